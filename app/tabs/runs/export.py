"""The Export panel of the Runs tab: write the selected run's config YAML, metrics CSV, groups Parquet and adapter
zip under ``<data dir>/exports/`` and offer each, and a zip of all, for download (see :mod:`grpo_core.runs.export`)."""

from __future__ import annotations

import gradio as gr

from app.context import MODEL_JOBS, AppContext, actor_of, boundary_of, fair_share
from app.tabs.runs.lazy import lazy_accordion
from grpo_core.child_jobs.slots import MODEL_SLOTS
from grpo_core.merge.job import REUSED, MergeError, merge_run
from grpo_core.run_config import ConfigError
from grpo_core.runs.export import export_run
from storage import StoreError

EXPORT_HELP = (
    "Writes the run's **config YAML** (with a copy of its dataset; it re-runs headless: "
    "`grpo-dashboard train run-NNNNN-config.yaml`), its **metrics** as a wide CSV (one row per step, one column "
    "per metric), every recorded **completion** as Parquet (per-rule rewards, total, advantage, tokens, "
    "truncation), the **adapter** as a zip when training saved one, and a zip of everything."
)

#: The narrowest a download box may be, in pixels: wide enough for ``run-NNNNN-groups.parquet`` with its size.
FILE_BOX_MIN_WIDTH = 440


def create_export_panel(ctx: AppContext, run_selector: gr.Dropdown) -> dict[str, gr.components.Component]:
    """Build the Export accordion inside the current ``gr.Blocks``; it exports the run chosen in ``run_selector``.

    Returns the components by name: ``button``, ``status``, ``config``, ``metrics``, ``groups``, ``adapter``,
    ``bundle``.
    """
    with lazy_accordion("Export", elem_id="export-accordion"):  # mounted when first opened
        gr.Markdown(EXPORT_HELP)
        button = gr.Button("Export the selected run", elem_id="export-button")
        status = gr.Markdown(elem_id="export-status")
        # min_width: a box never narrower than a file name (the row wraps instead); five in one row cut the names
        # to ".ya" and ".js"
        with gr.Row():
            config = gr.File(label="config YAML + dataset + plugin files", file_count="multiple", interactive=False,
                             elem_id="export-config", min_width=FILE_BOX_MIN_WIDTH)
            metrics = gr.File(label="metrics CSV", interactive=False, elem_id="export-metrics",
                              min_width=FILE_BOX_MIN_WIDTH)
            groups = gr.File(label="groups Parquet", interactive=False, elem_id="export-groups",
                             min_width=FILE_BOX_MIN_WIDTH)
            adapter = gr.File(label="adapter zip", interactive=False, elem_id="export-adapter",
                              min_width=FILE_BOX_MIN_WIDTH)
            bundle = gr.File(label="everything (zip)", interactive=False, elem_id="export-bundle",
                             min_width=FILE_BOX_MIN_WIDTH)
        merge = gr.Button("Merge the adapter into the base model (a folder to serve)", elem_id="export-merge")
        merge_status = gr.Markdown(elem_id="export-merge-status")

    def on_export(run_id: int | None, request: gr.Request):
        """Inputs: selected run. Outputs: status, config files, metrics, groups, adapter, bundle."""
        if run_id is None:
            return "Choose a run first.", None, None, None, None, None
        try:
            boundary_of(ctx, request).check_stored(ctx.store.get_run(int(run_id)).config or {}, "export")
            result = export_run(ctx.store, ctx.settings, int(run_id), reader=actor_of(ctx, request))
        except (StoreError, ConfigError, OSError) as exc:
            return f"Not exported: {exc}", None, None, None, None, None
        note = "" if result.adapter is not None else " No adapter yet: the run has not finished training."
        text = f"Exported run #{result.run_id} to `{result.folder}`.{note}"
        text += "".join(f"\n\n⚠️ {warning}" for warning in result.warnings())
        try:  # each file offered under a random folder Gradio may serve (app.served_files), never the data directory
            config_files = [ctx.offer(p, request) for p in (result.config, result.dataset, *result.plugins)
                            if p is not None]
            offered = [ctx.offer(p, request) for p in (result.metrics, result.groups, result.adapter, result.bundle)]
        except OSError as exc:
            return f"Not exported: {exc}", None, None, None, None, None
        return (text, config_files, *offered)

    def on_merge(run_id: int | None, request: gr.Request):
        """Inputs: selected run. Outputs: merge status (streamed: the worker's progress, then the folder)."""
        if run_id is None:
            yield "Choose a run first."
            return
        try:
            run = ctx.store.get_run(int(run_id))
            boundary_of(ctx, request).check_stored(run.config or {}, "merge")
            steps: list[str] = []
            for line in merge_run(ctx.settings, run):
                steps.append(line)
                yield "Merging… " + " → ".join(steps[-4:])
        except (StoreError, MergeError, OSError, ConfigError) as exc:
            yield f"Not merged: {exc}"
            return
        if steps[0].startswith(REUSED):
            done = f"Already merged: run #{run.id} with this adapter was merged before; nothing new written, reusing"
        else:
            done = f"Merged model of run #{run.id} written to"
        yield (f"{done} `{steps[-1]}` (safetensors, tokenizer, generation config): load it with "
               "`AutoModelForCausalLM.from_pretrained(folder)` or serve it with `vllm serve folder`.")

    merge.click(fair_share(MODEL_SLOTS, on_merge), inputs=run_selector, outputs=merge_status, **MODEL_JOBS)
    button.click(
        on_export, inputs=run_selector, outputs=[status, config, metrics, groups, adapter, bundle]
    )
    return {"button": button, "status": status, "config": config, "metrics": metrics, "groups": groups,
            "adapter": adapter, "bundle": bundle, "merge": merge, "merge_status": merge_status}
