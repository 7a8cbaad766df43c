"""The run doctor: why a GRPO run learns or not, read from its metrics and a sample of its groups.

:func:`diagnose` looks at TRL's logged metrics (``frac_reward_zero_std``, ``completions/clipped_ratio``, ``kl``,
``reward``, ``loss``, ...) and the most recent sampled groups, and returns plain-words findings, each with the
steps involved and what to change in the run config. Pure: no torch, no gradio, no store access.

The checks and their thresholds (module constants below):

- **no learning signal**: ``frac_reward_zero_std`` above 0.5 for 3 or more logged steps in a row. A group whose
  completions all score the same has advantage 0 everywhere and teaches nothing (DAPO's "dynamic sampling"
  motivation, Yu et al. 2025, arXiv 2503.14476).
- **truncated completions**: ``completions/clipped_ratio`` above 0.3.
- **KL drifting**: ``kl`` above 0.5, or at least three times its value of 5 steps earlier.
- **reward flat at zero**: ``reward`` exactly 0 for 3 or more logged steps in a row, with example completions and
  the rules that gave them 0.
- **NaN or inf**: a metric that has numbers at some steps and NaN/inf (the store's NULL) at others.
- **loss exactly 0**: explained; it is expected in GRPO (see :func:`_loss_zero`).

Left out: trends that need a baseline across runs (is the reward rising fast *enough*), and learning-rate
schedules.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storage import GroupRecord, MetricPoint

#: ``key -> (steps, values)``, steps ascending, ``None`` for NaN/inf/NULL (:attr:`app.charts.MetricSeries.data`).
Series = Mapping[str, tuple[Sequence[int], Sequence[float | None]]]

ZERO_STD_FRACTION = 0.5
ZERO_STD_MIN_STEPS = 3
CLIPPED_RATIO_MAX = 0.3
KL_MAX = 0.5
KL_GROWTH_FACTOR = 3.0
KL_GROWTH_WINDOW = 5
#: KL below this is treated as "not started yet": going from 1e-5 to 3e-5 is not drift.
KL_GROWTH_FLOOR = 0.01
FLAT_REWARD_MIN_STEPS = 3
EXAMPLES = 3
#: NaN in these means the optimisation itself broke; NaN elsewhere (a rule's mean) usually means "did not apply".
CORE_KEYS = ("loss", "grad_norm", "kl", "reward", "reward_std", "entropy")


class Severity(str, enum.Enum):
    """How urgent a finding is: ``error`` (the run cannot learn), ``warning`` (it learns badly), ``info``."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


_ORDER = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}


@dataclass(frozen=True)
class Finding:
    """One thing the doctor noticed.

    Attributes:
        code: stable identifier: ``zero_std``, ``clipped``, ``kl``, ``reward_zero``, ``nan``, ``nan_rule``,
            ``loss_zero``.
        severity: see :class:`Severity`.
        title: one line, with the numbers.
        advice: plain words: what it means and what to change.
        steps: the logged steps involved, ascending.
        examples: short illustrations (example completions with the rules that scored them), possibly empty.
    """

    code: str
    severity: Severity
    title: str
    advice: str
    steps: tuple[int, ...] = ()
    examples: tuple[str, ...] = ()


def series_from_points(points: Iterable[MetricPoint]) -> dict[str, tuple[list[int], list[float | None]]]:
    """Long-format store points (ordered by step) as :data:`Series`; a repeated ``(key, step)`` keeps the first."""
    series: dict[str, tuple[list[int], list[float | None]]] = {}
    for point in points:
        steps, values = series.setdefault(point.key, ([], []))
        if steps and steps[-1] >= point.step:
            continue
        steps.append(point.step)
        values.append(point.value)
    return series


def diagnose(
    series: Series, groups: Sequence[GroupRecord] = (), config: Mapping[str, Any] | None = None
) -> list[Finding]:
    """Everything the doctor finds in one run, most severe first.

    Args:
        series: the run's metrics, ``key -> (steps, values)`` with TRL's key names; ``None`` or a non-finite value
            is NaN (the store keeps NaN as NULL).
        groups: a sample of recent groups (``Store.recent_groups``), for example completions; may be empty.
        config: the run's config (``RunInfo.config``, a ``RunConfig`` dump), for the numbers in the advice
            (``beta``, ``learning_rate``, ``max_completion_length``, ...); may be missing.

    Returns:
        The findings; empty when nothing looks wrong (or nothing was logged yet).
    """
    config = config or {}
    findings = [
        finding
        for check in (_reward_zero, _nan, _zero_std, _clipped, _kl, _loss_zero)
        for finding in check(series, groups, config)
    ]
    return sorted(findings, key=lambda f: _ORDER[f.severity])  # stable: checks keep their order within a severity


