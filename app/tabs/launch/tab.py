"""The Launch tab: dataset, model, weighted reward rules from the registry, key hyperparameters, a preview of the
run config, a try-out bench for the rules (with a dataset-row picker), a preflight that samples a few groups from
the model to say whether the run can learn (:mod:`app.tabs.launch.tools`), a "start from an existing run" picker that
fills the form from a stored run's config, and Launch.

The reward rule slots are generated from the registry: each slot's dropdown lists every rule, and choosing one
fills its parameters (JSON, with each parameter's type and help shown) from the rule's defaults.
"""

from __future__ import annotations

import json
import re
from typing import Any

import gradio as gr
import pandas as pd

from app.catalog_sync import CatalogSync, dataset_choices, run_choices
from app.context import MODEL_JOBS, AppContext, boundary_of, check_webhooks
from app.tabs.launch.memory import create_memory_panel, fit_markdown
from app.tabs.launch.sweep import create_sweep_launcher
from app.tabs.launch.tools import (
    bench_coverage_markdown,
    bench_specs,
    clone_drift_notes,
    dataset_row_for_bench,
    stream_preflight,
    template_think_markdown,
)
from grpo_core.access.boundary import plugin_files
from grpo_core.bounded_parse import dump_yaml, load_json, load_yaml
from grpo_core.datasets.library import ARITHMETIC_EXAMPLE, QUICK_START_EXAMPLE
from grpo_core.doctor.preflight import DEFAULT_PROMPTS
from grpo_core.jobs.reward_check import has_plugins, score_group_isolated
from grpo_core.rewards import RewardGate, RewardSpec, all_rules, get_rule, score_group
from grpo_core.rewards.hacking_probe import flagged, probe_row
from grpo_core.rewards.regex_budget import time_budget
from grpo_core.runs.config import DEFAULT_MODEL, ConfigError, RunConfig, parse_run_config
from grpo_core.runs.trl_fields import describe_trl_field
from grpo_core.sandbox.box import sandbox_info
from grpo_core.submit.queue import submit_run
from grpo_core.submit.validate import validate_run_config
from grpo_core.training.gpus import machine_gpus

RULE_SLOTS = 4
# The try-out bench and the probe score in the web process: one group at a time, of a bounded size, and the users'
# regular expressions (format_regex, a JSON schema's patterns) of one scoring take this long at most together.
BENCH_MAX_COMPLETIONS = 256
BENCH_MAX_CHARS = 2_000_000
BENCH_REGEX_BUDGET_S = 5.0
SLOT_FIELDS = 4
"""Components per rule slot: rule, weight, parameters JSON, gate."""
NO_RULE = "(none)"
GATE_PATTERN = re.compile(r"^\s*(\S+)\s*>=\s*([-+0-9.eE]+)\s*$")
DEFAULT_SLOTS = [(spec.rule, spec.weight, spec.params) for spec in RunConfig().rewards]

#: (field, label, component kind, extra kwargs) of the hyperparameters shown in the form.
HYPERPARAMETERS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("num_generations", "num_generations (group size G)", "number", {"precision": 0, "minimum": 2}),
    ("per_device_train_batch_size", "completions per step (per process)", "number", {"precision": 0, "minimum": 1}),
    ("max_steps", "max_steps", "number", {"precision": 0, "minimum": 1}),
    ("learning_rate", "learning_rate", "number", {}),
    ("beta", "beta (KL coefficient)", "number", {"minimum": 0}),
    ("max_completion_length", "max_completion_length (tokens)", "number", {"precision": 0, "minimum": 1}),
    ("temperature", "temperature", "number", {"minimum": 0.01}),
    ("seed", "seed", "number", {"precision": 0}),
    ("use_lora", "LoRA adapter", "checkbox", {}),
    ("lora_r", "LoRA rank r", "number", {"precision": 0, "minimum": 1}),
    ("loss_type", "loss_type", "dropdown", {"choices": ["dapo", "grpo", "dr_grpo", "bnpo"]}),
    ("device", "device", "dropdown", {"choices": ["auto", "cpu", "cuda"]}),
    ("use_vllm", "vLLM generation", "checkbox", {}),
    ("num_processes", "num_processes (accelerate launch when > 1)", "number", {"precision": 0, "minimum": 1}),
    ("gpus", "GPUs for the run (CUDA_VISIBLE_DEVICES)", "gpus", {}),
]
"""``gpus`` is a text box shown only on a machine where ``nvidia-smi`` lists GPUs (:func:`grpo_core.training.gpus.machine_gpus`);
elsewhere it stays hidden but still carries a cloned run's value."""


def sandbox_line() -> str:
    """Markdown: how the code reward rules isolate model-written code here (:func:`sandbox_info`'s mode), led by a
    warning where the host gives less than the ``bwrap`` mode (no namespaces: network and files reachable)."""
    info = sandbox_info()
    line = f"Code rules (`code_tests`, `code_runtime`) run model-written Python in the sandbox: {info.describe()}."
    if info.warning:
        line = f"⚠️ **The sandbox is weaker on this host.** {info.warning}\n\n{line}"
    return line


