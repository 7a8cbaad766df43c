"""The Launch form's values <-> a :class:`RunConfig`, by field name.

The form is a mapping of field name -> value (what :func:`read_form` makes of a Gradio event's inputs): the run
config's own field names (``dataset_id``, ``model``, ``name``, ``num_generations``, ``loss_type``, ...) and, per reward
rule slot ``i`` (1-based), ``rule_i``, ``weight_i``, ``params_i`` (JSON) and ``gate_i`` (``"code_tests >= 0.01"``).
Handlers never slice the form's values by position (LLaMA-Factory's web UI does the same with its ``elem_id``s).

What the fields are comes from :class:`grpo_core.run_config.RunConfig` itself: a field's choices are its ``Literal``
values, its component kind follows its type, its default and help text are the config's. The form only adds labels and
the bounds of its number boxes.
"""

from __future__ import annotations

import json
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal

from grpo_core.bounded_parse import dump_yaml, load_json, load_yaml
from grpo_core.rewards import RewardGate, RewardSpec, get_rule
from grpo_core.run_config import DEFAULT_MODEL, ConfigError, RunConfig, parse_run_config
from grpo_core.trl_fields import CHOICE_FIELDS, GRPO_SECTIONS, describe_trl_field, trl_field

RULE_SLOTS = 4
NO_RULE = "(none)"
SLOT_PARTS = ("rule", "weight", "params", "gate")
"""The fields of one rule slot: rule name, weight, parameters JSON, gate text."""
GATE_PATTERN = re.compile(r"^\s*(\S+)\s*>=\s*([-+0-9.eE]+)\s*$")
DEFAULT_SLOTS = [(spec.rule, spec.weight, spec.params) for spec in RunConfig().rewards]

#: (field, label, extra component kwargs) of the hyperparameters shown in the form; the kind of component, a
#: dropdown's choices, the default and the help text (shown under the label) come from :class:`RunConfig`
#: (:func:`field_kind`). Labels stay short (the field's name, or a few words): what they mean is in the help text.
HYPERPARAMETERS: list[tuple[str, str, dict[str, Any]]] = [
    ("num_generations", "num_generations (G)", {"minimum": 2}),
    ("per_device_train_batch_size", "completions per micro-batch", {"minimum": 1}),
    ("gradient_accumulation_steps", "micro-batches per step", {"minimum": 1}),
    ("max_steps", "max_steps", {"minimum": 1}),
    ("learning_rate", "learning_rate", {}),
    ("beta", "beta (KL)", {"minimum": 0}),
    ("max_completion_length", "max_completion_length", {"minimum": 1}),
    ("temperature", "temperature", {"minimum": 0.01}),
    ("seed", "seed", {}),
    ("use_lora", "LoRA adapter", {}),
    ("lora_r", "LoRA rank r", {"minimum": 1}),
]

#: The fields that only matter on a machine with GPUs: shown only where ``nvidia-smi`` lists some
#: (:func:`grpo_core.training.gpus.machine_gpus`); elsewhere hidden, still carrying a cloned run's values.
GPU_FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    ("device", "device", {}),
    ("num_processes", "num_processes", {"minimum": 1}),
    ("gpus", "GPUs (CUDA_VISIBLE_DEVICES)", {}),
    ("use_vllm", "vLLM generation", {}),
]

#: vLLM's settings: shown only while vLLM generation is on (and the machine has GPUs).
VLLM_FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    ("vllm_mode", "vllm_mode", {}),
    ("vllm_gpu_memory_utilization", "vllm_gpu_memory_utilization", {"minimum": 0.01, "maximum": 1}),
    ("vllm_tensor_parallel_size", "vllm_tensor_parallel_size", {"minimum": 1}),
]

#: TRL's GRPO fields under the form's GRPO headings (:data:`grpo_core.trl_fields.GRPO_SECTIONS`), labelled by their
#: TRL names; help text, default and choices are TRL's (the run config reads them from the snapshot).
GRPO_FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    (name, name, {"minimum": 0} if name not in CHOICE_FIELDS else {})
    for _heading, names in GRPO_SECTIONS for name in names
]