# ----------------------------------------------------------------------------------------------------- helpers


def _number(value: float | None) -> float | None:
    """``value`` when it is a finite number, else ``None``."""
    if value is None:
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _points(series: Series, key: str) -> list[tuple[int, float | None]]:
    steps, values = series.get(key, ((), ()))
    return [(int(s), _number(v)) for s, v in zip(steps, values, strict=False)]


def _streaks(points: list[tuple[int, float | None]], predicate, min_length: int) -> list[list[int]]:
    """Maximal runs of consecutive logged points satisfying ``predicate`` (NaN breaks a run), at least
    ``min_length`` long; each as its steps."""
    streaks, current = [], []
    for step, value in points:
        if value is not None and predicate(value):
            current.append(step)
            continue
        if len(current) >= min_length:
            streaks.append(current)
        current = []
    if len(current) >= min_length:
        streaks.append(current)
    return streaks


def _config_value(config: Mapping[str, Any], key: str) -> str:
    return f" (now {config[key]})" if key in config else ""


def step_ranges(steps: Iterable[int]) -> str:
    """Steps as compact ranges: ``[1, 2, 3, 7, 9, 10]`` -> ``"1–3, 7, 9–10"``; empty -> ``""``."""
    ordered = sorted(set(steps))
    parts: list[str] = []
    start = prev = None
    for step in [*ordered, None]:
        if start is not None and (step is None or step != prev + 1):
            parts.append(str(start) if start == prev else f"{start}–{prev}")
            start = None
        if step is not None and start is None:
            start = step
        prev = step
    return ", ".join(parts)


