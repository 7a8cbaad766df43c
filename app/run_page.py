"""A run's own page, ``/run?run=12``: the link to one run that alerts and the Runs tab hand out.

It shows what a link to a run is opened for, and nothing the dashboard's other tabs need: the run's status card, its
overview chart and every other key it recorded in the sections grouped by prefix (:mod:`app.tabs.runs.sections`),
the chart controls (smoothing, x axis, log scale, search, one panel expanded), refreshed every
:data:`~app.tabs.runs.tab.REFRESH_SECONDS` while it trains. A click on a point opens that step's groups in the
dashboard's Inspect tab (``/?run=12&step=30&tab=inspect``); links open the run in the dashboard's Runs tab.

Why a page of its own: Gradio builds every component and event of a page in the browser before the page's first
answer is applied (the dashboard's page has about 560 components and 200 events); this page has about 40, so its
first chart is drawn in about the time of the least page Gradio and plotly can make for it
(``benchmarks/bench_web.py --side-by-side``; docs/long-runs.md). trackio's and W&B's links to a run open such a page
too. The page is served under the dashboard's login like every other (``Blocks.route``); it only reads.

The ``run`` parameter is user input: anything but an existing run's id (:func:`app.url_state.parse_view`) shows a
note and a link to the dashboard, and the value is never echoed into the page.
"""

from __future__ import annotations

from datetime import datetime, timezone

import gradio as gr

from app.context import AppContext
from app.tabs.navigation import url_view_of
from app.tabs.runs.plots import compact_plot
from app.tabs.runs.sections import connect_metric_sections, create_metric_sections
from app.tabs.runs.sidebar import chart_options, create_chart_controls
from app.tabs.runs.tab import CHART_CLICK_JS, REFRESH_SECONDS, refresh_series
from app.views.charts import MetricSeries, training_figure
from app.views.runs import run_status_html
from storage import RunStatus, StoreError

#: The page's path under the dashboard's address (``Blocks.route``).
RUN_PAGE_PATH = "run"
#: Shown for a link without a run, or to a run that does not exist (any more).
NO_SUCH_RUN_HTML = ('<div id="run-page-missing">No run to show: the link names no run that exists. '
                    '<a href="./?tab=runs">Open the dashboard\'s runs</a>.</div>')

#: Browser code for a click on a chart point (written by :data:`~app.tabs.runs.tab.CHART_CLICK_JS` into
#: ``#runs-chart-step`` as ``"<step>@<time>"``): opens the dashboard's Inspect tab at that step of the page's run
#: (Inspect lands on the recorded step nearest it). Only integers reach the address.
OPEN_INSPECT_JS = """
(value, run) => {
  const step = Math.round(parseFloat(String(value || '').split('@')[0]));
  const id = Math.round(Number(run));
  if (Number.isFinite(step) && step >= 0 && Number.isFinite(id) && id > 0) {
    window.location.assign(`./?run=${id}&step=${step}&tab=inspect`);
  }
  return [];
}
"""


#: Browser code after the page load: the browser tab is titled with the run (its name as the status card shows it,
#: text only), so several run pages open side by side tell themselves apart.
TITLE_JS = """
() => {
  setTimeout(() => {
    const name = document.querySelector('#run-page-head #run-status b');
    if (name && name.textContent) document.title = `${name.textContent} · GRPO dashboard`;
  }, 100);
  return [];
}
"""


def page_link(run_id: int) -> str:
    """The run page's address relative to the dashboard's root (``run?run=12``)."""
    return f"{RUN_PAGE_PATH}?run={int(run_id)}"


def head_html(ctx: AppContext, run) -> str:
    """The page's head: the run's status card (:func:`app.views.runs.run_status_html`, its log's end for a failed run)
    and the links into the dashboard."""
    # the card shows the log's end for a failed run only: read it then, not at every tick of a training run
    log_tail = ctx.launcher.log_tail(run, max_lines=60) if run.status == RunStatus.FAILED else ""
    links = (f'<div class="run-page-links"><a href="./?run={run.id}&amp;tab=runs">Open in the dashboard</a> · '
             f'<a href="./?run={run.id}&amp;tab=inspect">Inspect its groups</a></div>')
    return run_status_html(run, log_tail, now=datetime.now(timezone.utc), page_link=False) + links


