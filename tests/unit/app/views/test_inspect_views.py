"""Tests for the pure views of the Inspect tools and the Runs tab's doctor and compare panels: group filters, long
text folding, the completion diff, search results, one prompt across steps, the doctor's report, the flat config
and its differences, and the compare chart's wall-time axis."""

from __future__ import annotations

import re

import pytest

from app.tabs.runs.compare import config_differences, flatten_config
from app.tabs.runs.doctor import doctor_html
from app.views.charts import MetricSeries, compare_figure
from app.views.inspect import (
    GROUP_FILTERS,
    advantage_spread,
    completion_choices,
    completion_diff_html,
    filter_groups,
    mean_total,
    parse_completion_ref,
    prompt_history_html,
    search_results_html,
)
from app.views.runs import fold_html, groups_html
from grpo_core.doctor import Finding, Severity
from storage import CompletionRecord, GroupRecord, MetricPoint, SearchHit, SearchPage


def _group(
    gid: int,
    totals: list[float | None],
    advantages: list[float | None] | None = None,
    *,
    step: int = 2,
    row: int | None = None,
    truncated: tuple[int, ...] = (),
    texts: list[str] | None = None,
) -> GroupRecord:
    advantages = advantages or [0.0] * len(totals)
    return GroupRecord(
        id=gid,
        step=step,
        row_index=gid if row is None else row,
        prompt=f"prompt {gid}",
        completions=[
            CompletionRecord(
                index=i,
                text=(texts[i] if texts else f"text {gid}.{i}"),
                rewards={"r": t},
                total_reward=t,
                advantage=a,
                num_tokens=3,
                truncated=i in truncated,
            )
            for i, (t, a) in enumerate(zip(totals, advantages, strict=True))
        ],
    )


GROUPS = [
    _group(1, [1.0, 1.0, 1.0], [0.0, 0.0, 0.0]),  # no signal, mean 1
    _group(2, [0.0, 1.0, 0.5], [-1.2, 1.2, 0.0], truncated=(0,)),  # spread 2.4, mean 0.5
    _group(3, [0.0, 0.0, 0.0]),  # no signal, mean 0
    _group(4, [0.2, 0.1, None], [0.7, -0.7, None]),  # spread 1.4, mean 0.15
    _group(5, [None, None, None], [None, None, None]),  # nothing known: no signal
]


@pytest.mark.parametrize(
    ("mode", "n", "ids"),
    [
        ("all", 3, [1, 2, 3, 4, 5]),
        ("no_signal", 3, [1, 3, 5]),
        ("truncated", 3, [2]),
        ("top_spread", 2, [2, 4]),
        ("bottom_spread", 2, [1, 3]),
        ("top_reward", 3, [1, 2, 4]),
        ("bottom_reward", 2, [3, 4]),
        ("bottom_reward", 10, [3, 4, 2, 1, 5]),  # groups without rewards last
        ("top_spread", 0, []),
    ],
)
def test_filter_groups(mode, n, ids):
    assert [g.id for g in filter_groups(GROUPS, mode, n)] == ids


def test_filter_groups_rejects_an_unknown_mode_and_every_listed_mode_works():
    with pytest.raises(ValueError, match="unknown group filter"):
        filter_groups(GROUPS, "best", 3)
    for _, key in GROUP_FILTERS:
        filter_groups(GROUPS, key, 2)


def test_spread_and_mean_ignore_missing_values():
    assert advantage_spread(GROUPS[3]) == pytest.approx(1.4)
    assert advantage_spread(GROUPS[4]) == 0.0
    assert mean_total(GROUPS[3]) == pytest.approx(0.15)
    assert mean_total(GROUPS[4]) is None


# ----------------------------------------------------------------------------------------------------- folding


def test_fold_html_folds_long_text_in_details_and_escapes_both_parts():
    text = "<b>" + "a" * 700 + "<i>tail</i>"
    page = fold_html(text, fold_chars=600)
    head, rest = page.split("<details", 1)
    assert head.startswith("<pre>&lt;b&gt;") and len(re.sub("<[^>]+>", "", head)) <= 610
    assert '<details class="grpo-fold"><summary>show the rest (' in "<details" + rest
    assert "&lt;i&gt;tail&lt;/i&gt;" in rest and "<i>tail" not in page
    assert "details" not in fold_html("short text")
    assert fold_html("") == "<pre><i>(empty)</i></pre>"


