"""The Launch tab's layout: the quick start buttons and their note, the form (dataset, model, weighted reward rules
from the registry, key hyperparameters, the advanced box), Launch, and the tools below it (config preview, the rules'
try-out bench with its dataset-row picker, the preflight). Only lays out: :func:`build_launch_layout` returns the
components by name and :func:`app.tabs.launch.tab.create_launch_tab` connects their events.

The reward rule slots are generated from the registry: each slot's dropdown lists every rule; the other form fields
are generated from :class:`grpo_core.run_config.RunConfig` (:mod:`app.tabs.launch.form`).
"""

from __future__ import annotations

import json
from typing import Any

import gradio as gr
import psutil

from app.catalog_sync import dataset_choices, run_choices
from app.context import AppContext
from app.tabs.launch.form import (
    ADVANCED_FIELDS,
    DEFAULT_SLOTS,
    GPU_FIELDS,
    GRPO_FIELDS,
    HYPERPARAMETERS,
    NO_RULE,
    RULE_SLOTS,
    VLLM_FIELDS,
    brief_help,
    field_choices,
    field_help,
    field_kind,
    grpo_help_markdown,
    rule_help,
    slot_field,
    trl_args_help,
)
from app.tabs.launch.tool_fields import build_tool_fields
from app.tabs.launch.tools import BENCH_HEADERS, RULE_TABLE_HEADERS, template_think_markdown
from app.views.tables import empty_frame
from grpo_core.access.boundary import plugin_files
from grpo_core.datasets.library import ARITHMETIC_EXAMPLE, QUICK_START_EXAMPLE
from grpo_core.preflight.report import DEFAULT_PROMPTS
from grpo_core.rewards import all_rules, get_rule
from grpo_core.run_config import DEFAULT_MODEL, RunConfig
from grpo_core.sandbox.box import sandbox_info
from grpo_core.submit.quick_starts import QUICK_STARTS
from grpo_core.training.gpus import machine_gpus
from grpo_core.trl_fields import GRPO_SECTIONS, load_trl_fields

Components = dict[str, gr.components.Component]

def machine_load() -> tuple[float, int] | None:
    """``(1-minute load average, logical CPUs)`` of this machine (psutil), or ``None`` where it cannot be read."""
    try:
        return float(psutil.getloadavg()[0]), int(psutil.cpu_count() or 1)
    except (OSError, AttributeError):
        return None


def busy_sentence(load: tuple[float, int] | None) -> str:
    """What a busy machine does to the times above: always that they are for quiet cores (the quick start measured
    34 s a step on a loaded 2-core machine against 8 s quiet, README), and, with ``load`` above one runnable process
    per CPU, the load now and how many times longer to expect (load / CPUs, the share of a core each process gets)."""
    text = ("Times are for quiet cores: on a busy machine a step takes several times longer (the quick start: 34 s a "
            "step on a loaded 2-core machine, 8 s on quiet ones).")
    if load is not None and load[0] > load[1]:
        text += (f" This machine is busy now (load {load[0]:.1f} on {load[1]} CPU{'s' if load[1] != 1 else ''}): "
                 f"expect about {load[0] / load[1]:.1f}× those times.")
    return text


def quick_start_note(load: tuple[float, int] | None = None) -> str:
    """Markdown above the quick start buttons: per quick start, what Launch then trains, for how many steps and
    about how long on two quiet CPU cores (:meth:`QuickStart.minutes`), and what to expect; the untouched form is
    the first (the README's Quick start); then what a busy machine does to those times (:func:`busy_sentence`, with
    ``load``, default this machine's now)."""
    parts = []
    for index, chosen in enumerate(QUICK_STARTS):
        recipe = chosen.recipe()
        lora = " (LoRA)" if recipe.use_lora else ""
        opens, where = (" (as the form opens)", " on two quiet CPU cores") if index == 0 else ("", "")
        minutes = chosen.minutes()
        took = chosen.time_note if minutes is None else f"about {minutes:.0f} min{where}"
        parts.append(f"**{chosen.label}**{opens}: {recipe.model}{lora} on {chosen.trains}, {recipe.max_steps} "
                     f"steps, {took}; {chosen.expect}"
                     + (f" ({chosen.template_note})." if chosen.template_note else "."))
    parts.append(busy_sentence(load if load is not None else machine_load()))
    return " ".join(parts)  # one paragraph: the page stays as short as with one quick start


