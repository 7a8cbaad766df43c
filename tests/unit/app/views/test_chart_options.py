"""The Runs chart's controls as pure functions: EMA, x axes, panel selection, option checking, and the training
figure drawn with them (smoothing on every panel, raw points kept faint, runs overlaid one colour each)."""

from __future__ import annotations

import math

import pytest

from app.views.chart_options import (
    MAX_FILTER_CHARS,
    MAX_SMOOTHING,
    RAW_OPACITY,
    ChartOptions,
    ema,
    run_colour,
    select_panels,
    x_values,
)
from app.views.charts import PANELS, MetricSeries, training_figure
from storage import MetricPoint


def _series(run_id: int, steps=(1, 2, 3, 4), start: float = 1000.0) -> MetricSeries:
    series = MetricSeries(run_id=run_id)
    for step in steps:
        series.extend([MetricPoint(step, key, float(step % 3) + run_id, start + 10 * step)
                       for key in ("reward", "kl", "loss", "rewards/numeric_answer/mean")])
    return series


def test_ema_is_tensorboards_debiased_average():
    assert ema([1.0, 1.0, 1.0], 0.9) == pytest.approx([1.0, 1.0, 1.0])  # no pull towards 0
    smoothed = ema([0.0, 1.0], 0.5)
    assert smoothed[0] == 0.0 and smoothed[1] == pytest.approx(0.5 / 0.75)
    assert ema([1.0, None, 3.0], 0.5)[1] is None
    assert ema([1.0, 5.0], 0.0) == [1.0, 5.0]


def test_x_values_by_step_relative_and_wall_time():
    wall = {1: 100.0, 2: 130.0, 3: 190.0}
    assert x_values([1, 2, 3], wall, "step") == [1, 2, 3]
    assert x_values([1, 2, 3], wall, "relative") == [0.0, 30.0, 90.0]
    assert x_values([2], wall, "wall") == ["1970-01-01T00:02:10+00:00"]
    assert x_values([9], wall, "relative") == [0.0]  # a step without a time: the run's first time
    with pytest.raises(ValueError, match="x_axis"):
        x_values([1], wall, "epoch")


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"smoothing": "0.5"}, ChartOptions(smoothing=0.5)),
        ({"smoothing": 7}, ChartOptions(smoothing=MAX_SMOOTHING)),
        ({"smoothing": -1}, ChartOptions()),
        ({"smoothing": float("nan")}, ChartOptions()),
        ({"smoothing": float("inf")}, ChartOptions()),
        ({"smoothing": "lots"}, ChartOptions()),
        ({"smoothing": None}, ChartOptions()),
        ({"x_axis": "relative"}, ChartOptions(x_axis="relative")),
        ({"x_axis": "<script>"}, ChartOptions()),
        ({"x_axis": ["step"]}, ChartOptions()),
        ({"panel_filter": 12}, ChartOptions()),
        ({"expanded": ""}, ChartOptions()),
        ({"expanded": 3}, ChartOptions()),
        ({"log_y": 1}, ChartOptions(log_y=True)),
    ],
)
def test_options_from_whatever_the_page_sends(raw, expected):
    assert ChartOptions.from_inputs(**raw) == expected


def test_a_long_filter_is_cut():
    assert len(ChartOptions.from_inputs(panel_filter="k" * 10_000).panel_filter) == MAX_FILTER_CHARS


def test_select_panels_by_words_and_expanded():
    assert [t for t, _ in select_panels(PANELS, ChartOptions(panel_filter="KL"))] == ["kl"]
    assert [t for t, _ in select_panels(PANELS, ChartOptions(panel_filter="completions clipped"))] == [
        "completions/clipped_ratio (truncated)"]
    assert select_panels(PANELS, ChartOptions(panel_filter="nothing-like-this")) == []
    assert select_panels(PANELS, ChartOptions()) == list(PANELS)
    assert select_panels(PANELS, ChartOptions(expanded="loss")) == [("loss", ("loss",))]
    # an expanded panel that does not exist is ignored: the filter applies
    assert len(select_panels(PANELS, ChartOptions(expanded="no such panel"))) == len(PANELS)


def test_smoothing_applies_to_every_panel_and_keeps_the_raw_points_faint():
    figure = training_figure(_series(1), "#1 a", options=ChartOptions(smoothing=0.6))
    raw = [t for t in figure.data if t.meta == "raw"]
    smooth = [t for t in figure.data if t.meta == "smoothed"]
    assert {t.xaxis for t in smooth} == {t.xaxis for t in raw} == {"x", "x3", "x4"}  # reward, kl, loss panels
    assert all(t.opacity == RAW_OPACITY for t in raw)
    reward_raw = next(t for t in raw if t.legendgroup == "reward")
    reward_smooth = next(t for t in smooth if t.legendgroup == "reward")
    assert list(reward_smooth.y) == pytest.approx(ema(list(reward_raw.y), 0.6))
    assert list(reward_smooth.y) != list(reward_raw.y)
    assert list(reward_raw.customdata) == [1, 2, 3, 4]  # a click opens the step whatever the x axis
    assert figure.layout.meta["smoothing"] == 0.6


def test_unsmoothed_chart_has_one_trace_per_key():
    figure = training_figure(_series(1))
    assert all(t.meta == "line" for t in figure.data)
    assert len(figure.data) == 4


def test_overlay_gives_each_run_one_colour_on_every_panel():
    figure = training_figure(_series(1), "#1 a", overlays=[("#2 b", _series(2)), ("#3 c", _series(3))])
    colours = {}
    for trace in figure.data:
        run = trace.legendgroup.split(" ")[0]
        colours.setdefault(run, set()).add(trace.line.color)
    assert colours == {"#1": {run_colour(0)}, "#2": {run_colour(1)}, "#3": {run_colour(2)}}
    kl_runs = {t.legendgroup.split(" ")[0] for t in figure.data if t.xaxis == "x3"}
    assert kl_runs == {"#1", "#2", "#3"}
    assert figure.layout.meta["runs"] == ["#1 a", "#2 b", "#3 c"]


def test_time_axes_log_scale_and_expanded_panel():
    relative = training_figure(_series(1), options=ChartOptions(x_axis="relative"))
    reward = next(t for t in relative.data if t.legendgroup == "reward")
    assert list(reward.x) == [0.0, 10.0, 20.0, 30.0]
    assert relative.layout.xaxis.title.text == "seconds since the run's first point"
    assert training_figure(_series(1), options=ChartOptions(log_y=True)).layout.yaxis.type == "log"
    expanded = training_figure(_series(1), options=ChartOptions(expanded="kl"))
    assert {t.xaxis for t in expanded.data} == {"x"} and len(expanded.data) == 1
    assert expanded.layout.height > training_figure(_series(1)).layout.height / 2


def test_filtered_out_chart_is_empty_not_an_error():
    figure = training_figure(_series(1), options=ChartOptions(panel_filter="zzz"))
    assert len(figure.data) == 0 and not math.isnan(figure.layout.height)
