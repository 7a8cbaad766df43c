"""The run doctor's verdict on the reward itself: learning (with the numbers), too early to tell, not improving,
falling, levelled off.

The test is one-sided Mann-Kendall over the latest :data:`~grpo_core.doctor.thresholds.TREND_WINDOW` logged rewards
(:func:`~grpo_core.doctor.trends.mann_kendall`). "Not improving" is a claim about power: it is said only when the
test could have seen a meaningful rise (half the mean within-group ``reward_std``, at least 0.05) with 80% power
(:func:`~grpo_core.doctor.trends.detectable_rise`); otherwise the doctor says "too early to tell" and how large a
rise it could see. Each check takes ``(series, groups, config)`` (see :func:`grpo_core.doctor.diagnose`).
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor.findings import Finding, Series, Severity, _config_value, _is_zero, _points, found
from grpo_core.doctor.thresholds import (
    FLAT_REWARD_MIN_STEPS,
    LEARNING_ENDS,
    MEANINGFUL_RISE_MIN,
    MEANINGFUL_RISE_STD_SHARE,
    TREND_MIN_STEPS,
    TREND_P_VALUE,
    TREND_POWER,
    TREND_WINDOW,
)
from grpo_core.doctor.trends import _ends, _trend, detectable_rise, sen_slope_interval
from storage import GroupRecord


def reward_points(series: Series) -> list[tuple[int, float]]:
    """The finite logged ``reward`` points, ascending."""
    return [(s, v) for s, v in _points(series, "reward") if v is not None]


def meaningful_rise(series: Series, since: int) -> float:
    """The rise the reward trend should be able to see from step ``since`` on: :data:`MEANINGFUL_RISE_STD_SHARE` of
    the mean ``reward_std`` over those steps, at least :data:`MEANINGFUL_RISE_MIN` (reward units)."""
    stds = [v for s, v in _points(series, "reward_std") if v is not None and s >= since]
    spread = statistics.fmean(stds) if stds else 0.0
    return max(MEANINGFUL_RISE_MIN, MEANINGFUL_RISE_STD_SHARE * spread)


def rises(points: Sequence[tuple[int, float]]) -> bool:
    """Whether ``points`` (at least 3) rise: one-sided Mann-Kendall p < :data:`TREND_P_VALUE`, Sen's slope above 0
    and the 95% interval of Sen's slope not below 0 (:func:`~grpo_core.doctor.trends.sen_slope_interval`; a reward
    of a few completions is discrete, so many pairwise slopes tie at exactly 0 and the bound can sit there). Together
    they keep a flat noisy reward from being called rising 1 time in 20."""
    trend = _trend(points)
    if trend.p_rising >= TREND_P_VALUE or trend.slope <= 0:
        return False
    return sen_slope_interval([s for s, _ in points], [v for _, v in points])[0] >= 0


def reward_rising(series: Series, since: int | None = None) -> bool | None:
    """Whether the reward :func:`rises` over the latest :data:`TREND_WINDOW` points from step ``since`` on; ``None``
    with fewer than :data:`TREND_MIN_STEPS` points."""
    points = [(s, v) for s, v in reward_points(series) if since is None or s >= since][-TREND_WINDOW:]
    if len(points) < TREND_MIN_STEPS:
        return None
    return rises(points)


def reward_falling(series: Series, since: int | None = None) -> bool:
    """Whether the reward falls over the latest :data:`TREND_WINDOW` points from ``since`` on, significantly
    (one-sided Mann-Kendall, p < :data:`TREND_P_VALUE`) and by a meaningful amount (Sen's slope over the steps at
    least :func:`meaningful_rise`): a 1-in-20 chance "fall" of a flat reward is not one."""
    points = [(s, v) for s, v in reward_points(series) if since is None or s >= since][-TREND_WINDOW:]
    if len(points) < TREND_MIN_STEPS:
        return False
    trend = _trend(points)
    drop = -trend.slope * (points[-1][0] - points[0][0])
    return trend.p_falling < TREND_P_VALUE and drop >= meaningful_rise(series, points[0][0])


def rising_now(series: Series) -> bool:
    """Whether the reward verdict is "learning" and not "levelled off" (:func:`_reward_trend`): the reward rises
    significantly over the latest :data:`TREND_WINDOW` logged steps, or over the whole run read with the latest steps
    still trending up. The checks about flat groups and collapsing entropy stay silent while it holds: a policy that
    sharpens and solves more prompts on a rising reward is learning, and saying otherwise beside "Learning: reward
    up" contradicts the verdict (the quick start: entropy falls and groups turn all-right as it learns "a + b = c")."""
    codes = {f.code for f in _reward_trend(series, (), {})}
    return "learning" in codes and "reward_plateau" not in codes


