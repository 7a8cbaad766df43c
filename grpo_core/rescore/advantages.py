"""GRPO's group-relative advantage for a batch of groups, as TRL's ``GRPOTrainer`` computes it. Pure, no torch.

Follows ``GRPOTrainer._generate_and_score_completions`` of TRL 1.16.0 (``trl/trainer/grpo_trainer.py``, lines
2755-2810 and 2830 of that release):

* ``sum_then_normalize``: ``reward = nansum_i(w_i * r_i)``, NaN where every rule returned ``None`` (unscorable);
  ``advantage = (reward - nanmean(group)) / (std + 1e-4)`` where ``std`` is the group's ``nanstd`` for
  ``scale_rewards="group"``, the whole batch's ``nanstd`` for ``"batch"``, and no division for ``"none"``;
* ``normalize_then_sum`` (GDPO): each rule normalised in its group first, ``(r - nanmean) / (nanstd + 1e-4)``, then
  weighted and summed; that sum normalised over the batch;
* NaN advantages (unscorable completions, a group of one scorable completion) become 0 (TRL's ``nan_to_num``);
* ``frac_reward_zero_std`` is the share of completions whose ``std`` is close to 0 (``torch.isclose``: within
  1e-8); a NaN std (fewer than two scorable completions) is not zero. With ``"group"``/``"none"`` it is the share
  of groups without signal when the groups are the same size.

``nanstd`` is the unbiased (n - 1) standard deviation over the non-NaN values (``trl.trainer.utils.nanstd``).
TRL computes in float32 on the device; this in float64: values agree to about 1e-6.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

EPSILON = 1e-4
"""TRL's constant added to the standard deviation before dividing."""

ZERO_STD_ATOL = 1e-8
"""``torch.isclose(std, 0)``'s tolerance (its default ``atol``; ``rtol`` times 0 adds nothing)."""

SCALES = ("group", "batch", "none")
AGGREGATIONS = ("sum_then_normalize", "normalize_then_sum")

_NAN = float("nan")


def _present(values: Sequence[float]) -> list[float]:
    return [v for v in values if not math.isnan(v)]


def nanmean(values: Sequence[float]) -> float:
    """Mean over the non-NaN values; NaN when there are none."""
    present = _present(values)
    return math.fsum(present) / len(present) if present else _NAN


def nanstd(values: Sequence[float]) -> float:
    """Unbiased (n - 1) standard deviation over the non-NaN values; NaN with fewer than two (TRL's ``nanstd``)."""
    present = _present(values)
    if len(present) < 2:
        return _NAN
    mean = math.fsum(present) / len(present)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in present) / (len(present) - 1))


def as_float(value: float | None) -> float:
    """``value`` as a float, ``None`` and non-numbers as NaN (TRL turns a ``None`` reward into NaN)."""
    if value is None or isinstance(value, bool):
        return _NAN if value is None else float(value)
    try:
        return float(value)
    except (TypeError, ValueError):
        return _NAN


def normalise_scale(scale_rewards: str | bool | None) -> str:
    """``GRPOConfig.scale_rewards`` as ``"group"``, ``"batch"`` or ``"none"`` (``True`` is ``"group"``, ``False`` and
    ``None`` ``"none"``). Raises ``ValueError`` for anything else."""
    scale = {True: "group", False: "none", None: "none"}.get(scale_rewards, scale_rewards)  # type: ignore[arg-type]
    if scale not in SCALES:
        raise ValueError(f"scale_rewards must be 'group', 'batch' or 'none', got {scale_rewards!r}")
    return str(scale)


def weighted_totals(rewards: Sequence[Sequence[float | None]], weights: Sequence[float]) -> list[float | None]:
    """Per completion, ``nansum_i(weights[i] * rewards[i][k])``; ``None`` where every rule gave ``None`` or NaN.

    ``rewards``: ``[rule][completion]``. Raises ``ValueError`` when ``weights`` and ``rewards`` differ in length."""
    if len(weights) != len(rewards):
        raise ValueError(f"{len(weights)} weights for {len(rewards)} rules")
    size = len(rewards[0]) if rewards else 0
    totals: list[float | None] = []
    for k in range(size):
        present = [(w, as_float(per_rule[k])) for w, per_rule in zip(weights, rewards, strict=True)]
        present = [(w, r) for w, r in present if not math.isnan(r)]
        totals.append(math.fsum(w * r for w, r in present) if present else None)
    return totals


