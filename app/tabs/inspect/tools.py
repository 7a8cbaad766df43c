"""The Inspect tab's tools below a step's groups: text search across the run, one prompt across steps, and a diff
of two completions. Built by :func:`create_inspect_tools` from the tab's run and step dropdowns."""

from __future__ import annotations

import html

import gradio as gr

from app.context import AppContext, actor_of
from app.tabs.inspect.pictures import prompt_pictures
from app.views.inspect import (
    completion_choices,
    completion_diff_html,
    completion_label,
    find_completion,
    prompt_history_html,
    search_results_html,
)
from app.views.trajectories import trajectory_text
from grpo_core.access.ownership import Actor
from grpo_core.datasets.rows import PROMPT_KEY_BASE, is_prompt_key
from storage import GroupRecord, PromptPage, StoreError

SEARCH_PAGE_SIZE = 10
HISTORY_PAGE_SIZE = 50
"""Groups per page of "one prompt across steps" (a long run samples a row thousands of times)."""

PROMPT_ROW_GROUPS = 20_000
"""The dataset-row dropdown counts the run's latest this many groups (counting every group of a long run grows with
its length); the page of a chosen row counts all of its groups."""


def _row_label(row_index: int) -> str:
    """``"row 12"`` for a dataset row; ``"prompt #3f2a1b07"`` for a script run's prompt key
    (:func:`grpo_core.datasets.rows.prompt_key`: the prompt text's digest, not a row)."""
    return f"prompt #{row_index - PROMPT_KEY_BASE:08x}" if is_prompt_key(row_index) else f"row {row_index}"


def prompt_row_choices(ctx: AppContext, run_id: int | None) -> list[tuple[str, int]]:
    """(label, row_index) of the dataset rows the run sampled in its latest :data:`PROMPT_ROW_GROUPS` groups, the
    most often sampled first (at most 500)."""
    if run_id is None:
        return []
    return [
        (
            f"{_row_label(r.row_index)} · {r.num_groups} group{'s' if r.num_groups != 1 else ''}, "
            f"steps {r.first_step}–{r.last_step}",
            r.row_index,
        )
        for r in ctx.store.prompt_rows(int(run_id), recent=PROMPT_ROW_GROUPS)
    ]


def history_page(
    ctx: AppContext,
    run_id: int | None,
    row_index: int | None,
    move: str = "first",
    shown: dict | None = None,
    from_step: float | None = None,
) -> PromptPage | None:
    """The page of the dataset row's groups that ``move`` leads to from the page ``shown``: ``"first"``,
    ``"earlier"``, ``"later"``, ``"latest"``, or with ``from_step`` the page starting at that step.

    ``shown`` is :func:`page_state` of the page on screen (``None``: none yet; a move from it then gives the
    first page). A move past either end gives the first or the latest page. ``None`` without a run or a row.
    """
    if run_id is None or row_index is None:
        return None
    run_id, row_index = int(run_id), int(row_index)
    same_row = shown is not None and shown.get("row_index") == row_index and shown.get("first") is not None
    kwargs: dict = {}
    if from_step is not None:
        kwargs["from_step"] = int(from_step)
    elif move == "latest":
        kwargs["last"] = True
    elif move == "earlier" and same_row:
        kwargs["before"] = tuple(shown["first"])
    elif move == "later" and same_row:
        kwargs["after"] = tuple(shown["last"])
    page = ctx.store.prompt_page(run_id, row_index, limit=HISTORY_PAGE_SIZE, **kwargs)
    if not page.groups and page.total:  # past the end (or the shown groups were replaced): the nearest end
        page = ctx.store.prompt_page(run_id, row_index, limit=HISTORY_PAGE_SIZE, last="before" not in kwargs)
    return page


def page_state(page: PromptPage | None) -> dict | None:
    """What the next move needs of a page: its row and the keyset cursors ``(step, group id)`` of its first and last
    group (``None`` for an empty page)."""
    if page is None:
        return None
    first, last = (page.groups[0], page.groups[-1]) if page.groups else (None, None)
    return {
        "row_index": page.row_index,
        "first": None if first is None else [first.step, first.id],
        "last": None if last is None else [last.step, last.id],
    }


