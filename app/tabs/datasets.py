"""The Datasets tab: upload a prompt file (JSONL, CSV, Parquet), see it validated and previewed, list datasets."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.catalog_sync import CatalogSync, dataset_choices
from app.context import AppContext
from grpo_core.dataset_library import import_dataset
from grpo_core.datasets import SUPPORTED_EXTENSIONS, DatasetError, read_normalized
from storage import StoreError

DATASET_HEADERS = ["id", "name", "rows", "columns", "prompt", "file", "added"]


def datasets_frame(ctx: AppContext) -> pd.DataFrame:
    """All datasets as a table."""
    rows = [
        [d.id, d.name, d.num_rows, ", ".join(d.columns), d.prompt_kind, d.source_name, f"{d.created_at:%Y-%m-%d %H:%M}"]
        for d in ctx.store.list_datasets()
    ]
    return pd.DataFrame(rows, columns=DATASET_HEADERS)


def preview_frame(rows: list[dict[str, Any]], limit: int = 8) -> pd.DataFrame:
    """The first ``limit`` rows, long cells shortened, nested values shown as text."""
    shown = []
    for row in rows[:limit]:
        cells = {}
        for key, value in row.items():
            text = value if isinstance(value, str) else repr(value)
            cells[key] = text if len(text) <= 160 else text[:159] + "…"
        shown.append(cells)
    return pd.DataFrame(shown)


def create_datasets_tab(ctx: AppContext, sync: CatalogSync | None = None) -> dict[str, gr.components.Component]:
    """Build the Datasets tab inside the current ``gr.Blocks``; ``sync`` keeps its table and picker current and
    tells the other tabs of an upload."""
    gr.Markdown(
        "Upload prompts as **JSONL, CSV or Parquet**. A `prompt` column is required (text, or a list of chat "
        "messages `{role, content}`); every other column (e.g. `answer`, `tests`) is handed to the reward rules."
    )
    with gr.Row():
        upload = gr.File(label="prompt file", file_types=list(SUPPORTED_EXTENSIONS), elem_id="dataset-file")
        with gr.Column():
            name = gr.Textbox(label="dataset name (default: file name)", elem_id="dataset-name")
            add = gr.Button("Add dataset", variant="primary", elem_id="dataset-add")
            status = gr.Markdown(elem_id="dataset-status")
    preview = gr.Dataframe(label="preview", interactive=False, elem_id="dataset-preview", wrap=True)
    table = gr.Dataframe(
        value=lambda: datasets_frame(ctx), label="datasets", interactive=False, elem_id="datasets-table"
    )
    selected = gr.Dropdown(label="preview a stored dataset", choices=dataset_choices(ctx), elem_id="dataset-pick")

    def on_add(file_path: str | None, dataset_name: str, request: gr.Request):
        """Inputs: uploaded temp path, name. Outputs: status, preview, table, dropdown."""
        if not file_path:
            return "**Choose a file first.**", gr.skip(), gr.skip(), gr.skip()
        source_name = Path(file_path).name
        try:
            info = import_dataset(ctx.store, ctx.settings, file_path, source_name=source_name, name=dataset_name,
                                  owner=request.username if request else None)
        except (DatasetError, StoreError) as exc:
            return f"❌ **Not added.** {exc}", gr.skip(), gr.skip(), gr.skip()
        rows = read_normalized(Path(info.path))
        message = f"✅ Added **{info.name}**: {info.num_rows} rows, columns {', '.join(info.columns)}."
        return (
            message,
            preview_frame(rows),
            datasets_frame(ctx),
            gr.update(choices=dataset_choices(ctx), value=info.id),
        )

    def on_pick(dataset_id: int | None):
        """Inputs: dataset id. Outputs: preview."""
        if dataset_id is None:
            return gr.skip()
        try:
            info = ctx.store.get_dataset(int(dataset_id))
        except StoreError:
            return gr.skip()
        return preview_frame(read_normalized(Path(info.path)))

    added = add.click(on_add, inputs=[upload, name], outputs=[status, preview, table, selected])
    if sync is not None:
        sync.follow_datasets(table, lambda: datasets_frame(ctx))
        sync.follow_datasets(selected)
        sync.after(added)
    selected.change(on_pick, inputs=selected, outputs=preview)
    return {"upload": upload, "name": name, "add": add, "status": status, "preview": preview, "table": table,
            "selected": selected}