#: The narrowest a form field may be, in pixels: a row of fields wraps rather than cut a label or its value.
FIELD_MIN_WIDTH = 250


def uses_code_rule(rule_names) -> bool:
    """Whether any of ``rule_names`` (the slots' dropdown values; :data:`NO_RULE` and unknown names ignored) is a code
    rule (registry category ``code``): only then does the sandbox line concern the run."""
    known = {rule.name: rule for rule in all_rules()}
    return any(name in known and known[name].category == "code" for name in rule_names)


def sandbox_line() -> str:
    """Markdown: how the code reward rules isolate model-written code here (:func:`sandbox_info`'s mode), led by a
    warning where the host gives less than the ``bwrap`` mode (no namespaces: network and files reachable)."""
    info = sandbox_info()
    line = f"Code rules (`code_tests`, `code_runtime`) run model-written Python in the sandbox: {info.describe()}."
    if info.warning:
        line = f"⚠️ **The sandbox is weaker on this host.** {info.warning}\n\n{line}"
    return line


def plugin_files_markdown(plugin_dirs) -> str:
    """The admin's plugin folders and their ``.py`` files with SHA-256, for the Launch tab: with logins, the files a
    ``plugin`` rule may name (docs/security.md)."""
    files = plugin_files(plugin_dirs)
    lines = ["**Plugin files** (the admin's plugin folders; name one as `path/file.py:function` in a `plugin` "
             "rule):", ""]
    lines += [f"- `{item.path}` sha256 `{item.sha256}`" for item in files] or ["- (no .py files yet)"]
    return "\n".join(lines)


def default_dataset(ctx: AppContext) -> int | None:
    """The quick start's example (single-digit sums: the defaults visibly learn on it), else the original
    arithmetic example, else the first dataset."""
    by_name = {dataset.name: dataset.id for dataset in ctx.store.list_datasets()}
    for name in (QUICK_START_EXAMPLE, ARITHMETIC_EXAMPLE):
        if name in by_name:
            return by_name[name]
    choices = dataset_choices(ctx)
    return choices[0][1] if choices else None


def field_component(ctx: AppContext, field: str, label: str, extra: dict[str, Any]) -> gr.components.Component:
    """The form's component for config ``field`` (:func:`app.tabs.launch.form.field_kind`), with the config's default,
    help text and choices; ``elem_id`` ``hp-<field>``."""
    kind = field_kind(field)
    value = getattr(RunConfig(), field)
    common = {"label": label, "info": brief_help(field), "elem_id": f"hp-{field}", "min_width": FIELD_MIN_WIDTH}
    if kind == "gpus":
        gpus = machine_gpus()
        return gr.Textbox(**common | {"info": f"{field_help(field)} This machine: {','.join(gpus) or 'none'}."},
                          value=value, placeholder="auto")
    if kind == "checkbox":
        return gr.Checkbox(value=value, **common)
    if kind == "dropdown":
        return gr.Dropdown(value=value, choices=field_choices(field), **common)
    if kind == "multiselect":
        return gr.CheckboxGroup(value=value, choices=field_choices(field), **common)
    if kind == "dataset":
        return gr.Dropdown(choices=dataset_choices(ctx), value=None, **common)
    if kind == "lines":
        return gr.Textbox(value="\n".join(value), lines=2, max_lines=8, **common)
    if kind == "mapping":
        return gr.Code(label="other GRPOConfig / TrainingArguments fields (YAML or JSON mapping; fields the dashboard "
                       "sets are refused with the reason)", language="yaml", lines=3, elem_id=f"hp-{field}")
    if kind == "text":
        return gr.Textbox(value=value, **common, **extra)
    precision = {"precision": 0} if kind == "integer" else {}
    return gr.Number(value=value, **common, **precision, **extra)


