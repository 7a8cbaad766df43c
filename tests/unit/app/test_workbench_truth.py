"""The Reward workbench says what is true and shows all of it: its changed-group table fits the panel (cells wrap,
the panel scrolls sideways), a reload of ``?tab=workbench&run=..`` opens the workbench, its chart has one tick per
recorded step (no 1.5), and a refused request says what is wrong (never "request: Value error")."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from app.url_state import TABS, parse_view
from app.views.rescore import changed_groups_html, step_order, steps_frame
from grpo_core.rescore.request import RescoreError, parse_request


def test_every_tab_of_the_page_can_be_opened_by_a_link():
    source = Path("app/server.py").read_text(encoding="utf-8")
    ids = re.findall(r'gr\.Tab\([^)]*\bid="([a-z]+)"', source)
    assert "workbench" in ids and set(ids) <= set(TABS)
    assert parse_view({"tab": "workbench", "run": "3"}).tab == "workbench"


def _result(steps):
    return {"steps": [{"step": s, "groups": 2, "reward_before": 0.5, "reward_after": 0.4,
                       "frac_reward_zero_std_before": 0.5, "frac_reward_zero_std_after": 0.0, "rules": {}}
                      for s in steps]}


def test_the_chart_has_whole_steps_in_order():
    result = _result([2, 10, 1, 3])
    frame = steps_frame(result)
    assert set(frame["step"]) == {"1", "2", "3", "10"}  # categories: one tick per step, none between
    assert step_order(result) == ["1", "2", "3", "10"]


def test_the_changed_groups_fit_the_panel():
    long_rule = "a_rule_name_" * 20
    group = {"group_id": 1, "step": 3, "row_index": 4, "sign_changes": 1, "max_shift": 0.9, "prompt": "p",
             "completions": [{"index": 0, "text": "x" * 400,
                              "before": {"total": 1.0, "advantage": 0.7, "rewards": {long_rule: 1.0}},
                              "after": {"total": 0.0, "advantage": -0.7, "rewards": {long_rule: 0.0}}}]}
    page = changed_groups_html({"changed_groups": [group]})
    assert "<div class='rescore-changed'>" in page and "overflow-x: auto" in page
    assert "table-layout: fixed" in page and "overflow-wrap: anywhere" in page


@pytest.mark.parametrize(
    ("values", "said"),
    [
        ({"run_id": 1, "rewards": [{"rule": "numeric_answer"}], "first_step": 5, "last_step": 2},
         "rescoring request: first_step 5 is after last_step 2"),
        ({"run_id": 1, "rewards": [{"rule": "nope"}]}, "rescoring request: reward rule 1 (nope): unknown reward rule"),
        ({"run_id": 0, "rewards": [{"rule": "numeric_answer"}]}, "rescoring request: run_id: Input should be"),
    ],
)
def test_a_refused_request_says_what_is_wrong(values, said):
    with pytest.raises(RescoreError) as caught:
        parse_request(values)
    message = str(caught.value)
    assert message.startswith(said)
    assert "Value error" not in message and "request: request" not in message
