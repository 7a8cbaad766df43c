"""The run doctor's checks on what the policy drifts towards: entropy surging (sampling going to noise) or collapsing
(sampling gone greedy without gain), the task rule falling while the total rises (a shaping rule learned, the task forgotten), and reward functions raising errors
(TRL-style per-rule ``rewards/<fn>/errors`` counts).

Each check takes ``(series, groups, config)`` and returns its findings (see :func:`grpo_core.doctor.diagnose`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor import progress
from grpo_core.doctor.findings import Finding, Series, Severity, _config_value, _number, _points, found, step_ranges
from grpo_core.doctor.groups import reward_weights, task_rule
from grpo_core.doctor.progress import reward_falling, reward_rising
from grpo_core.doctor.registry import doctor_check
from grpo_core.doctor.thresholds import (
    BETA_ZERO_STD_WINDOW,
    ENTROPY_COLLAPSE_RATIO,
    ENTROPY_SURGE_RATIO,
    RULE_ERRORS_SUFFIX,
    RULE_FALL_MIN,
    TREND_MIN_STEPS,
    TREND_P_VALUE,
    ZERO_STD_FRACTION,
)
from grpo_core.doctor.trends import _ends, _trend, _trend_points
from storage import GroupRecord


@doctor_check(80)
def _entropy_surge(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Entropy rising significantly to :data:`ENTROPY_SURGE_RATIO` times its start while the reward is not rising
    over the same steps: the policy spreads its probability over more and more tokens (going to noise)."""
    window = _trend_points(series, "entropy")
    if len(window) < TREND_MIN_STEPS:
        return []
    start, end = _ends(window)
    if start <= 0 or end < ENTROPY_SURGE_RATIO * start or _trend(window).p_rising >= TREND_P_VALUE:
        return []
    first = window[0][0]
    if reward_rising(series, first):
        return []  # more varied sampling while the reward rises is exploration that pays
    reward = "while the reward falls" if reward_falling(series, first) else "while the reward does not rise"
    return found(
        "entropy_surge", Severity.WARNING,
        title=f"Entropy is surging {reward}: {start:.3g} → {end:.3g} nats per token",
        advice=(
            "The policy is going to noise: each token is sampled from a flatter and flatter distribution, so "
            "completions turn into gibberish and the rewards drop. Causes: a learning rate too high for the "
            f"model (learning_rate{_config_value(config, 'learning_rate')}), a KL term too weak to hold the policy "
            f"(beta{_config_value(config, 'beta')}), or an entropy bonus or high temperature"
            f"{_config_value(config, 'temperature')}. Lower the learning rate, raise beta, and resume from a "
            "checkpoint before the surge."
        ),
        steps=(s for s, _ in window),
    )