def _grpo_fields(ctx: AppContext, parts: Components) -> None:
    """TRL's GRPO fields (:data:`GRPO_FIELDS`) under their headings (:data:`GRPO_SECTIONS`), each heading with TRL's
    whole help text folded under its row, in one closed accordion ``launch-grpo``."""
    version = load_trl_fields()[0]
    labels = {field: (label, extra) for field, label, extra in GRPO_FIELDS}
    with gr.Accordion(f"GRPO loss, clipping, entropy, off-policy masking and vLLM importance sampling (TRL {version})",
                      open=False, elem_id="launch-grpo"):
        for heading, names in GRPO_SECTIONS:
            gr.Markdown(f"#### {heading}")
            with gr.Row(equal_height=True):
                for field in names:
                    parts[field] = field_component(ctx, field, *labels[field])
            gr.Markdown(grpo_help_markdown(names))


def _rule_slots(parts: Components) -> None:
    """The :data:`RULE_SLOTS` reward rule slots, each a group ``rule_group_i`` (shown only while it holds a rule or was
    just added) of ``rule_i``, ``weight_i``, ``rule_remove_i``, ``params_i``, ``gate_i`` and ``help_i``; then
    ``rule_add`` ("+ add rule", hidden once every slot is shown) and ``rule_shown`` (a state: which slots show)."""
    rule_names = [NO_RULE] + [rule.name for rule in all_rules()]
    shown = []
    for index in range(1, RULE_SLOTS + 1):
        rule, weight, params = DEFAULT_SLOTS[index - 1] if index <= len(DEFAULT_SLOTS) else (NO_RULE, 1.0, {})
        params_text = json.dumps({**(get_rule(rule).defaults() if rule != NO_RULE else {}), **params}, indent=1,
                                 ensure_ascii=False)
        shown.append(rule != NO_RULE)
        with gr.Group(visible=rule != NO_RULE, elem_id=f"rule-group-{index}") as group:
            parts[slot_field("rule_group", index)] = group
            with gr.Row(equal_height=True):
                parts[slot_field("rule", index)] = gr.Dropdown(label=f"rule {index}", choices=rule_names, value=rule,
                                                               scale=3, elem_id=f"rule-{index}")
                parts[slot_field("weight", index)] = gr.Number(label="weight", value=weight, scale=1, min_width=120,
                                                               elem_id=f"weight-{index}")
                parts[slot_field("rule_remove", index)] = gr.Button("✕ remove", size="sm", scale=0, min_width=100,
                                                                    elem_id=f"rule-remove-{index}")
            with gr.Accordion("parameters, gate and what the rule does", open=False,
                              elem_id=f"rule-details-{index}"):
                with gr.Row():
                    parts[slot_field("params", index)] = gr.Code(label="parameters (JSON)", value=params_text,
                                                                 language="json", lines=3, elem_id=f"params-{index}")
                    parts[slot_field("gate", index)] = gr.Textbox(
                        label="gate (optional)", placeholder="code_tests >= 0.01", elem_id=f"gate-{index}",
                        info="counts only where that rule's reward reaches the number, else 0")
                parts[slot_field("help", index)] = gr.Markdown(rule_help(rule))
    parts["rule_add"] = gr.Button("+ add rule", size="sm", visible=not all(shown), elem_id="rule-add")
    parts["rule_shown"] = gr.State(shown)


