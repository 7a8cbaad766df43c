"""The Inspect tab: pick a run and a step, see its sampled groups: the prompt and its G completions side by side,
sorted by advantage, each with every rule's reward, the total and the advantage TRL computed."""

from __future__ import annotations

import gradio as gr

from app.catalog_sync import CatalogSync, run_choices
from app.context import AppContext
from app.inspect_views import GROUP_FILTERS, filter_groups
from app.tabs.inspect_tools import create_inspect_tools
from app.views import groups_html
from storage import StoreError


def step_choices(ctx: AppContext, run_id: int | None) -> list[int]:
    """Steps of the run that have recorded groups, newest first."""
    if run_id is None:
        return []
    return sorted(ctx.store.group_steps(int(run_id)), reverse=True)


def create_inspect_tab(
    ctx: AppContext, tab: gr.Tab | None = None, sync: CatalogSync | None = None
) -> dict[str, gr.components.Component]:
    """Build the Inspect tab inside the current ``gr.Blocks``; ``sync`` keeps its run list current, selecting
    ``tab`` or "↻ steps" reloads the chosen run's steps (a live run records new ones)."""
    with gr.Row():
        run = gr.Dropdown(label="run", choices=run_choices(ctx), scale=3, elem_id="inspect-run")
        step = gr.Dropdown(label="step", choices=[], scale=1, elem_id="inspect-step")
        sort = gr.Checkbox(label="sort by advantage", value=True, scale=1)
        reload = gr.Button("↻ steps", scale=0, elem_id="inspect-refresh")
    with gr.Row():
        show = gr.Dropdown(label="show", choices=list(GROUP_FILTERS), value="all", scale=3, elem_id="inspect-filter")
        top_n = gr.Number(label="N (top / bottom)", value=3, minimum=1, precision=0, scale=1, elem_id="inspect-n")
    summary = gr.Markdown(elem_id="inspect-summary")
    groups = gr.HTML(elem_id="inspect-groups")

    def on_run(run_id: int | None):
        """Inputs: run. Outputs: step dropdown (latest step selected)."""
        steps = step_choices(ctx, run_id)
        return gr.update(choices=steps, value=steps[0] if steps else None)

    def on_show(run_id: int | None, step_value: int | None, sort_by_advantage: bool, mode: str = "all", n=3):
        """Inputs: run, step, sort, filter, N. Outputs: summary, groups HTML."""
        if run_id is None or step_value is None:
            return "Choose a run and a step.", ""
        try:
            info = ctx.store.get_run(int(run_id))
        except StoreError:
            return "That run no longer exists.", ""
        records = ctx.store.groups_at(info.id, int(step_value))
        completions = [c for g in records for c in g.completions]
        truncated = sum(c.truncated for c in completions)
        flat = sum(
            1
            for g in records
            if len({c.total_reward for c in g.completions}) <= 1
        )
        text = (
            f"**#{info.id} {info.name}**, step {step_value}: {len(records)} groups, {len(completions)} completions, "
            f"{truncated} truncated, {flat} groups with all rewards equal (no learning signal)."
        )
        shown = filter_groups(records, mode or "all", int(n or 3))
        if (mode or "all") != "all":
            label = {key: name for name, key in GROUP_FILTERS}[mode]
            text += f" Showing {len(shown)} of {len(records)}: {label}."
            if not shown:
                return text, '<div class="grpo-empty">No group of this step matches the filter.</div>'
        return text, groups_html(shown, sort_by_advantage=sort_by_advantage)

    def on_reload(run_id: int | None, step_value: int | None, sort_by_advantage: bool, mode: str = "all", n=3):
        """Inputs: run, step, sort, filter, N. Outputs: steps, summary, groups."""
        steps = step_choices(ctx, run_id)
        if step_value not in steps:
            step_value = steps[0] if steps else None
        summary_text, html = on_show(run_id, step_value, sort_by_advantage, mode, n)
        return gr.update(choices=steps, value=step_value), summary_text, html

    run.change(on_run, inputs=run, outputs=step)
    if sync is not None:
        sync.follow_runs(run)
    shown_by = [run, step, sort, show, top_n]
    step.change(on_show, inputs=shown_by, outputs=[summary, groups])
    sort.change(on_show, inputs=shown_by, outputs=[summary, groups])
    show.change(on_show, inputs=shown_by, outputs=[summary, groups])
    top_n.submit(on_show, inputs=shown_by, outputs=[summary, groups])
    top_n.blur(on_show, inputs=shown_by, outputs=[summary, groups])
    reload.click(on_reload, inputs=shown_by, outputs=[step, summary, groups])
    if tab is not None:  # the run dropdown shows a run from the start: fill its steps when the tab opens
        tab.select(on_reload, inputs=shown_by, outputs=[step, summary, groups])
    tools = create_inspect_tools(ctx, run, step, reload)
    return {"run": run, "step": step, "groups": groups, "summary": summary, "refresh": reload, "filter": show,
            "top_n": top_n, **tools}
