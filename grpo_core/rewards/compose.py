"""Weighted composition of reward rules, and group scoring that mirrors TRL's GRPOTrainer.

A run's rewards are a list of :class:`RewardSpec` (rule name, weight, parameters, optional metric name, optional
:class:`RewardGate`). :func:`build_reward_funcs` turns them into what ``GRPOTrainer`` takes (``reward_funcs`` and
``GRPOConfig.reward_weights``); :func:`score_group` scores one prompt's group of completions the way the trainer
would, for the dashboard's try-out bench, without torch.

A *gate* makes a rule count only where another rule's reward reaches a threshold: with ``gate: {rule: code_tests,
min: 0.01}`` on ``code_style``, style is rewarded only for code that passes at least one test, so a one-line print
that passes nothing cannot win its group on style and length alone. The gated rule stays its own reward function
(TRL still logs ``rewards/<name>/mean``); it returns 0.0 where its gate fails, and its own reward elsewhere.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic

from grpo_core.rewards.logged import RewardLogs
from grpo_core.rewards.registry import RewardFunc, get_rule

logger = logging.getLogger(__name__)


def _finite(what: str, value: float) -> float:
    """``value`` unchanged when finite; ``ValueError`` naming ``what`` when it is NaN or infinite."""
    if not math.isfinite(value):
        raise ValueError(f"{what} must be a finite number, got {value}")
    return value


class RewardGate(pydantic.BaseModel):
    """A condition on another rule of the same run: the gated rule counts only where it holds.

    Attributes:
        rule: the metric name of the gating rule in the same run (its ``name``, else its rule name; a rule used
            twice is ``numeric_answer_2`` on its second use).
        min: the gate holds for a completion whose gating reward is at least this; a ``None`` gating reward (the
            rule did not apply) fails the gate.
    """

    model_config = pydantic.ConfigDict(extra="forbid")

    rule: str = pydantic.Field(min_length=1)
    min: float = 0.0

    @pydantic.field_validator("min")
    @classmethod
    def _finite_min(cls, value: float) -> float:
        return _finite("gate min", value)


class RewardSpec(pydantic.BaseModel):
    """One reward rule of a run, as stored in its config.

    Attributes:
        rule: registry name (see :func:`grpo_core.rewards.all_rules`).
        weight: its weight in the weighted sum of rewards (TRL's ``reward_weights``); any finite number, negative
            allowed.
        params: the rule's parameters; missing ones take their defaults.
        name: metric name (TRL logs ``rewards/<name>/mean``); default the reward function's own name, which is
            the rule name for every built-in rule except ``plugin`` (its ``name`` parameter or function name).
        gate: when set, the rule's reward counts only where another rule's reward reaches ``gate.min``; elsewhere
            it is 0.0 (see :class:`RewardGate`).
    """

    model_config = pydantic.ConfigDict(extra="forbid")

    rule: str = pydantic.Field(min_length=1)
    weight: float = 1.0
    params: dict[str, Any] = pydantic.Field(default_factory=dict)
    name: str | None = None
    gate: RewardGate | None = None

    @pydantic.field_validator("weight")
    @classmethod
    def _finite_weight(cls, weight: float) -> float:
        return _finite("weight", weight)

    @pydantic.field_validator("name")
    @classmethod
    def _blank_name_is_none(cls, name: str | None) -> str | None:
        return name.strip() or None if name is not None else None


def _as_spec(index: int, spec: RewardSpec | Mapping[str, Any]) -> RewardSpec:
    if isinstance(spec, RewardSpec):
        return spec
    try:
        return RewardSpec.model_validate(spec)
    except pydantic.ValidationError as exc:
        rule = spec.get("rule", "?") if isinstance(spec, Mapping) else "?"
        problems = "; ".join(f"{'.'.join(map(str, e['loc'])) or 'spec'}: {e['msg']}" for e in exc.errors())
        raise ValueError(f"reward rule {index} ({rule}): {problems}") from None


_NOT_KEYED = ("trainer_state", "log_extra", "log_metric")


class _LastCallMemo:
    """A reward function that remembers its last call, so a gate reading it does not run it twice (picklable).

    TRL calls every reward function of a batch with the same arguments, one after the other; the gating rule and the
    gates that read it share one instance, so an expensive rule (``code_tests`` runs a sandbox) runs once per batch.
    The key is the ``repr`` of every argument except the trainer state and the logging callbacks.
    """

    def __init__(self, func: RewardFunc) -> None:
        self.func = func
        self.__name__ = getattr(func, "__name__", type(func).__name__)
        self._key: str | None = None
        self._value: list[float | None] = []

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        key = repr((completions, sorted((k, v) for k, v in kwargs.items() if k not in _NOT_KEYED)))
        if key != self._key:
            self._value = list(self.func(completions=completions, **kwargs))
            self._key = key
        return list(self._value)

    def __getstate__(self) -> dict[str, Any]:
        return {"func": self.func, "__name__": self.__name__, "_key": None, "_value": []}


class GatedReward:
    """A reward function that returns ``func``'s reward where ``gate``'s reward is at least ``threshold``, else 0.0.

    ``None`` from ``func`` stays ``None`` (the rule did not apply); ``None`` from ``gate`` fails the gate. Picklable.
    """

    def __init__(self, func: RewardFunc, gate: RewardFunc, threshold: float) -> None:
        self.func = func
        self.gate = gate
        self.threshold = threshold
        self.__name__ = getattr(func, "__name__", type(func).__name__)

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        own = self.func(completions=completions, **kwargs)
        gate = self.gate(completions=completions, **kwargs)
        return [
            None if r is None else (r if g is not None and g >= self.threshold else 0.0)
            for r, g in zip(own, gate, strict=True)
        ]


def _apply_gates(specs: Sequence[RewardSpec], funcs: list[RewardFunc], names: list[str]) -> list[RewardFunc]:
    """``funcs`` with each gated spec's function wrapped in a :class:`GatedReward` reading its gating rule.

    Raises:
        ValueError: a gate names no rule of the run, names its own rule, or names a rule that is itself gated.
    """
    gated = list(funcs)
    memos: dict[int, _LastCallMemo] = {}
    for index, spec in enumerate(specs):
        if spec.gate is None:
            continue
        where = f"reward rule {index + 1} ({spec.rule})"
        if spec.gate.rule not in names:
            raise ValueError(f"{where}: its gate names {spec.gate.rule!r}, which is not a rule of this run "
                             f"(rules: {', '.join(names)})")
        target = names.index(spec.gate.rule)
        if target == index:
            raise ValueError(f"{where}: a rule cannot gate itself")
        if specs[target].gate is not None:
            raise ValueError(f"{where}: its gate {spec.gate.rule!r} is itself gated; gate on an ungated rule")
        if target not in memos:
            memos[target] = _LastCallMemo(funcs[target])
            gated[target] = memos[target]
        gated[index] = GatedReward(funcs[index], memos[target], spec.gate.min)
    return gated


REWARD_ERRORS_KEY = "reward_errors"
"""Key of a recorded group's ``extra``: ``{completion index (str): {reward function: error}}`` for the completions a
reward function failed on (the recorder fills it from :data:`REWARD_ERRORS_PREFIX` columns); Inspect badges them."""

REWARD_ERRORS_PREFIX = "reward_errors/"
"""``log_extra`` column of :class:`GuardedReward`: ``reward_errors/<name>``, the error per completion (``""``: none)."""


REWARD_CALL_TIMEOUT_S = 900.0
"""Default wall-clock limit of one call of a reward function in the trainer (a batch): past it the call is an error."""


class RewardTimeout(Exception):
    """A reward function did not return within its time limit."""


class GuardedReward:
    """A reward function whose failure is its own outcome, not a 0: what the trainer calls.

    When ``func`` raises (an ``Exception``), returns a list of the wrong length, or takes longer than ``timeout_s``
    seconds (its rewards are then dropped), every completion of the call gets ``None``, which TRL turns into NaN and leaves out of
    the nan-summed total and of the group's mean and std (as for a rule that does not apply; TRL's ``GRPOTrainer``
    ``_calculate_rewards``/``_generate_and_score_completions``), and the count of those completions is logged through
    TRL's ``log_metric`` as ``rewards/<name>/errors`` (TRL averages a metric over a logging step; 0 is logged on calls
    that succeed, so the series is there from the first step). Each errored completion is also marked in the
    completions table through ``log_extra`` (column ``reward_errors/<name>``: the error's type and message, ``""``
    where the rule ran), which Inspect shows as a badge. ``timeout_s=None``: no limit. What the function itself logs
    through ``log_extra`` / ``log_metric`` is checked and passed on by :class:`grpo_core.rewards.logged.RewardLogs`.

    The call runs in the caller's thread (rules such as math-verify's parser set ``signal.alarm`` timeouts, which work
    in the main thread only), so a function that never returns cannot be stopped here: the run then stalls, which its
    heartbeat shows. A ``MemoryError`` is not the rule's outcome but the worker's: it propagates, and the run fails
    as out of memory with every step recorded before it. Picklable.
    """

    def __init__(self, func: RewardFunc, timeout_s: float | None = REWARD_CALL_TIMEOUT_S) -> None:
        self.func = func
        self.timeout_s = timeout_s
        self.__name__ = getattr(func, "__name__", "reward")
        self.logs = RewardLogs(self.__name__)  # its log_extra / log_metric, checked (grpo_core.rewards.logged)

    def _call(self, completions: list[Any], kwargs: dict[str, Any]) -> list[Any]:
        start = time.monotonic()
        output = list(self.func(completions, **kwargs))
        elapsed = time.monotonic() - start
        if self.timeout_s is not None and elapsed > self.timeout_s:
            raise RewardTimeout(f"took {elapsed:.0f} s, over the limit of {self.timeout_s:g} s")
        return output

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        error, call = None, self.logs.call(kwargs, n)
        try:
            output = self._call(completions, call.kwargs)
            if len(output) != n:
                raise ValueError(f"returned {len(output)} rewards for {n} completions")
        except MemoryError:
            raise  # the worker is out of memory, not the rule wrong: the run fails with "out of memory" and its steps
        except Exception as exc:  # noqa: BLE001 - the rule's failure is recorded, never the trainer's
            error = f"{type(exc).__name__}: {exc}"[:300]
            logger.warning("reward function %s failed: %s", self.__name__, error)
            output = [None] * n
        call.flush(error)  # rewards/<fn>/errors, reward_errors/<fn>, and what the function logged
        return output


def guard_reward_funcs(funcs: Sequence[Any]) -> list[Any]:
    """``funcs`` with each plain (synchronous) reward function wrapped in a :class:`GuardedReward`; reward models
    (objects with ``parameters``, TRL scores them itself) and ``async`` functions are left as they are."""
    import inspect

    return [
        func
        if hasattr(func, "parameters") or inspect.iscoroutinefunction(type(func).__call__)
        or inspect.iscoroutinefunction(func) or isinstance(func, GuardedReward)
        else GuardedReward(func)
        for func in funcs
    ]


def build_reward_funcs(
    specs: Sequence[RewardSpec | Mapping[str, Any]],
    *,
    guard: bool = False,
) -> tuple[list[RewardFunc], list[float], list[str]]:
    """Build the reward functions of a run.

    Args:
        specs: the run's reward rules (``RewardSpec`` objects or dicts of the same fields), in order.
        guard: wrap each function in a :class:`GuardedReward` (the trainer does: a rule that raises gives ``None``
            rewards and a ``rewards/<name>/errors`` count instead of stopping the run).

    Returns:
        ``(funcs, weights, names)``, one entry per spec: picklable reward functions whose ``__name__`` is set to
        their unique metric name, the weights (pass as ``GRPOConfig.reward_weights``) and the names. A name used
        twice gets ``_2``, ``_3``... on its later uses (``numeric_answer``, ``numeric_answer_2``). A gated spec's
        function is a :class:`GatedReward` (its own reward where the gate holds, else 0.0); the gating rule's function
        then remembers its last call, so it runs once per batch however many rules it gates.

    Raises:
        ValueError: ``specs`` is empty, or a spec names an unknown rule, has a bad parameter or a gate that names no
            other ungated rule of the run; the message starts with the 1-based position and the rule, e.g.
            ``reward rule 2 (format_regex): parameter 'pattern': ...``.
    """
    if not specs:
        raise ValueError("at least one reward rule is needed")
    funcs: list[RewardFunc] = []
    weights: list[float] = []
    names: list[str] = []
    parsed = [_as_spec(index, raw) for index, raw in enumerate(specs, start=1)]
    for index, spec in enumerate(parsed, start=1):
        try:
            func = get_rule(spec.rule).build(spec.params)
        except ValueError as exc:
            raise ValueError(f"reward rule {index} ({spec.rule}): {exc}") from None
        base = spec.name or getattr(func, "__name__", None) or spec.rule
        name, suffix = base, 2
        while name in names:
            name, suffix = f"{base}_{suffix}", suffix + 1
        func.__name__ = name  # type: ignore[attr-defined]
        funcs.append(func)
        weights.append(float(spec.weight))
        names.append(name)
    funcs = _apply_gates(parsed, funcs, names)
    if guard:
        funcs = [GuardedReward(func) for func in funcs]
    return funcs, weights, names


def reward_function_name(spec: RewardSpec | Mapping[str, Any]) -> str:
    """The name a spec's reward function gets before the ``_2``, ``_3``... of a repeated name (what TRL logs as
    ``rewards/<name>/mean``), without building it: the spec's ``name``; else, for a ``plugin``, its ``name``
    parameter or the function its ``target`` names (``rules.py:short`` -> ``short``); else the rule.

    ``spec``: a :class:`RewardSpec` or its dict, as a run's stored config holds it.
    """
    if isinstance(spec, Mapping):
        rule, name, params = str(spec.get("rule") or ""), spec.get("name"), spec.get("params") or {}
    else:
        rule, name, params = spec.rule, spec.name, spec.params
    if name and str(name).strip():
        return str(name).strip()
    if rule == "plugin":
        named = str(params.get("name") or "").strip()
        target = str(params.get("target") or "").strip()
        if named:
            return named
        if ":" in target:
            return target.rsplit(":", 1)[1].strip().split(".")[-1] or rule
    return rule


@dataclass
class GroupScore:
    """The scores of one group of completions of the same prompt.

    Attributes:
        names: reward function names, one per rule.
        rewards: ``[rule][completion]`` raw rewards; ``None`` where the rule did not apply.
        total: per completion, the weighted sum of the rewards that applied (what TRL logs as ``reward``);
            ``None`` when no rule applied to that completion (TRL: NaN, "unscorable").
        advantages: per completion, the group-relative advantage GRPO trains on (0.0 for unscorable completions).
    """

    names: list[str]
    rewards: list[list[float | None]]
    total: list[float | None]
    advantages: list[float]


_NAN = float("nan")


def _nanmean(values: Sequence[float]) -> float:
    present = [v for v in values if not math.isnan(v)]
    return math.fsum(present) / len(present) if present else _NAN


def _nanstd(values: Sequence[float]) -> float:
    """Unbiased (n - 1) standard deviation ignoring NaNs; NaN with fewer than 2 values.

    Same as ``trl.trainer.utils.nanstd`` (TRL 1.16.0).
    """
    present = [v for v in values if not math.isnan(v)]
    if len(present) < 2:
        return _NAN
    mean = math.fsum(present) / len(present)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in present) / (len(present) - 1))


def _nansum(values: Sequence[float]) -> float:
    return math.fsum(v for v in values if not math.isnan(v))


def _ignore_log_extra(column: str, values: list[Any]) -> None:
    """Stands in for the trainer's ``log_extra`` (extra completion-table columns), which the bench does not keep."""