def _bench(parts: Components) -> None:
    """The try-out bench: ``bench_row_number``, ``bench_row_pick``, ``bench_prompt``, ``bench_row``,
    ``bench_completions``, ``bench_button``, ``probe_button``, ``bench_table``, ``bench_status``."""
    with gr.Accordion("Try the rules on sample completions (before launching)", open=False):
        gr.Markdown(
            "Give a dataset row (JSON, e.g. `{\"answer\": 42}`) and a group of completions separated by lines of "
            "`---`. The table shows every rule's reward, the weighted total and the group-relative advantage GRPO "
            "would train on."
        )
        with gr.Row():
            parts["bench_row_number"] = gr.Number(
                label="pick a dataset row (row number in the chosen dataset, from 0)", value=0, precision=0,
                minimum=0, elem_id="bench-row-number", scale=3)
            parts["bench_row_pick"] = gr.Button("Use this row", elem_id="bench-row-pick", scale=1)
        parts["bench_prompt"] = gr.Textbox(label="prompt of that row", interactive=False, lines=2, max_lines=8,
                                           elem_id="bench-prompt")
        with gr.Row():
            parts["bench_row"] = gr.Code(label="dataset row (JSON)", language="json", value='{"answer": 82}',
                                         lines=3, elem_id="bench-row")
            parts["bench_completions"] = gr.Textbox(
                label="completions of one group", lines=8, elem_id="bench-completions",
                value="82\n---\nThe answer is 82.\n---\n81\n---\nI don't know",
            )
        with gr.Row():
            parts["bench_button"] = gr.Button("Score the group", elem_id="bench-button")
            parts["probe_button"] = gr.Button("Probe for reward hacking (degenerate completions against these)",
                                              elem_id="probe-button")
        parts["bench_table"] = gr.Dataframe(value=empty_frame(BENCH_HEADERS), interactive=False,
                                            elem_id="bench-table")
        parts["bench_status"] = gr.Markdown(elem_id="bench-status")


def _preflight(parts: Components) -> None:
    """The preflight: ``preflight_prompts``, ``preflight_button``, ``preflight_verdict``, ``preflight_table``."""
    with gr.Accordion("Preflight: will this run learn?", open=False):
        gr.Markdown(
            "Samples a few prompts × G completions from the model with the rules above (no training) and checks "
            "that rewards differ within groups: a group whose completions all score the same has zero advantage "
            "and teaches nothing (DeepSeekMath's group baseline; DAPO drops such groups). Runs in a subprocess; "
            "the first use of the default model converts it (about 30 s)."
        )
        with gr.Row():
            parts["preflight_prompts"] = gr.Number(label="prompts to sample", value=DEFAULT_PROMPTS, precision=0,
                                                   minimum=1, maximum=64, elem_id="preflight-prompts", scale=3)
            parts["preflight_button"] = gr.Button("Run the preflight", elem_id="preflight-button", scale=1)
        parts["preflight_verdict"] = gr.Markdown(elem_id="preflight-verdict")
        parts["preflight_table"] = gr.Dataframe(value=empty_frame(RULE_TABLE_HEADERS), interactive=False,
                                                elem_id="preflight-table")


