"""The Runs tab's chart data (app.tabs.runs.tab.refresh_series) on a real store: the first load reads the downsampled
history only, with its min/max band and the true last point; a refresh reads the new steps only."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.tabs.runs.tab import refresh_series
from app.views.charts import MetricSeries, training_figure
from storage import MetricSummary

pytestmark = pytest.mark.backends("sqlite", "postgres")


def _record(store, run_id: int, steps: range) -> None:
    store.record_metric_steps(run_id, [
        (step, {"reward": 9.0 if step == 77 else (step % 8) / 8, "kl": step / 1024,
                "rewards/numeric_answer/mean": 0.5, "grad_norm": 1.0}, 1000.0 + step)
        for step in steps
    ])


def test_first_load_draws_the_summary_and_a_refresh_adds_only_the_new_steps(store, monkeypatch):
    store.summary_buckets = 16
    run = store.create_run(name="long", config={}, dataset_id=None, max_steps=400)
    _record(store, run.id, range(1, 301))
    ctx = SimpleNamespace(store=store)
    reads = []
    for name in ("metrics_since", "metric_summary"):
        original = getattr(store, name)
        monkeypatch.setattr(store, name, lambda *a, _f=original, _n=name, **k: reads.append(_n) or _f(*a, **k))

    series, changed = refresh_series(ctx, run.id, None)
    assert changed and reads == ["metric_summary"]  # the first load reads no raw points
    steps, values = (list(column) for column in series.data["reward"])
    assert len(steps) <= 16 and steps[-1] == 300 and values[-1] == (300 % 8) / 8  # the true last point
    assert "grad_norm" not in series.data and "rewards/numeric_answer/mean" in series.data
    band_steps, lows, highs = series.envelope["reward"]
    assert max(highs) == 9.0 and min(lows) == 0.0  # the spike at step 77 is kept
    assert band_steps[0] == 1 and band_steps[-1] == 300

    reads.clear()
    _record(store, run.id, range(301, 304))
    series, changed = refresh_series(ctx, run.id, series)
    assert changed and reads == ["metrics_since"]
    assert series.data["reward"][0][-4:] == [300, 301, 302, 303]
    assert series.data["reward"][0][:-3] == steps
    series, changed = refresh_series(ctx, run.id, series)
    assert not changed

    figure = training_figure(series, "long")
    band = [t for t in figure.data if t.name in ("reward min", "reward max")]
    assert [t.name for t in band] == ["reward max", "reward min"] and band[1].fill == "tonexty"
    assert all(t.hoverinfo == "skip" and not t.showlegend for t in band)
    line = next(t for t in figure.data if t.name == "reward (weighted total)")
    assert list(line.x)[-1] == 303


def test_a_short_run_is_drawn_point_by_point_without_a_band():
    series = MetricSeries()
    summary = MetricSummary("reward", (1, 2, 3), (1, 2, 3), (1, 1, 1), (0.1, 0.2, 0.3), (0.1, 0.2, 0.3),
                            (0.1, 0.2, 0.3), (0.1, 0.2, 0.3), (1.0, 2.0, 3.0))
    assert series.extend_summary([summary]) == 3
    assert series.data["reward"] == ([1, 2, 3], [0.1, 0.2, 0.3])
    assert series.envelope == {} and series.wall == {1: 1.0, 2: 2.0, 3: 3.0}
    assert not [t for t in training_figure(series).data if t.name.endswith((" min", " max"))]


def test_the_doctor_reads_and_keeps_only_the_latest_steps_of_a_long_run(store, monkeypatch):
    from app.tabs.runs import doctor as doctor_tab
    from grpo_core.doctor.thresholds import RECENT_STEPS

    monkeypatch.setattr(doctor_tab, "RECENT_STEPS", 50)
    run = store.create_run(name="long", config={}, dataset_id=None, max_steps=400)
    _record(store, run.id, range(1, 301))
    store.update_run(run.id, current_step=300)
    ctx = SimpleNamespace(store=store)
    reads = []
    original = store.metric_rows
    monkeypatch.setattr(store, "metric_rows", lambda run_id, after=-1, *a, **k: reads.append(after)
                        or original(run_id, after, *a, **k))

    _, state = doctor_tab.doctor_report(ctx, run.id, None)
    assert reads == [250] and state.series.data["reward"][0][0] == 251  # not the 250 steps before
    _record(store, run.id, range(301, 311))
    store.update_run(run.id, current_step=310)
    _, state = doctor_tab.doctor_report(ctx, run.id, state)
    assert reads[1] == 299  # the new steps only (the last seen one read again, for eval metrics at that step)
    steps = state.series.data["reward"][0]
    assert steps[0] == 261 and steps[-1] == 310 and len(state.series.wall) == 50  # the window moved with the run
    assert RECENT_STEPS >= 20 * 50  # the real window is far wider than the trend window the checks use


def test_keep_last_forgets_old_points_and_the_band():
    series = MetricSeries(run_id=1)
    series.extend_summary([MetricSummary("reward", (1, 3), (2, 4), (2, 2), (0.0, 0.5), (1.0, 0.9), (0.5, 0.7),
                                         (1.0, 0.9), (10.0, 11.0))])
    assert "reward" in series.envelope
    series.keep_last(1)
    assert series.data["reward"] == ([4], [0.9]) and list(series.wall) == [4] and series.envelope == {}


def test_metric_nan_steps_names_the_other_keys_where_they_were_nan(store):
    run = store.create_run(name="nan", config={}, dataset_id=None, max_steps=10)
    store.record_metric_steps(run.id, [
        (step, {"reward": 0.5, "rewards/code_tests/mean": None if step in (3, 6) else 0.25,
                "rewards/plugin/mean": None, "eval_loss": float("nan") if step == 6 else 1.0}, 1000.0 + step)
        for step in range(1, 8)
    ])
    assert store.metric_nan_steps(run.id, exclude=["reward"]) == {
        "eval_loss": ([6], True),
        "rewards/code_tests/mean": ([3, 6], True),
        "rewards/plugin/mean": ([1, 2, 3, 4, 5, 6, 7], False),  # never a number
    }
    assert store.metric_nan_steps(run.id, 4, exclude=["reward", "rewards/plugin/mean"]) == {
        "eval_loss": ([6], True), "rewards/code_tests/mean": ([6], True)}
    assert store.metric_nan_steps(run.id, 7) == {}


def test_the_doctor_reads_the_values_of_its_keys_and_where_the_others_were_nan(store, monkeypatch):
    from app.tabs.runs import doctor as doctor_tab
    from grpo_core.doctor.thresholds import SERIES_KEYS

    run = store.create_run(name="nan", config={}, dataset_id=None, max_steps=100)
    _record(store, run.id, range(1, 21))
    store.record_metric_steps(run.id, [(21, {"reward": 0.5, "rewards/numeric_answer/mean": None}, 1021.0)])
    store.update_run(run.id, current_step=21)
    ctx = SimpleNamespace(store=store)
    html, state = doctor_tab.doctor_report(ctx, run.id, None)
    assert set(state.series.data) == {"reward", "kl", "grad_norm"} <= set(SERIES_KEYS)  # no rule means read
    assert "rewards/numeric_answer/mean (1 steps)" in html and "NaN in" in html
    # a refresh adds a later NaN of that key, the step read again counted once
    store.record_metric_steps(run.id, [(22, {"reward": 0.5, "rewards/numeric_answer/mean": None}, 1022.0)])
    store.update_run(run.id, current_step=22)
    html, state = doctor_tab.doctor_report(ctx, run.id, state)
    assert state.nan_steps["rewards/numeric_answer/mean"] == ([21, 22], True)
    assert "rewards/numeric_answer/mean (2 steps)" in html


def test_reading_the_last_step_again_changes_the_chart_only_for_a_key_it_draws(store):
    """The first refresh after the first load reads the last step again: the other keys' last points (grad_norm,
    200 of a user's keys) are kept for the sections but the overview is not sent again; a key it draws that was
    logged at that step just after (TRL's eval_reward) or a later step is a change."""
    run = store.create_run(name="done", config={}, dataset_id=None, max_steps=300)
    _record(store, run.id, range(1, 301))
    store.record_metric_steps(run.id, [(300, {f"custom/metric_{i}": float(i) for i in range(200)}, 1300.0)])
    ctx = SimpleNamespace(store=store)
    series, _ = refresh_series(ctx, run.id, None)

    series, changed = refresh_series(ctx, run.id, series)
    assert not changed
    assert series.data["grad_norm"] == ([300], [1.0]) and series.data["custom/metric_199"] == ([300], [199.0])

    store.record_metric_steps(run.id, [(300, {"eval_reward": 0.25}, 1300.0)])
    series, changed = refresh_series(ctx, run.id, series)
    assert changed and series.data["eval_reward"] == ([300], [0.25])
    series, changed = refresh_series(ctx, run.id, series)
    assert not changed
    _record(store, run.id, range(301, 302))
    assert refresh_series(ctx, run.id, series)[1]
