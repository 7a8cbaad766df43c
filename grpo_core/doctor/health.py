"""The run doctor's checks on numeric health: truncation, reward flat at zero, NaN/inf, loss exactly 0.

Each check takes ``(series, groups, config)`` and returns its findings (see :func:`grpo_core.doctor.diagnose`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor.findings import (
    Finding,
    Series,
    Severity,
    _clip,
    _config_value,
    _is_zero,
    _number,
    _points,
    _streaks,
    found,
    step_ranges,
)
from grpo_core.doctor.progress import _reward_trend as _reward_verdict
from grpo_core.doctor.progress import reward_rising
from grpo_core.doctor.registry import doctor_check
from grpo_core.doctor.thresholds import (
    CLIPPED_FINISH_GAIN,
    CLIPPED_MIN_FINISHED,
    CLIPPED_NEARLY_ALL,
    CLIPPED_RATIO_MAX,
    CORE_KEYS,
    EXAMPLES,
    FLAT_REWARD_MIN_STEPS,
    TREND_MIN_STEPS,
    TREND_P_VALUE,
    TREND_WINDOW,
    ZERO_STD_MIN_STEPS,
)
from grpo_core.doctor.trends import _trend
from storage import GroupRecord


def _finish_gain(groups: Sequence[GroupRecord]) -> tuple[float, int, int] | None:
    """``(mean total of finished - mean total of cut completions, finished count, cut count)`` over the sampled
    groups, or ``None`` when either kind is missing (then the sample cannot say whether finishing pays)."""
    finished, cut = [], []
    for group in groups:
        for completion in group.completions:
            if completion.total_reward is not None:
                (cut if completion.truncated else finished).append(completion.total_reward)
    if not finished or not cut:
        return None
    return statistics.fmean(finished) - statistics.fmean(cut), len(finished), len(cut)


@doctor_check(130)
def _clipped(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Completions cut at ``max_completion_length``: a warning only while the cuts block the reward, otherwise
    information. They block it when nearly every completion is cut (:data:`CLIPPED_NEARLY_ALL` or more on average
    over the latest :data:`ZERO_STD_MIN_STEPS` logged steps: the policy has almost no finished completion to learn
    from), the share is not falling and the reward is not rising over at least :data:`TREND_MIN_STEPS` logged steps,
    and the sampled groups do not show the few finished completions scoring more than the cut ones (by
    :data:`CLIPPED_FINISH_GAIN`, over at least :data:`CLIPPED_MIN_FINISHED` finished ones). A run that cuts many but not nearly all completions learns to finish from the
    others (the quick start starts with 60-90% cut, its cut explanations score less than its short answers, and it
    learns "a + b = c"); that is information, with the numbers, unless it lasts: more than twice
    :data:`CLIPPED_RATIO_MAX` cut on average over 20 or more logged steps, not falling, while the reward is "not
    improving" with the power to see a rise (:mod:`~grpo_core.doctor.progress`)."""
    points = _points(series, "completions/clipped_ratio")
    high = [(s, v) for s, v in points if v is not None and v > CLIPPED_RATIO_MAX]
    if not high:
        return []
    finite = [(s, v) for s, v in points if v is not None]
    latest = finite[-1][1]
    still = latest > CLIPPED_RATIO_MAX
    worst = max(v for _, v in high)
    window = finite[-TREND_WINDOW:]
    judged = len(window) >= TREND_MIN_STEPS
    shrinking = judged and _trend(window).p_falling < TREND_P_VALUE
    rising = reward_rising(series, window[0][0]) if judged else None
    nearly_all = statistics.fmean(v for _, v in finite[-ZERO_STD_MIN_STEPS:]) >= CLIPPED_NEARLY_ALL
    gain = _finish_gain(groups)
    pays = gain is not None and gain[0] > CLIPPED_FINISH_GAIN and gain[1] >= CLIPPED_MIN_FINISHED
    evidence = (
        f"finished completions score {gain[0]:+.2g} more than cut ones in the sample ({gain[1]} finished, "
        f"{gain[2]} cut)" if gain is not None else ""
    )
    persistent = (
        len(window) >= 2 * TREND_MIN_STEPS
        and statistics.fmean(v for _, v in window) > 2 * CLIPPED_RATIO_MAX
        and any(f.code == "reward_flat" for f in _reward_verdict(series, groups, config))
    )
    blocking = still and judged and not shrinking and not rising and ((nearly_all and not pays) or persistent)
    if blocking:
        why = (
            ": nearly all, not falling, and the reward is not rising: the cuts block the reward" if nearly_all and not pays
            else f": {statistics.fmean(v for _, v in window):.0%} on average over {len(window)} logged steps, not "
            "falling, and the reward is not improving (the trend test could have seen a rise): the cuts block it"
        )
    elif not still:
        why = f", below {CLIPPED_RATIO_MAX:.0%} again: the policy has learned to finish"
    elif not judged:
        why = f"; too early to tell whether they block the reward (fewer than {TREND_MIN_STEPS} logged steps)"
    elif shrinking or rising:
        why = "; " + ("the share is falling" if shrinking else "the reward rises") + ": the policy learns to finish"
    elif pays:
        why = f"; {evidence}, so the policy is pushed to finish"
    else:
        why = "; enough completions finish for the policy to learn from them"
    return found(
        "clipped", Severity.WARNING if blocking else Severity.INFO,
        title=(
            f"Many completions are cut at max_completion_length: clipped_ratio up to {worst:.0%} "
            f"(> {CLIPPED_RATIO_MAX:.0%}), {latest:.0%} at the latest step{why}"
        ),
        advice=(
            "A truncated completion never reaches its answer, so it is scored on unfinished text. "
            + (
                f"Raise max_completion_length{_config_value(config, 'max_completion_length')}, or reward "
                "finishing early (a length rule with an overlong penalty, or a format rule that needs the closing "
                "tag)."
                if blocking
                else "While some completions finish and score more, the advantages teach the policy to finish; if "
                "the reward stops rising while many are still cut, raise max_completion_length"
                f"{_config_value(config, 'max_completion_length')}."
            )
        ),
        steps=(s for s, _ in high),
    )


