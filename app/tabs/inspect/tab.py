"""The Inspect tab: pick a run and a step (or click a point of a Runs chart), see its sampled groups: the prompt and
its G completions side by side, sorted by advantage, each with every rule's reward, the total and the advantage TRL
computed; the histogram of the step's total rewards and pass@G per step; one completion's tokens as a heatmap of
log-probability, KL or entropy (:mod:`app.tabs.inspect.tokens`)."""

from __future__ import annotations

import gradio as gr

from app.catalog_sync import CatalogSync, run_choices
from app.context import AppContext, actor_of
from app.tabs.inspect.pictures import prompt_pictures
from app.tabs.inspect.tokens import create_token_view
from app.tabs.inspect.tools import create_inspect_tools
from app.tabs.runs.tab import parse_chart_click
from app.views.charts import step_groups_figure
from app.views.inspect import GROUP_FILTERS, filter_groups, pass_at_g, pass_share, step_totals
from app.views.latest_view import LatestOnly
from app.views.runs import groups_html, md_text, reward_error_map
from grpo_core.access.ownership import Actor
from storage import StoreError

STEP_CHOICES = 1000
"""The step dropdown lists the latest this many recorded steps (plus a step opened from elsewhere, e.g. a chart
click): reading every step of a long run grows with its length."""

PASS_STEPS = 200
"""pass@G is drawn for at most this many recorded steps (the latest)."""


def step_choices(ctx: AppContext, run_id: int | None, keep: int | None = None) -> list[int]:
    """The latest :data:`STEP_CHOICES` steps of the run that have recorded groups, newest first, with ``keep`` among
    them when it is a recorded step (one opened from a chart click, older than those)."""
    if run_id is None:
        return []
    steps = ctx.store.latest_group_steps(int(run_id), STEP_CHOICES)
    if keep is not None and keep not in steps and ctx.store.nearest_group_step(int(run_id), int(keep)) == keep:
        steps = sorted([*steps, int(keep)], reverse=True)
    return steps


def stats_figure(ctx: AppContext, run_id: int, step: int, threshold: float):
    """The histogram of ``step``'s completion totals and pass@G (totals above ``threshold``) per recorded step (the
    latest :data:`PASS_STEPS`, read as each group's best total in one query)."""
    steps = sorted(ctx.store.latest_group_steps(run_id, PASS_STEPS))
    best = ctx.store.best_totals(run_id, steps[0], steps[-1]) if steps else {}
    shares = [pass_share(best.get(s, []), threshold) for s in steps]
    totals = step_totals(ctx.store.groups_at(run_id, step, turns=False))
    return step_groups_figure(totals, steps, shares, step=step, threshold=threshold)


def open_step(ctx: AppContext, run_id: int | None, step: float | None) -> tuple[int | None, list[int], int | None]:
    """Where a click on a chart point at ``step`` of ``run_id`` leads: ``(run, its recorded steps, the recorded step
    nearest the click)``; the step is ``None`` when the run has no groups yet."""
    if run_id is None or step is None:
        return run_id, [], None
    nearest = ctx.store.nearest_group_step(int(run_id), float(step))
    return int(run_id), step_choices(ctx, run_id, keep=nearest), nearest


def step_view(ctx: AppContext, run_id: int | None, step_value: int | None, sort_by_advantage: bool = True,
              mode: str = "all", n=3, pass_threshold: float | None = 0.5, *, actor: Actor | None = None) -> tuple:
    """Inspect's view of one step, every part read from the one ``step_value``: ``(summary markdown, groups HTML,
    stats figure)`` (``gr.skip()`` for the figure when there is no run or step). The prompts' images are shown
    to ``actor`` when it may read them (the run's owner or an admin; none without an actor)."""
    if run_id is None or step_value is None:
        return "Choose a run and a step.", "", gr.skip()
    try:
        info = ctx.store.get_run(int(run_id))
    except StoreError:
        return "That run no longer exists.", "", gr.skip()
    records = ctx.store.groups_at(info.id, int(step_value))
    completions = [c for g in records for c in g.completions]
    truncated = sum(c.truncated for c in completions)
    flat = sum(
        1
        for g in records
        if len({c.total_reward for c in g.completions}) <= 1
    )
    errored = sum(len(errors) for errors in map(reward_error_map, records))
    text = (
        f"**#{info.id} {md_text(info.name)}**, step {step_value}: {len(records)} groups, {len(completions)} completions, "
        f"{truncated} truncated, {flat} groups with all rewards equal (no learning signal)"
        + (f", ⚠️ {errored} completions whose reward function failed (no reward, not 0)." if errored else ".")
    )
    threshold_value = float(pass_threshold if pass_threshold is not None else 0.5)
    figure = stats_figure(ctx, info.id, int(step_value), threshold_value)
    passed = pass_at_g(records, threshold_value)
    if passed is not None:
        text += f" pass@G (a completion above {threshold_value:g}): {passed:.0%} of groups."
    shown = filter_groups(records, mode or "all", int(n or 3))
    if (mode or "all") != "all":
        label = {key: name for name, key in GROUP_FILTERS}[mode]
        text += f" Showing {len(shown)} of {len(records)}: {label}."
        if not shown:
            return text, '<div class="grpo-empty">No group of this step matches the filter.</div>', figure
    return text, groups_html(shown, sort_by_advantage=sort_by_advantage,
                             pictures=prompt_pictures(ctx, info, shown, actor)), figure