def _ends_k(points: Sequence[tuple[int, float]]) -> int:
    """How many points at each end the learning title averages: :data:`LEARNING_ENDS`, at most a third."""
    return max(1, min(LEARNING_ENDS, len(points) // 3))


def _up(points: Sequence[tuple[int, float]]) -> bool:
    """Whether the mean of the last :func:`_ends_k` points is above that of the first: what "reward up from X to Y"
    says. A trend test alone can call a flat noisy reward rising (1 time in 20), and the title would then read "up
    from 0.382 to 0.373"."""
    k = _ends_k(points)
    return statistics.fmean(v for _, v in points[-k:]) > statistics.fmean(v for _, v in points[:k])


def spread_points(points: Sequence[tuple[int, float]], count: int = TREND_WINDOW) -> list[tuple[int, float]]:
    """At most ``count`` of ``points`` spread evenly over them, the first and the latest included (a trend test over
    a whole long run at the cost of one over the window)."""
    if len(points) <= count:
        return list(points)
    stride = (len(points) - 1) / (count - 1)
    return [points[round(i * stride)] for i in range(count)]


def _learning(window: list[tuple[int, float]], all_points: list[tuple[int, float]]) -> Finding:
    trend = _trend(window)
    k = _ends_k(all_points)
    first = statistics.fmean(v for _, v in all_points[:k])
    last = statistics.fmean(v for _, v in all_points[-k:])
    low, high = sen_slope_interval([s for s, _ in window], [v for _, v in window])
    return Finding(
        code="learning",
        severity=Severity.INFO,
        title=(
            f"Learning: reward up from {first:.3g} (mean of the first {k} logged steps) to {last:.3g} (the last {k}); "
            f"Mann-Kendall p = {trend.p_rising:.2g}, Sen's slope {trend.slope:+.2g}/step "
            f"(95% interval {low:+.2g} to {high:+.2g})"
        ),
        advice=(
            f"The weighted total reward has a significant upward trend over the latest {len(window)} logged steps "
            "(one-sided Mann-Kendall test for a monotonic trend; Sen's slope with its distribution-free interval). "
            "Check in Inspect that the completions earn it the way you meant (the task, not a loophole)."
        ),
        steps=tuple(s for s, _ in window),
    )


def _reward_trend(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any],
                  tips: Sequence[str] = ()) -> list[Finding]:
    """The reward verdict (module docstring); ``tips`` are the config settings that slow learning, for the "not
    improving" advice. Learning is judged over the whole run read (at most :data:`TREND_WINDOW` points spread
    over it, :func:`spread_points`), what it does now over the latest :data:`TREND_WINDOW` points."""
    points = reward_points(series)
    if len(points) < TREND_MIN_STEPS:
        return []
    if all(_is_zero(v) for _, v in points[-FLAT_REWARD_MIN_STEPS:]):
        return []  # flat at zero: reward_zero says it, with examples
    window = points[-TREND_WINDOW:]
    trend = _trend(window)
    whole = spread_points(points)
    learned = rises(whole) and _up(points)
    start, end = _ends(window)
    numbers = (
        f"{start:.3g} → {end:.3g} over the last {len(window)} logged steps, Sen's slope {trend.slope:+.2g}/step, "
        f"Mann-Kendall p = "
    )
    steps = tuple(s for s, _ in window)
    wanted = meaningful_rise(series, window[0][0])
    span = window[-1][0] - window[0][0]
    if trend.p_falling < TREND_P_VALUE and -trend.slope * span >= wanted:
        return found(
            "reward_falling", Severity.WARNING,
            title=f"Reward is falling: {numbers}{trend.p_falling:.2g} for a fall",
            advice=(
                "The policy is getting worse at what the rules reward. Look at the latest completions in Inspect "
                "(a broken format, repetition, a rule being gamed), watch KL and entropy, and lower the learning "
                f"rate{_config_value(config, 'learning_rate')} or raise beta{_config_value(config, 'beta')} to "
                "hold the policy nearer the reference model."
            ),
            steps=steps,
        )
    if rises(window) and _up(points):
        return [_learning(window, points)]
    if learned and len(points) > len(window):
        findings = [_learning(whole, points)]
        if trend.p_rising >= TREND_P_VALUE:
            findings.append(
                Finding(
                    code="reward_plateau",
                    severity=Severity.INFO,
                    title=f"Reward rose over the run and has levelled off: {numbers}{trend.p_rising:.2g} for a rise",
                    advice=(
                        "The run learned what it could from these prompts and rules. Stop here, or give it harder "
                        "prompts or a finer-grained reward to keep improving."
                    ),
                    steps=steps,
                )
            )
        return findings
    if trend.p_rising < TREND_P_VALUE:
        return found(
            "reward_slow", Severity.INFO,
            title=f"Reward may be rising: {numbers}{trend.p_rising:.2g} for a rise",
            advice=(
                "A one-sided trend test says rising, but the 95% interval of Sen's slope still reaches below 0, or "
                "the latest steps do not yet average more than the first: not yet enough to call it learning. Let "
                "it run longer."
            ),
            steps=steps,
        )
    visible = detectable_rise([s for s, _ in window], [v for _, v in window], TREND_P_VALUE, TREND_POWER)
    power = (
        f"with {len(window)} points and this noise, Mann-Kendall at p < {TREND_P_VALUE:g} sees a rise of "
        f"{visible:.2g} or more over these steps {TREND_POWER:.0%} of the time"
    )
    if visible > wanted:
        return found(
            "reward_undecided", Severity.INFO,
            title=f"Too early to tell whether the reward improves: {numbers}{trend.p_rising:.2g} for a rise",
            advice=(
                f"No significant trend yet, but the test cannot tell a real rise of {wanted:.2g} (half the spread "
                f"between a group's completions) from noise so far: {power}. Let it run longer before judging."
            ),
            steps=steps,
        )
    return found(
        "reward_flat", Severity.WARNING,
        title=f"Reward is not improving: {numbers}{trend.p_rising:.2g} for a rise",
        advice=(
            f"No upward trend in the weighted total reward, and the test had the power to see one: {power}, "
            f"and a rise of {wanted:.2g} would matter. "
            + (
                " ".join(tips)
                if tips
                else "The config looks reasonable: check that the groups carry signal "
                "(frac_reward_zero_std) and that the rules reward what you want (Inspect)."
            )
        ),
        steps=steps,
    )