def test_groups_html_folds_long_completions_and_tags_groups():
    group = _group(9, [1.0, 0.0], texts=["x" * 1000, "short"])
    page = groups_html([group])
    assert page.count("<details") == 1
    assert 'data-row="9"' in page and 'data-group-id="9"' in page


# -------------------------------------------------------------------------------------------------------- diff


def test_completion_choices_and_refs():
    choices = completion_choices([GROUPS[1], GROUPS[1], _group(7, [1.0], step=5, row=11)])
    assert [value for _, value in choices] == ["2:0", "2:1", "2:2", "7:0"]  # each group once
    assert choices[1][0] == "step 2 · row 2 · #1 (advantage +1.20, total 1.00)"
    assert parse_completion_ref(" 12 : 3 ") == (12, 3)
    with pytest.raises(ValueError):
        parse_completion_ref("12")


def test_completion_diff_html_marks_changes_and_escapes():
    page = completion_diff_html(("A <1>", "The answer is 41.\n<end>"), ("B", "The answer is 42.\n<end>"))
    assert 'id="completion-diff"' in page
    assert "A &lt;1&gt;" in page and "A <1>" not in page
    assert "&lt;end&gt;" in page and "<end>" not in page
    assert "diff_chg" in page
    ratio = float(re.search(r'data-ratio="([0-9.]+)"', page).group(1))
    assert 0.8 < ratio < 1.0
    same = completion_diff_html(("A", "same"), ("B", "same"))
    assert "identical" in same and 'data-ratio="1.000"' in same


def test_completion_diff_splits_one_long_line_so_words_line_up():
    left = " ".join(f"word{i}" for i in range(40))
    right = left.replace("word20", "WORD20")
    page = completion_diff_html(("A", left), ("B", right), width=30)
    assert page.count('class="diff_chg"') == 2  # only the changed chunk, once per side


# ------------------------------------------------------------------------------------------------------ search


def test_search_results_html_shows_steps_rows_snippets_and_paging():
    group = _group(4, [1.0, 0.0], step=7, row=12, texts=["the <answer> is 42", "no"])
    page = SearchPage(
        text="<ANSWER>",
        total=23,
        offset=10,
        limit=10,
        hits=[SearchHit(group=group, prompt_matched=False, completion_indexes=[0])],
    )
    out = search_results_html(page)
    assert "groups 11–11 of 23" in out and "page 2 of 3" in out
    assert 'data-step="7"' in out and "dataset row 12" in out and "found in completion #0" in out
    assert "<mark>&lt;answer&gt;</mark>" in out
    assert "<answer>" not in out and "&lt;ANSWER&gt;" in out


def test_search_results_html_empty_cases():
    assert "Type some text" in search_results_html(SearchPage(text=" ", total=0, offset=0, limit=10, hits=[]))
    assert "No prompt or completion contains" in search_results_html(
        SearchPage(text="zzz", total=0, offset=0, limit=10, hits=[])
    )


# -------------------------------------------------------------------------------------------------- history


def test_prompt_history_html_has_one_table_row_per_group_in_step_order():
    groups = [
        _group(1, [0.0, 0.0], step=1, row=3),
        _group(2, [0.0, 1.0], step=4, row=3),
        _group(3, [1.0, 1.0], step=9, row=3),
    ]
    page = prompt_history_html(groups)
    assert 'data-steps="3"' in page
    assert re.findall(r'class="history-step" data-step="(\d+)"', page) == ["1", "4", "9"]
    assert "sampled at 3 steps" in page
    assert page.count('class="grpo-group"') == 3
    assert "never" not in page and "no recorded groups" in prompt_history_html([])


# ------------------------------------------------------------------------------------------------------ doctor