#: The redraw tickets of Inspect's step views, per page.
VIEWS = LatestOnly()


def _page(request: gr.Request | None) -> str | None:
    return getattr(request, "session_hash", None) if request is not None else None


def draw_latest(guard: LatestOnly, request: gr.Request | None, draw) -> tuple:
    """``draw()``'s outputs, or ``gr.skip()`` for each when ``guard`` handed the page a newer ticket while it
    drew: a slow redraw of an older step never lands over a newer one."""
    ticket = guard.begin(_page(request))
    outputs = draw()
    if guard.is_latest(_page(request), ticket):
        return outputs
    return tuple(gr.skip() for _ in outputs)


def create_inspect_tab(
    ctx: AppContext,
    tab: gr.Tab | None = None,
    sync: CatalogSync | None = None,
    *,
    runs: dict[str, gr.components.Component] | None = None,
    tabs: gr.Tabs | None = None,
    view: gr.State | None = None,
) -> dict[str, gr.components.Component]:
    """Build the Inspect tab inside the current ``gr.Blocks``; ``sync`` keeps its run list current, selecting
    ``tab`` or "↻ steps" reloads the chosen run's steps (a live run records new ones).

    With ``runs`` (:func:`app.tabs.runs.tab.create_runs_tab`'s components: ``chart_click``, ``selected``) and ``tabs``
    (holding both tabs; this one's id is ``inspect``), a click on a point of the Runs chart opens this tab on that
    run, at the recorded step nearest the click.
    """
    with gr.Row():
        run = gr.Dropdown(label="run", choices=run_choices(ctx), scale=3, elem_id="inspect-run")
        step = gr.Dropdown(label="step", choices=[], scale=1, elem_id="inspect-step")
        sort = gr.Checkbox(label="sort by advantage", value=True, scale=1)
        reload = gr.Button("↻ steps", scale=0, elem_id="inspect-refresh")
    with gr.Row():
        show = gr.Dropdown(label="show", choices=list(GROUP_FILTERS), value="all", scale=3, elem_id="inspect-filter")
        top_n = gr.Number(label="N (top / bottom)", value=3, minimum=1, precision=0, scale=1, elem_id="inspect-n")
        threshold = gr.Number(label="pass@G: total reward above", value=0.5, scale=1, elem_id="inspect-threshold")
    summary = gr.Markdown(elem_id="inspect-summary")
    stats = gr.Plot(label="total rewards at this step; pass@G per step", elem_id="inspect-stats")
    groups = gr.HTML(elem_id="inspect-groups")

    def on_run(run_id: int | None, step_value: int | None = None, sort_by=True, mode="all", n=3, pass_threshold=0.5, request: gr.Request | None = None):
        """Inputs: run (picked by the user), step, sort, filter, N, pass@G threshold. Outputs: step dropdown (the step
        kept when the run has it, else the latest), summary, groups, stats chart of that step."""
        steps = step_choices(ctx, run_id, keep=step_value)
        keep = step_value if step_value in steps else (steps[0] if steps else None)
        return with_view(request, (gr.update(choices=steps, value=keep),), run_id, keep,
                         (sort_by, mode, n, pass_threshold))

    def with_view(request: gr.Request | None, head: tuple, run_id: object, step_value: object, extra) -> tuple:
        """``head`` (the run and step updates an event sets), then the view of ``step_value`` of ``run_id`` drawn in
        the same output, so the dropdowns and the view can never show two steps (no view for no run)."""
        if run_id is None or step_value is None or isinstance(run_id, dict):
            return (*head, gr.skip(), gr.skip(), gr.skip())
        return (*head, *draw_latest(VIEWS, request, lambda: step_view(ctx, run_id, step_value, *extra,
                                                                           actor=actor_of(ctx, request))))

    def on_show(run_id: int | None, step_value: int | None, sort_by_advantage: bool, mode: str = "all", n=3,
                pass_threshold: float | None = 0.5, request: gr.Request | None = None):
        """Inputs: run, step, sort, filter, N, pass@G threshold. Outputs: summary, groups HTML, stats chart: all of
        one step, or no change when a newer redraw of this page started meanwhile (:mod:`app.views.latest_view`)."""
        return draw_latest(VIEWS, request, lambda: step_view(ctx, run_id, step_value, sort_by_advantage, mode, n,
                                                             pass_threshold, actor=actor_of(ctx, request)))

    def on_reload(run_id: int | None, step_value: int | None, sort_by_advantage: bool, mode: str = "all", n=3,
                  pass_threshold: float | None = 0.5, request: gr.Request | None = None):
        """Inputs: run, step, sort, filter, N, pass@G threshold. Outputs: steps, summary, groups, stats chart (no
        change when a newer redraw of this page started meanwhile)."""
        ticket = VIEWS.begin(_page(request))
        steps = step_choices(ctx, run_id, keep=step_value)
        if step_value not in steps:
            step_value = steps[0] if steps else None
        summary_text, html, figure = step_view(ctx, run_id, step_value, sort_by_advantage, mode, n, pass_threshold,
                                               actor=actor_of(ctx, request))
        if not VIEWS.is_latest(_page(request), ticket):
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return gr.update(choices=steps, value=step_value), summary_text, html, figure

    def on_tab(run_id: int | None, step_value: int | None):
        """Inputs: run, step. Outputs: the step dropdown's choices (its value kept; the latest step when none is
        chosen, e.g. a run selected after Launch, before it recorded groups). The view is drawn by the step's change
        alone: the tab opening never redraws it from a step value read while another event (a chart click) was
        setting a new one."""
        if run_id is None or isinstance(run_id, dict):  # no run, or read while another event sets it
            return gr.skip()
        steps = step_choices(ctx, run_id, keep=step_value)
        if step_value is None or step_value not in steps:
            return gr.update(choices=steps, value=steps[0] if steps else None)
        return gr.update(choices=steps)

    if sync is not None:
        sync.follow_runs(run)
    shown_by = [run, step, sort, show, top_n, threshold]
    shown = [summary, groups, stats]
    extras = [sort, show, top_n, threshold]
    # a user's pick only: a run set by another event (a follow, a link, a chart click) comes with its step and view
    run.input(on_run, inputs=[run, step, *extras], outputs=[step, *shown])
    step.change(on_show, inputs=shown_by, outputs=shown)
    sort.change(on_show, inputs=shown_by, outputs=shown)
    show.change(on_show, inputs=shown_by, outputs=shown)
    top_n.submit(on_show, inputs=shown_by, outputs=shown)
    top_n.blur(on_show, inputs=shown_by, outputs=shown)
    threshold.submit(on_show, inputs=shown_by, outputs=shown)
    threshold.blur(on_show, inputs=shown_by, outputs=shown)
    reload.click(on_reload, inputs=shown_by, outputs=[step, *shown])
    if tab is not None:  # a live run records new steps: list them when the tab opens
        tab.select(on_tab, inputs=[run, step], outputs=step, show_progress="hidden")
    if runs is not None and tabs is not None:
        _follow_chart_clicks(ctx, runs, run, step, tabs, with_view, extras, shown)
    if runs is not None:
        _follow_selection(ctx, runs["selected"], view, run, step, with_view, extras, shown)
    tools = {**create_token_view(ctx, run, step, groups), **create_inspect_tools(ctx, run, step, reload, tab)}
    return {"run": run, "step": step, "groups": groups, "summary": summary, "refresh": reload, "filter": show,
            "top_n": top_n, "threshold": threshold, "stats": stats, **tools}


