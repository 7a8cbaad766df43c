"""The Runs tab: the runs table (filtered by status and name/tag), the sweeps (:mod:`app.tabs.runs.sweeps`), the selected
run's status and live charts, cancel, resume, delete, notes and tags (:mod:`app.tabs.runs.controls`), and a comparison
of runs.

A timer refreshes every few seconds. Charts are incremental: the page keeps the metric points it has in a
``gr.State`` and asks the store only for steps after the last one seen; when nothing new arrived the figure is not
re-sent.
"""

from __future__ import annotations

from datetime import datetime, timezone

import gradio as gr
import pandas as pd
import plotly.graph_objects as go

from app.catalog_sync import CatalogSync, run_choices
from app.context import AppContext
from app.tabs.runs.compare import create_compare_panel
from app.tabs.runs.controls import create_filter_row, create_run_controls
from app.tabs.runs.doctor import create_doctor_panel
from app.tabs.runs.export import create_export_panel
from app.tabs.runs.lazy import lazy_accordion
from app.tabs.runs.plots import compact_plot
from app.tabs.runs.sections import connect_metric_sections, create_metric_sections
from app.tabs.runs.sidebar import (
    ANY_SWEEP,
    chart_options,
    clicked_run,
    create_chart_controls,
    create_overlay_picker,
    in_sweep,
    overlay_ids,
    overlay_legend_html,
    sweep_filter_choices,
)
from app.tabs.runs.sweeps import create_sweeps_panel
from app.views.charts import CHART_KEYS, GPU_KEY_PATTERN, TOOL_KEY_PATTERN, MetricSeries, training_figure
from app.views.latest_view import LatestOnly
from app.views.plot_payload import figure_json
from app.views.run_filter import filter_runs
from app.views.runs import NO_RUNS_HTML, RECENT_REWARD_STEPS, RUNS_TABLE_HEADERS, run_status_html, runs_table
from storage import StoreError

REFRESH_SECONDS = 2.0
#: Keys the chart draws beside :data:`CHART_KEYS`, as SQL LIKE patterns: the per-rule means and the eval split's reward.
FIRST_LOAD_PATTERNS = ("rewards/%/mean", "eval_reward", "eval_rewards/%/mean", GPU_KEY_PATTERN, TOOL_KEY_PATTERN)
COMPARE_METRICS = list(CHART_KEYS)


def overview_draws(key: str) -> bool:
    """Whether the overview chart (``training_figure`` without ``panels``) draws ``key``: one of :data:`CHART_KEYS`
    or of :data:`FIRST_LOAD_PATTERNS` (a reward function's mean, the eval split's reward, GPU and tool metrics)."""
    return (key in CHART_KEYS or key.startswith(("gpu/", "tools/")) or key == "eval_reward"
            or (key.startswith(("rewards/", "eval_rewards/")) and key.endswith("/mean")))

#: Browser code run after each chart update (the overview's and each section's): a click on a point of a chart writes
#: ``"<step>@<time>"`` into the hidden ``#runs-chart-step`` box (the time makes a second click on the same step a change
#: too), which opens Inspect there. ``gr.Plot`` has no select event of its own (gradio 6: ``EVENTS = [change]``), hence
#: plotly's ``plotly_click``, which a chart has only once plotly has drawn it: a section's chart is drawn after the
#: change that fills it ran this, so one watcher a page (installed once) attaches the handler to every chart of the
#: overview and the sections as each appears or is drawn anew, every 250 ms.
CHART_CLICK_JS = """
() => {
  if (window.__grpoChartClicks) return [];
  window.__grpoChartClicks = true;
  const attach = () => {
    document.querySelectorAll('#runs-plot .js-plotly-plot, .grpo-section-plot .js-plotly-plot').forEach((div) => {
      if (!div.on || !div._ev || div._ev.__grpoClick) return;
      div._ev.__grpoClick = true;
      div.on('plotly_click', (data) => {
        const point = data && data.points && data.points[0];
        const box = document.querySelector('#runs-chart-step textarea, #runs-chart-step input');
        if (!point || point.x === undefined || point.x === null || !box) return;
        const step = (point.customdata !== undefined && point.customdata !== null) ? point.customdata : point.x;
        box.value = `${step}@${Date.now()}`;
        box.dispatchEvent(new Event('input', {bubbles: true}));
      });
    });
  };
  attach();
  setInterval(attach, 250);
  return [];
}
"""