def test_doctor_html_escapes_and_lists_findings():
    finding = Finding(
        code="reward_zero",
        severity=Severity.ERROR,
        title="Reward <0>",
        advice="fix <it>",
        steps=(1, 2, 3, 7),
        examples=("“<b>x</b>” — 0 from numeric_answer",),
    )
    page = doctor_html([finding], num_steps=7)
    assert 'data-findings="reward_zero"' in page and 'data-severity="error"' in page
    assert "Reward &lt;0&gt;" in page and "fix &lt;it&gt;" in page and "<b>x</b>" not in page
    assert "steps 1–3, 7" in page
    assert "7 logged steps" in page


def test_doctor_html_orders_by_severity_without_repeats_and_counts():
    def finding(code: str, severity: Severity) -> Finding:
        return Finding(code=code, severity=severity, title=f"title {code}", advice="advice")

    findings = [
        finding("loss_zero", Severity.INFO),
        finding("reward_flat", Severity.WARNING),
        finding("nan", Severity.ERROR),
        finding("reward_flat", Severity.WARNING),
        finding("beta_zero_std", Severity.INFO),
    ]
    page = doctor_html(findings, num_steps=12)
    assert re.findall(r'data-code="([a-z_]+)"', page) == ["nan", "reward_flat", "loss_zero", "beta_zero_std"]
    assert 'data-findings="nan,reward_flat,loss_zero,beta_zero_std"' in page
    assert "12 logged steps · 1 error, 1 warning, 2 notes" in page


def test_doctor_html_without_findings():
    assert "No metrics logged yet" in doctor_html([], num_steps=0)
    assert "Nothing looks wrong" in doctor_html([], num_steps=4)


# ----------------------------------------------------------------------------------------------------- compare

CONFIG_A = {
    "name": "a",
    "learning_rate": 1e-5,
    "beta": 0.02,
    "lora_target_modules": "all-linear",
    "rewards": [
        {"rule": "numeric_answer", "weight": 1.0, "params": {}, "name": None},
        {"rule": "format_regex", "weight": 0.2, "params": {"pattern": "^\\d+$"}, "name": None},
    ],
    "tags": ["x", "y"],
}


def test_flatten_config_keys_rewards_by_rule():
    flat = flatten_config(
        CONFIG_A
        | {"nested": {"a": {"b": 1}}, "rewards": [*CONFIG_A["rewards"], {"rule": "format_regex", "weight": 0.1}]}
    )
    assert flat["learning_rate"] == 1e-5
    assert flat["rewards.numeric_answer.weight"] == 1.0
    assert flat["rewards.format_regex.params.pattern"] == "^\\d+$"
    assert flat["rewards.format_regex#2.weight"] == 0.1
    assert flat["nested.a.b"] == 1
    assert flat["tags"] == '["x", "y"]'


def test_config_differences_lists_only_fields_that_differ():
    config_b = CONFIG_A | {
        "name": "b",
        "beta": 0.0,
        "rewards": [
            {"rule": "format_regex", "weight": 0.2, "params": {"pattern": "^\\d+$"}, "name": None},
            {"rule": "numeric_answer", "weight": 2.0, "params": {}, "name": None},
            {"rule": "length", "weight": 0.1, "params": {}, "name": None},
        ],
    }
    frame = config_differences({"#1 a": CONFIG_A, "#2 b": config_b})
    assert list(frame.columns) == ["field", "#1 a", "#2 b"]
    rows = {row[0]: list(row[1:]) for row in frame.itertuples(index=False)}
    assert rows == {
        "beta": ["0.02", "0.0"],
        "name": ["a", "b"],
        "rewards.length.name": ["(not set)", "None"],
        "rewards.length.rule": ["(not set)", "length"],
        "rewards.length.weight": ["(not set)", "0.1"],
        "rewards.numeric_answer.weight": ["1.0", "2.0"],
    }  # reordering the rules is no difference


def test_config_differences_of_one_run_or_equal_runs_is_empty():
    assert config_differences({"#1 a": CONFIG_A}).empty
    assert config_differences({"#1 a": CONFIG_A, "#2 a": dict(CONFIG_A)}).empty
    assert list(config_differences({}).columns) == ["field"]