#: The "sampling, eval and trackers" box, as above.
ADVANCED_FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    ("mask_truncated_completions", "mask_truncated_completions", {}),
    ("steps_per_generation", "steps_per_generation", {"minimum": 0}),
    ("top_k", "top_k", {"minimum": 0}),
    ("min_p", "min_p (0 = off)", {"minimum": 0, "maximum": 1}),
    ("repetition_penalty", "repetition_penalty", {"minimum": 0.01}),
    ("lr_scheduler_type", "lr_scheduler_type", {}),
    ("num_train_epochs", "num_train_epochs", {"minimum": 0}),
    ("eval_fraction", "eval_fraction", {"minimum": 0, "maximum": 0.9}),
    ("eval_dataset_id", "eval dataset", {}),
    ("eval_steps", "eval_steps", {"minimum": 1}),
    ("report_to", "also report to", {}),
    ("trl_args", "other GRPOConfig fields (YAML or JSON mapping)", {}),
]
#: The "Tools" group: the library's tools (a checkbox each, with its description), the user's own tool functions
#: (one plugin target a line) and environment class (TRL's ``environment_factory``), and the iteration limit.
TOOL_FIELDS: list[tuple[str, str, dict[str, Any]]] = [
    ("tools", "library tools the policy may call", {}),
    ("tool_plugins", "your own tool functions (plugins, one 'file.py:function' a line)", {}),
    ("environment", "your environment class (plugin, 'file.py:Class')", {}),
    ("max_tool_calling_iterations", "max_tool_calling_iterations (0 = no limit)", {"minimum": 0}),
]
#: Every config field the form shows, in the form's order.
CONFIG_FIELDS = HYPERPARAMETERS + GPU_FIELDS + VLLM_FIELDS + GRPO_FIELDS + ADVANCED_FIELDS + TOOL_FIELDS
#: Number fields whose default is ``None`` (off): an empty box reaches the server as 0, which means the same.
ZERO_MEANS_UNSET = ("epsilon_high", "steps_per_generation", "min_p", "delta", "off_policy_mask_threshold",
                    "vllm_importance_sampling_clip_min", "max_tool_calling_iterations")
#: Fields whose component is not the one their type suggests: a GPU list, a stored dataset, a YAML mapping.
SPECIAL_KINDS = {"gpus": "gpus", "dataset_id": "dataset", "eval_dataset_id": "dataset", "trl_args": "mapping",
                 "tool_plugins": "lines"}
#: Most lines the form reads from a ``lines`` field (a run names a handful of tool plugins).
MAX_FORM_LINES = 32

FormKind = Literal["checkbox", "dropdown", "multiselect", "integer", "number", "text", "gpus", "dataset", "mapping",
                   "lines"]


def slot_field(part: str, index: int) -> str:
    """The form's name of a rule slot's ``part`` (one of :data:`SLOT_PARTS`), slot ``index`` counted from 1."""
    return f"{part}_{index}"


SLOT_FIELDS = [slot_field(part, index) for index in range(1, RULE_SLOTS + 1) for part in SLOT_PARTS]
FORM_FIELDS = ["dataset_id", "model", "name", *SLOT_FIELDS,
               *(f for f, *_ in CONFIG_FIELDS)]
"""Every field of the Launch form, by name."""


def _bare_type(field: str) -> Any:
    """A config field's type without ``| None``."""
    annotation = RunConfig.model_fields[field].annotation
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        kept = [arg for arg in typing.get_args(annotation) if arg is not type(None)]
        annotation = kept[0] if len(kept) == 1 else annotation
    return annotation


def field_kind(field: str) -> FormKind:
    """The component a config field gets on the form, from its type: ``bool`` a checkbox, a ``Literal`` a dropdown,
    a list of ``Literal`` a checkbox group, ``int``/``float`` a number box (whole numbers for ``int``), else text;
    :data:`SPECIAL_KINDS` are their own."""
    if field in SPECIAL_KINDS:
        return SPECIAL_KINDS[field]  # type: ignore[return-value]
    if field in CHOICE_FIELDS:
        return "dropdown"  # TRL's text field of a closed set of values
    annotation = _bare_type(field)
    if annotation is bool:
        return "checkbox"
    if typing.get_origin(annotation) is Literal:
        return "dropdown"
    if typing.get_origin(annotation) is list and typing.get_origin(typing.get_args(annotation)[0]) is Literal:
        return "multiselect"
    return {int: "integer", float: "number"}.get(annotation, "text")  # type: ignore[return-value]


