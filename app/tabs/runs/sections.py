"""The Runs tab's metric sections: every key the selected run recorded, one chart per key, grouped by its prefix
(:mod:`app.views.metric_sections`), below the overview chart.

Each section is a closed ``gr.Accordion`` holding one ``gr.Plot``. A section is drawn only once it is opened (or a
search over metric names finds keys in it), and only then are its keys' downsampled histories read
(``Store.metric_summary`` for those keys, at most 1,000 buckets each): the first chart of a run with 200 keys costs
what one with 8 costs (docs/long-runs.md). The timer's refresh reads the new steps of every key at once; it relabels
the sections (a key that appears during a run appears in its section) and redraws the open ones that changed. The
chart controls (smoothing, x axis, log scale, overlay, the search) apply to every section, and a click on a point
opens Inspect at its step as on the overview.
"""

from __future__ import annotations

from collections.abc import Callable

import gradio as gr

from app.context import AppContext
from app.tabs.runs.plots import compact_plot
from app.views.chart_options import ChartOptions
from app.views.charts import MetricSeries, training_figure
from app.views.metric_sections import (
    SECTIONS,
    group_keys,
    matches,
    section_label,
    section_panels,
)
from storage import StoreError

#: The sections drawn in accordions (the overview is the tab's main chart).
ACCORDION_SECTIONS = tuple(section for section in SECTIONS if section.id != "overview")
#: At most this many charts are drawn in one section (a search narrows a larger one); the heading says so.
MAX_SECTION_CHARTS = 48


def section_keys(series: MetricSeries | None) -> dict[str, list[str]]:
    """``section id -> keys`` of every key the page knows the run has (its key list read at the first load, and any
    key seen since)."""
    if series is None:
        return group_keys(())
    return group_keys(set(series.data) | series.known)


def load_keys(ctx: AppContext, series: MetricSeries, keys: list[str]) -> None:
    """Read the downsampled history of those of ``keys`` whose history the page does not have yet (one
    ``metric_summary`` read for them all; nothing when every key is loaded)."""
    missing = [key for key in keys if key not in series.loaded]
    if missing and series.run_id is not None:
        series.load_history(ctx.store.metric_summary(series.run_id, keys=missing))
        series.loaded.update(missing)


def drawn_keys(keys: list[str], options: ChartOptions) -> list[str]:
    """The keys of a section to draw: those matching the search, at most :data:`MAX_SECTION_CHARTS`."""
    return [key for key in keys if matches(key, options.panel_filter)][:MAX_SECTION_CHARTS]


def section_figure(ctx: AppContext, run, series: MetricSeries, keys: list[str], options: ChartOptions,
                   overlays: dict | None) -> object:
    """The figure of one section: one panel per key (histories read first), the overlaid runs drawn beside."""
    load_keys(ctx, series, keys)
    others = []
    for label, other in (overlays or {}).values():
        load_keys(ctx, other, keys)
        others.append((label, other))
    options = ChartOptions(smoothing=options.smoothing, x_axis=options.x_axis, log_y=options.log_y,
                           expanded=options.expanded)
    return training_figure(series, f"#{run.id} {run.name}", run.config.get("beta"), options=options,
                           overlays=others, panels=section_panels(keys))


def create_metric_sections(ctx: AppContext, *, chart_options: Callable[..., ChartOptions],
                           click_js: str) -> dict:
    """Lay out one closed accordion and plot per section of :data:`ACCORDION_SECTIONS` inside the current
    ``gr.Blocks`` (hidden until the run has a key in it). Returns ``accordions`` and ``plots`` (section id ->
    component), ``open`` (a ``gr.State`` of the open sections' ids) and ``drawn`` (a ``gr.State``: section id ->
    what its labels and charts were drawn from), for :func:`connect_metric_sections`."""
    accordions, plots = {}, {}
    for section in ACCORDION_SECTIONS:
        with gr.Accordion(section_label(section, []), open=False, visible=False,
                          elem_id=f"runs-section-{section.id}") as accordion:
            plot = compact_plot(show_label=False, elem_id=f"runs-section-plot-{section.id}",
                           elem_classes=["grpo-section-plot"])
        plot.change(None, js=click_js)
        accordions[section.id], plots[section.id] = accordion, plot
    return {"accordions": accordions, "plots": plots, "open": gr.State([]), "drawn": gr.State({}),
            "chart_options": chart_options}


def _run(ctx: AppContext, run_id: object):
    try:
        return None if run_id is None else ctx.store.get_run(int(run_id))
    except (StoreError, TypeError, ValueError):
        return None