def test_config_differences_tells_1_from_true():
    frame = config_differences({"a": {"x": 1}, "b": {"x": True}})
    assert frame.values.tolist() == [["x", "1", "true"]]


def test_compare_figure_by_wall_time_counts_from_each_runs_first_point():
    first, second = MetricSeries(), MetricSeries()
    first.extend([MetricPoint(1, "reward", 0.1, 1000.0), MetricPoint(2, "reward", 0.2, 1030.0)])
    second.extend([MetricPoint(1, "reward", 0.3, 5000.0), MetricPoint(3, "reward", 0.4, 5012.5)])
    figure = compare_figure({"a": first, "b": second}, "reward", x_axis="wall")
    assert list(figure.data[0].x) == [0.0, 30.0]
    assert list(figure.data[1].x) == [0.0, 12.5]
    assert "seconds" in figure.layout.xaxis.title.text
    assert list(compare_figure({"a": first}, "reward").data[0].x) == [1, 2]
    with pytest.raises(ValueError, match="x_axis"):
        compare_figure({"a": first}, "reward", x_axis="time")


@pytest.mark.parametrize(
    ("groups", "threshold", "expected"),
    [
        ([], 0.5, None),
        ([[0.0, 1.0], [0.0, 0.0]], 0.5, 0.5),
        ([[0.0, 1.0], [0.6, None]], 0.5, 1.0),
        ([[0.5, 0.5], [None, None]], 0.5, 0.0),  # "above": a total equal to the threshold does not pass
        ([[0.5, 0.5]], 0.4, 1.0),
    ],
)
def test_pass_at_g(groups, threshold, expected):
    from app.views.inspect import pass_at_g

    assert pass_at_g([_group(i, totals) for i, totals in enumerate(groups)], threshold) == expected


def test_step_totals_and_the_stats_figure():
    from app.views.charts import step_groups_figure
    from app.views.inspect import step_totals

    totals = step_totals([_group(1, [1.0, None, 0.5]), _group(2, [0.0])])
    assert totals == [1.0, 0.5, 0.0]
    figure = step_groups_figure(totals, [2, 4], [0.5, None], step=4, threshold=0.5)
    histogram, line = figure.data
    assert list(histogram.x) == [1.0, 0.5, 0.0]
    assert list(line.x) == [2, 4] and list(line.y) == [0.5, None]
    assert "step 4 (3 completions)" in figure.layout.annotations[0].text


@pytest.mark.parametrize(("value", "expected"), [("12@1733000000000", 12.0), ("3.5@1", 3.5), ("", None),
                                                  (None, None), ("x@1", None)])
def test_parse_chart_click(value, expected):
    from app.tabs.runs.tab import parse_chart_click

    assert parse_chart_click(value) == expected


def test_config_differences_show_trl_args_and_the_knobs_by_field():
    from grpo_core.run_config import RunConfig

    plain = RunConfig(dataset_id=1).model_dump(mode="json")
    tuned = RunConfig(
        dataset_id=1, epsilon_high=0.28, report_to=["tensorboard"], trl_args={"num_generations_eval": 2}
    ).model_dump(mode="json")
    rows = {row[0]: list(row[1:]) for row in config_differences({"a": plain, "b": tuned}).itertuples(index=False)}
    assert rows == {
        "epsilon_high": ["None", "0.28"],
        "report_to": ["[]", '["tensorboard"]'],
        "trl_args.num_generations_eval": ["(not set)", "2"],
    }


def test_completion_diff_of_two_long_trajectories_aligns_lines():
    left = "\n".join(f"[tool result lookup] row {i} of the table" for i in range(300))
    right = left.replace("row 150 of", "row <b>150</b> of") + "\n[tool result lookup] one more"
    page = completion_diff_html(("A <1>", left), ("B", right))
    assert page.count('class="diff_chg"') == 2 and page.count('class="diff_add"') == 1
    assert 'class="diff_sub"' not in page and "&lt;b&gt;150" in page and "<b>150" not in page and "A &lt;1&gt;" in page
    assert 0.98 < float(re.search(r'data-ratio="([0-9.]+)"', page).group(1)) < 1.0