@dataclass(frozen=True)
class BatchAdvantages:
    """The advantages of a batch of groups.

    Attributes:
        advantages: ``[group][completion]``, 0.0 where TRL's would be NaN.
        zero_std: per group, True when its ``std`` (the group's, or the batch's for ``"batch"``) is close to 0.
    """

    advantages: list[list[float]]
    zero_std: list[bool]


def batch_advantages(
    totals: Sequence[Sequence[float | None]],
    *,
    scale_rewards: str | bool = "group",
    rewards: Sequence[Sequence[Sequence[float | None]]] | None = None,
    weights: Sequence[float] | None = None,
    multi_objective_aggregation: str = "sum_then_normalize",
) -> BatchAdvantages:
    """The group-relative advantages of one generation batch (the groups of one step), as TRL computes them.

    Args:
        totals: ``[group][completion]`` weighted totals; ``None`` (or NaN) for an unscorable completion. Groups may
            differ in size (a recorded sample); each group's mean is its own.
        scale_rewards: ``"group"``, ``"batch"``, ``"none"`` (or ``True``/``False``).
        rewards, weights: ``[group][rule][completion]`` raw rewards and the rule weights, needed only for
            ``"normalize_then_sum"``.
        multi_objective_aggregation: ``"sum_then_normalize"`` (default) or ``"normalize_then_sum"``.

    Raises:
        ValueError: an unknown scale or aggregation, or ``normalize_then_sum`` without ``rewards`` and ``weights``.
    """
    scale = normalise_scale(scale_rewards)
    if multi_objective_aggregation not in AGGREGATIONS:
        raise ValueError(f"multi_objective_aggregation must be one of {', '.join(AGGREGATIONS)}, "
                         f"got {multi_objective_aggregation!r}")
    as_nan = [[as_float(t) for t in group] for group in totals]
    if multi_objective_aggregation == "normalize_then_sum":
        if rewards is None or weights is None:
            raise ValueError("normalize_then_sum needs each group's rewards per rule and the weights")
        summed = [_normalised_sum(group_rewards, weights, group) for group_rewards, group in zip(rewards, as_nan,
                                                                                                   strict=True)]
        flat = [v for group in summed for v in group]
        std = nanstd(flat) if len(flat) > 1 else 0.0
        mean = nanmean(flat)
        advantages = [[_finite_or_zero((v - mean) / (std + EPSILON)) for v in group] for group in summed]
        return BatchAdvantages(advantages, [_is_zero(std)] * len(summed))
    flat = [v for group in as_nan for v in group]
    batch_std = (nanstd(flat) if len(flat) > 1 else 0.0) if scale == "batch" else None
    advantages, zero_std = [], []
    for group in as_nan:
        mean = nanmean(group)
        std = batch_std if batch_std is not None else (nanstd(group) if len(group) > 1 else 0.0)
        centred = [v - mean for v in group]
        if scale != "none":
            centred = [c / (std + EPSILON) for c in centred]
        advantages.append([_finite_or_zero(c) for c in centred])
        zero_std.append(_is_zero(std))
    return BatchAdvantages(advantages, zero_std)


def _normalised_sum(group_rewards: Sequence[Sequence[float | None]], weights: Sequence[float],
                    totals: Sequence[float]) -> list[float]:
    """GDPO's per-group sum of the weighted rules, each normalised within the group; NaN where ``totals`` is."""
    size = len(totals)
    normalised = []
    for per_rule in group_rewards:
        values = [as_float(r) for r in per_rule]
        mean, std = nanmean(values), (nanstd(values) if size > 1 else 0.0)
        normalised.append([(v - mean) / (std + EPSILON) for v in values])
    out = []
    for k in range(size):
        if math.isnan(totals[k]):
            out.append(_NAN)
            continue
        out.append(math.fsum(w * n[k] for w, n in zip(weights, normalised, strict=True) if not math.isnan(n[k])))
    return out


def _finite_or_zero(value: float) -> float:
    return value if math.isfinite(value) else 0.0


def _is_zero(std: float) -> bool:
    return not math.isnan(std) and abs(std) <= ZERO_STD_ATOL


def sign_changed(before: float | None, after: float | None, *, tolerance: float = 1e-6) -> bool:
    """True when an advantage is strictly positive under one scoring and strictly negative under the other
    (beyond ``tolerance``); a 0 (no signal) on either side is not a change of sign."""
    b, a = as_float(before), as_float(after)
    if math.isnan(b) or math.isnan(a):
        return False
    return (b > tolerance and a < -tolerance) or (b < -tolerance and a > tolerance)
