"""The Runs tab's run controls: the table's filter row, Cancel (enabled only while the run can be cancelled), Resume,
Delete (after a confirmation), notes and tags.

The handlers are thin: :mod:`grpo_core.runs.actions` does the checks and file handling, the store the rest.
Delete asks first: the button only reveals a confirmation row naming the run, which is remembered in a
``gr.State`` so that the run deleted is the one asked about even if the selection changed meanwhile.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import gradio as gr

from app.catalog_sync import CatalogSync
from app.context import AppContext, actor_of
from app.tabs.runs.lazy import lazy_accordion
from app.views.run_filter import ALL_STATUSES, STATUS_FILTER_CHOICES
from app.views.runs import cancel_state, md_text, run_status_html
from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.run_config import ConfigError
from grpo_core.runs.actions import (
    RunActionError,
    annotate_run,
    authorize_run_action,
    cancel_run,
    delete_run,
    resume_run,
    resume_state,
)
from storage import RunStatus, StoreError


def create_filter_row(
    ctx: AppContext, *, table: gr.Dataframe, table_frame: Callable
) -> dict[str, gr.components.Component]:
    """Build the status and text filters of the runs ``table`` inside the current ``gr.Blocks``; a change of either
    refills it with ``table_frame(ctx, status, text)``. Returns ``status`` and ``text``."""
    with gr.Row():
        status = gr.Dropdown(label="show", choices=STATUS_FILTER_CHOICES, value=ALL_STATUSES, scale=1,
                             elem_id="runs-filter-status")
        text = gr.Textbox(label="filter by name or tag", placeholder="e.g. baseline lr-sweep", scale=3,
                          elem_id="runs-filter-text")

    def on_filter(status_filter: str, text_filter: str):
        """Inputs: status filter, text filter. Outputs: table."""
        return table_frame(ctx, status_filter, text_filter)

    status.change(on_filter, inputs=[status, text], outputs=table)
    text.submit(on_filter, inputs=[status, text], outputs=table)
    text.blur(on_filter, inputs=[status, text], outputs=table)
    return {"status": status, "text": text}


def cancel_button(ctx: AppContext, run_id: int | None) -> dict:
    """The Cancel button's update for the run ``run_id``: enabled only while it can be cancelled
    (:func:`app.views.runs.cancel_state`); "Cancelling…" while a cancelled run is still stopping."""
    run = _run_or_none(ctx, run_id)
    enabled, _ = cancel_state(run)
    stopping = run is not None and not run.status.is_final and run.cancel_requested
    return gr.update(interactive=enabled, value="Cancelling…" if stopping else "Cancel run")


def resume_button(ctx: AppContext, run_id: int | None) -> dict:
    """The Resume button's update for the run ``run_id``: enabled only when there is a checkpoint to resume from
    (:func:`grpo_core.runs.actions.resume_state`); a click on a run without one says why."""
    enabled, _ = resume_state(ctx.settings, _run_or_none(ctx, run_id))
    return gr.update(interactive=enabled)


def _run_or_none(ctx: AppContext, run_id: int | None):
    """The run ``run_id`` from the store, ``None`` for none or a deleted run."""
    try:
        return None if run_id is None else ctx.store.get_run(int(run_id))
    except StoreError:
        return None


def cancel_selected(ctx: AppContext, run_id: int | None, actor: Actor) -> tuple[str, str | None, bool]:
    """Ask the run ``run_id`` to stop (:func:`grpo_core.runs.actions.cancel_run` through the launcher).

    Returns ``(kind, message, enabled)``: ``kind`` is ``"info"`` or ``"warning"`` (the message for a toast; a run that
    cannot be cancelled says why instead of nothing), ``message`` is the run's status card (HTML) or ``None`` when the
    run is gone, and ``enabled`` whether Cancel still applies afterwards.
    """
    run = _run_or_none(ctx, run_id)
    enabled, why_not = cancel_state(run)
    if not enabled:
        return "warning", why_not, False
    try:
        run = cancel_run(ctx.store, run.id, actor, request_stop=ctx.launcher.cancel)
    except (NotOwnerError, StoreError) as exc:
        return "warning", f"Not cancelled: {exc}", cancel_state(run)[0]
    after = ctx.store.get_run(run.id)
    if after.status == RunStatus.CANCELLED:
        return "info", f"Run #{run.id} was cancelled before it started.", False
    return "info", f"Run #{run.id} will stop at the end of its current step (a checkpoint is saved first).", False


def _status_card(ctx: AppContext, run_id: int):
    """The run's status card, or a skip when it is gone."""
    try:
        return run_status_html(ctx.store.get_run(int(run_id)))
    except StoreError:
        return gr.skip()


