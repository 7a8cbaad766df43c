"""Reading the sampled groups for the run doctor: reward weights by metric name, the task rule, whether a
completion solved the task, each rule's share of the within-group reward variance, and why a group has zero std."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor.findings import (
    _number,
)
from grpo_core.doctor.thresholds import (
    SCORE_TOLERANCE,
)
from grpo_core.rewards.compose import reward_function_name
from storage import CompletionRecord, GroupRecord


def reward_weights(config: Mapping[str, Any]) -> dict[str, float]:
    """Each reward function's weight by its metric name, in the config's order.

    Names follow :func:`grpo_core.rewards.compose.build_reward_funcs`: a spec's ``name``, else its function's
    (:func:`~grpo_core.rewards.compose.reward_function_name`: a ``plugin``'s function, else the rule), with ``_2``,
    ``_3``... on a repeated name; callers give unknown names weight 1.

    Args:
        config: a run config dump; ``config["rewards"]`` is a list of ``RewardSpec`` mappings.

    Returns:
        ``name -> weight``; empty when the config lists no rules.
    """
    weights: dict[str, float] = {}
    for spec in config.get("rewards") or ():
        if not isinstance(spec, Mapping) or not spec.get("rule"):
            continue
        base = reward_function_name(spec)
        name, suffix = base, 2
        while name in weights:
            name, suffix = f"{base}_{suffix}", suffix + 1
        weight = _number(spec.get("weight", 1.0))
        weights[name] = 1.0 if weight is None else weight
    return weights


def task_rule(config: Mapping[str, Any], groups: Sequence[GroupRecord] = ()) -> str | None:
    """The reward rule that stands for the task: the one with the largest weight (the first listed on a tie), or,
    when the config lists no rules, the first rule in the first sampled completion; ``None`` when neither exists."""
    weights = reward_weights(config)
    if weights:
        return max(weights, key=lambda name: weights[name])  # max keeps the first of equal weights
    for group in groups:
        for completion in group.completions:
            if completion.rewards:
                return next(iter(completion.rewards))
    return None


def completion_outcome(completion: CompletionRecord, rule: str) -> str | None:
    """Whether ``completion`` solved the task by ``rule``'s score: ``"right"`` (full marks, 1), ``"wrong"`` (0),
    ``"partial"`` (in between) or ``None`` (the rule did not score it).

    The built-in task rules (answer matching, code tests, JSON) score 1 for a right completion and 0 for a wrong
    one; a partial score is e.g. some of a program's tests passing.
    """
    score = _number(completion.rewards.get(rule))
    if score is None:
        return None
    if score >= 1.0 - SCORE_TOLERANCE:
        return "right"
    if score <= SCORE_TOLERANCE:
        return "wrong"
    return "partial"


def rule_variance_shares(groups: Sequence[GroupRecord], weights: Mapping[str, float]) -> tuple[dict[str, float], int]:
    """How much of the within-group variance of the weighted total reward each rule explains.

    In each group the weighted total of completion ``k`` is ``T_k = sum_i c_ik`` with ``c_ik = w_i r_ik`` (a rule
    that returned ``None`` adds 0, as TRL's ``nansum``). Variance decomposes as
    ``Var T = sum_i Cov(c_i, T)``, so rule ``i``'s share is ``sum_g Cov_g(c_i, T) / sum_g Var_g(T)`` pooled over
    the groups (sums of squares within each group, no group means across groups). Shares add up to 1; a share can
    be negative (a rule that pulls against the others) or above 1.

    Args:
        groups: sampled groups; completions no rule scored are left out.
        weights: ``name -> weight``; a rule not in it weighs 1.

    Returns:
        ``(shares, groups_used)``: ``name -> share``, largest first, empty when no group varies; and how many
        groups had within-group variance.
    """
    covariances: dict[str, float] = {}
    total_variance, used = 0.0, 0
    for group in groups:
        rows = []
        for completion in group.completions:
            scores = {name: _number(value) for name, value in completion.rewards.items()}
            if any(v is not None for v in scores.values()):
                rows.append({name: weights.get(name, 1.0) * (v or 0.0) for name, v in scores.items()})
        if len(rows) < 2:
            continue
        names = sorted({name for row in rows for name in row})
        totals = [sum(row.values()) for row in rows]
        mean_total = statistics.fmean(totals)
        variance = sum((t - mean_total) ** 2 for t in totals)
        if variance <= SCORE_TOLERANCE**2:
            continue
        used += 1
        total_variance += variance
        for name in names:
            column = [row.get(name, 0.0) for row in rows]
            mean = statistics.fmean(column)
            covariances[name] = covariances.get(name, 0.0) + sum(
                (c - mean) * (t - mean_total) for c, t in zip(column, totals, strict=True)
            )
    if not used:
        return {}, 0
    shares = {name: cov / total_variance for name, cov in covariances.items()}
    return dict(sorted(shares.items(), key=lambda item: -item[1])), used
