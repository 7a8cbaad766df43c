"""Every recorded key in a section of the Runs tab (app.views.metric_sections, app.tabs.runs.sections): the grouping
by prefix, and on a real store the lazy reads (the first load reads the overview's keys and the key list; a
section's keys' histories are read only when it is drawn, and a key's recent points survive that read)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from app.tabs.runs.sections import MAX_SECTION_CHARTS, drawn_keys, section_figure, section_keys
from app.tabs.runs.tab import refresh_series
from app.views.chart_options import ChartOptions
from app.views.charts import CHART_KEYS
from app.views.metric_sections import SECTION_IDS, group_keys, matches, section_label, section_of

#: What a TRL 1.16 GRPO run logs on the CPU (grpo_trainer.py's ``_metrics``), and a user's own key.
TRL_KEYS = {
    "grad_norm": "policy", "learning_rate": "policy", "num_tokens": "policy", "step_time": "policy",
    "entropy_coef": "policy", "policy_loss": "policy", "epoch": "policy",
    "clip_ratio/low_mean": "clip", "clip_ratio/low_min": "clip", "clip_ratio/high_mean": "clip",
    "clip_ratio/high_max": "clip", "clip_ratio/region_mean": "clip", "cispo_clip_ratio": "clip",
    "completions/min_length": "completions", "completions/max_length": "completions",
    "completions/mean_terminated_length": "completions", "completions/max_terminated_length": "completions",
    "rewards/numeric_answer/mean": "rewards", "rewards/numeric_answer/std": "rewards",
    "sampling/importance_sampling_ratio/mean": "sampling", "sampling/sampling_logp_difference/max": "sampling",
    "tools/call_frequency": "tools", "tools/failure_frequency": "tools",
    "gpu/power_watts": "gpu", "eval_reward": "eval", "eval_loss": "eval",
    "reward_logs/format_share": "reward_logs", "my_accuracy": "custom", "custom/thing": "custom",
}


@pytest.mark.parametrize(("key", "section"), sorted(TRL_KEYS.items()))
def test_each_key_lands_in_the_section_of_its_prefix(key, section):
    assert section_of(key) == section


def test_the_overview_keeps_its_panels_keys_and_no_key_is_lost_or_repeated():
    keys = [*TRL_KEYS, *CHART_KEYS, "gpu/utilization"]
    grouped = group_keys(keys)
    assert list(grouped) == list(SECTION_IDS) and SECTION_IDS[0] == "overview"
    assert set(grouped["overview"]) == {*CHART_KEYS, "gpu/utilization"}
    flat = [key for keys_of in grouped.values() for key in keys_of]
    assert sorted(flat) == sorted(set(keys))  # each key once
    assert grouped["clip"] == sorted(k for k, s in TRL_KEYS.items() if s == "clip")


def test_grouping_drops_what_is_not_a_key():
    grouped = group_keys(["grad_norm", "", None, 3, "x" * 201, "grad_norm"])
    assert grouped["policy"] == ["grad_norm"] and sum(map(len, grouped.values())) == 1


def test_search_matches_every_word_case_insensitively_and_labels_count():
    assert matches("clip_ratio/high_mean", "CLIP high") and not matches("clip_ratio/low_mean", "clip high")
    keys = ["clip_ratio/high_mean", "clip_ratio/high_max", "clip_ratio/low_mean"]
    section = SimpleNamespace(title="clipping")
    assert section_label(section, keys).endswith("3 charts")
    assert section_label(section, keys, "high").endswith("2 of 3 match")
    many = [f"k{i:03d}" for i in range(MAX_SECTION_CHARTS + 5)]
    assert drawn_keys(many, ChartOptions()) == many[:MAX_SECTION_CHARTS]
    assert drawn_keys(many, ChartOptions(panel_filter="k00")) == many[:10]


def _record(store, run_id: int, steps: range, extra: dict | None = None) -> None:
    store.record_metric_steps(run_id, [
        (step, {"reward": step / 10, "kl": 0.01, "grad_norm": 100.0 if step == 7 else 1.0,
                "clip_ratio/high_mean": 0.1, "my_key": float(step), **(extra or {})}, 1000.0 + step)
        for step in steps
    ])


def test_a_section_reads_its_keys_history_only_when_drawn(store, monkeypatch):
    store.summary_buckets = 8
    run = store.create_run(name="keys", config={"beta": 0.0}, dataset_id=None, max_steps=100)
    _record(store, run.id, range(1, 41))
    ctx = SimpleNamespace(store=store)
    reads = []
    original = store.metric_summary
    monkeypatch.setattr(store, "metric_summary", lambda *a, **k: reads.append(sorted(k.get("keys", ()))) or
                        original(*a, **k))

    series, _ = refresh_series(ctx, run.id, None)
    assert "grad_norm" not in series.data and "grad_norm" in series.known  # listed, not read
    assert section_keys(series)["policy"] == ["grad_norm"] and section_keys(series)["custom"] == ["my_key"]
    _record(store, run.id, range(41, 44), {"tools/call_frequency": 0.5})  # a key that appears during the run
    series, changed = refresh_series(ctx, run.id, series)
    assert changed and section_keys(series)["tools"] == ["tools/call_frequency"]
    assert series.data["grad_norm"][0] == [40, 41, 42, 43]  # only the recent reads so far (the last step read again)

    reads.clear()
    figure = section_figure(ctx, run, series, ["grad_norm"], ChartOptions(log_y=True), {})
    assert reads == [["grad_norm"]]  # that section's key only
    steps, values = series.data["grad_norm"]
    assert steps[-1] == 43 and len(steps) <= 10 and "grad_norm" in series.loaded
    assert max(series.envelope["grad_norm"][2]) == 100.0  # the spike at step 7 is in the band
    assert figure.layout.meta["panels"] == ["grad_norm"] and figure.layout.yaxis.type == "log"
    line = next(t for t in figure.data if t.name == "grad_norm")
    assert list(line.customdata) == list(line.x)  # the click to Inspect reads the step

    reads.clear()
    section_figure(ctx, run, series, ["grad_norm"], ChartOptions(), {})
    assert reads == []  # read once


def test_a_key_is_drawn_as_text_never_as_plotly_markup():
    from app.views.charts import MetricSeries, training_figure
    from app.views.metric_sections import section_panels

    key = '<a href="javascript:alert(1)">x</a>&<b>'
    series = MetricSeries(run_id=1)
    series.extend_rows([(1, key, 1.0, 0.0), (2, key, 2.0, 1.0)])
    figure = training_figure(series, "run", None, panels=section_panels([key]))
    titles = [a.text for a in figure.layout.annotations]
    assert titles == ['&lt;a href="javascript:alert(1)"&gt;x&lt;/a&gt;&amp;&lt;b&gt;']
    assert [t.name for t in figure.data] == [titles[0]] and list(figure.data[0].y) == [1.0, 2.0]
