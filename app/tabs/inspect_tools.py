"""The Inspect tab's tools below a step's groups: text search across the run, one prompt across steps, and a diff
of two completions. Built by :func:`create_inspect_tools` from the tab's run and step dropdowns."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from app.inspect_views import (
    completion_choices,
    completion_diff_html,
    completion_label,
    find_completion,
    prompt_history_html,
    search_results_html,
)
from storage import GroupRecord

SEARCH_PAGE_SIZE = 10


def prompt_row_choices(ctx: AppContext, run_id: int | None) -> list[tuple[str, int]]:
    """(label, row_index) of every dataset row the run sampled, the most often sampled first."""
    if run_id is None:
        return []
    return [
        (
            f"row {r.row_index} · {r.num_groups} group{'s' if r.num_groups != 1 else ''}, "
            f"steps {r.first_step}–{r.last_step}",
            r.row_index,
        )
        for r in ctx.store.prompt_rows(int(run_id))
    ]


def diff_choices(ctx: AppContext, run_id: int | None, step: int | None, row_index: int | None):
    """The completions the diff can pick from: those of the shown step, then those of the chosen dataset row's
    groups across steps. Returns the update for one diff dropdown."""
    groups: list[GroupRecord] = []
    if run_id is not None and step is not None:
        groups += ctx.store.groups_at(int(run_id), int(step))
    if run_id is not None and row_index is not None:
        groups += ctx.store.groups_for_prompt(int(run_id), int(row_index))
    return gr.update(choices=completion_choices(groups), value=None)


def create_inspect_tools(
    ctx: AppContext, run: gr.Dropdown, step: gr.Dropdown, reload: gr.Button
) -> dict[str, gr.components.Component]:
    """Build the search, prompt-across-steps and diff panels inside the current ``gr.Blocks`` and wire them to the
    Inspect tab's ``run`` and ``step`` dropdowns and its ``reload`` button."""
    with gr.Accordion("Search the run (prompts and completions)", open=False, elem_id="inspect-search-panel"):
        with gr.Row():
            query = gr.Textbox(label="text", placeholder="e.g. 42, <answer>, def ", scale=4, elem_id="inspect-search")
            search = gr.Button("Search", scale=1, elem_id="inspect-search-button")
            previous = gr.Button("◀ previous", scale=0, elem_id="inspect-search-prev")
            following = gr.Button("next ▶", scale=0, elem_id="inspect-search-next")
        results = gr.HTML(elem_id="inspect-search-results")
    offset_state = gr.State(0)
    with gr.Accordion("One prompt across steps", open=False, elem_id="inspect-history-panel"):
        prompt_row = gr.Dropdown(label="dataset row", choices=[], elem_id="inspect-prompt-row")
        history = gr.HTML(elem_id="inspect-history")
    with gr.Accordion("Diff two completions", open=False, elem_id="inspect-diff-panel"):
        gr.Markdown("Pick two completions of the shown step or of the chosen dataset row's groups.")
        with gr.Row():
            left = gr.Dropdown(label="A", choices=[], elem_id="inspect-diff-a")
            right = gr.Dropdown(label="B", choices=[], elem_id="inspect-diff-b")
        diff = gr.HTML(elem_id="inspect-diff")

    def on_run(run_id: int | None):
        """Inputs: run. Outputs: dataset-row dropdown, history, search results, search offset."""
        return gr.update(choices=prompt_row_choices(ctx, run_id), value=None), "", "", 0

    def on_reload(run_id: int | None, row_index: int | None):
        """Inputs: run, dataset row. Outputs: dataset-row dropdown (new rows of a live run), history."""
        return gr.update(choices=prompt_row_choices(ctx, run_id)), on_history(run_id, row_index)

    def on_search(run_id: int | None, text: str, offset: int):
        """Inputs: run, text, offset (0 = first page). Outputs: results, offset."""
        if run_id is None:
            return "Choose a run first.", 0
        page = ctx.store.search_groups(int(run_id), text or "", limit=SEARCH_PAGE_SIZE, offset=max(0, int(offset)))
        if page.total and page.offset >= page.total:  # past the end: show the last page
            last = (page.total - 1) // SEARCH_PAGE_SIZE * SEARCH_PAGE_SIZE
            page = ctx.store.search_groups(int(run_id), text or "", limit=SEARCH_PAGE_SIZE, offset=last)
        return search_results_html(page), page.offset

    def on_history(run_id: int | None, row_index: int | None) -> str:
        """Inputs: run, dataset row. Outputs: the row's groups in step order."""
        if run_id is None or row_index is None:
            return ""
        return prompt_history_html(ctx.store.groups_for_prompt(int(run_id), int(row_index)))

    def on_choices(run_id: int | None, step_value: int | None, row_index: int | None):
        """Inputs: run, step, dataset row. Outputs: both diff dropdowns, the diff."""
        update = diff_choices(ctx, run_id, step_value, row_index)
        return update, update, ""

    def on_diff(left_ref: str | None, right_ref: str | None) -> str:
        """Inputs: completion A, completion B (``group id:index``). Outputs: the diff."""
        if not left_ref or not right_ref:
            return "Pick two completions."
        sides = []
        for ref in (left_ref, right_ref):
            found = find_completion(ctx.store, ref)
            if found is None:
                return f"Completion {ref!r} no longer exists."
            group, completion = found
            sides.append((completion_label(group, completion), completion.text))
        return completion_diff_html(sides[0], sides[1])

    run.change(on_run, inputs=run, outputs=[prompt_row, history, results, offset_state])
    reload.click(on_reload, inputs=[run, prompt_row], outputs=[prompt_row, history])
    search.click(lambda r, t: on_search(r, t, 0), inputs=[run, query], outputs=[results, offset_state])
    query.submit(lambda r, t: on_search(r, t, 0), inputs=[run, query], outputs=[results, offset_state])
    previous.click(
        lambda r, t, o: on_search(r, t, max(0, int(o or 0) - SEARCH_PAGE_SIZE)),
        inputs=[run, query, offset_state],
        outputs=[results, offset_state],
    )
    following.click(
        lambda r, t, o: on_search(r, t, int(o or 0) + SEARCH_PAGE_SIZE),
        inputs=[run, query, offset_state],
        outputs=[results, offset_state],
    )
    prompt_row.change(on_history, inputs=[run, prompt_row], outputs=history)
    for trigger in (step.change, prompt_row.change):
        trigger(on_choices, inputs=[run, step, prompt_row], outputs=[left, right, diff])
    left.change(on_diff, inputs=[left, right], outputs=diff)
    right.change(on_diff, inputs=[left, right], outputs=diff)
    return {
        "search": query,
        "search_button": search,
        "search_results": results,
        "prompt_row": prompt_row,
        "history": history,
        "diff_a": left,
        "diff_b": right,
        "diff": diff,
    }