def diff_choices(
    ctx: AppContext, run_id: int | None, step: int | None, row_index: int | None, shown: dict | None = None
):
    """The completions the diff can pick from: those of the shown step, then those of the chosen dataset row's
    groups on the page shown (``shown``: :func:`page_state`; ``None``: the first page). Returns the update for one
    diff dropdown."""
    groups: list[GroupRecord] = []
    if run_id is not None and step is not None:
        groups += ctx.store.groups_at(int(run_id), int(step), turns=False)  # labels only
    if run_id is not None and row_index is not None:
        if shown and shown.get("row_index") == int(row_index) and shown.get("first"):
            first_step, first_id = shown["first"]
            after = (int(first_step), int(first_id) - 1)  # from the page's first group on
            groups += ctx.store.groups_for_prompt(int(run_id), int(row_index), HISTORY_PAGE_SIZE, after=after,
                                                  turns=False)
        else:
            groups += ctx.store.groups_for_prompt(int(run_id), int(row_index), HISTORY_PAGE_SIZE, turns=False)
    return gr.update(choices=completion_choices(groups), value=None)


def _history_outputs(page: PromptPage | None, ctx: AppContext | None = None, run_id: int | None = None,
                     actor: Actor | None = None) -> tuple[str, dict | None]:
    """The history panel's HTML and state for ``page`` (``None``: no run or row chosen), the prompt's images
    shown to ``actor`` when it may see them."""
    if page is None:
        return "", None
    pictures = ""
    if ctx is not None and run_id is not None and actor is not None and page.groups:
        try:
            run = ctx.store.get_run(int(run_id))
        except (StoreError, ValueError):
            run = None
        if run is not None:
            first = page.groups[0]
            pictures = prompt_pictures(ctx, run, [first], actor).get((first.split, first.row_index), "")
    return prompt_history_html(page.groups, page, pictures=pictures), page_state(page)


