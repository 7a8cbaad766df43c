"""The Launch tab: dataset, model, weighted reward rules from the registry, key hyperparameters, a preview of the
run config, a try-out bench for the rules (with a dataset-row picker), a preflight that samples a few groups from
the model to say whether the run can learn (:mod:`app.tabs.launch.tools`), a "start from an existing run" picker that
fills the form from a stored run's config, the memory estimate, sweeps, and Launch.

:func:`create_launch_tab` lays the tab out (:mod:`app.tabs.launch.layout`) and connects each event to its handler
(:mod:`app.tabs.launch.handlers`). Every event passes its inputs as a set, so Gradio hands over a dict keyed by
component, which :func:`app.tabs.launch.form.read_form` turns into the form keyed by field name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gradio as gr

from app.catalog_sync import CatalogSync
from app.context import MODEL_JOBS, AppContext
from app.tabs.launch import handlers
from app.tabs.launch.form import FORM_FIELDS, RULE_SLOTS, SLOT_FIELDS, read_form, slot_field, trl_args_help
from app.tabs.launch.layout import build_launch_layout
from app.tabs.launch.memory import create_memory_panel
from app.tabs.launch.sweep import create_sweep_panel
from app.tabs.launch.tools import template_think_markdown

BENCH_FIELDS = ["bench_row", "bench_completions", "model", "dataset_id", *SLOT_FIELDS]
PROBE_FIELDS = ["bench_row", "bench_prompt", "bench_completions", *SLOT_FIELDS]
PICK_ROW_FIELDS = ["dataset_id", "bench_row_number", *SLOT_FIELDS]


def create_launch_tab(ctx: AppContext, sync: CatalogSync | None = None) -> dict[str, gr.components.Component]:
    """Build the Launch tab inside the current ``gr.Blocks`` and connect its events; ``sync`` keeps its dataset and
    clone dropdowns current and tells the other tabs of a launch.

    Returns :func:`app.tabs.launch.layout.build_launch_layout`'s components by name, with ``sweep_button``.
    """
    parts = build_launch_layout(ctx)
    form = {name: parts[name] for name in FORM_FIELDS}

    def inputs(names: Iterable[str]) -> set[gr.components.Component]:
        return {parts[name] for name in names}

    def on_preview(data: dict):
        """Inputs: the form. Outputs: the YAML preview."""
        return handlers.preview(read_form(parts, data))

    def on_launch(request: gr.Request, data: dict):
        """Inputs: the form (the login first, from Gradio). Outputs: status."""
        return handlers.launch(ctx, request, read_form(parts, data))

    def on_bench(request: gr.Request, data: dict):
        """Inputs: :data:`BENCH_FIELDS`. Outputs: bench table, status."""
        return handlers.bench(ctx, request, read_form(parts, data))

    def on_probe(request: gr.Request, data: dict):
        """Inputs: :data:`PROBE_FIELDS`. Outputs: bench table, status."""
        return handlers.probe(ctx, request, read_form(parts, data))

    def on_pick_row(data: dict):
        """Inputs: :data:`PICK_ROW_FIELDS`. Outputs: bench row, its prompt, bench status."""
        return handlers.pick_row(ctx, read_form(parts, data))

    def on_preflight(request: gr.Request, data: dict):
        """Inputs: prompts to sample and the form. Outputs: verdict, per-rule table; streamed."""
        yield from handlers.preflight(ctx, request, read_form(parts, data))

    def on_clone(run_id: Any, request: gr.Request = None):
        """Inputs: run id. Outputs: the form, the rules' help, clone status (those the handler names)."""
        return {parts[name]: value for name, value in handlers.clone(ctx, request, run_id).items()}

    for index in range(1, RULE_SLOTS + 1):
        # .input, not .change: filling the form from a cloned run sets the rule and its parameters together.
        parts[slot_field("rule", index)].input(
            handlers.rule_chosen, inputs=parts[slot_field("rule", index)],
            outputs=[parts[slot_field("params", index)], parts[slot_field("help", index)]])
    parts["trl_args"].change(trl_args_help, inputs=parts["trl_args"], outputs=parts["trl_args_help"],
                             show_progress="hidden")
    gr.on(triggers=[c.change for c in form.values()], fn=on_preview, inputs=set(form.values()),
          outputs=parts["preview"], show_progress="hidden")
    launched = parts["launch"].click(on_launch, inputs=set(form.values()), outputs=parts["status"])
    with parts["panels"]:
        create_memory_panel(ctx, form)
        sweep = create_sweep_panel(ctx, form, sync)
    bench_outputs = [parts["bench_table"], parts["bench_status"]]
    parts["bench_button"].click(on_bench, inputs=inputs(BENCH_FIELDS), outputs=bench_outputs)
    parts["model"].change(lambda name: template_think_markdown(ctx, name), inputs=parts["model"],
                          outputs=parts["template_line"], show_progress="hidden")
    parts["probe_button"].click(on_probe, inputs=inputs(PROBE_FIELDS), outputs=bench_outputs)
    parts["bench_row_pick"].click(on_pick_row, inputs=inputs(PICK_ROW_FIELDS),
                                  outputs=[parts["bench_row"], parts["bench_prompt"], parts["bench_status"]])
    parts["preflight_button"].click(on_preflight, inputs=inputs(["preflight_prompts", *FORM_FIELDS]),
                                    outputs=[parts["preflight_verdict"], parts["preflight_table"]], **MODEL_JOBS)
    help_boxes = [parts[slot_field("help", index)] for index in range(1, RULE_SLOTS + 1)]
    parts["clone"].input(on_clone, inputs=parts["clone"],
                         outputs=[*form.values(), *help_boxes, parts["clone_status"]])
    if sync is not None:
        sync.follow_datasets(parts["eval_dataset_id"])
        sync.follow_datasets(parts["dataset_id"])
        sync.follow_runs(parts["clone"])
        sync.after(launched)
    return {**parts, "sweep_button": sweep["button"]}