def create_run_controls(
    ctx: AppContext,
    *,
    selected: gr.Dropdown,
    status: gr.HTML,
    table: gr.Dataframe,
    filters: dict[str, gr.components.Component],
    table_frame: Callable,
    sync: CatalogSync | None = None,
    cancel: gr.Button | None = None,
) -> dict[str, gr.components.Component]:
    """Connect ``cancel`` (when given: made by the tab beside the run picker; enabled only while the ``selected`` run
    can be cancelled, a click on one that cannot says why) and build the Resume and Delete buttons, the delete confirmation row (hidden) and the notes/tags editor inside the
    current ``gr.Blocks``, acting on the ``selected`` run; ``table_frame(ctx, status, text)`` rebuilds the ``table``
    under the ``filters`` (:func:`create_filter_row`); ``sync`` hears of a resume or delete, so that the other tabs'
    run lists follow at once.

    Returns the components by name: ``resume``, ``delete``, ``confirm_row``, ``confirm_text``, ``confirm``,
    ``keep``, ``pending``, ``tags``, ``notes``, ``save``.
    """
    with gr.Row():
        resume = gr.Button("Resume run", scale=1, elem_id="runs-resume", interactive=False)
        delete = gr.Button("Delete run…", scale=1, elem_id="runs-delete")
    with gr.Row(visible=False, elem_id="runs-delete-confirm-row") as confirm_row:
        confirm_text = gr.Markdown(elem_id="runs-delete-question")
        confirm = gr.Button("Yes, delete it", variant="stop", scale=0, elem_id="runs-delete-confirm")
        keep = gr.Button("Keep it", scale=0, elem_id="runs-delete-keep")
    pending = gr.State(None)
    with lazy_accordion("Notes and tags", elem_id="runs-notes-panel"):  # mounted when first opened
        tags = gr.Textbox(label="tags (comma-separated)", elem_id="runs-tags")
        notes = gr.Textbox(label="notes", lines=3, elem_id="runs-notes")
        save = gr.Button("Save notes and tags", elem_id="runs-notes-save")
    controls = {"resume": resume, "delete": delete, "confirm_row": confirm_row, "confirm_text": confirm_text,
                "confirm": confirm, "keep": keep, "pending": pending, "tags": tags, "notes": notes, "save": save}

    def on_resume(run_id: int | None, request: gr.Request):
        """Inputs: run. Outputs: status."""
        if run_id is None:
            return gr.skip()
        try:  # the owner first: another login learns nothing of the run's checkpoints
            authorize_run_action(ctx.store, actor_of(ctx, request), int(run_id), "resume")
        except (NotOwnerError, StoreError) as exc:
            gr.Warning(f"Not resumed: {exc}")
            return gr.skip()
        offered, why = resume_state(ctx.settings, _run_or_none(ctx, run_id))
        if not offered:
            gr.Warning(why)
            return gr.skip()
        try:
            run = resume_run(ctx.store, ctx.settings, int(run_id), actor_of(ctx, request))
        except (RunActionError, NotOwnerError, StoreError, ConfigError) as exc:
            gr.Warning(str(exc))
            return gr.skip()
        where = f"from {Path(run.resume_from).name}" if run.resume_from else "from step 0 (it has no checkpoint)"
        gr.Info(f"Run #{run.id} is queued to resume {where}.")
        return run_status_html(run)

    def on_delete_ask(run_id: int | None, request: gr.Request):
        """Inputs: run. Outputs: confirmation row, its question, pending run id."""
        if run_id is None:
            return gr.skip(), gr.skip(), None
        try:
            run = authorize_run_action(ctx.store, actor_of(ctx, request), int(run_id), "delete")
        except (NotOwnerError, StoreError) as exc:
            gr.Warning(f"Not deleted: {exc}")
            return gr.update(visible=False), "", None
        question = (f"Delete run **#{run.id} {md_text(run.name)}** ({run.status.value}) with its folder, checkpoints, "
                    "adapter, metrics and groups? This cannot be undone.")
        return gr.update(visible=True), question, run.id

    def on_delete_confirm(pending_id: int | None, status_filter: str, text_filter: str, request: gr.Request):
        """Inputs: pending run id, filters. Outputs: confirmation row, pending id, status, selected run, table."""
        if pending_id is None:
            return gr.update(visible=False), None, gr.skip(), gr.skip(), gr.skip()
        try:
            delete_run(ctx.store, ctx.settings, int(pending_id), actor_of(ctx, request))
        except (RunActionError, NotOwnerError, StoreError, OSError) as exc:
            gr.Warning(f"Not deleted: {exc}")
            return gr.update(visible=False), None, gr.skip(), gr.skip(), gr.skip()
        gr.Info(f"Run #{pending_id} deleted.")
        return (gr.update(visible=False), None, f"Run #{pending_id} was deleted.", gr.update(value=None),
                table_frame(ctx, status_filter, text_filter))

    def on_load_notes(run_id: int | None):
        """Inputs: run. Outputs: tags, notes."""
        if run_id is None:
            return "", ""
        try:
            run = ctx.store.get_run(int(run_id))
        except StoreError:
            return "", ""
        return ", ".join(run.tags), run.notes

    def on_save_notes(run_id: int | None, tags_text: str, notes_text: str, status_filter: str, text_filter: str,
                      request: gr.Request):
        """Inputs: run, tags, notes, filters. Outputs: status, table, tags (normalised)."""
        if run_id is None:
            return gr.skip(), gr.skip(), gr.skip()
        try:
            run = annotate_run(ctx.store, int(run_id), notes=notes_text, tags_text=tags_text, actor=actor_of(ctx, request))
        except (RunActionError, NotOwnerError, StoreError) as exc:
            gr.Warning(f"Not saved: {exc}")
            return gr.skip(), gr.skip(), gr.skip()
        return run_status_html(run), table_frame(ctx, status_filter, text_filter), ", ".join(run.tags)

    filter_inputs = [filters["status"], filters["text"]]
    resumed = controls["resume"].click(on_resume, inputs=selected, outputs=status)
    for changed in (selected.change, status.change):  # Resume only where there is a checkpoint to resume from
        changed(lambda run_id: resume_button(ctx, run_id), inputs=selected, outputs=resume, show_progress="hidden")
    controls["delete"].click(
        on_delete_ask, inputs=selected, outputs=[controls["confirm_row"], controls["confirm_text"], controls["pending"]]
    )
    controls["keep"].click(lambda: (gr.update(visible=False), None),
                           outputs=[controls["confirm_row"], controls["pending"]])
    deleted = controls["confirm"].click(
        on_delete_confirm,
        inputs=[controls["pending"], *filter_inputs],
        outputs=[controls["confirm_row"], controls["pending"], status, selected, table],
    )
    if sync is not None:
        sync.after(resumed)
        sync.after(deleted)
    if cancel is not None:
        def on_cancel(run_id: int | None, request: gr.Request):
            """Inputs: run. Outputs: status, cancel button."""
            kind, message, _ = cancel_selected(ctx, run_id, actor_of(ctx, request))
            (gr.Info if kind == "info" else gr.Warning)(message)
            card = gr.skip() if run_id is None else _status_card(ctx, run_id)
            return card, cancel_button(ctx, run_id)

        cancelled = cancel.click(on_cancel, inputs=selected, outputs=[status, cancel])
        for changed in (selected.change, status.change):  # a new pick, or the picked run moved on (e.g. completed)
            changed(lambda run_id: cancel_button(ctx, run_id), inputs=selected, outputs=cancel, show_progress="hidden")
        if sync is not None:
            sync.after(cancelled)
        controls["cancel"] = cancel
    selected.change(on_load_notes, inputs=selected, outputs=[controls["tags"], controls["notes"]])
    controls["save"].click(
        on_save_notes,
        inputs=[selected, controls["tags"], controls["notes"], *filter_inputs],
        outputs=[status, table, controls["tags"]],
    )
    return controls