def _zero_rules(rewards: Mapping[str, float | None]) -> str:
    rules = [name for name, value in rewards.items() if _is_zero(value)]
    skipped = [name for name, value in rewards.items() if value is None]
    parts = []
    if rules:
        parts.append("0 from " + ", ".join(rules))
    if skipped:
        parts.append("no score from " + ", ".join(skipped))
    return "; ".join(parts) or "total 0"


@doctor_check(10)
def _reward_zero(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    streaks = _streaks(_points(series, "reward"), _is_zero, FLAT_REWARD_MIN_STEPS)
    if not streaks:
        return []
    steps = tuple(s for streak in streaks for s in streak)
    examples = []
    flagged = set(steps)
    # groups of the flagged steps first (newest first within each, as Store.recent_groups returns them): the sample
    # may also hold later steps where the reward is no longer 0
    for group in sorted(groups, key=lambda g: g.step not in flagged):
        for completion in group.completions:
            if completion.total_reward is None or _is_zero(completion.total_reward):
                examples.append(
                    f"step {group.step}, row {group.row_index}, completion #{completion.index}: "
                    f"“{_clip(completion.text) or '(empty)'}” — {_zero_rules(completion.rewards)}"
                )
                break  # one per group: three different prompts say more than three tries at one
        if len(examples) == EXAMPLES:
            break
    return found(
        "reward_zero", Severity.ERROR,
        title=f"Reward is 0 at every step for {max(len(s) for s in streaks)} steps in a row",
        advice=(
            "No completion earns anything, so every advantage is 0 and nothing is learned. Compare the "
            "examples with what the rules expect (answer format, the dataset's answer column, a regex that "
            "never matches), add a dense term that partial answers can earn (format, length), or start from "
            "a model that solves some prompts."
        ),
        steps=steps,
        examples=examples,
    )


def _all_finite(values: Sequence[Any]) -> bool:
    """Whether every value is a finite number (and there is at least one): ``None`` absent and a finite sum, a
    NaN or inf making the sum NaN or inf (a sum that overflows, or a non-number, answers False: the caller then looks
    point by point)."""
    if not values or None in values:
        return False
    try:
        return math.isfinite(sum(values))
    except (TypeError, OverflowError, ValueError):
        return False


@doctor_check(20, nan_steps=True)
def _nan(
    series: Series,
    groups: Sequence[GroupRecord],
    config: Mapping[str, Any],
    nan_steps: Mapping[str, Sequence[int]] | None = None,
) -> list[Finding]:
    core: dict[str, list[int]] = {}
    rules: dict[str, list[int]] = {}
    for key, steps in (nan_steps or {}).items():  # keys whose values were not read: where they were NaN
        if key not in series and steps:
            (core if key in CORE_KEYS else rules)[key] = sorted(steps)
    for key in sorted(series):
        if _all_finite(series[key][1]):
            continue  # the common case, checked without a pass in Python over the 1,000 points read
        points = _points(series, key)
        if not any(v is not None for _, v in points):
            continue  # never a number: not a metric this run computes (e.g. kl with beta = 0)
        bad = [s for s, v in points if v is None]
        if bad:
            (core if key in CORE_KEYS else rules)[key] = bad
    findings = []
    if core:
        findings.append(_nan_finding(
            "nan", Severity.ERROR, title="NaN or inf in ", steps_by_key=core,
            advice=(
                "The optimisation produced non-numbers: the model's weights are likely broken from here on. "
                f"Lower the learning rate{_config_value(config, 'learning_rate')}, keep max_grad_norm at 1 or "
                "below, and check the reward rules return finite numbers."
            ),
        ))
    if rules:
        findings.append(_nan_finding(
            "nan_rule", Severity.WARNING, title="NaN in ", steps_by_key=rules,
            advice=(
                "A rule's mean is NaN when it returned None for every completion of the step (it did not "
                "apply, e.g. a code rule on rows without tests) or returned NaN/inf. The total reward then "
                "comes from the other rules only; check the rule's parameters and the dataset's columns."
            ),
        ))
    return findings


def _nan_finding(
    code: str, severity: Severity, *, title: str, steps_by_key: Mapping[str, Sequence[int]], advice: str
) -> Finding:
    """A NaN finding: ``title`` followed by the keys of ``steps_by_key`` (key -> the steps it was NaN at) in key
    order, each with its number of steps; the finding's steps are all of theirs, ascending."""
    named = ", ".join(f"{key} ({len(steps)} steps)" for key, steps in sorted(steps_by_key.items()))
    steps = sorted({step for key_steps in steps_by_key.values() for step in key_steps})
    return Finding(code, severity, title + named, advice, tuple(steps))


@doctor_check(170)
def _loss_zero(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Loss exactly 0 is expected in GRPO; say why.

    On-policy (``num_iterations`` 1) the importance ratio is 1, so the policy term's *value* is ``-mean(A)``,
    which is 0 up to rounding because advantages are centred within each group; its *gradient* is not 0. The KL
    term adds ``beta * kl``: nothing with ``beta`` 0, and little while the policy is still near the reference.
    The Trainer rounds the logged loss to 4 decimals. Only when every group has zero std are the gradients 0 too.
    """
    zero_steps = [s for s, v in _points(series, "loss") if _is_zero(v)]
    if not zero_steps:
        return []
    frac = dict(_points(series, "frac_reward_zero_std"))
    dead = [s for s in zero_steps if frac.get(s) is not None and frac[s] >= 1.0 - 1e-9]
    reasons = []
    if dead:
        reasons.append(
            f"At step{'s' if len(dead) > 1 else ''} {step_ranges(dead)} every group had equal rewards: all "
            "advantages were 0, so those steps taught nothing."
        )
    beta = _number(config.get("beta")) if "beta" in config else None
    kl_term = (
        "beta is 0, so there is no KL term"
        if beta == 0
        else "the KL term, beta × kl, is below the loss's 4-decimal rounding while the policy is near the "
        "reference model"
    )
    reasons.append(
        "Otherwise this is normal in GRPO: on-policy the loss's value is minus the mean advantage, which is 0 "
        f"because advantages are centred within each group, while its gradient is not 0; and {kl_term}. "
        "Judge progress by reward and reward_std, not by loss."
    )
    return found(
        "loss_zero", Severity.INFO,
        title=f"loss is exactly 0 at {len(zero_steps)} step{'s' if len(zero_steps) > 1 else ''} (expected in GRPO)",
        advice=" ".join(reasons),
        steps=zero_steps,
    )