#: The "GRPO variants, sampling, eval and trackers" box: (field, label, kind, extra kwargs), as above; ``"multiselect"``
#: is a checkbox group, ``"dataset"`` a dataset dropdown, ``"mapping"`` YAML/JSON text (``trl_args``).
ADVANCED_FIELDS: list[tuple[str, str, str, dict[str, Any]]] = [
    ("multi_objective_aggregation", "multi_objective_aggregation (GDPO)", "dropdown",
     {"choices": ["sum_then_normalize", "normalize_then_sum"]}),
    ("mask_truncated_completions", "mask_truncated_completions", "checkbox", {}),
    ("epsilon_high", "epsilon_high (DAPO clip-higher; 0 = epsilon)", "number", {"minimum": 0}),
    ("importance_sampling_level", "importance_sampling_level (GSPO)", "dropdown", {"choices": ["token", "sequence"]}),
    ("steps_per_generation", "steps_per_generation (0 = gradient_accumulation_steps)", "number",
     {"precision": 0, "minimum": 0}),
    ("top_k", "top_k", "number", {"precision": 0, "minimum": 0}),
    ("min_p", "min_p (0 = off)", "number", {"minimum": 0, "maximum": 1}),
    ("repetition_penalty", "repetition_penalty", "number", {"minimum": 0.01}),
    ("lr_scheduler_type", "lr_scheduler_type", "dropdown",
     {"choices": list(RunConfig.model_fields["lr_scheduler_type"].annotation.__args__)}),
    ("num_train_epochs", "num_train_epochs (0 = max_steps decides)", "number", {"minimum": 0}),
    ("eval_fraction", "eval_fraction (held-out rows)", "number", {"minimum": 0, "maximum": 0.9}),
    ("eval_dataset_id", "eval dataset (instead of a fraction)", "dataset", {}),
    ("eval_steps", "eval_steps", "number", {"precision": 0, "minimum": 1}),
    ("report_to", "also report to", "multiselect", {"choices": ["trackio", "tensorboard", "wandb"]}),
    ("vllm_mode", "vllm_mode (with vLLM generation)", "dropdown", {"choices": ["colocate", "server"]}),
    ("vllm_gpu_memory_utilization", "vllm_gpu_memory_utilization (colocate)", "number",
     {"minimum": 0.01, "maximum": 1}),
    ("vllm_tensor_parallel_size", "vllm_tensor_parallel_size (colocate)", "number", {"precision": 0, "minimum": 1}),
    ("trl_args", "other GRPOConfig fields (YAML or JSON mapping)", "mapping", {}),
]
#: Advanced number fields whose default is ``None`` (off): an empty box reaches the server as 0, which means the same.
ZERO_MEANS_UNSET = ("epsilon_high", "steps_per_generation", "min_p")


def plugin_files_markdown(plugin_dirs) -> str:
    """The admin's plugin folders and their ``.py`` files with SHA-256, for the Launch tab: with logins, the files a
    ``plugin`` rule may name (docs/security.md)."""
    files = plugin_files(plugin_dirs)
    lines = ["**Plugin files** (the admin's plugin folders; name one as `path/file.py:function` in a `plugin` "
             "rule):", ""]
    lines += [f"- `{item.path}` sha256 `{item.sha256}`" for item in files] or ["- (no .py files yet)"]
    return "\n".join(lines)


def _probe_line(result) -> str:
    """One flagged probe of the bench as a Markdown list item: what it earns and from which rule."""
    if result.paid_by_task:
        reward = result.rewards.get(result.rule or "")
        earned = "-" if reward is None else f"{reward:.3g}"
        return (f"- **{result.probe}** earns {earned} on the task rule `{result.rule}`: a degenerate completion should "
                "earn nothing for the task")
    if result.best_real is None:
        return f"- **{result.probe}**: rule `{result.rule}`"
    return (f"- **{result.probe}** scores {result.total:.3g}, the best of these completions {result.best_real:.3g}: "
            f"rule `{result.rule}` rewards it")


def trl_args_text(args: dict[str, Any]) -> str:
    """``trl_args`` as the form's YAML text (empty for none)."""
    return dump_yaml(args) if args else ""


def parse_trl_args_text(text: str) -> dict[str, Any]:
    """The form's ``trl_args`` text (YAML or JSON) as a mapping (empty text = none).

    Raises:
        ConfigError: not YAML (with line and column), over a limit of :func:`grpo_core.bounded_parse.load_yaml`, or
            not a mapping of field names.
    """
    value = load_yaml(text or "", source="other GRPOConfig fields", error=ConfigError) or {}
    if not isinstance(value, dict):
        raise ConfigError("other GRPOConfig fields: write a mapping, one `field: value` a line")
    return value


