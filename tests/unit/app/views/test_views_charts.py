"""Tests for app.views.runs and app.views.charts, both pure: the group and status HTML (escaping, ordering, colours, badges),
the incremental metric series, the training figure's traces and the EMA smoothing."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from app.views.charts import (
    KL_OFF_TEXT,
    NO_DATA_TEXT,
    PANEL_TITLE_PX,
    TITLE_PX,
    MetricSeries,
    compare_figure,
    ema,
    step_dtick,
    training_figure,
)
from app.views.runs import duration, groups_html, run_label, run_status_html, runs_table
from storage import CompletionRecord, GroupRecord, MetricPoint, RunStatus
from tests.helpers import NOW, run_info


def _completion(index: int, advantage: float | None, total: float | None = 1.0, **kw) -> CompletionRecord:
    fields = {"text": f"answer-{index}", "rewards": {"numeric_answer": total}, "num_tokens": 5, "truncated": False}
    fields.update(kw)
    return CompletionRecord(index=index, total_reward=total, advantage=advantage, **fields)


def _group(completions, prompt: str = "What is 2 + 2?", extra=None) -> GroupRecord:
    return GroupRecord(step=3, row_index=11, prompt=prompt, completions=completions, extra=extra or {})


def _completion_blocks(html_text: str) -> list[str]:
    """The opening tag of each completion card, in page order."""
    return re.findall(r'<div class="grpo-completion [a-z]+" data-advantage="[^"]*">', html_text)


# ------------------------------------------------------------------------------------------------ groups_html


def test_groups_html_escapes_prompt_completion_rewards_and_extra():
    group = _group(
        [
            _completion(0, 1.0, text="<script>alert('x')</script>", rewards={"<b>rule</b>": 1.0}),
            _completion(1, -1.0, total=0.0),
        ],
        prompt="<img src=x onerror=alert(1)> & more",
        extra={"answer": "<i>4</i>", "<k>": 1},
    )
    page = groups_html([group])
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;" in page
    assert "<img" not in page
    assert "&lt;img src=x onerror=alert(1)&gt; &amp; more" in page
    assert "<b>rule</b>" not in page and "&lt;b&gt;rule&lt;/b&gt;" in page
    assert "<i>4</i>" not in page and "&lt;i&gt;4&lt;/i&gt;" in page
    assert "&lt;k&gt;=1" in page


def test_groups_html_sorts_by_advantage_none_last():
    group = _group([_completion(0, -0.5), _completion(1, None), _completion(2, 1.5), _completion(3, 0.2)])
    cards = _completion_blocks(groups_html([group]))
    assert [re.search(r'data-advantage="([^"]*)"', c).group(1) for c in cards] == ["1.5000", "0.2000", "-0.5000", "–"]


def test_groups_html_keeps_order_when_not_sorting():
    group = _group([_completion(0, -0.5), _completion(1, 1.5)])
    page = groups_html([group], sort_by_advantage=False)
    assert page.index("answer-0") < page.index("answer-1")


@pytest.mark.parametrize(
    ("advantage", "css"), [(0.7, "pos"), (-0.7, "neg"), (0.0, "zero"), (1e-9, "zero"), (None, "zero")]
)
def test_groups_html_colours_by_advantage_sign(advantage, css):
    group = _group([_completion(0, advantage, total=1.0), _completion(1, 0.0, total=0.0)])
    first = _completion_blocks(groups_html([group], sort_by_advantage=False))[0]
    assert f'class="grpo-completion {css}"' in first


def test_groups_html_marks_truncated_completions():
    group = _group([_completion(0, 1.0, truncated=True), _completion(1, -1.0, total=0.0)])
    page = groups_html([group], sort_by_advantage=False)
    cards = page.split('<div class="grpo-completion ')[1:]
    assert "truncated" in cards[0]
    assert "truncated" not in cards[1]


@pytest.mark.parametrize(
    ("totals", "flagged"),
    [([1.0, 1.0, 1.0], True), ([0.0, 0.0], True), ([None, None], True), ([1.0, 0.0], False), ([None, 0.5, 0.0], False)],
)
def test_groups_html_flags_groups_without_learning_signal(totals, flagged):
    group = _group([_completion(i, 0.0, total=t) for i, t in enumerate(totals)])
    assert ("no learning signal" in groups_html([group])) is flagged


def test_groups_html_cuts_long_completions():
    group = _group([_completion(0, 1.0, text="x" * 50), _completion(1, -1.0, total=0.0)])
    page = groups_html([group], max_chars=10)
    assert "x" * 11 not in page
    assert "(50 characters)" in page


def test_groups_html_empty():
    assert "No groups" in groups_html([])


# -------------------------------------------------------------------------------------------------- run views


def test_run_status_html_escapes_the_error():
    run = run_info(status=RunStatus.FAILED, error="Traceback <module>\nValueError: bad <tag> & co", finished_at=NOW)
    page = run_status_html(run, now=NOW)
    assert 'data-status="failed"' in page
    assert "&lt;module&gt;" in page and "bad &lt;tag&gt; &amp; co" in page
    assert "<tag>" not in page


def test_run_status_html_shows_the_log_tail_of_a_failed_run_without_error():
    run = run_info(status=RunStatus.FAILED, finished_at=NOW)
    page = run_status_html(run, log_tail="last line <x>", now=NOW)
    assert "last line &lt;x&gt;" in page


def test_run_status_html_of_a_running_run():
    run = run_info(name="<b>n</b>", phase="generating <x>", cancel_requested=True)
    page = run_status_html(run, now=NOW)
    assert "&lt;b&gt;n&lt;/b&gt;" in page and "<b>n</b>" not in page
    assert "generating &lt;x&gt;" in page
    assert "heartbeat 3 s ago" in page
    assert "cancel requested" in page
    assert "step 4/10" in page
    assert "1 min 5 s" in page


def test_run_label_duration_and_table():
    run = run_info()
    assert run_label(run) == "#7 demo (running)"
    assert duration(run, now=NOW) == "1 min 5 s"
    assert duration(run_info(started_at=None)) == ""
    finished = run_info(finished_at=NOW - timedelta(seconds=60))
    assert duration(finished, now=NOW) == "5 s"
    [row] = runs_table([run], {7: 0.25})
    assert row[:6] == [7, "demo", "running", "4/10", "0.250", "org/model"]
    assert runs_table([run], {})[0][4] == "–"


# -------------------------------------------------------------------------------------------------- charts


def _points(step: int, **values) -> list[MetricPoint]:
    return [MetricPoint(step, key, value, 1000.0 + step) for key, value in sorted(values.items())]


def test_metric_series_extend_is_incremental_and_deduplicates():
    series = MetricSeries(run_id=1)
    assert series.last_step == -1
    assert series.extend(_points(1, reward=0.1, kl=0.0) + _points(2, reward=0.2, kl=0.01)) == 4
    assert series.last_step == 2
    # The same rows again (a refresh that re-read them) add nothing.
    assert series.extend(_points(2, reward=0.2, kl=0.01)) == 0
    assert series.extend(_points(3, reward=0.3)) == 1
    assert series.data["reward"] == ([1, 2, 3], [0.1, 0.2, 0.3])
    assert series.data["kl"] == ([1, 2], [0.0, 0.01])
    assert series.last_step == 3
    assert series.wall == {1: 1001.0, 2: 1002.0, 3: 1003.0}


def _one_by_one(rows):
    series = MetricSeries()
    for row in rows:  # each row alone: the point-by-point path
        series.extend_rows([row])
    return series


@pytest.mark.parametrize(
    "rows",
    [
        # every step logs the same keys (periodic rows, sliced per key)
        [(s, k, float(s) + i / 10, 1000.0 + s) for s in range(1, 6) for i, k in enumerate(["kl", "loss", "reward"])],
        # a key at some steps only (an eval metric), and a None
        [(1, "kl", 0.1, 1001.0), (1, "reward", None, 1001.0), (2, "eval_reward", 0.5, 1002.5),
         (2, "kl", 0.2, 1002.0), (2, "reward", 0.3, 1002.0), (3, "reward", 0.4, 1003.0)],
        # a step read twice for one key: the first value stays, as point by point
        [(1, "reward", 0.1, 1001.0), (2, "reward", 0.2, 1002.0), (2, "reward", 0.9, 1009.0), (3, "reward", 0.3, 1003.0)],
    ],
    ids=["periodic", "uneven keys", "repeated step"],
)
def test_a_first_read_of_rows_equals_reading_them_point_by_point(rows):
    fast = MetricSeries()
    assert fast.extend_rows(rows) == sum(len(steps) for steps, _ in _one_by_one(rows).data.values())
    slow = _one_by_one(rows)
    assert fast.data == slow.data and fast.wall == slow.wall and fast.last_step == slow.last_step == rows[-1][0]
    assert fast.extend_rows([(rows[-1][0], "reward", 7.0, 0.0)]) == 0  # a step seen already adds nothing


def test_metric_series_last_and_reward_rule_keys():
    series = MetricSeries()
    series.extend(
        _points(
            1,
            reward=0.5,
            **{"rewards/numeric_answer/mean": 1.0, "rewards/format_regex/mean": 0.0, "rewards/numeric_answer/std": 0.1},
        )
    )
    series.extend(_points(2, reward=None))
    assert series.last("reward") is None
    assert series.last("rewards/numeric_answer/mean") == 1.0
    assert series.last("never") is None
    assert series.reward_rule_keys() == ["rewards/format_regex/mean", "rewards/numeric_answer/mean"]


def test_training_figure_has_reward_and_rule_traces():
    series = MetricSeries()
    for step in (1, 2, 3):
        series.extend(
            _points(step, reward=step / 10, kl=float("nan"), **{"rewards/numeric_answer/mean": step / 5, "loss": 0.1})
        )
    figure = training_figure(series, title="run 1")
    names = [trace.name for trace in figure.data]
    assert "reward (weighted total)" in names
    assert "rewards/numeric_answer/mean" in names
    assert "kl" in names and "loss" in names
    assert "entropy" not in names  # never logged
    reward = next(t for t in figure.data if t.name == "reward (weighted total)")
    assert list(reward.x) == [1, 2, 3]
    assert list(reward.y) == [0.1, 0.2, 0.3]
    kl = next(t for t in figure.data if t.name == "kl")
    assert list(kl.y) == [None, None, None]  # NaN is drawn as a gap
    # The per-rule means share the reward panel (the first subplot).
    rule = next(t for t in figure.data if t.name == "rewards/numeric_answer/mean")
    assert rule.xaxis == reward.xaxis == "x"


def test_training_figure_of_an_empty_series():
    assert len(training_figure(MetricSeries()).data) == 0


def _three_steps(**extra) -> MetricSeries:
    """A 3-step run as ``beta: 0`` logs it: reward and loss, no ``kl``."""
    series = MetricSeries()
    for step in (1, 2, 3):
        series.extend(_points(step, reward=step / 10, loss=0.0, **extra))
    return series


def _panel_notes(figure) -> dict[str, str]:
    """Text of each empty panel's note, by the panel's x axis (``x``, ``x2``, ...): the panel whose domain centre
    the note sits at, in paper coordinates."""
    notes = {}
    for note in figure.layout.annotations:
        if not (note.name or "").startswith("empty-panel"):
            continue
        assert (note.xref, note.yref, note.xanchor, note.yanchor) == ("paper", "paper", "center", "middle")
        [axis] = [
            name.replace("axis", "")
            for name in figure.layout
            if name.startswith("xaxis")
            and sum(figure.layout[name].domain) / 2 == pytest.approx(note.x)
            and sum(figure.layout[name.replace("x", "y", 1)].domain) / 2 == pytest.approx(note.y)
        ]
        notes[axis] = note.text
    return notes


def test_kl_panel_says_why_it_is_empty_when_beta_is_0():
    notes = _panel_notes(training_figure(_three_steps(), beta=0.0))
    assert notes["x3"] == KL_OFF_TEXT == "KL not computed: beta = 0"  # kl is the third panel
    assert notes["x5"] == NO_DATA_TEXT  # entropy: never logged
    assert "x" not in notes and "x4" not in notes  # reward and loss have points


@pytest.mark.parametrize(
    ("beta", "extra", "note"),
    [(0.04, {}, NO_DATA_TEXT), (None, {}, NO_DATA_TEXT), (0.0, {"kl": 0.01}, None), (0.0, {"kl": None}, KL_OFF_TEXT)],
)
def test_kl_panel_note_needs_beta_0_and_no_kl_points(beta, extra, note):
    assert _panel_notes(training_figure(_three_steps(**extra), beta=beta)).get("x3") == note


@pytest.mark.parametrize(
    ("first", "last", "dtick"), [(1, 1, 1), (1, 3, 1), (1, 9, 1), (1, 10, 2), (0, 40, 5), (1, 300, 50), (5, 2000, 500)]
)
def test_step_dtick_gives_at_most_eight_integer_ticks(first, last, dtick):
    assert step_dtick(first, last) == dtick
    assert (last - first) / dtick <= 8


def test_step_axes_have_integer_ticks():
    figure = training_figure(_three_steps(), beta=0.0)
    axes = [figure.layout[name] for name in figure.layout if name.startswith("xaxis")]
    assert len(axes) == 8
    for axis in axes:
        assert (axis.tickmode, axis.tick0, axis.dtick, axis.tickformat) == ("linear", 0, 1, "d")
    series = MetricSeries()
    for step in range(1, 301):
        series.extend(_points(step, reward=0.5))
    assert training_figure(series).layout.xaxis.dtick == 50
    compared = compare_figure({"a": _three_steps()}, "reward")
    assert (compared.layout.xaxis.dtick, compared.layout.xaxis.tickformat) == (1, "d")
    by_time = compare_figure({"a": _three_steps()}, "reward", x_axis="wall")
    assert by_time.layout.xaxis.tickformat is None  # seconds are not steps


def _legend_band(figure) -> tuple[float, float]:
    """Top and bottom of the legend, in pixels from the top of the figure (layout only, no rendering)."""
    layout = figure.layout
    assert layout.legend.yref == "container" and layout.legend.yanchor == "top"
    top = (1 - layout.legend.y) * layout.height
    return top, layout.margin.t - PANEL_TITLE_PX


@pytest.mark.parametrize("rules", [0, 1, 8])
def test_legend_sits_between_the_title_and_the_reward_panel(rules):
    series = _three_steps(**{f"rewards/rule_number_{i}/mean": 0.5 for i in range(rules)})
    figure = training_figure(series, title="#1 run")
    layout = figure.layout
    assert layout.legend.orientation == "h"
    assert layout.title.yref == "container" and layout.title.y == 1.0 and layout.title.yanchor == "top"
    top, bottom = _legend_band(figure)
    assert top == pytest.approx(TITLE_PX)  # below the title's band
    assert bottom - top >= 22 * (1 + rules // 4)  # room for every row of entries (at most ~4 long names a row)
    # the panel titles of the first row sit just above the panels, i.e. below the legend's band
    reward_title = next(a for a in layout.annotations if a.text == "reward (total and per rule)")
    assert reward_title.yref == "paper" and reward_title.y == pytest.approx(1.0) and reward_title.yanchor == "bottom"
    # the panels keep their height whatever the legend takes
    assert layout.height - layout.margin.t - layout.margin.b == 260 * 4 - 100


def test_ema_matches_a_hand_computation():
    smoothed = ema([1.0, 2.0, None, 3.0], 0.5)
    # Debiased: s_t = (w s_{t-1} + (1 - w) x_t) / (1 - w^t), with t counting values only.
    assert smoothed[0] == pytest.approx(1.0)
    assert smoothed[1] == pytest.approx(1.25 / 0.75)
    assert smoothed[2] is None
    assert smoothed[3] == pytest.approx(2.125 / 0.875)


@pytest.mark.parametrize("weight", [0.0, -0.3])
def test_ema_without_smoothing_is_the_identity(weight):
    assert ema([1.0, None, 3.0], weight) == [1.0, None, 3.0]


def test_compare_figure_has_one_trace_per_run():
    first, second = MetricSeries(), MetricSeries()
    first.extend(_points(1, reward=1.0) + _points(2, reward=3.0))
    second.extend(_points(1, reward=0.0))
    figure = compare_figure({"a": first, "b": second, "c": MetricSeries()}, "reward", smoothing=0.5)
    assert [t.name for t in figure.data] == ["a", "b", "c"]
    assert list(figure.data[0].y) == pytest.approx([1.0, 1.75 / 0.75])


def test_eval_groups_are_marked_and_eval_reward_is_drawn_dashed_beside_the_train_reward():
    members = [CompletionRecord(index=i, text=str(i), rewards={}, total_reward=float(i), advantage=0.0) for i in range(2)]
    html_text = groups_html([GroupRecord(step=2, row_index=5, prompt="p", completions=members, split="eval")])
    assert 'data-split="eval"' in html_text and "eval (held out)" in html_text
    assert "eval (held out)" not in groups_html([GroupRecord(step=2, row_index=5, prompt="p", completions=members)])

    series = MetricSeries()
    series.extend(
        [MetricPoint(step=s, key="reward", value=0.1 * s, wall_time=float(s)) for s in (1, 2)]
        + [MetricPoint(step=2, key="rewards/length/mean", value=0.5, wall_time=2.0)]
    )
    assert series.cursor == 1  # the last step is read again: its eval metrics come just after the train ones
    series.extend(
        [
            MetricPoint(step=1, key="reward", value=0.1, wall_time=1.0),
            MetricPoint(step=2, key="eval_reward", value=0.3, wall_time=2.5),
            MetricPoint(step=2, key="eval_rewards/length/mean", value=0.4, wall_time=2.5),
        ]
    )
    assert series.data["reward"] == ([1, 2], [0.1, 0.2])
    assert series.eval_reward_keys() == ["eval_reward", "eval_rewards/length/mean"]
    traces = {t.name: t for t in training_figure(series).data if t.xaxis in (None, "x")}
    assert traces["eval_reward (held-out rows)"].line.dash == "dash"
    assert traces["eval_rewards/length/mean"].line.dash == "dash"
    assert traces["reward (weighted total)"].line.dash == "solid"


def test_gpu_panels_appear_when_the_run_recorded_gpu_metrics():
    cpu_run = training_figure(_three_steps())
    assert not [a for a in cpu_run.layout.annotations if (a.text or "").startswith("GPU")]
    gpu = {"gpu/memory_allocated_mib": 900.0, "gpu/memory_reserved_mib": 1200.0, "gpu/memory_peak_mib": 1100.0,
           "gpu/utilization": 87.0}
    series = _three_steps(**gpu)
    assert series.has_gpu_metrics() and not _three_steps().has_gpu_metrics()
    figure = training_figure(series)
    titles = [a.text for a in figure.layout.annotations if a.yanchor == "bottom"]
    assert titles[-2:] == ["GPU memory (MiB; allocated, reserved, peak)", "GPU utilization (%)"]
    memory = {t.name: t for t in figure.data if t.name.startswith("gpu/memory")}
    assert set(memory) == {"gpu/memory_allocated_mib", "gpu/memory_reserved_mib", "gpu/memory_peak_mib"}
    assert all(t.showlegend for t in memory.values())  # three lines in one panel: named in the legend
    assert {t.xaxis for t in memory.values()} == {"x9"}  # the ninth panel
    [utilization] = [t for t in figure.data if t.name == "gpu/utilization"]
    assert (utilization.xaxis, list(utilization.y)) == ("x10", [87.0, 87.0, 87.0])
    assert figure.layout.height - figure.layout.margin.t - figure.layout.margin.b == 260 * 5 - 100
