"""The Datasets tab: upload a prompt file (JSONL, JSON, CSV, Parquet, a zipped save_to_disk folder) or load a hub
dataset, map its columns (prompt column, system prompt, renames), see the prompts as the model gets them, list
datasets; rename or delete one (its owner or an admin: :func:`grpo_core.datasets.library.delete_dataset`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.catalog_sync import CatalogSync, dataset_choices
from app.context import AppContext, actor_of, boundary_of
from app.views.images import images_html
from app.views.runs import md_text
from app.views.tables import cell_text, empty_frame
from grpo_core.access.boundary import BoundaryError
from grpo_core.access.ownership import NotOwnerError, check_may_change, may_change
from grpo_core.child_jobs.slots import HUB_LOAD_SLOTS, SlotsBusy
from grpo_core.datasets.formats import SUPPORTED_EXTENSIONS, read_normalized
from grpo_core.datasets.images import stored_image_path, thumbnails
from grpo_core.datasets.leaks import leak_lines
from grpo_core.datasets.library import (
    DatasetInUseError,
    delete_dataset,
    import_dataset,
    import_hub_dataset,
    load_upload,
    parse_renames,
    rename_dataset,
)
from grpo_core.datasets.prompt_dataset import ColumnMapping, DatasetError
from grpo_core.models.prompt_lengths import preview_model_prompts
from grpo_core.rewards.answer_coverage import coverage_lines, dataset_answer_coverage
from grpo_core.run_config import DEFAULT_MODEL
from storage import StoreError

PREVIEW_HEADERS = ["prompt"]
DATASET_HEADERS = ["id", "name", "rows", "columns", "prompt", "file", "added", "owner"]
#: "Add from the hub" runs in one concurrency group of the pool's total: each load is a child held by a slot of
#: :data:`grpo_core.child_jobs.slots.HUB_LOAD_SLOTS` (a login's second at once is refused, never queued).
HUB_LOADS = {"concurrency_id": "hub-loads", "concurrency_limit": HUB_LOAD_SLOTS.total}


def datasets_frame(ctx: AppContext) -> pd.DataFrame:
    """All datasets as a table."""
    rows = [
        [d.id, d.name, d.num_rows, ", ".join(d.columns), d.prompt_kind, d.source_name, f"{d.created_at:%Y-%m-%d %H:%M}",
         d.owner or ""]
        for d in ctx.store.list_datasets()
    ]
    return pd.DataFrame(rows, columns=DATASET_HEADERS)


def preview_frame(rows: list[dict[str, Any]], limit: int = 8) -> pd.DataFrame:
    """The first ``limit`` rows as text (:func:`app.views.tables.cell_text`: a chat prompt as ``role: content``
    lines, long cells shortened); an empty table with a ``prompt`` column when there are none."""
    shown = [{key: cell_text(value) for key, value in row.items()} for row in rows[:limit]]
    return pd.DataFrame(shown) if shown else empty_frame(PREVIEW_HEADERS)


def thumbnails_html(items: list) -> str:
    """Thumbnails (``(PIL image, "row N")`` pairs) as inline pictures (:func:`app.views.images.images_html`): no
    image becomes a file Gradio serves."""
    import base64
    import io

    urls = []
    for image, _ in items:
        out = io.BytesIO()
        image.save(out, format="PNG")
        urls.append("data:image/png;base64," + base64.b64encode(out.getvalue()).decode("ascii"))
    return images_html(urls, "preview")


def stored_thumbnails(ctx: AppContext, info, rows: list[dict[str, Any]], request: object = None) -> str:
    """The first rows' images of the stored dataset ``info`` as inline thumbnails; none for a login that may not
    read them (only the dataset's owner, an admin, or anyone for a dataset without an owner)."""
    if not may_change(actor_of(ctx, request), info.owner):
        return ""

    def load(name: str) -> bytes | None:
        try:
            return stored_image_path(info.path, name).read_bytes()
        except (OSError, ValueError):
            return None

    return thumbnails_html(thumbnails(rows, load))


def mapping_from_form(prompt_column: str | None, system_prompt: str | None, renames: str | None) -> ColumnMapping:
    """The column mapping typed in the tab.

    Raises:
        ValueError: the renames are not written as ``old=new`` (see :func:`parse_renames`).
    """
    return ColumnMapping(
        prompt_column=(prompt_column or "").strip() or None,
        system_prompt=system_prompt or "",
        renames=parse_renames(renames),
    )


def model_view_text(ctx: AppContext, rows: list[dict[str, Any]], model: str | None, request: object = None) -> str:
    """The first prompts exactly as ``model`` gets them (chat template applied), separated by row headers; a model
    folder the login may not read (:mod:`grpo_core.access.boundary`) is refused with the reason, its files unread."""
    try:
        model = boundary_of(ctx, request).model((model or "").strip() or DEFAULT_MODEL, "model")
    except BoundaryError as exc:
        return f"({exc})"
    shown, note = preview_model_prompts(rows, model, ctx.settings.model_cache_dir)
    parts = [f"──── row {index} ────\n{text}" for index, text in enumerate(shown)]
    if note:
        parts.insert(0, f"({note})")
    return "\n".join(parts)


def answer_coverage_markdown(rows: list[dict[str, Any]]) -> str:
    """Markdown lines (each starting with a blank line): prompts that give their answer away
    (:func:`grpo_core.datasets.leaks.leak_lines`: a final assistant message, the answer inside), then the answer
    rules that cannot judge some rows' ``answer`` (missing, prose, not one number); ``""`` when there is none."""
    lines = [*leak_lines(rows), *coverage_lines(dataset_answer_coverage(rows))]
    return "".join(f"\n\n⚠️ {line}" for line in lines)


def create_datasets_tab(ctx: AppContext, sync: CatalogSync | None = None) -> dict[str, gr.components.Component]:
    """Build the Datasets tab inside the current ``gr.Blocks``; ``sync`` keeps its table and picker current and
    tells the other tabs of an upload."""
    gr.Markdown(
        "Upload prompts as **JSONL, JSON, CSV, Parquet**, or a **.zip** of a `save_to_disk` folder or of one data "
        "file with the images it names. The prompt "
        "column (text, or a list of chat messages `{role, content}`) is `prompt` unless you name another below "
        "(e.g. `question`); every other column (e.g. `answer`, `tests`) is handed to the reward rules. Images come "
        "from an `image` / `images` column or image blocks in the prompt (see docs/images.md)."
    )
    with gr.Row():
        upload = gr.File(label="prompt file", file_types=[*SUPPORTED_EXTENSIONS, ".zip"], elem_id="dataset-file")
        with gr.Column():
            name = gr.Textbox(label="dataset name (default: file name)", elem_id="dataset-name")
            with gr.Row():
                check = gr.Button("Check", elem_id="dataset-check")
                add = gr.Button("Add dataset", variant="primary", elem_id="dataset-add")
            status = gr.Markdown(elem_id="dataset-status")
    with gr.Accordion("Column mapping", open=True):
        with gr.Row():
            prompt_column = gr.Textbox(label="prompt column (default: prompt)", placeholder="e.g. question",
                                       elem_id="dataset-prompt-column")
            renames = gr.Textbox(label="rename other columns (old=new, comma-separated)",
                                 placeholder="e.g. solution=answer", elem_id="dataset-renames")
            preview_model = gr.Textbox(label="model for the prompt view", value=DEFAULT_MODEL,
                                       elem_id="dataset-preview-model")
        system_prompt = gr.Textbox(label="system prompt (turns text prompts into chat prompts; empty: none)",
                                   lines=2, elem_id="dataset-system-prompt")
    with gr.Accordion("Load from the hub (needs a network connection)", open=False):
        with gr.Row():
            hub_id = gr.Textbox(label="hub dataset id", placeholder="openai/gsm8k", elem_id="dataset-hub-id")
            hub_config = gr.Textbox(label="config", placeholder="main", elem_id="dataset-hub-config")
            hub_split = gr.Textbox(label="split", value="train", elem_id="dataset-hub-split")
            hub_add = gr.Button("Add from the hub", elem_id="dataset-hub-add")
    preview = gr.Dataframe(value=empty_frame(PREVIEW_HEADERS), label="preview", interactive=False,
                           elem_id="dataset-preview", wrap=True)
    gallery = gr.HTML(elem_id="dataset-images")  # the first rows' images, inline
    model_view = gr.Textbox(label="prompts as the model gets them", lines=8, interactive=False,
                            elem_id="dataset-model-view")
    table = gr.Dataframe(
        # read again at each page load by the catalog's own answer (sync.follow_datasets below), not an event of its own
        value=datasets_frame(ctx) if sync is not None else lambda: datasets_frame(ctx), label="datasets",
        interactive=False, elem_id="datasets-table"
    )
    # nothing picked at first (not Gradio's default, the first choice): a picked dataset always shows its preview
    selected = gr.Dropdown(label="preview a stored dataset", choices=dataset_choices(ctx), value=None,
                           elem_id="dataset-pick")
    with gr.Accordion("Rename or delete the dataset picked above (its owner or an admin)", open=False,
                      elem_id="dataset-manage"):
        with gr.Row():
            new_name = gr.Textbox(label="new name", elem_id="dataset-new-name")
            rename = gr.Button("Rename", elem_id="dataset-rename")
            delete = gr.Button("Delete…", variant="stop", elem_id="dataset-delete")
        with gr.Row(visible=False, elem_id="dataset-delete-confirm-row") as confirm_row:
            question = gr.Markdown(elem_id="dataset-delete-question")
            confirm = gr.Button("Yes, delete it", variant="stop", elem_id="dataset-delete-confirm")
            keep = gr.Button("Keep it", elem_id="dataset-delete-keep")
        manage_status = gr.Markdown(elem_id="dataset-manage-status")
    pending = gr.State(None)

    def on_check(file_path: str | None, column: str, system: str, renamed: str, model: str,
                 request: gr.Request = None):
        """Inputs: uploaded temp path, mapping, model. Outputs: status, preview, model view."""
        if not file_path:
            return "**Choose a file first.**", gr.skip(), gr.skip(), gr.skip()
        try:
            mapping = mapping_from_form(column, system, renamed)
            dataset = load_upload(file_path, source_name=Path(file_path).name,
                                  max_upload_mb=ctx.settings.max_upload_mb, mapping=mapping)
        except (DatasetError, ValueError) as exc:  # the preview of an earlier file would read as this one's
            return f"❌ **Not valid.** {exc}", empty_frame(PREVIEW_HEADERS), "", ""
        staged = dataset.images.files if dataset.images is not None else {}
        pictures = f", {len(staged)} images" if staged else ""
        message = (f"✅ Valid: {dataset.num_rows} rows, columns {', '.join(dataset.columns)}, "
                   f"{dataset.prompt_kind} prompts{pictures}. Not added yet.{answer_coverage_markdown(dataset.rows)}")
        return (message, preview_frame(dataset.rows), model_view_text(ctx, dataset.rows, model, request),
                thumbnails_html(thumbnails(dataset.rows, staged.get)))

    def added_outputs(info, model: str, request: gr.Request = None):
        rows = read_normalized(Path(info.path))
        message = (f"✅ Added **{md_text(info.name)}**: {info.num_rows} rows, columns {md_text(', '.join(info.columns))}."
                   f"{answer_coverage_markdown(rows)}")
        return (
            message,
            preview_frame(rows),
            model_view_text(ctx, rows, model, request),
            datasets_frame(ctx),
            gr.update(choices=dataset_choices(ctx), value=info.id),
            stored_thumbnails(ctx, info, rows, request),
        )

    def on_add(file_path: str | None, dataset_name: str, column: str, system: str, renamed: str, model: str,
               request: gr.Request = None):
        """Inputs: uploaded temp path, name, mapping, model. Outputs: status, preview, model view, table,
        dropdown."""
        if not file_path:
            return "**Choose a file first.**", gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        source_name = Path(file_path).name
        try:
            mapping = mapping_from_form(column, system, renamed)
            info = import_dataset(ctx.store, ctx.settings, file_path, source_name=source_name, name=dataset_name,
                                  mapping=mapping, owner=getattr(request, "username", None))
        except (DatasetError, StoreError, ValueError) as exc:
            return f"❌ **Not added.** {exc}", empty_frame(PREVIEW_HEADERS), "", gr.skip(), gr.skip(), ""
        return added_outputs(info, model, request)

    def on_hub_add(dataset_id: str, config: str, split: str, dataset_name: str, column: str, system: str,
                   renamed: str, model: str, request: gr.Request = None):
        """Inputs: hub id, config, split, name, mapping, model. Outputs: as :func:`on_add`."""
        login = getattr(request, "username", None)
        try:
            mapping = mapping_from_form(column, system, renamed)
            with HUB_LOAD_SLOTS.hold(login):  # the load's child: one of the login's share (else refused at once)
                info = import_hub_dataset(ctx.store, ctx.settings, dataset_id, config=(config or "").strip() or None,
                                          split=(split or "").strip() or "train", name=dataset_name or None,
                                          mapping=mapping, owner=login)
        except (DatasetError, StoreError, ValueError, SlotsBusy) as exc:
            return f"❌ **Not added.** {exc}", gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        return added_outputs(info, model, request)

    def on_pick(dataset_id: int | None, request: gr.Request = None):
        """Inputs: dataset id. Outputs: preview, its images (its owner's or an admin's)."""
        if dataset_id is None:
            return gr.skip(), gr.skip()
        try:
            info = ctx.store.get_dataset(int(dataset_id))
        except StoreError:
            return gr.skip(), gr.skip()
        rows = read_normalized(Path(info.path))
        return preview_frame(rows), stored_thumbnails(ctx, info, rows, request)

    def on_dataset_rename(dataset_id: int | None, name_text: str, request: gr.Request = None):
        """Inputs: picked dataset, new name. Outputs: status, table, picker."""
        if dataset_id is None:
            return "Pick a dataset first.", gr.skip(), gr.skip()
        try:
            info = rename_dataset(ctx.store, int(dataset_id), name_text, actor_of(ctx, request))
        except (DatasetError, NotOwnerError, StoreError) as exc:
            gr.Warning(f"Not renamed: {exc}")
            return f"❌ Not renamed: {exc}", gr.skip(), gr.skip()
        return (f"✅ Dataset #{info.id} is now **{md_text(info.name)}**.", datasets_frame(ctx),
                gr.update(choices=dataset_choices(ctx), value=info.id))

    def on_dataset_delete_ask(dataset_id: int | None, request: gr.Request = None):
        """Inputs: picked dataset. Outputs: confirmation row, its question, pending id, status. Refuses at once a
        login that may not delete it."""
        if dataset_id is None:
            return gr.skip(), gr.skip(), None, "Pick a dataset first."
        try:
            info = ctx.store.get_dataset(int(dataset_id))
            check_may_change(actor_of(ctx, request), info.owner, "delete", f"dataset #{info.id} {info.name}")
        except (NotOwnerError, StoreError) as exc:
            gr.Warning(f"Not deleted: {exc}")
            return gr.update(visible=False), "", None, f"❌ Not deleted: {exc}"
        text = (f"Delete dataset **#{info.id} {md_text(info.name)}** ({info.num_rows} rows)? Runs that used it keep their "
                "config and groups (it is then only hidden, kept for them); refused while a run using it is queued "
                "or running.")
        return gr.update(visible=True), text, info.id, ""

    def on_dataset_delete_confirm(pending_id: int | None, request: gr.Request = None):
        """Inputs: pending id. Outputs: confirmation row, pending id, status, table, picker."""
        if pending_id is None:
            return gr.update(visible=False), None, gr.skip(), gr.skip(), gr.skip()
        try:
            done = delete_dataset(ctx.store, ctx.settings, int(pending_id), actor_of(ctx, request))
        except (DatasetInUseError, NotOwnerError, StoreError, OSError) as exc:
            gr.Warning(f"Not deleted: {exc}")
            return gr.update(visible=False), None, f"❌ Not deleted: {exc}", gr.skip(), gr.skip()
        return (gr.update(visible=False), None, f"✅ {done.message()}", datasets_frame(ctx),
                gr.update(choices=dataset_choices(ctx), value=None))

    mapping_inputs = [prompt_column, system_prompt, renames, preview_model]
    check.click(on_check, inputs=[upload, *mapping_inputs], outputs=[status, preview, model_view, gallery])
    added = add.click(on_add, inputs=[upload, name, *mapping_inputs],
                      outputs=[status, preview, model_view, table, selected, gallery])
    hub_added = hub_add.click(on_hub_add, inputs=[hub_id, hub_config, hub_split, name, *mapping_inputs],
                              outputs=[status, preview, model_view, table, selected, gallery], **HUB_LOADS)
    renamed_event = rename.click(on_dataset_rename, inputs=[selected, new_name],
                                 outputs=[manage_status, table, selected])
    delete.click(on_dataset_delete_ask, inputs=selected, outputs=[confirm_row, question, pending, manage_status])
    deleted = confirm.click(on_dataset_delete_confirm, inputs=pending,
                            outputs=[confirm_row, pending, manage_status, table, selected])
    keep.click(lambda: (gr.update(visible=False), None), outputs=[confirm_row, pending])
    if sync is not None:
        sync.follow_datasets(table, lambda: datasets_frame(ctx))
        sync.follow_datasets(selected)
        sync.after(added)
        sync.after(hub_added)
        sync.after(renamed_event)
        sync.after(deleted)
    selected.change(on_pick, inputs=selected, outputs=[preview, gallery])
    return {"upload": upload, "name": name, "add": add, "check": check, "status": status, "preview": preview,
            "model_view": model_view, "gallery": gallery, "prompt_column": prompt_column, "system_prompt": system_prompt,
            "renames": renames, "table": table, "selected": selected, "new_name": new_name, "rename": rename,
            "delete": delete, "confirm": confirm, "manage_status": manage_status}