def connect_metric_sections(ctx: AppContext, sections: dict, *, selected: gr.Dropdown, series_state: gr.State,
                            overlay_state: gr.State, option_inputs: list, triggers: dict) -> Callable:
    """Connect the sections after the events of ``triggers["refresh"]`` (every section relabelled and the open ones
    redrawn when their data moved: the timer's refresh, a new run picked) and of ``triggers["search"]`` (the chart
    controls changed: the same, and with a search over metric names the sections with a matching key open and are
    drawn). Returns ``follow(event)``, which connects the refresh after an event made later (the page load that
    opens a link, :func:`app.tabs.navigation.connect_url`)."""
    ids = [section.id for section in ACCORDION_SECTIONS]
    accordions = [sections["accordions"][i] for i in ids]
    plots = [sections["plots"][i] for i in ids]
    open_state, drawn_state = sections["open"], sections["drawn"]
    to_options = sections["chart_options"]

    def update(run_id, series: MetricSeries | None, cache: dict | None, opened: list | None, drawn: dict | None,
               options: ChartOptions, search_opens: bool):
        opened = [i for i in (opened or []) if i in ids]
        drawn = drawn if isinstance(drawn, dict) else {}
        labels, charts = dict(drawn.get("labels") or {}), dict(drawn.get("charts") or {})
        run = _run(ctx, run_id)
        if run is None or series is None or series.run_id != run.id:
            hidden = [gr.update(visible=False)] * len(ids)
            return (*hidden, *([gr.skip()] * len(ids)), gr.skip(), gr.skip(), [], {})
        grouped = section_keys(series)
        overlay_steps = sorted((int(i), other.last_step) for i, (_, other) in (cache or {}).items())
        accordion_out, plot_out = [], []
        for section in ACCORDION_SECTIONS:
            keys = grouped[section.id]
            found = drawn_keys(keys, options)
            opens = search_opens and bool(options.panel_filter.strip()) and bool(found) and section.id not in opened
            if opens:
                opened.append(section.id)
            head = [section_label(section, keys, options.panel_filter), bool(keys)]
            if labels.get(section.id) != head or opens:
                accordion_out.append(gr.update(label=head[0], visible=head[1], **({"open": True} if opens else {})))
                labels[section.id] = head
            else:
                accordion_out.append(gr.skip())
            mark = [run.id, series.last_step, found, repr(options), overlay_steps]
            if section.id in opened and found and charts.get(section.id) != mark:
                plot_out.append(section_figure(ctx, run, series, found, options, cache))
                charts[section.id] = mark
            else:
                plot_out.append(gr.skip())
        return (*accordion_out, *plot_out, series, cache, opened, {"labels": labels, "charts": charts})

    def on_refresh(run_id, series, cache, opened, drawn, *options):
        """Inputs: run, its series, overlay series, open sections, drawn marks, chart controls. Outputs: the
        accordions, the plots, series, overlay series, open sections, drawn marks."""
        return update(run_id, series, cache, opened, drawn, to_options(*options), False)

    def on_search(run_id, series, cache, opened, drawn, *options):
        """As :func:`on_refresh`, and the sections with a key matching the search open."""
        return update(run_id, series, cache, opened, drawn, to_options(*options), True)

    common_inputs = [selected, series_state, overlay_state, open_state, drawn_state, *option_inputs]
    common_outputs = [*accordions, *plots, series_state, overlay_state, open_state, drawn_state]
    hidden = {"show_progress": "hidden"}
    def follow(event) -> None:
        event.then(on_refresh, inputs=common_inputs, outputs=common_outputs, **hidden)

    for event in triggers["refresh"]:
        follow(event)
    for event in triggers["search"]:
        event.then(on_search, inputs=common_inputs, outputs=common_outputs, **hidden)

    for section_id, accordion in zip(ids, accordions, strict=True):
        def on_expand(run_id, series, cache, opened, drawn, *options, _id=section_id):
            """A section opened: it is drawn (its keys' histories read now)."""
            opened = [*(opened or []), _id] if _id not in (opened or []) else opened
            return update(run_id, series, cache, opened, drawn, to_options(*options), False)

        def on_collapse(opened, _id=section_id):
            return [i for i in (opened or []) if i != _id]

        accordion.expand(on_expand, inputs=common_inputs, outputs=common_outputs, **hidden)
        accordion.collapse(on_collapse, inputs=open_state, outputs=open_state, **hidden)
    return follow