def _follow_chart_clicks(
    ctx: AppContext, runs: dict[str, gr.components.Component], run: gr.Dropdown, step: gr.Dropdown, tabs: gr.Tabs,
    with_view, extras: list, shown: list,
) -> None:
    """A click on a point of the Runs chart (``runs["chart_click"]``, for ``runs["selected"]``) selects this tab in
    ``tabs`` and its ``run`` and ``step``: the recorded step nearest the click, with that step's view
    (``with_view``, drawn from the tab's ``extras`` into ``shown``)."""
    def on_chart_click(value: str | None, run_id: int | None, sort_by=True, mode="all", n=3, pass_threshold=0.5, request: gr.Request | None = None):
        """Inputs: the clicked point (``step@time``), the Runs tab's run, sort, filter, N, threshold. Outputs: tabs,
        Inspect's run and step, summary, groups, stats chart."""
        run_value, steps, step_value = open_step(ctx, run_id, parse_chart_click(value))
        if run_value is None or step_value is None:
            if run_value is not None:
                gr.Info("This run has no recorded groups yet.")
            return (gr.skip(),) * 6
        head = (gr.Tabs(selected="inspect"), run_value, gr.update(choices=steps, value=step_value))
        return with_view(request, head, run_value, step_value, (sort_by, mode, n, pass_threshold))

    runs["chart_click"].change(
        on_chart_click, inputs=[runs["chart_click"], runs["selected"], *extras], outputs=[tabs, run, step, *shown],
        show_progress="hidden",
    )