def create_inspect_tools(
    ctx: AppContext, run: gr.Dropdown, step: gr.Dropdown, reload: gr.Button, tab: gr.Tab | None = None
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
        with gr.Row():
            prompt_row = gr.Dropdown(label=f"dataset row (sampled in the latest {PROMPT_ROW_GROUPS:,} groups)", choices=[], scale=3, elem_id="inspect-prompt-row")
            from_step = gr.Number(label="from step", value=None, precision=0, minimum=0, scale=1,
                                  elem_id="inspect-history-from")
        with gr.Row():
            moves = {
                "first": gr.Button("⏮ first", scale=0, elem_id="inspect-history-first"),
                "earlier": gr.Button("◀ earlier", scale=0, elem_id="inspect-history-prev"),
                "later": gr.Button("later ▶", scale=0, elem_id="inspect-history-next"),
                "latest": gr.Button("latest ⏭", scale=0, elem_id="inspect-history-latest"),
            }
        history = gr.HTML(elem_id="inspect-history")
    history_state = gr.State(None)
    with gr.Accordion("Diff two completions", open=False, elem_id="inspect-diff-panel"):
        gr.Markdown("Pick two completions of the shown step or of the chosen dataset row's groups.")
        with gr.Row():
            left = gr.Dropdown(label="A", choices=[], elem_id="inspect-diff-a")
            right = gr.Dropdown(label="B", choices=[], elem_id="inspect-diff-b")
        diff = gr.HTML(elem_id="inspect-diff")

    def on_run(run_id: int | None):
        """Inputs: run. Outputs: dataset-row dropdown, history, history page, search results, search offset."""
        return gr.update(choices=prompt_row_choices(ctx, run_id), value=None), "", None, "", 0

    def on_reload(run_id: int | None, row_index: int | None, shown: dict | None, request: gr.Request = None):
        """Inputs: run, dataset row, history page. Outputs: dataset-row dropdown (new rows of a live run), history,
        history page (the same page again, from its first group: a live run adds groups after it)."""
        if shown and shown.get("first") and shown.get("row_index") == row_index:
            page = ctx.store.prompt_page(int(run_id), int(row_index), limit=HISTORY_PAGE_SIZE,
                                         after=(shown["first"][0], shown["first"][1] - 1))
            if not page.groups and page.total:
                page = history_page(ctx, run_id, row_index, "latest")
        else:
            page = history_page(ctx, run_id, row_index)
        html_, state = _history_outputs(page, ctx, run_id, actor_of(ctx, request))
        return gr.update(choices=prompt_row_choices(ctx, run_id)), html_, state

    def on_search(run_id: int | None, text: str, offset: int):
        """Inputs: run, text, offset (0 = first page). Outputs: results, offset."""
        if run_id is None:
            return "Choose a run first.", 0
        try:
            page = ctx.store.search_groups(int(run_id), text or "", limit=SEARCH_PAGE_SIZE, offset=max(0, int(offset)))
        except StoreError as exc:
            return html.escape(str(exc)), 0
        if page.total and page.offset >= page.total:  # past the end: show the last page
            last = (page.total - 1) // SEARCH_PAGE_SIZE * SEARCH_PAGE_SIZE
            page = ctx.store.search_groups(int(run_id), text or "", limit=SEARCH_PAGE_SIZE, offset=last)
        return search_results_html(page), page.offset

    def on_history(run_id: int | None, row_index: int | None, move: str = "first", shown: dict | None = None,
                   step_value: float | None = None, request: gr.Request = None):
        """Inputs: run, dataset row, the move (first/earlier/later/latest), history page, from step. Outputs: one
        page of the row's groups in step order, history page (the diff's choices follow it)."""
        return _history_outputs(history_page(ctx, run_id, row_index, move, shown, step_value), ctx, run_id,
                                actor_of(ctx, request))

    def on_choices(run_id: int | None, step_value: int | None, row_index: int | None, shown: dict | None):
        """Inputs: run, step, dataset row, history page. Outputs: both diff dropdowns, the diff."""
        update = diff_choices(ctx, run_id, step_value, row_index, shown)
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
            sides.append((completion_label(group, completion), trajectory_text(completion)))
        return completion_diff_html(sides[0], sides[1])

    run.change(on_run, inputs=run, outputs=[prompt_row, history, history_state, results, offset_state])
    reload.click(on_reload, inputs=[run, prompt_row, history_state], outputs=[prompt_row, history, history_state])
    if tab is not None:  # a run shown from the start (no change event): its dataset rows when the tab opens
        tab.select(on_reload, inputs=[run, prompt_row, history_state], outputs=[prompt_row, history, history_state])
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
    history_out = [history, history_state]

    def on_row(r, i, request: gr.Request = None):
        return on_history(r, i, request=request)

    def mover(move: str):
        def on_move(r, i, shown, request: gr.Request = None):
            return on_history(r, i, move, shown, request=request)
        return on_move

    def on_from_step(r, i, s, request: gr.Request = None):
        return on_history(r, i, "first", None, s, request=request)

    prompt_row.change(on_row, inputs=[run, prompt_row], outputs=history_out).then(
        on_choices, inputs=[run, step, prompt_row, history_state], outputs=[left, right, diff])
    for move, button in moves.items():
        button.click(
            mover(move), inputs=[run, prompt_row, history_state], outputs=history_out,
        ).then(on_choices, inputs=[run, step, prompt_row, history_state], outputs=[left, right, diff])
    for event in (from_step.submit, from_step.blur):  # Enter, or leaving the box
        event(
            on_from_step, inputs=[run, prompt_row, from_step], outputs=history_out,
        ).then(on_choices, inputs=[run, step, prompt_row, history_state], outputs=[left, right, diff])
    step.change(on_choices, inputs=[run, step, prompt_row, history_state], outputs=[left, right, diff])
    left.change(on_diff, inputs=[left, right], outputs=diff)
    right.change(on_diff, inputs=[left, right], outputs=diff)
    return {
        "search": query,
        "search_button": search,
        "search_results": results,
        "prompt_row": prompt_row,
        "history": history,
        "history_from_step": from_step,
        **{f"history_{move}": button for move, button in moves.items()},
        "diff_a": left,
        "diff_b": right,
        "diff": diff,
    }
