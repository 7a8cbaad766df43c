"""The comparison of a run's scoring with a rescoring (grpo_core/rescore/compare.py) and its views
(app/views/rescore.py): per-step means and zero-std shares under both, rules only one side has, None rewards, the
changed groups ranked by sign changes, and every value from the run escaped in the HTML."""

from __future__ import annotations

import pytest

from app.views.rescore import changed_groups_html, probe_html, steps_frame, steps_html, summary_html
from grpo_core.rescore.compare import compare_scorings


def _group(gid, step, totals, advantages, rewards=None, text="t"):
    return {"id": gid, "step": step, "row_index": gid, "prompt": f"p{gid}",
            "completions": [{"index": k, "text": f"{text}{k}", "rewards": (rewards or {"old": t}),
                             "total_reward": t, "advantage": a}
                            for k, (t, a) in enumerate(zip(totals, advantages, strict=True))]}


def test_per_step_means_shares_and_rules_on_both_sides():
    groups = [_group(1, 1, [1.0, 1.0], [0.0, 0.0]), _group(2, 1, [1.0, 0.0], [0.707, -0.707]),
              _group(3, 2, [None, 0.0], [0.0, 0.0])]
    scored = {"names": ["new"], "weights": [2.0],
              "groups": [{"id": 1, "rewards": [[1.0, 0.0]]}, {"id": 2, "rewards": [[0.0, 1.0]]},
                         {"id": 3, "rewards": [[None, None]]}]}
    result = compare_scorings(groups, scored)
    first, second = result["steps"]
    assert first["reward_before"] == pytest.approx(0.75) and first["reward_after"] == pytest.approx(1.0)
    assert first["frac_reward_zero_std_before"] == 0.5 and first["frac_reward_zero_std_after"] == 0.0
    assert first["rules"]["old"] == {"before": pytest.approx(0.75), "after": None}  # a rule the new rules drop
    assert first["rules"]["new"] == {"before": None, "after": pytest.approx(0.5)}  # and one they add
    assert second["reward_after"] is None  # nothing scorable: no mean, not 0
    assert second["frac_reward_zero_std_after"] == 0.0  # NaN std is not "zero std" (TRL's isclose)
    assert result["summary"]["sign_changes"] == 2  # group 2 swaps its completions
    assert [g["group_id"] for g in result["changed_groups"]] == [2, 1]  # sign changes first, then the shift
    assert result["changed_groups"][1]["sign_changes"] == 0 and result["changed_groups"][1]["max_shift"] > 0.7
    assert all(g["group_id"] != 3 for g in result["changed_groups"])  # 0 -> 0: not changed
    frame = steps_frame(result)
    assert set(frame["series"]) == {"reward (run)", "reward (new rules)", "frac_reward_zero_std (run)",
                                    "frac_reward_zero_std (new rules)"}


def test_the_views_escape_what_the_run_wrote():
    evil = "<script>alert(1)</script>"
    groups = [_group(1, 1, [1.0, 0.0], [0.7, -0.7], rewards={evil: 1.0}, text=evil)]
    scored = {"names": [evil], "weights": [1.0], "groups": [{"id": 1, "rewards": [[0.0, 1.0]]}]}
    result = compare_scorings(groups, scored)
    result["warnings"] = [evil]
    result["errors"] = {evil: evil}
    result["probe"] = [{"probe": evil, "text": evil, "total": 1.0, "best_real": 1.0, "rule": evil}]
    for html in (summary_html(result), steps_html(result), changed_groups_html(result), probe_html(result)):
        assert "<script>" not in html and "&lt;script&gt;" in html