#: The Runs tab's draws of a selected run, per page: the page load's (a link) and each pick. Gradio runs them
#: concurrently; an answer that lands after a newer one began is dropped (a slow page load never undoes a pick).
SELECTIONS = LatestOnly()


def _page(request: gr.Request | None) -> str | None:
    return getattr(request, "session_hash", None) if request is not None else None


def parse_chart_click(value: str | None) -> float | None:
    """The step of a chart click written by :data:`CHART_CLICK_JS` (``"12@1733000000000"`` -> 12.0); ``None`` for
    anything else."""
    try:
        return float((value or "").split("@", 1)[0])
    except ValueError:
        return None


def runs_frame(ctx: AppContext, status: str | None = None, text: str | None = None,
               sweep: object = None) -> pd.DataFrame:
    """The runs table with each run's recent reward (the mean of its latest :data:`RECENT_REWARD_STEPS` logged
    ``reward`` values, NaN left out), only the runs that pass the filters (see ``filter_runs``, and
    :func:`app.tabs.runs.sidebar.in_sweep` for ``sweep``)."""
    runs = in_sweep(filter_runs(ctx.store.list_runs(), status, text), sweep)
    rewards = {}
    for run in runs:
        after = max(-1, run.current_step - RECENT_REWARD_STEPS)
        values = [p.value for p in ctx.store.metrics_since(run.id, after, keys=["reward"])][-RECENT_REWARD_STEPS:]
        finite = [v for v in values if v is not None]
        rewards[run.id] = sum(finite) / len(finite) if finite else None
    return pd.DataFrame(runs_table(runs, rewards), columns=RUNS_TABLE_HEADERS)


def refresh_series(ctx: AppContext, run_id: int, series: MetricSeries | None) -> tuple[MetricSeries, bool]:
    """Bring ``series`` up to date for ``run_id``; returns (series, changed). A new series starts from the store's
    downsampled history (``Store.metric_summary``); an existing one reads the steps after its cursor
    (``Store.metrics_since``). ``changed``: the overview chart would draw something new (a later step, or a point
    of a key it draws, :func:`overview_draws`); the first read again of the last step, which
    brings every other key's last point (200 of them on a run logging 200 keys), changes nothing drawn, so the
    timer does not send the same chart again."""
    if series is None or series.run_id != run_id:
        series = MetricSeries(run_id=run_id)
        # First view: the charted keys' downsampled history (at most 1,000 buckets a key, whatever the run's length,
        # with their min/max band and the true last point); then every new step incrementally.
        series.extend_summary(ctx.store.metric_summary(run_id, keys=CHART_KEYS, key_patterns=FIRST_LOAD_PATTERNS))
        # the names of every other key (one row each): their sections read their history once opened
        series.known = set(ctx.store.metric_keys(run_id))
        return series, True
    before = series.last_step
    drawn = {key: len(steps) for key, (steps, _) in series.data.items() if overview_draws(key)}
    if not series.extend(ctx.store.metrics_since(run_id, series.cursor)):
        return series, False
    return series, series.last_step > before or any(
        len(steps) != drawn.get(key, 0) for key, (steps, _) in series.data.items() if overview_draws(key))


def refresh_overlays(ctx: AppContext, ids: list[int], cache: dict | None) -> tuple[dict, bool]:
    """The overlaid runs' series, ``run id -> [label, MetricSeries]``, brought up to date from ``cache`` (ids no
    longer checked dropped, runs deleted left out); returns (cache, changed)."""
    cache = cache if isinstance(cache, dict) else {}
    fresh, changed = {}, set(cache) != set(ids)
    for run_id in ids:
        try:
            run = ctx.store.get_run(run_id)
        except StoreError:
            changed = True
            continue
        label, old = cache.get(run_id, (None, None))
        series, moved = refresh_series(ctx, run.id, old)
        fresh[run.id] = [f"#{run.id} {run.name}", series]
        changed = changed or moved or label != fresh[run.id][0]
    return fresh, changed