def create_run_page(ctx: AppContext, blocks: gr.Blocks) -> dict[str, gr.components.Component]:
    """Build the run page inside ``blocks``' page context (``with blocks.route(...)``, :func:`app.server.build_blocks`):
    its load draws the linked run's chart in its own answer, the sections follow it. Returns the components by name
    (``run``, ``head``, ``plot``, ``chart_click``, ``timer`` and the chart controls)."""
    run_box = gr.Number(visible="hidden", precision=0, elem_id="run-page-run")  # the run shown (read by the click)
    head = gr.HTML(elem_id="run-page-head")
    with gr.Column(elem_id="run-page-body") as body:  # hidden for a link naming no run
        controls = create_chart_controls()
        plot = compact_plot(label="training metrics (click a point to see that step's groups in Inspect)",
                            elem_id="runs-plot")
        chart_click = gr.Textbox(visible="hidden", elem_id="runs-chart-step")
        sections = create_metric_sections(ctx, chart_options=chart_options, click_js=CHART_CLICK_JS)
    series_state = gr.State(None)
    no_overlays = gr.State(None)  # the sections draw other runs beside; this page draws one
    timer = gr.Timer(REFRESH_SECONDS)
    options = [controls[name] for name in ("smoothing", "x_axis", "log_y", "panel_filter", "expand")]

    def read_run(run_id: object):
        try:
            return ctx.store.get_run(int(run_id)) if run_id is not None else None
        except (StoreError, TypeError, ValueError, OverflowError):
            return None

    def figure(run, series: MetricSeries, values: tuple) -> object:
        return training_figure(series, f"#{run.id} {run.name}", run.config.get("beta"),
                               options=chart_options(*values))

    def on_load(request: gr.Request, *values):
        """Inputs: the page's request (its ``run``), the chart controls. Outputs: the run, the head, the chart, the
        series, the page's body (hidden without a run); the run's chart in this one answer."""
        run = read_run(url_view_of(request)["run"])
        if run is None:
            return None, NO_SUCH_RUN_HTML, None, None, gr.update(visible=False)
        series, _ = refresh_series(ctx, run.id, None)
        return run.id, head_html(ctx, run), figure(run, series, values), series, gr.skip()

    def on_tick(run_id: object, series: MetricSeries | None, *values):
        """Inputs: the run, its series, the chart controls. Outputs: the head, the chart (only when something new
        was recorded), the series."""
        run = read_run(run_id)
        if run is None:
            return gr.skip(), gr.skip(), gr.skip()
        series, changed = refresh_series(ctx, run.id, series if isinstance(series, MetricSeries) else None)
        return head_html(ctx, run), figure(run, series, values) if changed else gr.skip(), series

    def on_redraw(run_id: object, series: MetricSeries | None, *values):
        """Inputs: the run, its series, the chart controls. Outputs: the chart drawn with the controls, the series."""
        run = read_run(run_id)
        if run is None:
            return gr.skip(), gr.skip()
        series, _ = refresh_series(ctx, run.id, series if isinstance(series, MetricSeries) else None)
        return figure(run, series, values), series

    hidden = {"show_progress": "hidden"}
    loaded = blocks.load(on_load, inputs=options, outputs=[run_box, head, plot, series_state, body], **hidden)
    loaded.then(None, js=TITLE_JS, **hidden)
    ticked = timer.tick(on_tick, inputs=[run_box, series_state, *options], outputs=[head, plot, series_state],
                        **hidden)
    redrawn = gr.on([controls["smoothing"].release, controls["x_axis"].change, controls["log_y"].change,
                     controls["panel_filter"].submit, controls["panel_filter"].blur, controls["expand"].change],
                    on_redraw, inputs=[run_box, series_state, *options], outputs=[plot, series_state],
                    trigger_mode="always_last", **hidden)
    connect_metric_sections(ctx, sections, selected=run_box, series_state=series_state, overlay_state=no_overlays,
                            option_inputs=options, triggers={"refresh": [loaded, ticked], "search": [redrawn]})
    plot.change(None, js=CHART_CLICK_JS)
    chart_click.change(None, inputs=[chart_click, run_box], js=OPEN_INSPECT_JS, **hidden)
    return {"run": run_box, "head": head, "plot": plot, "chart_click": chart_click, "timer": timer, **controls}