def field_choices(field: str) -> list[Any]:
    """The values a ``Literal`` (or list of ``Literal``) config field allows, as :class:`RunConfig` declares them.

    Raises:
        ValueError: the field declares no choices.
    """
    if field in CHOICE_FIELDS:
        return list(trl_field(field).choices or ())  # the values TRL documents (the snapshot)
    annotation = _bare_type(field)
    if typing.get_origin(annotation) is list:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) is not Literal:
        raise ValueError(f"{field}: the run config declares no choices")
    return list(typing.get_args(annotation))


def field_help(field: str) -> str | None:
    """The config field's help text (its ``description``)."""
    return RunConfig.model_fields[field].description


#: The longest help text shown under a field's label; a longer one (TRL's help runs to paragraphs) shows its first
#: sentence there, and the whole text under the field's heading (:func:`grpo_help_markdown`).
BRIEF_HELP_CHARS = 240


def brief_help(field: str) -> str:
    """The field's help text, or its first sentence (at most :data:`BRIEF_HELP_CHARS` characters) when longer."""
    text = field_help(field) or ""
    if len(text) <= BRIEF_HELP_CHARS:
        return text
    first = re.split(r"(?<=[.!?])\s", text, maxsplit=1)[0]
    return first if len(first) <= BRIEF_HELP_CHARS else first[: BRIEF_HELP_CHARS - 1] + "…"


def grpo_help_markdown(fields: tuple[str, ...]) -> str:
    """Markdown: TRL's whole help text of each of ``fields``, with its default and choices, in a folded block."""
    lines = []
    for name in fields:
        spec = trl_field(name)
        choices = f"; one of {', '.join(f'`{c}`' for c in spec.choices)}" if spec.choices else ""
        lines.append(f"- **`{name}`** (`{spec.type}`, TRL's default `{spec.default!r}`{choices}): {spec.help}")
    return "<details><summary>TRL's help for these fields</summary>\n\n" + "\n".join(lines) + "\n\n</details>"


def read_form(components: Mapping[str, Any], values: Mapping[Any, Any]) -> dict[str, Any]:
    """The values of a Gradio event given its inputs as a set (``values``: component -> value), keyed by the names
    ``components`` (name -> component) gives them; components not in ``values`` are left out."""
    return {name: values[component] for name, component in components.items() if component in values}


def lines_text(values: list[str]) -> str:
    """A list field (``tool_plugins``) as the form's text, one value a line."""
    return "\n".join(values)


def parse_lines_text(field: str, text: Any) -> list[str]:
    """The form's text of a list field (``tool_plugins``) as its values: one a line, blank lines and surrounding
    spaces dropped.

    Raises:
        ConfigError: not text, or more than :data:`MAX_FORM_LINES` values; the message names the field.
    """
    if isinstance(text, (list, tuple)):
        text = "\n".join(str(item) for item in text)
    if not isinstance(text, str):
        raise ConfigError(f"{field}: write one value a line")
    values = [line.strip() for line in text.splitlines() if line.strip()]
    if len(values) > MAX_FORM_LINES:
        raise ConfigError(f"{field}: {len(values)} lines, more than the {MAX_FORM_LINES} the form takes")
    return values


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


def parse_params(index: int, rule: str, text: str | None) -> dict[str, Any]:
    """A slot's parameters from its JSON text (blank: none).

    Raises:
        ConfigError: not JSON (with line and column) or not an object; the message names the slot.
    """
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


def form_rules(form: Mapping[str, Any]) -> list[str]:
    """The rule names chosen in the form's slots, in slot order (empty slots left out)."""
    rules = [form.get(slot_field("rule", index)) for index in range(1, RULE_SLOTS + 1)]
    return [rule for rule in rules if rule and rule != NO_RULE]