def trl_args_help(text: str) -> str:
    """Markdown: the TRL help text of each field named in the form's ``trl_args`` text, or why it is refused."""
    try:
        args = parse_trl_args_text(text)
        if args:
            parse_run_config({"trl_args": args}, source="other GRPOConfig fields")
    except ConfigError as exc:
        return f"❌ {exc}"
    lines = [describe_trl_field(name) for name in args]
    return "\n".join(f"- {line}" for line in lines if line) or (
        "Any `GRPOConfig` / `TrainingArguments` field by name, e.g. `num_generations_eval: 2`; checked against the "
        "installed TRL."
    )


def rule_help(rule_name: str) -> str:
    """Markdown: the rule's description, the columns it reads and its parameters with types and help."""
    if not rule_name or rule_name == NO_RULE:
        return ""
    rule = get_rule(rule_name)
    lines = [f"*{rule.description}*"]
    if rule.columns:
        lines.append("reads column " + ", ".join(f"`{c}`" for c in rule.columns))
    for param in rule.params:
        choices = f" one of {list(param.choices)}" if param.choices else ""
        lines.append(f"- `{param.name}` ({param.type}{choices}, default `{param.default!r}`): {param.help}")
    return "\n".join(lines)


def rule_defaults_json(rule_name: str) -> str:
    """The rule's parameter defaults as indented JSON ("{}" for none)."""
    if not rule_name or rule_name == NO_RULE:
        return "{}"
    return json.dumps(get_rule(rule_name).defaults(), indent=1, ensure_ascii=False)


def _parse_params(index: int, rule: str, text: str) -> dict[str, Any]:
    text = (text or "").strip() or "{}"
    value = load_json(text, source=f"reward rule {index} ({rule}): parameters", error=ConfigError)
    if not isinstance(value, dict):
        raise ConfigError(f"reward rule {index} ({rule}): parameters must be a JSON object")
    return value


def parse_gate(index: int, rule: str, text: str | None) -> RewardGate | None:
    """A slot's gate from its text, ``"code_tests >= 0.01"`` (blank: no gate).

    Raises:
        ConfigError: the text is not ``<rule metric name> >= <number>``.
    """
    if not (text or "").strip():
        return None
    match = GATE_PATTERN.match(text or "")
    try:
        if match is None:
            raise ValueError("write it as `<rule> >= <number>`, e.g. `code_tests >= 0.01`")
        return RewardGate(rule=match.group(1), min=float(match.group(2)))
    except ValueError as exc:
        raise ConfigError(f"reward rule {index} ({rule}): gate {text!r}: {exc}") from None


def gate_text(gate: RewardGate | None) -> str:
    """The form's text for ``gate`` (the inverse of :func:`parse_gate`)."""
    return "" if gate is None else f"{gate.rule} >= {gate.min:g}"


def form_to_config(
    dataset_id: int | None,
    model: str,
    name: str,
    slots: list[tuple[str, Any, str]],
    hyper: dict[str, Any],
    advanced: dict[str, Any] | None = None,
) -> RunConfig:
    """Build a :class:`RunConfig` from the form's values.

    Args:
        slots: (rule name or ``(none)``, weight, parameters JSON[, gate text]) per rule slot (see
            :func:`parse_gate`).
        hyper: hyperparameter field -> value.
        advanced: :data:`ADVANCED_FIELDS` field -> value (``trl_args`` as YAML/JSON text); empty values keep the
            defaults.

    Raises:
        ConfigError: a field is invalid; the message names it (and the rule slot).
    """
    rewards = []
    for index, (rule, weight, params, *gate) in enumerate(slots, start=1):
        if not rule or rule == NO_RULE:
            continue
        rewards.append(
            RewardSpec(rule=rule, weight=float(weight if weight is not None else 1.0),
                       params=_parse_params(index, rule, params),
                       gate=parse_gate(index, rule, gate[0] if gate else None)).model_dump()
        )
    data: dict[str, Any] = {
        "name": name or "",
        "model": (model or "").strip() or DEFAULT_MODEL,
        "dataset_id": int(dataset_id) if dataset_id is not None else None,
        "rewards": rewards,
    }
    advanced = dict(advanced or {})
    if "trl_args" in advanced:
        advanced["trl_args"] = parse_trl_args_text(advanced["trl_args"])
    for field in ZERO_MEANS_UNSET:
        if advanced.get(field) == 0:
            advanced[field] = None
    for field, value in {**hyper, **advanced}.items():
        if value is None or value == "":
            continue
        kind = RunConfig.model_fields[field].annotation
        if kind is int and isinstance(value, float):
            value = int(value)
        data[field] = value
    return parse_run_config(data, source="launch form")