def create_chart_warmup() -> gr.Plot:
    """A hidden, one-point ``gr.Plot`` to place outside the tabs (``app.server.build_blocks``): mounted with the page,
    it makes the browser load plotly.js (a ~4.6 MB module Gradio imports with the first plot drawn) at page load, so
    the Runs tab's first chart is only drawn when the tab opens (bench_web.py: 3-5 s on a loaded machine with the
    import, 0.6 s without). It also builds one training chart, so the server's first chart does not pay plotly's
    first use."""
    # plotly reads its validators when a figure first uses them (~1 s on a busy machine): done here, at start, not
    # in the first page's chart
    figure_json(training_figure(MetricSeries(run_id=0, data={"reward": ([1], [0.0])}, wall={1: 0.0})))
    figure = go.Figure(go.Scatter(x=[0], y=[0]))
    figure.update_layout(height=10, width=10, margin={"l": 0, "r": 0, "t": 0, "b": 0})
    return gr.Plot(value=figure, visible="hidden", elem_id="chart-warmup", show_label=False)


def create_runs_tab(ctx: AppContext, sync: CatalogSync | None = None) -> dict[str, gr.components.Component]:
    """Build the Runs tab inside the current ``gr.Blocks``; ``sync`` keeps the compare picker current and tells the
    other tabs of a cancel, resume or delete (the tab's own timer refreshes its table and run picker).

    The ``selected`` run is the app's selection: a click on a row of the table sets it, the other tabs follow it.
    ``first_view`` in the result is what the page load runs (:func:`app.tabs.navigation.connect_url`): it selects
    the run a link names (else the newest) and returns its chart in the load's own answer, without waiting for the
    timer or a second round trip; the sections follow it.
    """
    timer = gr.Timer(REFRESH_SECONDS)
    # built before their place on the page (render=False, then .render()) so that the panels above them can act on them
    # read again at each page load, in the catalog's page-load answer (one event for the page's values)
    table = gr.Dataframe(value=runs_frame(ctx) if sync is not None else lambda: runs_frame(ctx), interactive=False,
                         label="runs (click a row to select it)", elem_id="runs-table", render=False)
    if sync is not None:
        sync.page_value(table, lambda: runs_frame(ctx))
    status = gr.HTML(elem_id="runs-status", render=False)
    filters = create_filter_row(ctx, table=table, table_frame=runs_frame)
    sweep_filter = gr.Dropdown(label="sweep", choices=sweep_filter_choices(ctx), value=ANY_SWEEP,
                               elem_id="runs-filter-sweep")
    table.render()
    sweep_slot = gr.Column()  # the Sweeps view, built once Compare exists (app.tabs.runs.sweeps)
    with gr.Row():
        choices = run_choices(ctx)
        selected = gr.Dropdown(label="run", choices=choices, value=choices[0][1] if choices else None, scale=3,
                               elem_id="runs-select")
        cancel = gr.Button("Cancel run", variant="stop", scale=1, elem_id="runs-cancel")
    create_run_controls(ctx, selected=selected, status=status, table=table, filters=filters, table_frame=runs_frame,
                        sync=sync, cancel=cancel)
    status.render()
    doctor = create_doctor_panel(ctx, timer=timer, selected=selected)["panel"]
    overlay = create_overlay_picker(choices)
    controls = create_chart_controls()
    plot = compact_plot(label="training metrics (click a point to see that step's groups in Inspect)", elem_id="runs-plot")
    chart_click = gr.Textbox(visible="hidden", elem_id="runs-chart-step")
    sections = create_metric_sections(ctx, chart_options=chart_options, click_js=CHART_CLICK_JS)
    with lazy_accordion("Log (last lines of train.log)", elem_id="runs-log-panel"):  # mounted when first opened
        log_box = gr.Code(language=None, interactive=False, lines=12, elem_id="runs-log")
    with lazy_accordion("Compare runs", elem_id="compare-panel") as compare_panel:  # mounted when first opened
        compare = create_compare_panel(ctx, choices, COMPARE_METRICS, sync)
    create_export_panel(ctx, selected)
    series_state = gr.State(None)
    overlay_state = gr.State(None)
    with sweep_slot:
        sweeps = create_sweeps_panel(ctx, timer, compare, compare_panel)
    option_inputs = [controls[name] for name in ("smoothing", "x_axis", "log_y", "panel_filter", "expand")]

    def figure_of(run, series: MetricSeries, cache: dict, options) -> object:
        overlays = [(label, other) for label, other in cache.values()]
        return training_figure(series, f"#{run.id} {run.name}", run.config.get("beta"),
                               options=chart_options(*options), overlays=overlays)

    def on_refresh(run_id: int | None, series: MetricSeries | None, status_filter: str | None = None,
                   text_filter: str | None = None, sweep: object = None, checked: list | None = None,
                   cache: dict | None = None, *options):
        """Inputs: selected run, cached series, filters, overlaid runs, their cached series, chart controls.
        Outputs: table, dropdown, status, plot, log, series, overlay series."""
        frame = runs_frame(ctx, status_filter, text_filter, sweep)
        options_now = run_choices(ctx)
        # choices only, never the value: a tick's inputs are read when it starts, so a value it chose from them could
        # land after the user picked a run and undo that pick (on_pick_first chooses, reading the selection afresh)
        dropdown = gr.update(choices=options_now)
        if run_id is None:
            if options_now:  # on_pick_first selects one next; its change draws it
                return frame, dropdown, gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
            return frame, dropdown, NO_RUNS_HTML, gr.skip(), "", None, None
        try:
            run = ctx.store.get_run(int(run_id))
        except StoreError:
            return frame, dropdown, "That run no longer exists.", gr.skip(), "", None, None
        series, changed = refresh_series(ctx, run.id, series)
        cache, overlays_moved = refresh_overlays(ctx, overlay_ids(checked, run.id), cache)
        figure = figure_of(run, series, cache, options) if changed or overlays_moved else gr.skip()
        log_tail = ctx.launcher.log_tail(run, max_lines=60)
        status_html = run_status_html(run, log_tail, now=datetime.now(timezone.utc))
        return frame, dropdown, status_html, figure, log_tail, series, cache

    def on_pick_first(run_id: int | None):
        """Inputs: the selected run, read after a refresh. Outputs: the selected run: the newest run when none is
        selected yet (a page opened before the first run existed), else unchanged."""
        if run_id is not None:
            return gr.skip()
        options_now = run_choices(ctx)
        return gr.update(choices=options_now, value=options_now[0][1]) if options_now else gr.skip()

    def on_select(run_id: int | None, checked: list | None = None, cache: dict | None = None, *options,
                  drawn: MetricSeries | None = None):
        """Inputs: run, overlaid runs, their series, chart controls. Outputs: status, plot, log, series, overlay
        series, overlay key (a fresh chart for the new run). ``drawn``: the page's series; when it is already the
        run's (the page load drew it, :func:`on_view`), nothing is drawn again."""
        if run_id is None:
            return gr.skip(), gr.skip(), gr.skip(), None, gr.skip(), gr.skip()
        if isinstance(drawn, MetricSeries) and drawn.run_id == run_id:
            return (gr.skip(),) * 6
        try:
            run = ctx.store.get_run(int(run_id))
        except StoreError:
            return "That run no longer exists.", gr.skip(), "", None, gr.skip(), gr.skip()
        series, _ = refresh_series(ctx, run.id, None)
        ids = overlay_ids(checked, run.id)
        cache, _ = refresh_overlays(ctx, ids, cache)
        log_tail = ctx.launcher.log_tail(run, max_lines=60)
        return (run_status_html(run, log_tail), figure_of(run, series, cache, options), log_tail, series, cache,
                overlay_legend_html(ctx, run.id, ids))

    def on_redraw(run_id: int | None, series: MetricSeries | None, checked: list | None = None,
                  cache: dict | None = None, *options):
        """Inputs: run, its series, overlaid runs, their series, chart controls. Outputs: plot, series, overlay
        series, overlay key: the chart redrawn from what the page has (new overlaid runs read once)."""
        if run_id is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        try:
            run = ctx.store.get_run(int(run_id))
        except StoreError:
            return gr.skip(), None, gr.skip(), gr.skip()
        series, _ = refresh_series(ctx, run.id, series)
        ids = overlay_ids(checked, run.id)
        cache, _ = refresh_overlays(ctx, ids, cache)
        return figure_of(run, series, cache, options), series, cache, overlay_legend_html(ctx, run.id, ids)

    def on_view(url_view: dict | None, run_id: int | None, checked: list | None = None, cache: dict | None = None,
                *options, request: gr.Request | None = None):
        """Inputs: the URL's view (the page load's, :func:`app.tabs.navigation.connect_url`), the selected run,
        overlaid runs, their series, chart controls. Outputs: the selected run (the link's, when it names one that
        exists; else only the current choices, so a pick made while the page loaded stands), then
        :func:`on_select`'s outputs; nothing at all when a pick of this page began meanwhile (:data:`SELECTIONS`)."""
        page = _page(request)
        picked_before = not SELECTIONS.is_latest(page, 0)  # a pick of this page began before its load ran
        ticket = SELECTIONS.begin(page)
        wanted = url_view.get("run") if isinstance(url_view, dict) else None
        linked = None
        if isinstance(wanted, int) and not isinstance(wanted, bool):
            try:
                linked = run_id = ctx.store.get_run(wanted).id
            except StoreError:
                pass  # a link to a deleted run: the selection stays
        if linked is None and picked_before:
            return (gr.skip(),) * 7
        drawn = on_select(run_id, checked, cache, *options)
        if not SELECTIONS.is_latest(page, ticket):
            return (gr.skip(),) * (1 + len(drawn))
        head = gr.update(choices=run_choices(ctx), **({"value": linked} if linked is not None else {}))
        return (head, *drawn)

    def on_row(frame: pd.DataFrame, event: gr.SelectData):
        """Inputs: the table, the clicked cell. Outputs: the selected run (the clicked row's)."""
        index = event.index if isinstance(event.index, list | tuple) else [event.index]
        run_id = clicked_run(frame, index[0] if index else None)
        # with the current choices: a run made after the page was built is then listed (and its label shown)
        return gr.skip() if run_id is None else gr.update(choices=run_choices(ctx), value=run_id)

    hidden = {"show_progress": "hidden"}
    ticked = timer.tick(on_refresh, inputs=[selected, series_state, filters["status"], filters["text"], sweep_filter,
                                   overlay["runs"], overlay_state, *option_inputs],
               outputs=[table, selected, status, plot, log_box, series_state, overlay_state],
               **hidden).then(on_pick_first, inputs=selected, outputs=selected, **hidden)
    sweep_filter.change(lambda s, t, w: runs_frame(ctx, s, t, w), inputs=[filters["status"], filters["text"],
                                                                        sweep_filter], outputs=table)
    selected_outputs = [status, plot, log_box, series_state, overlay_state, overlay["key"]]
    def on_pick(request: gr.Request, run_id: int | None, drawn: MetricSeries | None, checked: list | None = None,
                cache: dict | None = None, *options):
        """Inputs: run, the page's series, overlaid runs, their series, chart controls. Outputs: :func:`on_select`'s
        (no change when a newer pick of this page began meanwhile)."""
        page = _page(request)
        ticket = SELECTIONS.begin(page)
        answer = on_select(run_id, checked, cache, *options, drawn=drawn)
        return answer if SELECTIONS.is_latest(page, ticket) else (gr.skip(),) * len(answer)

    picked = selected.change(on_pick, inputs=[selected, series_state, overlay["runs"], overlay_state, *option_inputs],
                             outputs=selected_outputs, trigger_mode="always_last", **hidden)
    table.select(on_row, inputs=table, outputs=selected, **hidden)
    redraw_inputs = [selected, series_state, overlay["runs"], overlay_state, *option_inputs]
    redraw_outputs = [plot, series_state, overlay_state, overlay["key"]]
    redrawn = gr.on([overlay["runs"].change, controls["smoothing"].release, controls["x_axis"].change, controls["log_y"].change,
           controls["panel_filter"].submit, controls["panel_filter"].blur, controls["expand"].change],
          on_redraw, inputs=redraw_inputs, outputs=redraw_outputs, trigger_mode="always_last", **hidden)
    follow_sections = connect_metric_sections(ctx, sections, selected=selected, series_state=series_state,
                                              overlay_state=overlay_state, option_inputs=option_inputs,
                                              triggers={"refresh": [ticked, picked], "search": [redrawn]})
    first_view = {"fn": on_view, "inputs": [selected, overlay["runs"], overlay_state, *option_inputs],
                  "outputs": [selected, *selected_outputs], "then": [follow_sections]}
    plot.change(None, js=CHART_CLICK_JS)
    if sync is not None:
        sync.follow_runs(overlay["runs"])
        sync.follow_runs(sweep_filter, lambda: gr.update(choices=sweep_filter_choices(ctx)))
    return {"table": table, "selected": selected, "status": status, "plot": plot, "chart_click": chart_click,
            "cancel": cancel, "overlay": overlay["runs"], "overlay_key": overlay["key"], **controls,
            "sweep_filter": sweep_filter,
            "timer": timer, "compare_runs": compare["runs"], "compare_plot": compare["plot"], "doctor": doctor,
            "sweep_table": sweeps["table"], "first_view": first_view}
