"""The Runs tab's "Compare runs" panel: one metric of several runs overlaid (x by step or by wall time, EMA
smoothing) and a table of the config fields, and the recorded provenance fields (dataset hash, model identity,
library versions, device), that differ between them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

import gradio as gr
import pandas as pd

from app.catalog_sync import CatalogSync
from app.context import AppContext, actor_of
from app.views.charts import MetricSeries, compare_figure
from grpo_core.access.ownership import SINGLE_USER, Actor, config_shown_to
from storage import StoreError

X_AXES = [("step", "step"), ("wall time (s since the run's first point)", "wall")]


def _reward_key(spec: Mapping[str, Any], seen: dict[str, int]) -> str:
    """A reward rule's key in the flat config: its metric name (or rule), ``#2``, ``#3`` for repeats."""
    base = str(spec.get("name") or spec.get("rule") or "?")
    seen[base] = seen.get(base, 0) + 1
    return base if seen[base] == 1 else f"{base}#{seen[base]}"


def flatten_config(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """A run config (``RunInfo.config``, a ``RunConfig`` dump) as ``dotted.field -> scalar``.

    Nested mappings become ``a.b``; the ``rewards`` list is keyed by each rule's metric name, so that adding or
    reordering rules shows as per-rule differences (``rewards.numeric_answer.weight``,
    ``rewards.format_regex.params.pattern``); other lists of mappings are keyed by position, lists of scalars stay
    whole (as JSON text).
    """
    flat: dict[str, Any] = {}
    for key, value in config.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten_config(value, f"{name}."))
        elif isinstance(value, list) and value and all(isinstance(v, Mapping) for v in value):
            seen: dict[str, int] = {}
            for position, item in enumerate(value):
                label = _reward_key(item, seen) if key == "rewards" and not prefix else str(position)
                flat.update(flatten_config(item, f"{name}.{label}."))
        elif isinstance(value, list):
            flat[name] = json.dumps(value, ensure_ascii=False)
        else:
            flat[name] = value
    return flat


def run_fields(config: Mapping[str, Any], provenance: Mapping[str, Any] | None) -> dict[str, Any]:
    """A run's config plus its recorded provenance under ``provenance`` (when it has one), so that
    :func:`config_differences` lists differing provenance fields as ``provenance.versions.trl``,
    ``provenance.dataset.sha256``, ``provenance.device.name`` ... rows."""
    return {**config, "provenance": dict(provenance)} if provenance else dict(config)


_MISSING = "(not set)"


def _show(value: Any) -> str:
    if value is _MISSING:
        return _MISSING
    if value is None:
        return "None"
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def config_differences(configs: Mapping[str, Mapping[str, Any]]) -> pd.DataFrame:
    """The config fields whose values are not the same in every run, one row each, sorted by field.

    Args:
        configs: run label -> run config (as stored with the run).

    Returns:
        Columns ``field`` and one per run label (in ``configs`` order); a field a run lacks shows "(not set)".
        Empty (with those columns) when fewer than two runs are given or all fields agree.
    """
    labels = list(configs)
    flats = [flatten_config(configs[label]) for label in labels]
    rows = []
    if len(flats) >= 2:
        for field in sorted(set().union(*flats)):
            values = [flat.get(field, _MISSING) for flat in flats]
            if any(v != values[0] or type(v) is not type(values[0]) for v in values[1:]):
                rows.append([field, *(_show(v) for v in values)])
    return pd.DataFrame(rows, columns=["field", *labels])


def compare_runs(
    ctx: AppContext, run_ids: Sequence[int] | None, key: str, weight: float | None, axis: str | None,
    reader: Actor = SINGLE_USER,
) -> tuple[Any, pd.DataFrame]:
    """The overlay of metric ``key`` for ``run_ids`` (EMA ``weight``, x ``axis`` ``"step"`` or ``"wall"``) and the
    table of their differing config fields: the Compare button's outputs (runs deleted meanwhile are left out). Each
    config as ``reader`` may read it (another owner's ``webhook_url`` hidden: :func:`config_shown_to`)."""
    series_by_label, configs = {}, {}
    for run_id in run_ids or []:
        try:
            run = ctx.store.get_run(int(run_id))
        except StoreError:
            continue
        label = f"#{run.id} {run.name}"
        series = MetricSeries(run_id=run.id)
        series.extend(ctx.store.metrics_since(run.id, keys=[key]))
        series_by_label[label] = series
        configs[label] = run_fields(config_shown_to(reader, run.owner, run.config), run.provenance)
    figure = compare_figure(series_by_label, key, smoothing=float(weight or 0), x_axis=axis or "step")
    return figure, config_differences(configs)


def create_compare_panel(
    ctx: AppContext,
    choices: Sequence[tuple[str, int]],
    metrics: Sequence[str],
    sync: CatalogSync | None = None,
) -> dict[str, gr.components.Component]:
    """Build the comparison controls, plot and config-difference table inside the current ``gr.Blocks``.

    Args:
        choices: (label, run id) of the runs to offer at first; ``sync`` keeps them current.
        metrics: metric names offered (custom names allowed).
    """
    with gr.Row():
        runs = gr.Dropdown(label="runs", choices=list(choices), multiselect=True, scale=3, elem_id="compare-runs")
        metric = gr.Dropdown(
            label="metric",
            choices=list(metrics),
            value="reward",
            scale=2,
            allow_custom_value=True,
            elem_id="compare-metric",
        )
        x_axis = gr.Radio(label="x axis", choices=X_AXES, value="step", scale=2, elem_id="compare-x")
        smoothing = gr.Slider(
            label="smoothing (EMA)", minimum=0, maximum=0.99, value=0.0, step=0.01, scale=2, elem_id="compare-smoothing"
        )
    button = gr.Button("Compare", elem_id="compare-button")
    plot = gr.Plot(elem_id="compare-plot")
    table = gr.Dataframe(label="config and provenance fields that differ", interactive=False, elem_id="compare-config")

    def on_compare(run_ids: list[int] | None, key: str, weight: float, axis: str, request: gr.Request = None):
        """Inputs: runs, metric, smoothing, x axis. Outputs: plot, config differences."""
        return compare_runs(ctx, run_ids, key, weight, axis, actor_of(ctx, request))

    button.click(on_compare, inputs=[runs, metric, smoothing, x_axis], outputs=[plot, table])
    if sync is not None:
        sync.follow_runs(runs)
    return {
        "runs": runs,
        "metric": metric,
        "x_axis": x_axis,
        "smoothing": smoothing,
        "button": button,
        "plot": plot,
        "config": table,
    }