def config_to_form(config: RunConfig) -> dict[str, Any]:
    """The form's values for ``config``: the inverse of :func:`form_to_config`.

    Returns:
        ``{"dataset_id", "model", "name", "slots", "hyper", "advanced"}``, the keyword arguments of
        :func:`form_to_config`: ``slots`` has :data:`RULE_SLOTS` entries ``(rule, weight, parameters JSON, gate
        text)`` (the rule's defaults filled in; ``(none)`` for unused slots), ``hyper`` the fields of
        :data:`HYPERPARAMETERS`, ``advanced`` those of :data:`ADVANCED_FIELDS` (``trl_args`` as YAML text). Rules past the
        :data:`RULE_SLOTS`-th, rule metric names and fields the form does not show are left out; see
        :func:`form_omissions`. ``form_to_config(**config_to_form(c))`` equals ``c`` for any config the form can
        express.
    """
    slots: list[tuple[str, Any, str]] = []
    for spec in config.rewards[:RULE_SLOTS]:
        params = {**get_rule(spec.rule).defaults(), **spec.params}
        slots.append((spec.rule, spec.weight, json.dumps(params, indent=1, ensure_ascii=False), gate_text(spec.gate)))
    slots += [(NO_RULE, 1.0, "{}", "")] * (RULE_SLOTS - len(slots))
    return {
        "dataset_id": config.dataset_id,
        "model": config.model,
        "name": config.name,
        "slots": slots,
        "hyper": {field: getattr(config, field) for field, *_ in HYPERPARAMETERS},
        "advanced": {
            field: trl_args_text(config.trl_args) if field == "trl_args" else getattr(config, field)
            for field, *_ in ADVANCED_FIELDS
        },
    }


def form_omissions(config: RunConfig) -> list[str]:
    """What of ``config`` the form cannot show (so a launch from the form would differ), one phrase each."""
    notes = []
    if len(config.rewards) > RULE_SLOTS:
        dropped = ", ".join(spec.rule for spec in config.rewards[RULE_SLOTS:])
        notes.append(f"only the first {RULE_SLOTS} reward rules fit the form (left out: {dropped})")
    named = [spec.name for spec in config.rewards[:RULE_SLOTS] if spec.name]
    if named:
        notes.append(f"rule metric names are not on the form ({', '.join(named)}): the rule names are used")
    if config.dataset_id is None and config.dataset_path:
        notes.append(f"the run read dataset_path {config.dataset_path}; choose a stored dataset")
    shown = {field for field, *_ in HYPERPARAMETERS + ADVANCED_FIELDS} | {"name", "model", "dataset_id", "dataset_path", "rewards"}
    defaults = RunConfig()
    hidden = [
        f"{field}={getattr(config, field)!r}"
        for field in RunConfig.model_fields
        if field not in shown and getattr(config, field) != getattr(defaults, field)
    ]
    if hidden:
        notes.append("not on the form, so back to their defaults: " + ", ".join(hidden))
    return notes


#: What the untouched form does (the README's Quick start; figures from benchmarks/bench_learning.py).
QUICK_START_NOTE = (
    "**Quick start:** Launch as it stands trains SmolLM2-135M-Instruct (LoRA) on single-digit sums for 60 steps, "
    "about 8 minutes on two quiet CPU cores; the mean reward should more than double as the model learns to answer "
    "the sum briefly. Harder levels: the other `arithmetic ... (example)` datasets."
)


def _default_dataset(ctx: AppContext) -> int | None:
    """The quick start's example (single-digit sums: the defaults visibly learn on it), else the original
    arithmetic example, else the first dataset."""
    by_name = {dataset.name: dataset.id for dataset in ctx.store.list_datasets()}
    for name in (QUICK_START_EXAMPLE, ARITHMETIC_EXAMPLE):
        if name in by_name:
            return by_name[name]
    choices = dataset_choices(ctx)
    return choices[0][1] if choices else None


