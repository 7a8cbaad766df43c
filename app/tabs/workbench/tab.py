"""``create_workbench_tab``: connects the workbench's layout to its handlers, and a changed group to Inspect."""

from __future__ import annotations

import html

import gradio as gr

from app.context import PLUGIN_CHECK_JOBS, AppContext
from app.tabs.inspect.tab import open_step
from app.tabs.workbench import handlers
from app.tabs.workbench.layout import layout_workbench
from app.views.rescore import (
    changed_groups_html,
    group_choices,
    probe_html,
    progress_html,
    step_order,
    steps_frame,
    steps_html,
    summary_html,
)
from grpo_core.rescore.request import RescoreError
from storage import StoreError

FORM = ("run", "rules", "first_step", "last_step", "sample", "scale_rewards", "launch_name", "preset_name",
        "preset_shared")


def create_workbench_tab(ctx: AppContext, sync=None, *, inspect: dict | None = None, tabs: gr.Tabs | None = None,
                         tab: gr.Tab | None = None) -> dict[str, gr.components.Component]:
    """Build the Reward workbench tab. With ``inspect`` (Inspect's components: ``run``, ``step``) and ``tabs``, "Open
    this step in Inspect" selects that tab on the chosen changed group's run and step. Selecting ``tab`` reads the
    chosen run's recorded groups again (a live run records them after it was chosen)."""
    c = layout_workbench(ctx)
    if sync is not None:
        sync.follow_runs(c["run"])
    form_inputs = {c[name] for name in FORM}

    def by_name(values: dict) -> dict:
        return {name: values[c[name]] for name in FORM}

    results = [c["progress"], c["summary"], c["plot"], c["steps"], c["probe"], c["group"], c["changed"]]

    def shown(info):
        """Outputs: the rescoring id, then ``results``, then the run's recorded line (read again once it is done)."""
        if info.status != "completed" or info.result is None:
            return info.id, progress_html(info), *(gr.skip(),) * 6, gr.skip()
        r = info.result
        plot = gr.LinePlot(value=steps_frame(r), sort=step_order(r))  # whole steps as ticks, in step order
        return (info.id, progress_html(info), summary_html(r), plot, steps_html(r), probe_html(r),
                gr.update(choices=group_choices(r), value=0 if r.get("changed_groups") else None),
                changed_groups_html(r), handlers.recorded_line(ctx, r.get("run_id")))

    def on_rescore(values: dict, request: gr.Request):
        """Inputs: the form. Outputs: rescoring id, progress, summary, plot, steps, probe, group, changed, the
        run's recorded line (read now: the run may have recorded groups since it was chosen)."""
        form = by_name(values)
        try:
            started = handlers.start(ctx, form, request)
        except (RescoreError, StoreError) as exc:
            yield (None, f"<p class='rescore-error'>{html.escape(str(exc))}</p>", *(gr.skip(),) * 6,
                   handlers.recorded_line(ctx, form.get("run")))
            return
        for info in handlers.follow(ctx, started.id):
            yield shown(info)

    c["rescore"].click(on_rescore, inputs=form_inputs, outputs=[c["rescoring"], *results, c["recorded"]])
    def on_cancel_rescoring(rescoring_id, request: gr.Request):
        return handlers.cancel(ctx, rescoring_id, request)

    c["cancel"].click(on_cancel_rescoring, inputs=c["rescoring"], outputs=c["launched"])
    c["run"].change(lambda run_id: handlers.rules_for_run(ctx, run_id), inputs=c["run"],
                    outputs=[c["rules"], c["recorded"]])

    if tab is not None:
        tab.select(lambda run_id: handlers.recorded_line(ctx, run_id), inputs=c["run"], outputs=c["recorded"],
                   show_progress="hidden")

    def on_load(name, request: gr.Request):
        try:
            return handlers.load(ctx, name, request) or gr.skip()
        except RescoreError as exc:
            gr.Warning(str(exc))
            return gr.skip()

    c["load_preset"].click(on_load, inputs=c["preset"], outputs=c["rules"])
    def on_launch(values: dict, request: gr.Request):
        return handlers.launch(ctx, by_name(values), request)

    c["launch"].click(on_launch, inputs=form_inputs, outputs=c["launched"], **PLUGIN_CHECK_JOBS)

    def on_save(values: dict, request: gr.Request):
        message, choices = handlers.save(ctx, by_name(values), request)
        return message, gr.update(choices=choices)

    c["save_preset"].click(on_save, inputs=form_inputs, outputs=[c["launched"], c["preset"]])

    def on_delete(name, request: gr.Request):
        message, choices = handlers.delete(ctx, name, request)
        return message, gr.update(choices=choices, value=None)

    c["delete_preset"].click(on_delete, inputs=c["preset"], outputs=[c["launched"], c["preset"]])

    def on_open_presets(request: gr.Request):
        """Outputs: the preset list of the login (its own and the shared ones)."""
        return gr.update(choices=handlers.preset_choices(ctx, request))

    c["preset"].focus(on_open_presets, outputs=c["preset"], show_progress="hidden")
    if inspect is not None and tabs is not None:
        _connect_inspect(ctx, c, inspect, tabs)
    return c


def _connect_inspect(ctx: AppContext, c: dict, inspect: dict, tabs: gr.Tabs) -> None:
    def on_open(rescoring_id, position):
        """Inputs: the shown rescoring, the changed group. Outputs: tabs, Inspect's run and step."""
        if rescoring_id is None or position is None:
            return gr.skip(), gr.skip(), gr.skip()
        result = ctx.store.get_rescoring(int(rescoring_id)).result or {}
        groups = result.get("changed_groups") or []
        if not 0 <= int(position) < len(groups):
            return gr.skip(), gr.skip(), gr.skip()
        run_value, steps, step_value = open_step(ctx, result.get("run_id"), groups[int(position)]["step"])
        return gr.Tabs(selected="inspect"), run_value, gr.update(choices=steps, value=step_value)

    c["open_inspect"].click(on_open, inputs=[c["rescoring"], c["group"]],
                            outputs=[tabs, inspect["run"], inspect["step"]])