def followed_view(ctx: AppContext, target: object, url_view: dict | None) -> tuple:
    """Inspect's run and step dropdown updates for run ``target``: at the recorded step nearest the URL view's step
    when the view names this run, else at the latest recorded step; ``gr.skip()`` twice for no run or a deleted
    one. A third item is the step chosen (``None`` without one)."""
    if not isinstance(target, int) or isinstance(target, bool):
        return gr.skip(), gr.skip(), None
    try:
        run_id = ctx.store.get_run(target).id
    except StoreError:
        return gr.skip(), gr.skip(), None
    wanted = url_view.get("step") if isinstance(url_view, dict) and url_view.get("run") == run_id else None
    if isinstance(wanted, int):
        _, steps, nearest = open_step(ctx, run_id, wanted)
    else:
        steps = step_choices(ctx, run_id)
        nearest = steps[0] if steps else None
    return run_id, gr.update(choices=steps, value=nearest), nearest


def _follow_selection(ctx: AppContext, selected: gr.components.Component, view: gr.State | None, run: gr.Dropdown,
                      step: gr.Dropdown, with_view, extras: list, shown: list) -> None:
    """Inspect's ``run`` follows the Runs tab's ``selected`` run, and opens the URL ``view``'s run and step, each
    with that step's view (``with_view``, drawn from the tab's ``extras`` into ``shown``)."""

    def opened(request, followed: tuple, extra) -> tuple:
        run_update, step_update, step_value = followed
        return with_view(request, (run_update, step_update), run_update, step_value, extra)

    def on_selected(run_id: int | None, current: int | None, url_view: dict | None = None, sort_by=True, mode="all", n=3, pass_threshold=0.5,
                    request: gr.Request | None = None):
        """Inputs: the selected run, Inspect's run, the URL view, sort, filter, N, threshold. Outputs: Inspect's run
        and step, summary, groups, stats chart."""
        if run_id is None or run_id == current:
            return (gr.skip(),) * 5
        return opened(request, followed_view(ctx, run_id, url_view), (sort_by, mode, n, pass_threshold))

    def on_view(url_view: dict | None, run_id: int | None, sort_by=True, mode="all", n=3, pass_threshold=0.5,
                request: gr.Request | None = None):
        """Inputs: the URL view, the selected run, sort, filter, N, threshold. Outputs: Inspect's run and step (the
        link's run, else the selected one), summary, groups, stats chart."""
        wanted = url_view.get("run") if isinstance(url_view, dict) else None
        linked = followed_view(ctx, wanted, url_view)
        chosen = linked if isinstance(linked[0], int) else followed_view(ctx, run_id, url_view)
        return opened(request, chosen, (sort_by, mode, n, pass_threshold))

    hidden = {"show_progress": "hidden"}
    outputs = [run, step, *shown]
    if view is None:
        selected.change(lambda r, c, *e: on_selected(r, c, None, *e), inputs=[selected, run, *extras],
                        outputs=outputs, **hidden)
        return
    selected.change(on_selected, inputs=[selected, run, view, *extras], outputs=outputs, **hidden)
    view.change(on_view, inputs=[view, selected, *extras], outputs=outputs, **hidden)
