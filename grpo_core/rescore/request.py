"""A rescoring request, read as untrusted input: which groups of a run to re-score, and with which composition.

The same request comes from the workbench, the public API (``/rescore_run``) and ``grpo-dashboard rescore``. Its
bounds: at most :data:`MAX_RULES` rules (each a :class:`~grpo_core.rewards.compose.RewardSpec`, validated by
building it), a step range inside the run's recorded steps, a sample of at most :data:`MAX_GROUPS` groups and
:data:`MAX_COMPLETIONS` completions in all (a larger selection is refused, never silently cut: say ``sample``), and
the rules' text under :mod:`grpo_core.bounded_parse`'s limits. Plugin targets are checked against the caller's
boundary by the job (:mod:`grpo_core.rescore.job`), before anything is imported.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import pydantic

from grpo_core.bounded_parse import ParseError, load_yaml
from grpo_core.rescore.advantages import normalise_scale
from grpo_core.rewards.compose import RewardSpec, build_reward_funcs

MAX_RULES = 16
"""The most reward rules one rescoring composes."""

MAX_GROUPS = 5_000
"""The most groups one rescoring scores."""

MAX_COMPLETIONS = 50_000
"""The most completions one rescoring scores (about 5 s of text rules per 10,000 on one core)."""


class RescoreError(ValueError):
    """A rescoring request that cannot be served; the message says what is wrong and where."""


class RescoreRequest(pydantic.BaseModel):
    """What to re-score and how.

    Attributes:
        run_id: the run whose recorded groups are scored.
        rewards: the new composition (rule, weight, params, name, gate), 1 to :data:`MAX_RULES` rules.
        first_step, last_step: the step range, both included; ``None``: from the first or to the last recorded step.
        sample: score at most this many groups, drawn evenly at random (``seed``) from the range; ``None``: all.
        seed: the sample's seed.
        scale_rewards: ``"group"``, ``"batch"`` or ``"none"``; ``None``: the run's own ``scale_rewards``.
    """

    model_config = pydantic.ConfigDict(extra="forbid")

    run_id: int = pydantic.Field(ge=1)
    rewards: list[RewardSpec] = pydantic.Field(min_length=1, max_length=MAX_RULES)
    first_step: int | None = pydantic.Field(default=None, ge=0)
    last_step: int | None = pydantic.Field(default=None, ge=0)
    sample: int | None = pydantic.Field(default=None, ge=1, le=MAX_GROUPS)
    seed: int = 0
    scale_rewards: str | None = None

    @pydantic.model_validator(mode="after")
    def _check(self) -> RescoreRequest:
        if self.first_step is not None and self.last_step is not None and self.first_step > self.last_step:
            raise ValueError(f"first_step {self.first_step} is after last_step {self.last_step}")
        if self.scale_rewards is not None:
            self.scale_rewards = normalise_scale(self.scale_rewards)
        for index, spec in enumerate(self.rewards, start=1):
            if spec.rule == "reward_model":
                raise ValueError(f"reward rule {index} (reward_model): the workbench does not re-score with a reward "
                                 "model (it runs in the training worker, on its GPU)")
        try:
            build_reward_funcs(self.rewards)  # unknown rule, bad parameter, bad gate: refused here, by position
        except ValueError as exc:  # a factory may raise without a message: say which composition step refused
            raise ValueError(str(exc) or f"the reward composition was refused ({type(exc).__name__} without a "
                             "message): check each rule's parameters and gate") from None
        return self


def parse_request(values: Mapping[str, Any]) -> RescoreRequest:
    """:class:`RescoreRequest` from plain values; ``RescoreError`` naming each bad field."""
    try:
        return RescoreRequest.model_validate(dict(values))
    except pydantic.ValidationError as exc:
        raise RescoreError(f"rescoring request: {'; '.join(_problem(e) for e in exc.errors())}") from None


def _problem(error: Mapping[str, Any]) -> str:
    """One pydantic error in plain words: ``"<field>: <what is wrong>"``, or only what is wrong for a check of the
    whole request (no field: never "request: Value error, ..."), pydantic's "Value error, " prefix dropped."""
    message = str(error.get("msg", "")).strip()
    for prefix in ("Value error,", "Assertion failed,"):
        if message.startswith(prefix):
            message = message[len(prefix):].strip()
    if not message or message in ("Value error", "Assertion failed"):
        message = f"refused without a reason ({error.get('type', 'value_error')}): check each rule's parameters"
    where = ".".join(map(str, error.get("loc", ())))
    return f"{where}: {message}" if where else message


def parse_rules_text(text: str, *, source: str = "rules") -> list[dict[str, Any]]:
    """A composition written as YAML or JSON: a list of rules, or a mapping with a ``rewards:`` list (a run config
    or a saved preset). Read under :func:`grpo_core.bounded_parse.load_yaml`'s limits.

    Raises:
        RescoreError: not YAML, empty, or not a list of mappings.
    """
    try:
        value = load_yaml(text or "", source=source)
    except ParseError as exc:
        raise RescoreError(str(exc)) from None
    if isinstance(value, Mapping):
        value = value.get("rewards")
    if not isinstance(value, list) or not value:
        raise RescoreError(f"{source}: give a list of reward rules (or a mapping with a 'rewards:' list)")
    if not all(isinstance(item, Mapping) for item in value):
        raise RescoreError(f"{source}: each reward rule is a mapping (rule, weight, params, name, gate)")
    if len(value) > MAX_RULES:
        raise RescoreError(f"{source}: {len(value)} rules, at most {MAX_RULES}")
    return [dict(item) for item in value]


def select_steps(recorded: Sequence[int], first_step: int | None, last_step: int | None) -> list[int]:
    """The recorded steps inside ``[first_step, last_step]``; ``RescoreError`` when none is."""
    chosen = [s for s in recorded if (first_step is None or s >= first_step) and (last_step is None or s <= last_step)]
    if not chosen:
        span = f"{recorded[0]}-{recorded[-1]}" if recorded else "none"
        raise RescoreError(f"no recorded groups in steps {first_step if first_step is not None else 'first'}-"
                           f"{last_step if last_step is not None else 'last'} (recorded steps: {span})")
    return chosen


def sample_groups(keys: Sequence[Any], sample: int | None, seed: int) -> list[Any]:
    """``keys`` (in order), or ``sample`` of them drawn with ``seed``, kept in their order."""
    if sample is None or sample >= len(keys):
        return list(keys)
    picked = set(random.Random(seed).sample(range(len(keys)), sample))
    return [key for index, key in enumerate(keys) if index in picked]


def check_size(num_groups: int, num_completions: int) -> None:
    """Refuse a selection over :data:`MAX_GROUPS` groups or :data:`MAX_COMPLETIONS` completions."""
    if num_groups > MAX_GROUPS or num_completions > MAX_COMPLETIONS:
        raise RescoreError(f"the selection holds {num_groups} groups and {num_completions} completions; at most "
                           f"{MAX_GROUPS} groups and {MAX_COMPLETIONS} completions: narrow the steps or set sample")