def _clip(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_zero(value: float | None) -> bool:
    return value is not None and abs(value) < 1e-12


# ------------------------------------------------------------------------------------------------------ checks


def _zero_std(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    streaks = _streaks(_points(series, "frac_reward_zero_std"), lambda v: v > ZERO_STD_FRACTION, ZERO_STD_MIN_STEPS)
    if not streaks:
        return []
    steps = tuple(s for streak in streaks for s in streak)
    longest = max(len(s) for s in streaks)
    examples = []
    for group in groups:
        totals = [c.total_reward for c in group.completions if c.total_reward is not None]
        if len(totals) == len(group.completions) and totals and max(totals) - min(totals) <= 1e-9:
            examples.append(
                f"step {group.step}, dataset row {group.row_index}: all {len(totals)} completions scored "
                f"{totals[0]:.3g}"
            )
        if len(examples) == EXAMPLES:
            break
    return [
        Finding(
            code="zero_std",
            severity=Severity.WARNING,
            title=(
                f"Most groups give no learning signal: frac_reward_zero_std > {ZERO_STD_FRACTION} for "
                f"{longest} steps in a row"
            ),
            advice=(
                "In these groups every completion got the same reward, so every advantage is 0 and the group "
                "teaches nothing. If they all score 0 the task is too hard for the model (or the rule never "
                "fires); if they all score the maximum it is too easy. Make the reward denser (partial credit, "
                "a format or length term), raise temperature or num_generations"
                f"{_config_value(config, 'num_generations')} for more varied completions, or use prompts the "
                "model solves sometimes, not never and not always."
            ),
            steps=steps,
            examples=tuple(examples),
        )
    ]


def _clipped(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    points = _points(series, "completions/clipped_ratio")
    high = [(s, v) for s, v in points if v is not None and v > CLIPPED_RATIO_MAX]
    if not high:
        return []
    latest = next((v for _, v in reversed(points) if v is not None), None)
    still = latest is not None and latest > CLIPPED_RATIO_MAX
    worst = max(v for _, v in high)
    return [
        Finding(
            code="clipped",
            severity=Severity.WARNING if still else Severity.INFO,
            title=(
                f"Many completions are cut at max_completion_length: clipped_ratio up to {worst:.0%} "
                f"(> {CLIPPED_RATIO_MAX:.0%}){'' if still else ', not at the latest step'}"
            ),
            advice=(
                "A truncated completion never reaches its answer, so it is scored on unfinished text and its "
                f"length dominates the loss. Raise max_completion_length{_config_value(config, 'max_completion_length')}"
                ", or reward finishing early (a length rule with an overlong penalty, or a format rule that needs "
                "the closing tag)."
            ),
            steps=tuple(s for s, _ in high),
        )
    ]


def _kl(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    points = [(s, v) for s, v in _points(series, "kl") if v is not None]
    high = [s for s, v in points if v > KL_MAX]
    rising = []
    for i, (step, value) in enumerate(points):
        earlier = [v for s, v in points[:i] if s <= step - KL_GROWTH_WINDOW]
        if earlier and earlier[-1] >= KL_GROWTH_FLOOR and value >= KL_GROWTH_FACTOR * earlier[-1]:
            rising.append(step)
    if not high and not rising:
        return []
    if high and rising:
        what = f"KL is above {KL_MAX} and rising fast"
    elif high:
        what = f"KL is above {KL_MAX} (max {max(v for _, v in points):.3g})"
    else:
        what = f"KL is rising fast: ×{KL_GROWTH_FACTOR:g} or more within {KL_GROWTH_WINDOW} steps"
    return [
        Finding(
            code="kl",
            severity=Severity.WARNING,
            title=what,
            advice=(
                "The policy is moving away from the reference model fast. That can be reward hacking (check the "
                "completions in Inspect) or a step size too large for the model. Raise beta"
                f"{_config_value(config, 'beta')} to hold it closer, or lower the learning rate"
                f"{_config_value(config, 'learning_rate')}."
            ),
            steps=tuple(sorted(set(high) | set(rising))),
        )
    ]


def _zero_rules(rewards: Mapping[str, float | None]) -> str:
    rules = [name for name, value in rewards.items() if _is_zero(value)]
    skipped = [name for name, value in rewards.items() if value is None]
    parts = []
    if rules:
        parts.append("0 from " + ", ".join(rules))
    if skipped:
        parts.append("no score from " + ", ".join(skipped))
    return "; ".join(parts) or "total 0"


def _reward_zero(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    streaks = _streaks(_points(series, "reward"), _is_zero, FLAT_REWARD_MIN_STEPS)
    if not streaks:
        return []
    steps = tuple(s for streak in streaks for s in streak)
    examples = []
    for group in groups:  # newest first, as Store.recent_groups returns them
        for completion in group.completions:
            if completion.total_reward is None or _is_zero(completion.total_reward):
                examples.append(
                    f"step {group.step}, row {group.row_index}, completion #{completion.index}: "
                    f"“{_clip(completion.text) or '(empty)'}” — {_zero_rules(completion.rewards)}"
                )
                break  # one per group: three different prompts say more than three tries at one
        if len(examples) == EXAMPLES:
            break
    return [
        Finding(
            code="reward_zero",
            severity=Severity.ERROR,
            title=f"Reward is 0 at every step for {max(len(s) for s in streaks)} steps in a row",
            advice=(
                "No completion earns anything, so every advantage is 0 and nothing is learned. Compare the "
                "examples with what the rules expect (answer format, the dataset's answer column, a regex that "
                "never matches), add a dense term that partial answers can earn (format, length), or start from "
                "a model that solves some prompts."
            ),
            steps=steps,
            examples=tuple(examples),
        )
    ]


def _nan(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    core: dict[str, list[int]] = {}
    rules: dict[str, list[int]] = {}
    for key in sorted(series):
        points = _points(series, key)
        if not any(v is not None for _, v in points):
            continue  # never a number: not a metric this run computes (e.g. kl with beta = 0)
        bad = [s for s, v in points if v is None]
        if bad:
            (core if key in CORE_KEYS else rules)[key] = bad
    findings = []
    if core:
        findings.append(
            Finding(
                code="nan",
                severity=Severity.ERROR,
                title="NaN or inf in " + ", ".join(f"{k} ({len(s)} steps)" for k, s in core.items()),
                advice=(
                    "The optimisation produced non-numbers: the model's weights are likely broken from here on. "
                    f"Lower the learning rate{_config_value(config, 'learning_rate')}, keep max_grad_norm at 1 or "
                    "below, and check the reward rules return finite numbers."
                ),
                steps=tuple(sorted({s for steps in core.values() for s in steps})),
            )
        )
    if rules:
        findings.append(
            Finding(
                code="nan_rule",
                severity=Severity.WARNING,
                title="NaN in " + ", ".join(f"{k} ({len(s)} steps)" for k, s in rules.items()),
                advice=(
                    "A rule's mean is NaN when it returned None for every completion of the step (it did not "
                    "apply, e.g. a code rule on rows without tests) or returned NaN/inf. The total reward then "
                    "comes from the other rules only; check the rule's parameters and the dataset's columns."
                ),
                steps=tuple(sorted({s for steps in rules.values() for s in steps})),
            )
        )
    return findings


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
    return [
        Finding(
            code="loss_zero",
            severity=Severity.INFO,
            title=f"loss is exactly 0 at {len(zero_steps)} step{'s' if len(zero_steps) > 1 else ''} (expected in GRPO)",
            advice=" ".join(reasons),
            steps=tuple(zero_steps),
        )
    ]
