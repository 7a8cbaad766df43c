"""The reward rule registry: rule name -> factory, parameters and description.

A *reward rule* is a named, parametrised recipe that builds a reward function with TRL's signature::

    reward_func(completions: list[str] | list[list[dict]], **columns) -> list[float | None]

(``completions`` holds one entry per completion of the batch; each dataset column arrives as a list of the same
length through ``**columns``, as do TRL's ``prompts``, ``completion_ids`` and ``trainer_state``; ``None`` means "the
rule does not apply to this completion"). TRL passes every argument by keyword (``completions=`` included). The registry is data: the Launch form of the dashboard is generated from
it, so adding a rule is one factory and one :func:`register` call.

Reward functions built here are picklable (callable class instances, never closures or lambdas), because they
cross process boundaries (the worker, ``accelerate launch``, the sandbox pool). Rule modules never import torch.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from grpo_core.tools.turns import final_assistant_text, is_multi_turn

ParamType = Literal["float", "int", "str", "bool", "choice", "text"]
RewardFunc = Callable[..., list[float | None]]


@dataclass(frozen=True)
class RuleParam:
    """One parameter of a reward rule, as shown in the Launch form.

    Attributes:
        name: keyword argument name passed to the rule's factory.
        type: ``float``, ``int``, ``str`` (one line), ``text`` (multi-line), ``bool`` or ``choice``.
        default: value used when the user gives none.
        help: one line shown beside the field.
        choices: allowed values when ``type == "choice"``.
    """

    name: str
    type: ParamType
    default: Any
    help: str = ""
    choices: tuple[Any, ...] = ()

    def coerce(self, value: Any) -> Any:
        """Convert a value from a form or a YAML file to this parameter's type.

        Raises:
            ValueError: the value cannot be converted, or is not one of ``choices``; the message names the parameter.
        """
        if value is None or value == "":
            return self.default
        try:
            if self.type == "float":
                return float(value)
            if self.type == "int":
                if isinstance(value, float) and not value.is_integer():
                    raise ValueError(f"{value!r} is not a whole number")
                return int(value)
            if self.type == "bool":
                if isinstance(value, str):
                    lowered = value.strip().lower()
                    if lowered in {"true", "1", "yes", "on"}:
                        return True
                    if lowered in {"false", "0", "no", "off"}:
                        return False
                    raise ValueError(f"{value!r} is not true or false")
                return bool(value)
            if self.type == "choice":
                if value not in self.choices:
                    raise ValueError(f"{value!r} is not one of {list(self.choices)}")
                return value
            return str(value)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"parameter {self.name!r}: {exc}") from None


@dataclass(frozen=True)
class RewardRule:
    """A registered reward rule.

    Attributes:
        name: registry key, also the default reward function name, so TRL logs it as ``rewards/<name>/mean``.
        description: one line for the UI.
        factory: ``factory(**params) -> reward function`` (a picklable callable).
        params: the factory's parameters.
        columns: dataset columns the rule reads (e.g. ``("answer",)``); the UI warns when a dataset lacks them.
        category: grouping in the UI (``answer``, ``format``, ``code``, ``length``, ``tools``, ``plugin``).
    """

    name: str
    description: str
    factory: Callable[..., RewardFunc]
    params: tuple[RuleParam, ...] = ()
    columns: tuple[str, ...] = ()
    category: str = "answer"

    def build(self, params: dict[str, Any] | None = None) -> RewardFunc:
        """Build the reward function with ``params`` coerced to their types and defaults filled in.

        Raises:
            ValueError: an unknown parameter name, or a value of the wrong type.
        """
        params = dict(params or {})
        known = {p.name: p for p in self.params}
        unknown = sorted(set(params) - set(known))
        if unknown:
            raise ValueError(f"rule {self.name!r} has no parameter {unknown[0]!r}; its parameters are {sorted(known)}")
        kwargs = {name: spec.coerce(params.get(name, spec.default)) for name, spec in known.items()}
        return self.factory(**kwargs)

    def defaults(self) -> dict[str, Any]:
        """Parameter name -> default value."""
        return {p.name: p.default for p in self.params}


_REGISTRY: dict[str, RewardRule] = {}


def register(rule: RewardRule) -> RewardRule:
    """Add ``rule`` to the registry and return it.

    Raises:
        ValueError: a rule with that name is already registered.
    """
    if rule.name in _REGISTRY:
        raise ValueError(f"reward rule {rule.name!r} is already registered")
    _REGISTRY[rule.name] = rule
    return rule


def get_rule(name: str) -> RewardRule:
    """Look a rule up by name.

    Raises:
        ValueError: no such rule; the message lists the known rules.
    """
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown reward rule {name!r}; known rules: {', '.join(sorted(_REGISTRY))}") from None


@dataclass(frozen=True)
class MissingColumn:
    """A reward rule that reads a dataset column the data at hand lacks (:func:`first_missing_column`).

    Attributes:
        position: the rule's place in the run's list of rules, from 1.
        rule: the rule's name.
        column: the first column it reads that is not there.
    """

    position: int
    rule: str
    column: str


#: Columns a rule reads under another name where its own is absent: ``code_tests`` reads open-r1's
#: ``verification_info`` when a dataset has no ``tests`` column.
COLUMN_ALIASES: dict[str, tuple[str, ...]] = {"tests": ("verification_info",)}


def first_missing_column(rules: Iterable[str], columns: Collection[str]) -> MissingColumn | None:
    """The first of ``rules`` (rule names, in the run's order) that reads a column not in ``columns`` (a dataset's,
    an eval dataset's or one row's column names), or ``None`` when every rule finds its columns. The one check of
    "a rule reads a column the dataset lacks": the launch's validation and the try-the-model request word it each.

    Raises:
        ValueError: a name is not a registered rule (:func:`get_rule`).
    """
    for position, name in enumerate(rules, start=1):
        missing = [column for column in get_rule(name).columns
                   if column not in columns and not any(alias in columns for alias in COLUMN_ALIASES.get(column, ()))]
        if missing:
            return MissingColumn(position=position, rule=name, column=missing[0])
    return None


def all_rules() -> list[RewardRule]:
    """Every registered rule, sorted by category then name."""
    return sorted(_REGISTRY.values(), key=lambda r: (r.category, r.name))


def completion_text(completion: str | Sequence[dict] | Any) -> str:
    """The text of one completion that a rule judges, standard (``str``) or conversational
    (``[{"role": ..., "content": ...}]``).

    For conversational completions the ``content`` of every message is joined with newlines, except in a multi-turn
    rollout (TRL's ``tools`` / ``environment_factory``: a tool call, parsed or not, or a tool message): there it is
    the model's **final assistant turn** (:func:`grpo_core.tools.turns.final_assistant_text`), so that neither a
    tool's output nor a call's arguments can pay a rule. ``None`` gives ``""``.
    """
    if completion is None:
        return ""
    if isinstance(completion, str):
        return completion
    if isinstance(completion, dict):
        return str(completion.get("content", ""))
    if is_multi_turn(completion):
        return final_assistant_text(completion)
    parts = []
    for message in completion:
        if isinstance(message, dict):
            content = message.get("content", "")
            if isinstance(content, list):  # multimodal content blocks; an image block's "text" may be None (Arrow
                # gives every block of a column every key)
                content = "".join(block["text"] for block in content
                                  if isinstance(block, dict) and isinstance(block.get("text"), str))
            parts.append(str(content))
        else:
            parts.append(str(message))
    return "\n".join(parts)