@doctor_check(110)
def _entropy_collapse(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Entropy fallen to :data:`ENTROPY_COLLAPSE_RATIO` of where the run started (the first points read) on a
    significant fall, while the reward is not rising, neither over the same steps nor now
    (:func:`~grpo_core.doctor.progress.rising_now`): entropy falling while the reward rises is what learning a short
    answer looks like. The title adds "most groups are flat" when the mean ``frac_reward_zero_std`` of the latest
    :data:`BETA_ZERO_STD_WINDOW` steps is above :data:`ZERO_STD_FRACTION` (a policy that writes one completion for
    every prompt, e.g. "5555..." after a learning rate of 1e-2). A long run is tested on at most
    :data:`TREND_WINDOW` points spread evenly over the steps read (:func:`_spread_points`), so a collapse that
    finished long ago is still seen."""
    window = _spread_points(series, "entropy")
    if len(window) < TREND_MIN_STEPS:
        return []
    start, end = _ends(window)
    trend = _trend(window)
    if start <= 0 or end > ENTROPY_COLLAPSE_RATIO * start or trend.p_falling >= TREND_P_VALUE:
        return []
    first = window[0][0]
    reward = [(s, v) for s, v in _spread_points(series, "reward") if s >= first]
    if progress.rising_now(series) or (len(reward) >= TREND_MIN_STEPS and progress.rises(reward)):
        return []  # sharpening on a rising reward is what learning looks like, flat (all-right) groups included
    flat_groups = [v for _, v in _points(series, "frac_reward_zero_std") if v is not None][-BETA_ZERO_STD_WINDOW:]
    degenerate = bool(flat_groups) and statistics.fmean(flat_groups) > ZERO_STD_FRACTION
    beta = _number(config.get("beta"))
    state = "while the reward is not rising" + (" and most groups are flat" if degenerate else "")
    return found(
        "entropy_collapse", Severity.WARNING,
        title=f"Entropy is collapsing {state}: {start:.3g} → {end:.3g} nats per token",
        advice=(
            "The policy has become nearly deterministic without getting better: completions of a group look "
            "alike, their rewards tie, and advantages vanish. Raise temperature"
            f"{_config_value(config, 'temperature')} for more varied rollouts, lower the learning rate"
            f"{_config_value(config, 'learning_rate')}"
            + (", and set beta > 0 (now 0) to hold the policy near the reference model." if beta == 0 else ".")
            + " Clip-higher (epsilon_high, DAPO) or an entropy bonus keep exploration alive."
        ),
        steps=(s for s, _ in window),
    )


def _spread_points(series: Series, key: str) -> list[tuple[int, float]]:
    """:func:`~grpo_core.doctor.progress.spread_points` of the finite points of ``key``."""
    return progress.spread_points([(s, v) for s, v in _points(series, key) if v is not None])


@doctor_check(70)
def _task_rule_falling(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """The task rule (:func:`~grpo_core.doctor.groups.task_rule`: the largest weight) falling significantly, by at
    least :data:`RULE_FALL_MIN`, while the total reward does not fall and another rule rises: the policy earns the
    other rules (usually the format) at the task's expense."""
    weights = reward_weights(config)
    rule = task_rule(config, groups)
    if not rule or len(weights) < 2:
        return []
    window = _trend_points(series, f"rewards/{rule}/mean")
    if len(window) < TREND_MIN_STEPS:
        return []
    start, end = _ends(window)
    if start - end < RULE_FALL_MIN or _trend(window).p_falling >= TREND_P_VALUE:
        return []
    first = window[0][0]
    if reward_falling(series, first):
        return []  # the whole reward falls: reward_falling says it
    risers = []
    for name in weights:
        other = [(s, v) for s, v in _trend_points(series, f"rewards/{name}/mean") if s >= first]
        if name != rule and len(other) >= TREND_MIN_STEPS and _trend(other).p_rising < TREND_P_VALUE:
            other_start, other_end = _ends(other)
            risers.append(f"{name} {other_start:.3g} → {other_end:.3g}")
    if not risers:
        return []
    total = "the total reward rises" if reward_rising(series, first) else "the total reward holds"
    return found(
        "task_rule_falling", Severity.WARNING,
        title=(
            f"The task rule is falling while {total}: {rule} {start:.3g} → {end:.3g}, while "
            + ", ".join(risers)
        ),
        advice=(
            f"The policy is learning what the other rules pay for (often the format) and forgetting the task "
            f"{rule} scores: format learned, task forgotten. Lower the other rules' weight, gate them on the "
            f"task (a format bonus only for a right answer), or give {rule} partial credit; read the completions "
            "in Inspect."
        ),
        steps=(s for s, _ in window),
    )


@doctor_check(50)
def _rule_errors(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Reward functions that raised: ``rewards/<fn>/errors`` above 0 at any logged step (the count of completions
    whose call raised, per step; an errored completion scores None, so it adds nothing to the advantages)."""
    failing = []
    for key in sorted(series):
        if not (key.startswith("rewards/") and key.endswith(RULE_ERRORS_SUFFIX)):
            continue
        bad = [(s, v) for s, v in _points(series, key) if v is not None and v > 0]
        if bad:
            failing.append((key[len("rewards/"):-len(RULE_ERRORS_SUFFIX)], bad))
    if not failing:
        return []
    parts = [
        f"{name}: {sum(v for _, v in bad):g} error{'s' if sum(v for _, v in bad) != 1 else ''} at "
        f"{len(bad)} step{'s' if len(bad) > 1 else ''} ({step_ranges((s for s, _ in bad), max_ranges=6)})"
        for name, bad in failing
    ]
    return found(
        "rule_errors", Severity.WARNING,
        title="Reward functions raised errors: " + "; ".join(parts),
        advice=(
            "A completion whose reward function raised gets no score from it (None), so it teaches nothing about "
            "that rule, and a rule that raises on every completion drops out of the reward. Read the worker log "
            "(train.log) for the tracebacks, then fix the rule's parameters, the dataset column it reads, or the "
            "plugin's code."
        ),
        steps=sorted({s for _, bad in failing for s, _ in bad}),
        examples=parts,
    )
