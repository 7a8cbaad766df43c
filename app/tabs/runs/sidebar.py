"""The Runs tab's run selection and chart controls, as trackio lays them out: a click on a row of the runs table selects
the run for the whole app, checkboxes overlay other runs on every panel (one colour per run), and the chart controls
(smoothing, x axis, log scale, panel filter, one panel expanded) apply at once to every panel.

Built by :func:`create_chart_controls` and :func:`create_overlay_picker`; the Runs tab (:mod:`app.tabs.runs.tab`)
connects them to its chart. The pure parts (options, colours) are :mod:`app.views.chart_options`.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

import gradio as gr
import pandas as pd

from app.context import AppContext
from app.views.chart_options import MAX_SMOOTHING, X_AXES, ChartOptions, run_colour
from app.views.charts import GPU_PANELS, PANELS, TOOL_PANELS
from storage import RunInfo, StoreError

#: The sweep filter's choice that keeps every run.
ANY_SWEEP = "any sweep"
#: At most this many runs are overlaid on the chart (past that a chart is unreadable and each costs a read).
MAX_OVERLAY = 10


def clicked_run(frame: Any, row: object) -> int | None:
    """The run id in row ``row`` of the runs table ``frame`` (its ``id`` column); ``None`` for a row out of range,
    a frame without ids, or an id that is not an integer."""
    if not isinstance(frame, pd.DataFrame) or "id" not in frame.columns or isinstance(row, bool):
        return None
    if not isinstance(row, int) or not 0 <= row < len(frame):
        return None
    try:
        return int(frame["id"].iloc[row])
    except (TypeError, ValueError):
        return None


def in_sweep(runs: Sequence[RunInfo], sweep: object) -> list[RunInfo]:
    """The runs of sweep ``sweep`` (its id), all of them for :data:`ANY_SWEEP`, ``None`` or an unknown value."""
    if sweep is None or sweep == ANY_SWEEP or isinstance(sweep, bool):
        return list(runs)
    try:
        sweep_id = int(sweep)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return list(runs)
    return [run for run in runs if run.sweep_id == sweep_id]


def sweep_filter_choices(ctx: AppContext) -> list[tuple[str, Any]]:
    """The sweep filter's choices: :data:`ANY_SWEEP`, then ``(sweep N: name, id)`` of each sweep, newest first."""
    return [(ANY_SWEEP, ANY_SWEEP), *((f"sweep {s.id}: {s.name}", s.id) for s in ctx.store.list_sweeps())]


def overlay_ids(values: object, selected: object) -> list[int]:
    """The checked runs to overlay, as ids: integers only, the selected run and repeats left out, at most
    :data:`MAX_OVERLAY`."""
    ids: list[int] = []
    for value in values if isinstance(values, list) else []:
        if isinstance(value, bool):
            continue
        try:
            run_id = int(value)
        except (TypeError, ValueError):
            continue
        if run_id != selected and run_id not in ids:
            ids.append(run_id)
    return ids[:MAX_OVERLAY]


def overlay_legend_html(ctx: AppContext, selected: int | None, ids: Sequence[int]) -> str:
    """The overlay's key: a coloured swatch and the label of the selected run and of each overlaid run, in the
    colours the chart gives them (:func:`app.views.chart_options.run_colour`)."""
    if not ids:
        return ""
    entries = []
    for position, run_id in enumerate([selected, *ids]):
        if run_id is None:
            continue
        try:
            run = ctx.store.get_run(int(run_id))
        except StoreError:
            continue
        entries.append(
            f'<span class="grpo-run-key" data-run="{run.id}" style="margin-right:1em">'
            f'<span style="display:inline-block;width:.8em;height:.8em;border-radius:2px;'
            f'background:{run_colour(position)}"></span> #{run.id} {html.escape(run.name)}</span>'
        )
    return '<div id="runs-overlay-key-items">' + "".join(entries) + "</div>"


def create_chart_controls() -> dict[str, gr.components.Component]:
    """Lay out the chart controls inside the current ``gr.Blocks``: ``smoothing`` (EMA slider), ``x_axis``
    (step / relative / wall time), ``log_y``, ``panel_filter`` (text), ``expand`` (one panel drawn large). The Runs
    tab connects their changes; :func:`chart_options` reads them."""
    titles = [title for title, _ in PANELS + TOOL_PANELS + GPU_PANELS]
    with gr.Row(elem_id="runs-chart-controls"):
        smoothing = gr.Slider(label="smoothing (EMA)", minimum=0, maximum=MAX_SMOOTHING, value=0.0, step=0.01,
                              scale=2, elem_id="runs-smoothing")
        x_axis = gr.Radio(label="x axis", choices=list(X_AXES), value="step", scale=2, elem_id="runs-x-axis")
        log_y = gr.Checkbox(label="log scale (y)", value=False, scale=1, elem_id="runs-log-y")
        panel_filter = gr.Textbox(label="search metrics", placeholder="e.g. grad_norm clip", scale=2,
                                  elem_id="runs-panel-filter")
        expand = gr.Dropdown(label="expand one panel", choices=[("(all panels)", "")] + [(t, t) for t in titles],
                             value="", scale=2, elem_id="runs-expand")
    return {"smoothing": smoothing, "x_axis": x_axis, "log_y": log_y, "panel_filter": panel_filter, "expand": expand}


def chart_options(smoothing: object, x_axis: object, log_y: object, panel_filter: object,
                  expand: object) -> ChartOptions:
    """The controls' values (:func:`create_chart_controls`' order) as checked :class:`ChartOptions`."""
    return ChartOptions.from_inputs(smoothing, x_axis, log_y, panel_filter, expand)


def create_overlay_picker(choices: Sequence[tuple[str, int]]) -> dict[str, gr.components.Component]:
    """Lay out the overlay picker inside the current ``gr.Blocks``: ``runs`` (a checkbox per run, ``choices`` at
    first) and ``key`` (the colour of each run drawn)."""
    with gr.Accordion("Overlay runs on every panel", open=True, elem_id="runs-overlay-panel"):
        runs = gr.CheckboxGroup(label="overlay", choices=list(choices), value=[], elem_id="runs-overlay")
        key = gr.HTML(elem_id="runs-overlay-key")
    return {"runs": runs, "key": key}
