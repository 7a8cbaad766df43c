"""The Launch tab: quick starts (a button each fills the whole form from its recipe,
:mod:`grpo_core.submit.quick_starts`), dataset, model, weighted reward rules from the registry, key hyperparameters,
a preview of the run config, a try-out bench for the rules (with a dataset-row picker), a preflight that samples a
few groups from the model to say whether the run can learn (:mod:`app.tabs.launch.tools`), a "start from an existing
run" picker that fills the form from a stored run's config, the memory estimate, sweeps, and Launch, which then shows
the Runs tab.

Reward rule slots show only while they hold a rule: "+ add rule" shows the next one, "✕ remove" empties and hides
one. The sandbox line shows only while a code rule is chosen, vLLM's settings only while vLLM generation is on, and
the config preview is filled when the tab is selected (no page-load event for a page opened on another tab).

:func:`create_launch_tab` lays the tab out (:mod:`app.tabs.launch.layout`) and connects each event to its handler
(:mod:`app.tabs.launch.handlers`). Every event passes its inputs as a set, so Gradio hands over a dict keyed by
component, which :func:`app.tabs.launch.form.read_form` turns into the form keyed by field name.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import gradio as gr

from app.catalog_sync import CatalogSync
from app.context import MODEL_JOBS, PLUGIN_CHECK_JOBS, AppContext, fair_share
from app.tabs.launch import handlers
from app.tabs.launch.form import FORM_FIELDS, RULE_SLOTS, SLOT_FIELDS, read_form, slot_field, trl_args_help
from app.tabs.launch.layout import build_launch_layout, quick_start_note, uses_code_rule
from app.tabs.launch.memory import create_memory_panel
from app.tabs.launch.sweep import create_sweep_panel
from app.tabs.launch.tool_fields import TOOL_INPUTS, plugin_boundary_markdown, tool_template_markdown, uses_tools
from app.tabs.launch.tools import template_think_markdown
from grpo_core.child_jobs.slots import MODEL_SLOTS, PREVIEW_SLOTS
from grpo_core.submit.quick_starts import QUICK_STARTS

BENCH_FIELDS = ["bench_row", "bench_completions", "model", "dataset_id", *SLOT_FIELDS]
PROBE_FIELDS = ["bench_row", "bench_prompt", "bench_completions", *SLOT_FIELDS]
PICK_ROW_FIELDS = ["dataset_id", "bench_row_number", *SLOT_FIELDS]
#: The id of the Runs tab in :func:`app.server.build_blocks`' ``gr.Tabs``: where Launch takes the user.
RUNS_TAB = "runs"


def enclosing_tabs() -> gr.Tabs | None:
    """The ``gr.Tabs`` whose ``gr.Tab`` is being built now (``None`` outside one)."""
    parent = getattr(gr.context.Context.block, "parent", None)
    return parent if isinstance(parent, gr.Tabs) else None


def enclosing_tab() -> gr.Tab | None:
    """The ``gr.Tab`` being built now (``None`` outside one)."""
    block = gr.context.Context.block
    return block if isinstance(block, gr.Tab) else None


def create_launch_tab(
    ctx: AppContext, sync: CatalogSync | None = None, tabs: gr.Tabs | None = None
) -> dict[str, gr.components.Component]:
    """Build the Launch tab inside the current ``gr.Blocks`` and connect its events; ``sync`` keeps its dataset and
    clone dropdowns current and tells the other tabs of a launch; a launch selects the :data:`RUNS_TAB` of ``tabs``
    (default: the ``gr.Tabs`` this tab is built in).

    Returns :func:`app.tabs.launch.layout.build_launch_layout`'s components by name, with ``sweep_button`` and
    ``launched`` (the Launch click's event; ``launched_run`` holds the new run's id once it succeeded: a later tab
    follows it with ``launched_run.change`` to select that run).
    """
    tabs = tabs if tabs is not None else enclosing_tabs()
    own_tab = enclosing_tab()
    parts = build_launch_layout(ctx)
    form = {name: parts[name] for name in FORM_FIELDS}

    def inputs(names: Iterable[str]) -> set[gr.components.Component]:
        return {parts[name] for name in names}

    def on_preview(data: dict):
        """Inputs: the form. Outputs: the YAML preview."""
        return handlers.preview(read_form(parts, data))

    def on_launch(request: gr.Request, data: dict):
        """Inputs: the form (the login first, from Gradio). Outputs: status, the new run's id, then the tabs (the Runs
        tab once launched) when there are tabs."""
        status, run_id = handlers.launch(ctx, request, read_form(parts, data))
        if run_id is None:
            return status, gr.skip(), *([gr.skip()] if tabs is not None else [])
        return status, run_id, *([gr.Tabs(selected=RUNS_TAB)] if tabs is not None else [])

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

    def on_clone(run_id: Any, shown: list[bool], request: gr.Request = None):
        """Inputs: run id, which rule slots show. Outputs: the form, the rules' help, clone status (those the handler
        names), the slots' groups, which show, "+ add rule"."""
        form = handlers.clone(ctx, request, run_id)
        stale = handlers.stale_cleared() if "dataset_id" in form else {}  # the form was refilled
        return {**{parts[name]: value for name, value in {**form, **stale}.items()},
                **slot_visibility(handlers.shown_after_clone(form, shown))}

    groups = [parts[slot_field("rule_group", index)] for index in range(1, RULE_SLOTS + 1)]
    rules = [parts[slot_field("rule", index)] for index in range(1, RULE_SLOTS + 1)]

    def slot_visibility(shown: list[bool]) -> dict:
        """The updates that show the slots ``shown`` says, remember it, and offer "+ add rule" while one is hidden."""
        return {parts["rule_shown"]: shown, parts["rule_add"]: gr.update(visible=not all(shown)),
                **{group: gr.update(visible=visible) for group, visible in zip(groups, shown, strict=True)}}

    def on_add_rule(shown: list[bool]):
        """Inputs: which slots show. Outputs: the same, the slots' groups, "+ add rule"."""
        return slot_visibility(handlers.add_rule_slot(shown)[0])

    def remover(index: int):
        def on_remove(shown: list[bool]):
            """Inputs: which slots show. Outputs: the slot's fields emptied, the slots' groups, "+ add rule"."""
            shown = [visible and number != index for number, visible in enumerate(shown, start=1)]
            return {**{parts[name]: value for name, value in handlers.slot_cleared(index).items()},
                    **slot_visibility(shown)}
        return on_remove

    visibility_outputs = [parts["rule_shown"], parts["rule_add"], *groups]
    parts["rule_add"].click(on_add_rule, inputs=parts["rule_shown"], outputs=visibility_outputs)
    for index in range(1, RULE_SLOTS + 1):
        cleared = [parts[name] for name in handlers.slot_cleared(index)]
        parts[slot_field("rule_remove", index)].click(remover(index), inputs=parts["rule_shown"],
                                                      outputs=[*cleared, *visibility_outputs])
    gr.on(triggers=[rule.change for rule in rules], fn=lambda *names: gr.update(visible=uses_code_rule(names)),
          inputs=rules, outputs=parts["sandbox_line"], show_progress="hidden")
    has_gpus = bool(parts["gpu_fields"].visible)
    parts["use_vllm"].change(lambda on: gr.update(visible=has_gpus and bool(on)), inputs=parts["use_vllm"],
                             outputs=parts["vllm_fields"], show_progress="hidden")

    for index in range(1, RULE_SLOTS + 1):
        # .input, not .change: filling the form from a cloned run sets the rule and its parameters together.
        parts[slot_field("rule", index)].input(
            handlers.rule_chosen, inputs=parts[slot_field("rule", index)],
            outputs=[parts[slot_field("params", index)], parts[slot_field("help", index)]])
    parts["trl_args"].change(trl_args_help, inputs=parts["trl_args"], outputs=parts["trl_args_help"],
                             show_progress="hidden")
    # every field's change, and the tab's selection (the preview is there before anything changes, without an event
    # at the page load of a link to another tab); built outside a tab: the page's load
    gr.on(triggers=[*(field.change for field in form.values()), own_tab.select] if own_tab is not None else None,
          fn=on_preview, inputs=set(form.values()), outputs=parts["preview"], show_progress="hidden")
    launch_outputs = [parts["status"], parts["launched_run"], *([tabs] if tabs is not None else [])]
    launched = parts["launch"].click(on_launch, inputs=set(form.values()), outputs=launch_outputs, **PLUGIN_CHECK_JOBS)
    with parts["panels"]:
        parts["memory_estimate"] = create_memory_panel(ctx, form)["result"]
        sweep = create_sweep_panel(ctx, form, sync)
        parts["sweep_status"] = sweep["status"]
    bench_outputs = [parts["bench_table"], parts["bench_status"]]
    parts["bench_button"].click(fair_share(PREVIEW_SLOTS, on_bench), inputs=inputs(BENCH_FIELDS), outputs=bench_outputs)

    def on_model(name: str, request: gr.Request):
        """Inputs: the model field. Outputs: the chat template line (the login's boundary first)."""
        return template_think_markdown(ctx, name, request)

    parts["model"].change(on_model, inputs=parts["model"],
                          outputs=parts["template_line"], show_progress="hidden")

    def on_tools(model: str, tools: list[str], tool_plugins: str, environment: str, request: gr.Request):
        """Inputs: :data:`TOOL_INPUTS`. Outputs: the tool template line (empty without tools; a child checks it)."""
        return tool_template_markdown(ctx, model, uses_tools(tools, tool_plugins, environment), request)

    # one check at a time on the server, the latest change only: each is a child process
    gr.on(triggers=[parts["model"].change, parts["tools"].change, parts["tool_plugins"].blur,
                    parts["environment"].blur], fn=on_tools, inputs=[parts[name] for name in TOOL_INPUTS],
          outputs=parts["tool_template"], trigger_mode="always_last", concurrency_limit=1,
          concurrency_id="tool-template", show_progress="minimal")
    parts["probe_button"].click(fair_share(PREVIEW_SLOTS, on_probe), inputs=inputs(PROBE_FIELDS), outputs=bench_outputs)
    parts["bench_row_pick"].click(on_pick_row, inputs=inputs(PICK_ROW_FIELDS),
                                  outputs=[parts["bench_row"], parts["bench_prompt"], parts["bench_status"]])
    parts["preflight_button"].click(fair_share(MODEL_SLOTS, on_preflight), inputs=inputs(["preflight_prompts", *FORM_FIELDS]),
                                    outputs=[parts["preflight_verdict"], parts["preflight_table"]], **MODEL_JOBS)
    help_boxes = [parts[slot_field("help", index)] for index in range(1, RULE_SLOTS + 1)]
    stale_outputs = [parts[name] for name in handlers.STALE_RESULTS]
    parts["clone"].input(on_clone, inputs=[parts["clone"], parts["rule_shown"]],
                         outputs=[*form.values(), *help_boxes, parts["clone_status"], *visibility_outputs, *stale_outputs])

    def quick_starter(key: str):
        def on_quick_start(shown: list[bool]):
            """Inputs: which rule slots show. Outputs: the form, the rules' help, the clone picker, its status (those
            the handler names), the slots' groups, which show, "+ add rule"."""
            form = handlers.quick_start_form(ctx, key)
            stale = handlers.stale_cleared() if "dataset_id" in form else {}  # the form was refilled
            return {**{parts[name]: value for name, value in {**form, **stale}.items()},
                    **slot_visibility(handlers.shown_after_clone(form, shown))}
        return on_quick_start

    for chosen in QUICK_STARTS:
        parts[f"quick_start_{chosen.key}"].click(
            quick_starter(chosen.key), inputs=parts["rule_shown"],
            outputs=[*form.values(), *help_boxes, parts["clone"], parts["clone_status"], *visibility_outputs,
                     *stale_outputs])
    if sync is not None:
        sync.follow_datasets(parts["eval_dataset_id"])
        sync.follow_datasets(parts["dataset_id"])
        sync.follow_runs(parts["clone"])
        sync.after(launched)
        # values read at each page load, in the catalog's answer (not one page-load event each)
        sync.page_value(parts["quick_start_note"], quick_start_note)
        sync.page_value(parts["tool_plugin_note"], lambda: plugin_boundary_markdown(ctx))
    return {**parts, "sweep_button": sweep["button"], "launched": launched}