def create_launch_tab(ctx: AppContext, sync: CatalogSync | None = None) -> dict[str, gr.components.Component]:
    """Build the Launch tab inside the current ``gr.Blocks``; ``sync`` keeps its dataset and clone dropdowns
    current and tells the other tabs of a launch."""
    defaults = RunConfig()
    rule_names = [NO_RULE] + [rule.name for rule in all_rules()]
    gr.Markdown(QUICK_START_NOTE, elem_id="launch-quick-start")
    clone = gr.Dropdown(
        label="start from an existing run (fills the form from its stored config)", choices=run_choices(ctx),
        value=None, elem_id="launch-clone",
    )
    clone_status = gr.Markdown(elem_id="launch-clone-status")
    with gr.Row():
        dataset = gr.Dropdown(
            label="dataset", choices=dataset_choices(ctx), value=_default_dataset(ctx), elem_id="launch-dataset"
        )
        model = gr.Textbox(
            label="model", value=DEFAULT_MODEL, elem_id="launch-model",
            info="SmolLM2-135M-Instruct (offline), a local model folder, a .gguf file, or a hub id",
        )
        run_name = gr.Textbox(label="run name (optional)", elem_id="launch-name")
    template_line = gr.Markdown(template_think_markdown(ctx, DEFAULT_MODEL), elem_id="launch-template-think")

    gr.Markdown("### Reward rules (weighted sum; TRL's `reward_funcs` and `reward_weights`)")
    gr.Markdown(sandbox_line(), elem_id="launch-sandbox")
    if ctx.settings.plugin_dirs:
        gr.Markdown(lambda: plugin_files_markdown(ctx.settings.plugin_dirs), elem_id="launch-plugin-files")
    slot_components: list[tuple[gr.Dropdown, gr.Number, gr.Code, gr.Textbox]] = []
    help_boxes: list[gr.Markdown] = []
    for index in range(RULE_SLOTS):
        rule, weight, params = DEFAULT_SLOTS[index] if index < len(DEFAULT_SLOTS) else (NO_RULE, 1.0, {})
        with gr.Group():
            with gr.Row():
                rule_box = gr.Dropdown(label=f"rule {index + 1}", choices=rule_names, value=rule, scale=2,
                                       elem_id=f"rule-{index + 1}")
                weight_box = gr.Number(label="weight", value=weight, scale=1, elem_id=f"weight-{index + 1}")
                params_text = json.dumps({**(get_rule(rule).defaults() if rule != NO_RULE else {}), **params},
                                         indent=1, ensure_ascii=False)
                params_box = gr.Code(label="parameters (JSON)", value=params_text, language="json", scale=3,
                                     lines=3, elem_id=f"params-{index + 1}")
                gate_box = gr.Textbox(label="gate (optional)", placeholder="code_tests >= 0.01", scale=1,
                                      elem_id=f"gate-{index + 1}",
                                      info="counts only where that rule's reward reaches the number, else 0")
            help_box = gr.Markdown(rule_help(rule))
        # .input, not .change: filling the form from a cloned run sets the rule and its parameters together.
        rule_box.input(lambda r: (rule_defaults_json(r), rule_help(r)), inputs=rule_box,
                       outputs=[params_box, help_box])
        slot_components.append((rule_box, weight_box, params_box, gate_box))
        help_boxes.append(help_box)

    gr.Markdown("### Hyperparameters")
    hyper_components: dict[str, gr.components.Component] = {}
    gpus = machine_gpus()
    with gr.Row(equal_height=True):
        for field, label, kind, extra in HYPERPARAMETERS:
            value = getattr(defaults, field)
            info = RunConfig.model_fields[field].description
            if kind == "gpus":
                component = gr.Textbox(label=f"{label}; this machine: {','.join(gpus)}", value=value, info=info,
                                       placeholder="auto", visible=bool(gpus), elem_id=f"hp-{field}", min_width=180)
            elif kind == "checkbox":
                component = gr.Checkbox(label=label, value=value, info=info, elem_id=f"hp-{field}")
            elif kind == "dropdown":
                component = gr.Dropdown(label=label, value=value, info=info, elem_id=f"hp-{field}", **extra)
            else:
                component = gr.Number(label=label, value=value, info=info, elem_id=f"hp-{field}", min_width=180,
                                      **extra)
            hyper_components[field] = component

    advanced_components: dict[str, gr.components.Component] = {}
    with gr.Accordion("GRPO variants, sampling, eval split, trackers and any other GRPOConfig field", open=False):
        with gr.Row(equal_height=True):
            for field, label, kind, extra in ADVANCED_FIELDS:
                if kind == "mapping":
                    continue
                value = getattr(defaults, field)
                info = RunConfig.model_fields[field].description
                elem_id = f"hp-{field}"
                if kind == "checkbox":
                    component = gr.Checkbox(label=label, value=value, info=info, elem_id=elem_id)
                elif kind == "dropdown":
                    component = gr.Dropdown(label=label, value=value, info=info, elem_id=elem_id, **extra)
                elif kind == "multiselect":
                    component = gr.CheckboxGroup(label=label, value=value, info=info, elem_id=elem_id, **extra)
                elif kind == "dataset":
                    component = gr.Dropdown(label=label, choices=dataset_choices(ctx), value=None, info=info,
                                            elem_id=elem_id)
                    if sync is not None:
                        sync.follow_datasets(component)
                else:
                    component = gr.Number(label=label, value=value, info=info, elem_id=elem_id, min_width=180,
                                          **extra)
                advanced_components[field] = component
        advanced_components["trl_args"] = gr.Code(
            label="other GRPOConfig / TrainingArguments fields (YAML or JSON mapping; fields the dashboard sets are "
            "refused with the reason)", language="yaml", lines=3, elem_id="hp-trl_args",
        )
        trl_args_info = gr.Markdown(trl_args_help(""), elem_id="trl-args-help")
        advanced_components["trl_args"].change(trl_args_help, inputs=advanced_components["trl_args"],
                                               outputs=trl_args_info, show_progress="hidden")

    with gr.Row():
        launch = gr.Button("Launch", variant="primary", elem_id="launch-button")
    launch_status = gr.Markdown(elem_id="launch-status")
    memory = create_memory_panel()
    sweep_slot = gr.Column()  # the Sweep accordion, built once the form's inputs exist (app.tabs.launch.sweep)
    with gr.Accordion("Run config preview (YAML; re-run headless with `grpo-dashboard train run.yaml`)", open=False):
        preview = gr.Code(language="yaml", interactive=False, elem_id="config-preview")

    with gr.Accordion("Try the rules on sample completions (before launching)", open=False):
        gr.Markdown(
            "Give a dataset row (JSON, e.g. `{\"answer\": 42}`) and a group of completions separated by lines of "
            "`---`. The table shows every rule's reward, the weighted total and the group-relative advantage GRPO "
            "would train on."
        )
        with gr.Row():
            bench_row_number = gr.Number(label="pick a dataset row (row number in the chosen dataset, from 0)",
                                         value=0, precision=0, minimum=0, elem_id="bench-row-number", scale=3)
            bench_row_pick = gr.Button("Use this row", elem_id="bench-row-pick", scale=1)
        bench_prompt = gr.Textbox(label="prompt of that row", interactive=False, lines=2, max_lines=8,
                                  elem_id="bench-prompt")
        with gr.Row():
            bench_row = gr.Code(label="dataset row (JSON)", language="json", value='{"answer": 82}', lines=3,
                                elem_id="bench-row")
            bench_completions = gr.Textbox(
                label="completions of one group", lines=8, elem_id="bench-completions",
                value="82\n---\nThe answer is 82.\n---\n81\n---\nI don't know",
            )
        with gr.Row():
            bench_button = gr.Button("Score the group", elem_id="bench-button")
            probe_button = gr.Button("Probe for reward hacking (degenerate completions against these)",
                                     elem_id="probe-button")
        bench_table = gr.Dataframe(interactive=False, elem_id="bench-table")
        bench_status = gr.Markdown(elem_id="bench-status")

    with gr.Accordion("Preflight: will this run learn?", open=False):
        gr.Markdown(
            "Samples a few prompts × G completions from the model with the rules above (no training) and checks "
            "that rewards differ within groups: a group whose completions all score the same has zero advantage "
            "and teaches nothing (DeepSeekMath's group baseline; DAPO drops such groups). Runs in a subprocess; "
            "the first use of the default model converts it (about 30 s)."
        )
        with gr.Row():
            preflight_prompts = gr.Number(label="prompts to sample", value=DEFAULT_PROMPTS, precision=0, minimum=1,
                                          maximum=64, elem_id="preflight-prompts", scale=3)
            preflight_button = gr.Button("Run the preflight", elem_id="preflight-button", scale=1)
        preflight_verdict = gr.Markdown(elem_id="preflight-verdict")
        preflight_table = gr.Dataframe(interactive=False, elem_id="preflight-table")

    slot_inputs = [c for slot in slot_components for c in slot]
    hyper_fields = list(hyper_components)
    advanced_fields = list(advanced_components)
    form_inputs = [dataset, model, run_name, *slot_inputs, *hyper_components.values(),
                   *advanced_components.values()]

    def _config_from(values: tuple) -> RunConfig:
        dataset_id, model_name, name = values[:3]
        flat = values[3 : 3 + SLOT_FIELDS * RULE_SLOTS]
        slots = [tuple(flat[i : i + SLOT_FIELDS]) for i in range(0, len(flat), SLOT_FIELDS)]
        rest = values[3 + SLOT_FIELDS * RULE_SLOTS :]
        hyper = dict(zip(hyper_fields, rest[: len(hyper_fields)], strict=True))
        advanced = dict(zip(advanced_fields, rest[len(hyper_fields) :], strict=True))
        return form_to_config(dataset_id, model_name, name, slots, hyper, advanced)

    def on_preview(*values):
        """Inputs: the whole form. Outputs: YAML preview (or the error)."""
        try:
            config = _config_from(values)
        except (ConfigError, ValueError) as exc:
            return f"# invalid: {exc}"
        return config.to_yaml()

    def on_launch(request: gr.Request, *values):
        """Inputs: the whole form (the login comes first, from Gradio). Outputs: status message."""
        try:
            boundary = boundary_of(ctx, request)
            config = boundary.check_config(_config_from(values))
            check_webhooks(ctx, request, [config.webhook_url])
            submitted = submit_run(ctx.store, config, model_cache_dir=ctx.settings.model_cache_dir,
                                   owner=getattr(request, "username", None), boundary=boundary)
        except (ConfigError, ValueError) as exc:
            return f"❌ **Not launched.** {exc}"
        ctx.launcher.tick()
        run = submitted.run
        note = "".join(f"\n\n⚠️ {w}" for w in submitted.warnings)
        return (
            f"✅ Run **#{run.id} {run.name}** queued: {config.max_steps} steps, "
            f"{config.num_generations} completions per prompt. Follow it in the **Runs** tab.{note}"
        )

    def _bench_inputs(row_text: str, completions_text: str, slot_values: tuple) -> tuple[Any, list[str], list]:
        """(row, completions, specs) from the bench and the rule slots; raises ValueError with the message to show."""
        row = load_json(row_text or "{}", source="dataset row", error=ValueError)
        if not isinstance(row, dict):
            raise ValueError("dataset row: must be a JSON object")
        if len(completions_text or "") > BENCH_MAX_CHARS:
            raise ValueError(f"completions: {len(completions_text):,} characters, more than the {BENCH_MAX_CHARS:,} "
                             "the bench scores at once")
        completions = [c.strip("\n") for c in (completions_text or "").split("\n---\n")]
        if len(completions) > BENCH_MAX_COMPLETIONS:
            raise ValueError(f"completions: {len(completions)} of them, more than the {BENCH_MAX_COMPLETIONS} of "
                             "one group the bench scores")
        specs = []
        for index in range(RULE_SLOTS):
            rule, weight, params, gate = slot_values[SLOT_FIELDS * index : SLOT_FIELDS * index + SLOT_FIELDS]
            if rule and rule != NO_RULE:
                try:
                    specs.append(RewardSpec(rule=rule, weight=float(weight or 0), params=_parse_params(
                        index + 1, rule, params), gate=parse_gate(index + 1, rule, gate)))
                except (ConfigError, ValueError) as exc:
                    raise ValueError(str(exc)) from None
        if not specs:
            raise ValueError("choose at least one reward rule")
        row.setdefault("prompt", "")
        return row, completions, specs

    def on_bench(request: gr.Request, row_text: str, completions_text: str, model_name: str, dataset_id,
                 *slot_values):
        """Inputs: row JSON, completions, model, dataset, rule slots (the login first, from Gradio). Outputs: score
        table, status."""
        try:
            row, completions, specs = _bench_inputs(row_text, completions_text, slot_values)
            specs = boundary_of(ctx, request).check_rewards(specs)  # before any plugin is imported
        except ValueError as exc:
            return None, f"❌ {exc}"  # no table: the last one scored other rules
        specs, opens_think = bench_specs(ctx, specs, model_name, dataset_id)
        try:
            # plugins are user code: scored in a child process, never in the web process
            with time_budget(BENCH_REGEX_BUDGET_S):  # users' regular expressions, in this process
                score = (score_group_isolated if has_plugins(specs) else score_group)(specs, completions, row)
        except Exception as exc:  # noqa: BLE001 - any rule error is shown, not raised
            message = str(exc)
            prefix = f"{type(exc).__name__}: "
            return None, f"❌ {message if message.startswith(prefix) else prefix + message}"
        table = {"completion": [c[:80] for c in completions]}
        for name, rewards in zip(score.names, score.rewards, strict=True):
            table[name] = [None if r is None or r != r else round(r, 6) for r in rewards]
        table["total"] = [round(t, 6) for t in score.total]
        table["advantage"] = [round(a, 4) for a in score.advantages]
        note = " The chat template opens `<think>`: format rules read completions as starting inside it." if (
            opens_think) else ""
        return pd.DataFrame(table), f"{len(completions)} completions scored.{note}"

    def on_probe(request: gr.Request, row_text: str, prompt: str, completions_text: str, *slot_values):
        """Inputs: row JSON, the row's prompt, completions (the real ones), rule slots (the login first, from
        Gradio). Outputs: probe table, status."""
        try:
            row, completions, specs = _bench_inputs(row_text, completions_text, slot_values)
            specs = boundary_of(ctx, request).check_rewards(specs)  # before any plugin is imported
            if prompt and not row.get("prompt"):
                row["prompt"] = prompt
            with time_budget(BENCH_REGEX_BUDGET_S):
                # plugins are user code: scored in a child process, never in the web process
                results = probe_row(specs, row, completions,
                                    scorer=score_group_isolated if has_plugins(specs) else score_group)
        except Exception as exc:  # noqa: BLE001 - any rule error is shown, not raised
            return gr.skip(), f"❌ {exc}"
        table = pd.DataFrame({
            "probe": [r.probe for r in results],
            "completion": [r.text[:40] for r in results],
            "total": [r.total for r in results],
            "best real": [r.best_real for r in results],
            "wins": ["⚠️ yes" if r.flagged else "" for r in results],
            "rule responsible": [r.rule or "" for r in results],
        })
        wins = flagged(results)
        lines = [_probe_line(r) for r in wins]
        status = ("⚠️ **Reward hacking:** degenerate completions are paid for the task or score at or above the best "
                  "real one (gate or reweight the rule):\n" + "\n".join(lines) if lines else
                  f"✅ No degenerate completion earns a task reward or scores at or above the best of these "
                  f"{len(completions)} completions.")
        return table, status

    def on_pick_row(dataset_id, number, *slot_values):
        """Inputs: dataset id, row number, rule slots. Outputs: bench row JSON, the row's prompt, bench status (with
        the answer rules that cannot judge some rows of the dataset)."""
        try:
            row_json, prompt = dataset_row_for_bench(ctx, dataset_id, number)
        except ValueError as exc:
            return gr.skip(), gr.skip(), f"❌ {exc}"
        rules = [slot_values[SLOT_FIELDS * index] for index in range(RULE_SLOTS)]
        coverage = bench_coverage_markdown(ctx, dataset_id, [r for r in rules if r and r != NO_RULE])
        return row_json, prompt, f"Row {int(number)} loaded: its columns are the bench's dataset row.{coverage}"

    def on_preflight(request: gr.Request, num_prompts, *values):
        """Inputs: prompts to sample, the whole form (the login first, from Gradio). Outputs: verdict (Markdown),
        per-rule table; streamed."""
        try:
            boundary = boundary_of(ctx, request)
            config = boundary.check_config(_config_from(values))  # the worker gets the real paths checked
            validate_run_config(ctx.store, config, model_cache_dir=ctx.settings.model_cache_dir, boundary=boundary)
        except (ConfigError, ValueError) as exc:
            yield f"❌ **Preflight not started.** {exc}", gr.skip()
            return
        yield from stream_preflight(ctx, config, num_prompts)

    def on_clone(run_id, request: gr.Request = None):
        """Inputs: run id. Outputs: the whole form (dataset, model, name, rules, hyperparameters), rule help, status.
        A run whose stored config names code or files the login may not use is refused (its files unread)."""
        skip_all = [gr.skip()] * (len(form_inputs) + len(help_boxes))
        if run_id is None:
            return [*skip_all, ""]
        try:
            run = ctx.store.get_run(int(run_id))
            boundary_of(ctx, request).check_stored(run.config or {}, "clone")
            config = parse_run_config(run.config, source=f"run {run_id} config")
            form = config_to_form(config)
        except (ConfigError, ValueError) as exc:
            return [*skip_all, f"❌ {exc}"]
        dataset_value = (gr.update(choices=dataset_choices(ctx), value=form["dataset_id"])
                         if form["dataset_id"] is not None else gr.skip())
        values = [dataset_value, form["model"], f"{config.name or run.name} (clone)"]
        values += [v for slot in form["slots"] for v in slot]
        values += [form["hyper"][field] for field in hyper_fields]
        values += [form["advanced"][field] for field in advanced_fields]
        values += [rule_help(rule) for rule, *_ in form["slots"]]
        notes = "".join(f"\n- ⚠️ {n}" for n in form_omissions(config))
        drift = clone_drift_notes(ctx, run)
        notes += "".join(f"\n- ⚠️ {n}" for n in drift)
        if run.provenance and not drift:
            notes += "\n- ✅ the dataset file, the model and the library versions are as when the run trained."
        return [*values, f"Form filled from run **#{run.id} {run.name}**; change what you like and Launch.{notes}"]

    gr.on(
        triggers=[c.change for c in form_inputs],
        fn=on_preview,
        inputs=form_inputs,
        outputs=preview,
        show_progress="hidden",
    )
    launched = launch.click(on_launch, inputs=form_inputs, outputs=launch_status)

    def on_estimate(request: gr.Request, *values):
        """Inputs: the whole form (the login first, from Gradio). Outputs: the memory estimate."""
        try:
            return fit_markdown(ctx, boundary_of(ctx, request).check_config(_config_from(values)))
        except (ConfigError, ValueError) as exc:
            return f"**No estimate:** {exc}"

    memory["button"].click(on_estimate, inputs=form_inputs, outputs=memory["result"])
    with sweep_slot:
        sweep = create_sweep_launcher(ctx, _config_from, form_inputs, sync)
    bench_button.click(on_bench, inputs=[bench_row, bench_completions, model, dataset, *slot_inputs],
                       outputs=[bench_table, bench_status])
    model.change(lambda name: template_think_markdown(ctx, name), inputs=model, outputs=template_line,
                 show_progress="hidden")
    probe_button.click(on_probe, inputs=[bench_row, bench_prompt, bench_completions, *slot_inputs],
                       outputs=[bench_table, bench_status])
    bench_row_pick.click(on_pick_row, inputs=[dataset, bench_row_number, *slot_inputs],
                         outputs=[bench_row, bench_prompt, bench_status])
    preflight_button.click(on_preflight, inputs=[preflight_prompts, *form_inputs],
                           outputs=[preflight_verdict, preflight_table], **MODEL_JOBS)
    clone.input(on_clone, inputs=clone, outputs=[*form_inputs, *help_boxes, clone_status])
    if sync is not None:
        sync.follow_datasets(dataset)
        sync.follow_runs(clone)
        sync.after(launched)
    return {"dataset": dataset, "model": model, "name": run_name, "launch": launch, "status": launch_status,
            "preview": preview, "bench_table": bench_table, "clone": clone,
            "preflight_verdict": preflight_verdict, "preflight_table": preflight_table, "sweep_button": sweep["button"]}