def reward_specs(form: Mapping[str, Any], *, blank_weight: float = 1.0) -> list[RewardSpec]:
    """The form's reward rules, one per slot with a rule chosen; a blank weight counts as ``blank_weight``.

    Raises:
        ConfigError: a slot's parameters or gate is invalid; the message names the slot and the rule.
        ValueError: a weight is not a number, or a rule spec is refused (pydantic's message).
    """
    specs = []
    for index in range(1, RULE_SLOTS + 1):
        rule, weight, params, gate = (form.get(slot_field(part, index)) for part in SLOT_PARTS)
        if not rule or rule == NO_RULE:
            continue
        specs.append(RewardSpec(rule=rule, weight=float(blank_weight if weight in (None, "") else weight),
                                params=parse_params(index, rule, params), gate=parse_gate(index, rule, gate)))
    return specs


def form_to_config(form: Mapping[str, Any]) -> RunConfig:
    """Build a :class:`RunConfig` from the form's values, keyed by field name (:data:`FORM_FIELDS`; any may be
    missing). Empty values keep the config's defaults; a whole number box's float becomes an ``int``; ``trl_args``
    is YAML/JSON text, ``tool_plugins`` one target a line; a 0 in a :data:`ZERO_MEANS_UNSET` field means "off"
    (``None``).

    Raises:
        ConfigError: a field is invalid; the message names it (and the rule slot).
        ValueError: a weight is not a number.
    """
    dataset_id = form.get("dataset_id")
    data: dict[str, Any] = {
        "name": form.get("name") or "",
        "model": (form.get("model") or "").strip() or DEFAULT_MODEL,
        "dataset_id": int(dataset_id) if dataset_id is not None else None,
        "rewards": [spec.model_dump() for spec in reward_specs(form)],
    }
    for field, *_ in CONFIG_FIELDS:
        value = form.get(field)
        if field == "trl_args" and field in form:
            value = parse_trl_args_text(value)
        elif field_kind(field) == "lines" and field in form:
            value = parse_lines_text(field, value or "")
        elif field == "environment" and isinstance(value, str):
            value = value.strip()
        elif field in ZERO_MEANS_UNSET and value == 0:
            value = None
        if value is None or value == "":
            continue
        if RunConfig.model_fields[field].annotation is int and isinstance(value, float):
            value = int(value)
        data[field] = value
    return parse_run_config(data, source="launch form")


def config_to_form(config: RunConfig) -> dict[str, Any]:
    """The form's values for ``config`` by field name (:data:`FORM_FIELDS`): the inverse of :func:`form_to_config`.

    Each slot's parameters are JSON with the rule's defaults filled in; unused slots are ``(none)``; ``trl_args`` is
    YAML text; ``tool_plugins`` one target a line. Rules past the :data:`RULE_SLOTS`-th, rule metric names and fields the form does not show are left
    out (:func:`form_omissions`). ``form_to_config(config_to_form(c))`` equals ``c`` for any config the form can
    express.
    """
    form: dict[str, Any] = {"dataset_id": config.dataset_id, "model": config.model, "name": config.name}
    for index in range(1, RULE_SLOTS + 1):
        values: tuple[Any, ...] = (NO_RULE, 1.0, "{}", "")
        if index <= len(config.rewards):
            spec = config.rewards[index - 1]
            params = {**get_rule(spec.rule).defaults(), **spec.params}
            values = (spec.rule, spec.weight, json.dumps(params, indent=1, ensure_ascii=False), gate_text(spec.gate))
        form |= {slot_field(part, index): value for part, value in zip(SLOT_PARTS, values, strict=True)}
    for field, *_ in CONFIG_FIELDS:
        if field == "trl_args":
            form[field] = trl_args_text(config.trl_args)
        elif field_kind(field) == "lines":
            form[field] = lines_text(getattr(config, field))
        elif field in ZERO_MEANS_UNSET and getattr(config, field) is None:
            form[field] = 0  # off, as the box shows it when the form opens (a None leaves the box blank)
        else:
            form[field] = getattr(config, field)
    return form


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
    shown = set(FORM_FIELDS) | {"dataset_path", "rewards"}
    defaults = RunConfig()
    hidden = [
        f"{field}={getattr(config, field)!r}"
        for field in RunConfig.model_fields
        if field not in shown and getattr(config, field) != getattr(defaults, field)
    ]
    if hidden:
        notes.append("not on the form, so back to their defaults: " + ", ".join(hidden))
    return notes