def build_launch_layout(ctx: AppContext) -> Components:
    """Lay out the Launch tab inside the current ``gr.Blocks`` (no events).

    Returns the components by name: ``quick_start_<key>`` (a button per quick start, :data:`QUICK_STARTS`); every
    field of :data:`app.tabs.launch.form.FORM_FIELDS` under its own name;
    the rule slots' parts (:func:`_rule_slots`); ``sandbox_line`` (shown while a code rule is chosen); ``gpu_fields``
    (the row of :data:`GPU_FIELDS`, shown on a machine with GPUs) and ``vllm_fields`` (the row of :data:`VLLM_FIELDS`,
    shown while vLLM generation is on); the Tools group's parts (:func:`app.tabs.launch.tool_fields.build_tool_fields`);
    ``quick_start_note`` (the quick starts' note, with the machine's load); ``launched_run`` (a hidden box: the id
    of the run Launch queued); ``clone``, ``clone_status``, ``template_line``, ``trl_args_help``, ``launch``,
    ``status``, ``panels`` (an empty column under the status for the memory and sweep panels), ``preview``; the
    bench's and the preflight's parts (see :func:`_bench`, :func:`_preflight`).
    """
    parts: Components = {}
    # the machine's load now; the Launch tab gives it again at each page load (CatalogSync.page_value)
    parts["quick_start_note"] = gr.Markdown(quick_start_note(), elem_id="launch-quick-start")
    with gr.Row():  # the form's starting points: a quick start's recipe, or a run's stored config
        for chosen in QUICK_STARTS:
            parts[f"quick_start_{chosen.key}"] = gr.Button(chosen.label, elem_id=f"quick-start-{chosen.key}",
                                                           scale=1)
        parts["clone"] = gr.Dropdown(
            label="start from an existing run (fills the form from its stored config)", choices=run_choices(ctx),
            value=None, elem_id="launch-clone", scale=3,
        )
    parts["clone_status"] = gr.Markdown(elem_id="launch-clone-status")
    with gr.Row():
        parts["dataset_id"] = gr.Dropdown(label="dataset", choices=dataset_choices(ctx), value=default_dataset(ctx),
                                          elem_id="launch-dataset")
        parts["model"] = gr.Textbox(
            label="model", value=DEFAULT_MODEL, elem_id="launch-model",
            info="SmolLM2-135M-Instruct (offline), a local model folder, a .gguf file, or a hub id",
        )
        parts["name"] = gr.Textbox(label="run name (optional)", elem_id="launch-name")
    parts["template_line"] = gr.Markdown(template_think_markdown(ctx, DEFAULT_MODEL), elem_id="launch-template-think")

    gr.Markdown("### Reward rules (weighted sum; TRL's `reward_funcs` and `reward_weights`)")
    parts["sandbox_line"] = gr.Markdown(sandbox_line(), elem_id="launch-sandbox",
                                        visible=uses_code_rule(rule for rule, *_ in DEFAULT_SLOTS))
    if ctx.settings.plugin_dirs:
        gr.Markdown(lambda: plugin_files_markdown(ctx.settings.plugin_dirs), elem_id="launch-plugin-files")
    _rule_slots(parts)

    gr.Markdown("### Hyperparameters")
    with gr.Row(equal_height=True):
        for field, label, extra in HYPERPARAMETERS:
            parts[field] = field_component(ctx, field, label, extra)
    has_gpus = bool(machine_gpus())
    with gr.Row(equal_height=True, visible=has_gpus, elem_id="launch-gpu-fields") as gpu_row:
        for field, label, extra in GPU_FIELDS:
            parts[field] = field_component(ctx, field, label, extra)
    parts["gpu_fields"] = gpu_row
    with gr.Row(equal_height=True, visible=has_gpus and bool(RunConfig().use_vllm),
                elem_id="launch-vllm-fields") as vllm_row:
        for field, label, extra in VLLM_FIELDS:
            parts[field] = field_component(ctx, field, label, extra)
    parts["vllm_fields"] = vllm_row
    _grpo_fields(ctx, parts)
    with gr.Accordion("Sampling, eval split, trackers and any other GRPOConfig field", open=False):
        with gr.Row(equal_height=True):
            for field, label, extra in ADVANCED_FIELDS:
                if field_kind(field) != "mapping":
                    parts[field] = field_component(ctx, field, label, extra)
        parts["trl_args"] = field_component(ctx, "trl_args", "", {})
        parts["trl_args_help"] = gr.Markdown(trl_args_help(""), elem_id="trl-args-help")
    build_tool_fields(ctx, parts, lambda field, label, extra: field_component(ctx, field, label, extra))

    with gr.Row():
        parts["launch"] = gr.Button("Launch", variant="primary", elem_id="launch-button")
    parts["status"] = gr.Markdown(elem_id="launch-status")
    parts["launched_run"] = gr.Number(visible="hidden", precision=0, elem_id="launch-run-id")
    parts["panels"] = gr.Column()
    with gr.Accordion("Run config preview (YAML; re-run headless with `grpo-dashboard train run.yaml`)", open=False):
        parts["preview"] = gr.Code(language="yaml", interactive=False, elem_id="config-preview")
    _bench(parts)
    _preflight(parts)
    return parts
