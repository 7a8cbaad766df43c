"""The Export panel of the Runs tab: write the selected run's config YAML, metrics CSV, groups Parquet and adapter
zip under ``<data dir>/exports/`` and offer each, and a zip of all, for download (see :mod:`grpo_core.export`)."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from grpo_core.config import ConfigError
from grpo_core.export import export_run
from storage import StoreError

EXPORT_HELP = (
    "Writes the run's **config YAML** (with a copy of its dataset; it re-runs headless: "
    "`grpo-dashboard train run-NNNNN-config.yaml`), its **metrics** as a wide CSV (one row per step, one column "
    "per metric), every recorded **completion** as Parquet (per-rule rewards, total, advantage, tokens, "
    "truncation), the **adapter** as a zip when training saved one, and a zip of everything."
)


def create_export_panel(ctx: AppContext, run_selector: gr.Dropdown) -> dict[str, gr.components.Component]:
    """Build the Export accordion inside the current ``gr.Blocks``; it exports the run chosen in ``run_selector``.

    Returns the components by name: ``button``, ``status``, ``config``, ``metrics``, ``groups``, ``adapter``,
    ``bundle``.
    """
    with gr.Accordion("Export", open=False, elem_id="export-accordion"):
        gr.Markdown(EXPORT_HELP)
        button = gr.Button("Export the selected run", elem_id="export-button")
        status = gr.Markdown(elem_id="export-status")
        with gr.Row():
            config = gr.File(label="config YAML + dataset", file_count="multiple", interactive=False,
                             elem_id="export-config")
            metrics = gr.File(label="metrics CSV", interactive=False, elem_id="export-metrics")
            groups = gr.File(label="groups Parquet", interactive=False, elem_id="export-groups")
            adapter = gr.File(label="adapter zip", interactive=False, elem_id="export-adapter")
            bundle = gr.File(label="everything (zip)", interactive=False, elem_id="export-bundle")

    def on_export(run_id: int | None):
        """Inputs: selected run. Outputs: status, config files, metrics, groups, adapter, bundle."""
        if run_id is None:
            return "Choose a run first.", None, None, None, None, None
        try:
            result = export_run(ctx.store, ctx.settings, int(run_id))
        except (StoreError, ConfigError, OSError) as exc:
            return f"Not exported: {exc}", None, None, None, None, None
        note = "" if result.adapter is not None else " No adapter yet: the run has not finished training."
        text = f"Exported run #{result.run_id} to `{result.folder}`.{note}"
        config_files = [str(p) for p in (result.config, result.dataset) if p is not None]
        adapter_file = str(result.adapter) if result.adapter is not None else None
        return text, config_files, str(result.metrics), str(result.groups), adapter_file, str(result.bundle)

    button.click(
        on_export, inputs=run_selector, outputs=[status, config, metrics, groups, adapter, bundle]
    )
    return {"button": button, "status": status, "config": config, "metrics": metrics, "groups": groups,
            "adapter": adapter, "bundle": bundle}