def _ignore_log_metric(name: str, value: float) -> None:
    """Stands in for the trainer's ``log_metric``, which the bench does not keep."""


def score_group(
    specs: Sequence[RewardSpec | Mapping[str, Any]],
    completions: Sequence[Any],
    row: Mapping[str, Any],
    completion_ids: Sequence[Sequence[int]] | None = None,
    epsilon: float = 1e-4,
    scale_rewards: str | bool = "group",
    multi_objective_aggregation: str = "sum_then_normalize",
) -> GroupScore:
    """Score ``completions`` (one group, all for the dataset ``row``) exactly as TRL's GRPOTrainer would.

    Matches ``GRPOTrainer._calculate_rewards`` and ``_generate_and_score_completions`` of TRL 1.16.0 for one group
    of ``G = len(completions)`` generations:

    * every reward function is called as ``f(prompts=..., completions=..., completion_ids=..., **columns,
      trainer_state=None, log_extra=..., log_metric=...)`` where each column of ``row`` except ``prompt``,
      ``completion`` and ``completion_ids`` is repeated G times, and ``prompts`` is ``row["prompt"]`` repeated;
      a ``None`` reward becomes NaN;
    * a completion for which every function returned ``None`` is *unscorable*: its total is NaN, it is left out of
      the mean and std below, and its advantage is 0;
    * ``"sum_then_normalize"`` (default): ``total = nansum_i(weight_i * reward_i)``; ``advantage = total -
      nanmean(total)``, divided by ``nanstd(total) + 1e-4`` unless ``scale_rewards`` is ``"none"``/``False``.
      ``nanstd`` is the unbiased (n - 1) standard deviation, NaN with fewer than two scorable values (then every
      advantage becomes 0, as TRL's ``nan_to_num`` does); with G = 1 the std is taken as 0. For a single group
      ``"batch"`` scaling equals ``"group"`` scaling;
    * ``"normalize_then_sum"`` (GDPO): each rule's rewards are first normalised within the group,
      ``(r - nanmean) / (nanstd + 1e-4)``, then weighted and summed; the advantage is that sum normalised again,
      always (``scale_rewards`` is not consulted, as in TRL).

    Differences: TRL computes in float32 on the device, this in float64, so values agree to about 1e-6; TRL's
    ``epsilon`` is fixed at 1e-4 (the ``epsilon`` argument here defaults to it). Plugin rules are run too, so call
    this in the web process only for built-in rules: with plugins, use
    :func:`grpo_core.reward_check.job.score_group_isolated` (the same scoring in a child process). A ``reward_model``
    rule scores only in a worker process that enabled it (see :mod:`grpo_core.rewards.reward_model`).

    Args:
        specs: the reward rules (see :func:`build_reward_funcs`).
        completions: G completions, standard (``str``) or conversational (message lists).
        row: the dataset row (column -> value) the prompt came from.
        completion_ids: G token id lists, used by ``length``; ``None`` lets it count words.
        epsilon: added to the std before dividing.
        scale_rewards: ``"group"``/``True``, ``"batch"`` or ``"none"``/``False`` (``GRPOConfig.scale_rewards``).
        multi_objective_aggregation: ``"sum_then_normalize"`` or ``"normalize_then_sum"``.

    Returns:
        A :class:`GroupScore`; ``total`` is the raw weighted sum in both aggregation modes.

    Raises:
        ValueError: an empty group, a bad spec (see :func:`build_reward_funcs`), an unknown ``scale_rewards`` or
            aggregation, ``completion_ids`` of the wrong length, or a reward function returning the wrong number
            of values (the message names it).
    """
    scale = {True: "group", False: "none"}.get(scale_rewards, scale_rewards)  # type: ignore[call-overload]
    if scale not in ("group", "batch", "none"):
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale_rewards!r}")
    if multi_objective_aggregation not in ("sum_then_normalize", "normalize_then_sum"):
        raise ValueError(
            "multi_objective_aggregation must be 'sum_then_normalize' or 'normalize_then_sum', "
            f"got {multi_objective_aggregation!r}"
        )
    size = len(completions)
    if size == 0:
        raise ValueError("score_group needs at least one completion")
    if completion_ids is not None and len(completion_ids) != size:
        raise ValueError(f"completion_ids has {len(completion_ids)} entries for {size} completions")
    funcs, weights, names = build_reward_funcs(specs)

    columns = {
        key: [value] * size for key, value in row.items() if key not in ("prompt", "completion", "completion_ids")
    }
    columns["trainer_state"] = None
    columns["log_extra"] = _ignore_log_extra
    columns["log_metric"] = _ignore_log_metric
    prompts = [row.get("prompt")] * size
    ids = [list(i) for i in completion_ids] if completion_ids is not None else None

    rewards: list[list[float | None]] = []
    for func, name in zip(funcs, names, strict=True):
        output = func(prompts=prompts, completions=list(completions), completion_ids=ids, **columns)
        if len(output) != size:
            raise ValueError(f"reward function {name!r} returned {len(output)} rewards for {size} completions")
        rewards.append([None if r is None else float(r) for r in output])

    as_nan = [[_NAN if r is None else r for r in per_rule] for per_rule in rewards]
    unscorable = [all(math.isnan(per_rule[k]) for per_rule in as_nan) for k in range(size)]
    raw_total = [
        _NAN if unscorable[k] else _nansum([w * per_rule[k] for w, per_rule in zip(weights, as_nan, strict=True)])
        for k in range(size)
    ]

    if multi_objective_aggregation == "sum_then_normalize":
        mean = _nanmean(raw_total)
        std = _nanstd(raw_total) if size > 1 else 0.0
        advantages = [t - mean for t in raw_total]
        if scale != "none":
            advantages = [a / (std + epsilon) for a in advantages]
    else:
        normalised = []
        for per_rule in as_nan:
            rule_mean = _nanmean(per_rule)
            rule_std = _nanstd(per_rule) if size > 1 else 0.0
            normalised.append([(r - rule_mean) / (rule_std + epsilon) for r in per_rule])
        summed = [
            _NAN if unscorable[k] else _nansum([w * n[k] for w, n in zip(weights, normalised, strict=True)])
            for k in range(size)
        ]
        std = _nanstd(summed) if size > 1 else 0.0
        mean = _nanmean(summed)
        advantages = [(s - mean) / (std + epsilon) for s in summed]

    return GroupScore(
        names=names,
        rewards=rewards,
        total=[None if math.isnan(t) else t for t in raw_total],
        advantages=[0.0 if math.isnan(a) else a for a in advantages],
    )
