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
- **reward not improving**: no upward trend in ``reward`` over the latest 50 logged steps (at least 10), by a
  one-sided Mann-Kendall test at p < 0.05 (:func:`mann_kendall`); a falling reward, and a reward that rose earlier
  and has levelled off, are told apart. The advice weighs the run's ``learning_rate`` (with or without LoRA),
  ``beta``, ``num_generations`` and ``max_steps``.
- **why groups have zero std**: the flat groups of the sample split into *too easy* (every completion has full
  marks from the task rule), *too hard* (every completion has 0 from it) and *same partial score*, with the pass
  rate per step (:func:`completion_outcome`).
- **entropy collapse**: ``entropy`` falling to a quarter of its start (a significant downward trend) while the
  reward is not rising.
- **completion length drift**: ``completions/mean_length`` trending up to 90% of ``max_completion_length``, or down
  to a quarter of its start.
- **one rule carries the signal**: one reward rule explains 80% or more of the within-group variance of the
  weighted total reward across the sampled groups while it is not the task rule (:func:`rule_variance_shares`).
- **beta with zero-std groups**: ``beta > 0`` while more than half the groups had zero std over the last 5 steps.
- **train up, eval flat**: the training ``reward`` rises (a significant upward trend) between the first and last of
  3 or more evaluations while ``eval_reward`` (TRL's eval split metric) gains less than a quarter of that.

Left out: trends that need a baseline across runs (is the reward rising fast *enough*), and learning-rate
schedules.
"""

from __future__ import annotations

import enum
import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from storage import CompletionRecord, GroupRecord, MetricPoint

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

# Trend tests (reward, entropy, completion length).
#: Fewest logged points a trend is judged on: Mann-Kendall's normal approximation is fair from about 10 points
#: (Kendall 1975 tabulates the exact distribution of S up to n = 10), and fewer cannot tell a trend from GRPO's
#: step-to-step noise.
TREND_MIN_STEPS = 10
#: The trend tests read the latest this-many logged points, so a run that rose early and levelled off is judged on
#: what it does now (and the O(n²) test stays cheap on every refresh).
TREND_WINDOW = 50
#: One-sided significance level: a rise (or fall) with p below this is a trend; a 1-in-20 false alarm on a flat
#: series is acceptable for advice, and a stricter level misses real but slow rises in short runs.
TREND_P_VALUE = 0.05
#: Start and end of a trended metric are the medians of this many points, so one noisy step does not decide.
TREND_ENDS = 3
#: Entropy "collapsed" when its end is at most this fraction of its start: sampling has become near-greedy and
#: groups stop differing (Cui et al. 2025, "The Entropy Mechanism of RL for Reasoning LMs", arXiv 2505.22617).
ENTROPY_COLLAPSE_RATIO = 0.25
#: Mean completion length "at the limit" from this fraction of ``max_completion_length`` (the mean sits below the
#: limit even when most completions are cut).
LENGTH_NEAR_MAX = 0.9
#: Mean completion length "collapsed" when its end is at most this fraction of its start.
LENGTH_SHORT_RATIO = 0.25

# Advice tied to the run's config.
#: A LoRA adapter starts at zero and wants about 10x the full fine-tuning learning rate ("LoRA Without Regret",
#: Schulman et al. 2025); below this, a LoRA run of a few hundred steps barely moves.
LORA_LR_LOW = 5e-5
LORA_LR_SUGGESTED = 1e-4
#: Half of TRL's ``GRPOConfig`` default (1e-6), the usual rate for full-weight GRPO.
FULL_LR_LOW = 5e-7
FULL_LR_SUGGESTED = 1e-6
#: DeepSeekMath used beta 0.04 (Shao et al. 2024); far above it the KL term holds the policy at the reference.
BETA_HIGH = 0.1
BETA_SUGGESTED = 0.04
#: TRL's default group size; fewer completions make a group with both a right and a wrong answer (signal) rarer.
NUM_GENERATIONS_LOW = 8
#: A run this short rarely shows a reward trend: GRPO rewards often move only after tens to hundreds of steps.
SHORT_RUN_STEPS = 50

# Per-group checks on the sampled groups.
#: A rule "carries" the reward when it explains this share of the within-group variance of the weighted total.
RULE_SHARE_MAX = 0.8
#: Fewest sampled groups with within-group variance before shares are trusted.
RULE_SHARE_MIN_GROUPS = 4
#: How many of the latest sampled steps the pass-rate line lists.
PASS_RATE_STEPS = 6
#: The beta check reads the mean ``frac_reward_zero_std`` of this many latest logged steps: it is about now.
BETA_ZERO_STD_WINDOW = 5
# Held-out evaluation (runs with an eval split).
#: Fewest logged ``eval_reward`` points before train and eval are compared.
EVAL_MIN_POINTS = 3
#: The eval reward "follows" the train reward when it gains at least this share of the train reward's gain.
EVAL_GAIN_SHARE = 0.25
#: Scores closer than this count as equal (rewards are stored as floats).
SCORE_TOLERANCE = 1e-6


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
            ``loss_zero``, ``reward_flat``, ``reward_falling``, ``reward_plateau``, ``entropy_collapse``,
            ``length_long``, ``length_short``, ``rule_dominates``, ``beta_zero_std``, ``eval_flat``.
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
    checks = (
        _reward_zero,
        _nan,
        _reward_trend,
        _zero_std,
        _rule_dominates,
        _entropy_collapse,
        _length_drift,
        _clipped,
        _kl,
        _beta_zero_std,
        _eval_flat,
        _loss_zero,
    )
    findings: dict[str, Finding] = {}
    for check in checks:
        for finding in check(series, groups, config):
            findings.setdefault(finding.code, finding)  # one block per code in the panel
    # stable: checks keep their order within a severity
    return sorted(findings.values(), key=lambda f: _ORDER[f.severity])


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


# ------------------------------------------------------------------------------------------- trends and groups


@dataclass(frozen=True)
class Trend:
    """A Mann-Kendall trend test of one series, with Sen's slope.

    Attributes:
        n: how many points were tested.
        s: Mann-Kendall's S, the sum over pairs ``i < j`` of ``sign(x_j - x_i)``; in ``[-n(n-1)/2, n(n-1)/2]``.
        z: S standardised with the continuity correction, ``(S - sign(S)) / sqrt(Var S)``; 0 when S or Var S is 0.
        p_rising: one-sided p-value of "no trend" against "rising" (normal approximation), ``1 - Phi(z)``.
        p_falling: the same against "falling", ``Phi(z)``.
        slope: Sen's slope, the median of ``(x_j - x_i) / (t_j - t_i)`` over pairs, in value units per step.
    """

    n: int
    s: int
    z: float
    p_rising: float
    p_falling: float
    slope: float


def _sign(difference: float) -> int:
    return 0 if abs(difference) <= SCORE_TOLERANCE else (1 if difference > 0 else -1)


def mann_kendall(steps: Sequence[int], values: Sequence[float]) -> Trend:
    """The Mann-Kendall test for a monotonic trend in ``values`` (logged at ``steps``), and Sen's slope.

    ``S = sum_{i<j} sign(x_j - x_i)``; under "no trend" S is near-normal with mean 0 and
    ``Var S = [n(n-1)(2n+5) - sum_t t(t-1)(2t+5)] / 18``, ``t`` the sizes of the groups of tied values; the
    p-values use ``Phi(z) = (1 + erf(z / sqrt 2)) / 2``. Values closer than :data:`SCORE_TOLERANCE` are ties.
    A constant series has S = 0 and both p-values 0.5. O(n²): meant for :data:`TREND_WINDOW` points.

    Sources: H. B. Mann, "Nonparametric tests against trend", Econometrica 13 (1945); M. G. Kendall, *Rank
    Correlation Methods*, 4th ed. (1975); P. K. Sen, "Estimates of the regression coefficient based on Kendall's
    tau", JASA 63 (1968).

    Args:
        steps: the logged steps, ascending, same length as ``values``.
        values: finite numbers.

    Raises:
        ValueError: the lengths differ, or there are fewer than 2 points.
    """
    n = len(values)
    if len(steps) != n:
        raise ValueError(f"steps and values differ in length: {len(steps)} != {n}")
    if n < 2:
        raise ValueError(f"a trend needs at least 2 points, got {n}")
    s = 0
    slopes = []
    for i in range(n - 1):
        for j in range(i + 1, n):
            s += _sign(values[j] - values[i])
            if steps[j] != steps[i]:
                slopes.append((values[j] - values[i]) / (steps[j] - steps[i]))
    ties, run = [], 1
    ordered = sorted(values)
    for previous, value in zip(ordered, ordered[1:], strict=False):
        if _sign(value - previous) == 0:
            run += 1
            continue
        ties.append(run)
        run = 1
    ties.append(run)
    variance = (n * (n - 1) * (2 * n + 5) - sum(t * (t - 1) * (2 * t + 5) for t in ties)) / 18
    z = 0.0 if s == 0 or variance <= 0 else (s - (1 if s > 0 else -1)) / math.sqrt(variance)
    below = 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))
    slope = statistics.median(slopes) if slopes else 0.0
    return Trend(n=n, s=s, z=z, p_rising=1.0 - below, p_falling=below, slope=slope)


def _trend_points(series: Series, key: str, window: int = TREND_WINDOW) -> list[tuple[int, float]]:
    """The latest ``window`` finite points of ``key``."""
    return [(s, v) for s, v in _points(series, key) if v is not None][-window:]


def _trend(points: Sequence[tuple[int, float]]) -> Trend:
    return mann_kendall([s for s, _ in points], [v for _, v in points])


def _ends(points: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """Median of the first and of the last :data:`TREND_ENDS` values."""
    values = [v for _, v in points]
    return statistics.median(values[:TREND_ENDS]), statistics.median(values[-TREND_ENDS:])


def reward_weights(config: Mapping[str, Any]) -> dict[str, float]:
    """Each reward function's weight by its metric name, in the config's order.

    Names follow :func:`grpo_core.rewards.compose.build_reward_funcs`: a spec's ``name``, else its ``rule``, with
    ``_2``, ``_3``... on a repeated name (a ``plugin`` rule without ``name`` is logged under its function's name,
    which the config does not hold; callers give unknown names weight 1).

    Args:
        config: a run config dump; ``config["rewards"]`` is a list of ``RewardSpec`` mappings.

    Returns:
        ``name -> weight``; empty when the config lists no rules.
    """
    weights: dict[str, float] = {}
    for spec in config.get("rewards") or ():
        if not isinstance(spec, Mapping) or not spec.get("rule"):
            continue
        base = (spec.get("name") or "").strip() or str(spec["rule"])
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


def _short(number: float) -> str:
    """A config number as people write it: ``1e-05`` -> ``1e-5``, ``2.5e-05`` -> ``2.5e-5``, ``0.04`` -> ``0.04``."""
    if number == 0 or abs(number) >= 1e-3:
        return f"{number:g}"
    mantissa, exponent = f"{number:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


def _learning_advice(config: Mapping[str, Any]) -> list[str]:
    """Config settings that slow learning down, each as a sentence with the value to try."""
    tips = []
    max_steps = config.get("max_steps")
    short = isinstance(max_steps, int) and max_steps <= SHORT_RUN_STEPS
    learning_rate = _number(config.get("learning_rate"))
    if learning_rate is not None:
        if config.get("use_lora") and learning_rate < LORA_LR_LOW:
            tips.append(
                f"learning_rate {_short(learning_rate)} with LoRA is low{' for a short run' if short else ''}: try "
                f"{_short(LORA_LR_SUGGESTED)} (an adapter starts at zero and wants about 10× the full fine-tuning rate)."
            )
        elif config.get("use_lora") is False and learning_rate < FULL_LR_LOW:
            tips.append(
                f"learning_rate {_short(learning_rate)} is low for full fine-tuning: try {_short(FULL_LR_SUGGESTED)} "
                "(TRL's default)."
            )
    beta = _number(config.get("beta"))
    if beta is not None and beta > BETA_HIGH:
        tips.append(
            f"beta {beta:g} holds the policy close to the reference model: try {BETA_SUGGESTED:g}, or 0 (DAPO and "
            "Dr. GRPO train without the KL term)."
        )
    num_generations = config.get("num_generations")
    if isinstance(num_generations, int) and num_generations < NUM_GENERATIONS_LOW:
        tips.append(
            f"num_generations {num_generations} is a small group: {NUM_GENERATIONS_LOW} or more makes a group with "
            "both a better and a worse completion (a learning signal) likelier."
        )
    if short:
        tips.append(
            f"max_steps {max_steps} is short: GRPO rewards often start to move only after tens to hundreds of steps."
        )
    return tips


# ------------------------------------------------------------------------------------------------------ checks


def _flat_group_causes(groups: Sequence[GroupRecord], rule: str | None) -> dict[str, list[GroupRecord]]:
    """The sampled groups whose completions all scored the same total, by cause: ``"easy"`` (every completion right
    by the task rule), ``"hard"`` (every one wrong) and ``"partial"`` (anything else, e.g. the same partial score or
    the task rule not scoring)."""
    causes: dict[str, list[GroupRecord]] = {"easy": [], "hard": [], "partial": []}
    for group in groups:
        totals = [c.total_reward for c in group.completions if c.total_reward is not None]
        if not totals or len(totals) != len(group.completions) or max(totals) - min(totals) > 1e-9:
            continue
        outcomes = {completion_outcome(c, rule) for c in group.completions} if rule else {None}
        cause = "easy" if outcomes == {"right"} else "hard" if outcomes == {"wrong"} else "partial"
        causes[cause].append(group)
    return causes


def _pass_rates(groups: Sequence[GroupRecord], rule: str | None) -> str:
    """``"step 11: 25% (2/8), step 12: 0% (0/8)"``: the share of the sampled completions the task rule scored
    right, for the latest :data:`PASS_RATE_STEPS` steps."""
    if not rule:
        return ""
    counts: dict[int, list[int]] = {}
    for group in groups:
        for completion in group.completions:
            outcome = completion_outcome(completion, rule)
            if outcome is not None:
                right, scored = counts.setdefault(group.step, [0, 0])
                counts[group.step] = [right + (outcome == "right"), scored + 1]
    steps = sorted(counts)[-PASS_RATE_STEPS:]
    return ", ".join(f"step {s}: {counts[s][0] / counts[s][1]:.0%} ({counts[s][0]}/{counts[s][1]})" for s in steps)


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
    rule = task_rule(config, groups)
    causes = _flat_group_causes(groups, rule)
    counted = {cause: len(flat) for cause, flat in causes.items() if flat}
    split = ""
    if counted:
        words = {"easy": "too easy (all right)", "hard": "too hard (all wrong)", "partial": "same partial score"}
        split = "; sampled flat groups: " + ", ".join(f"{n} {words[c]}" for c, n in counted.items())
    if counted and max(counted, key=lambda c: counted[c]) == "easy":
        cause = (
            f"Most sampled flat groups are too easy: every completion got full marks from {rule}. Use harder "
            "prompts, or drop the rows the model always solves."
        )
    elif counted and max(counted, key=lambda c: counted[c]) == "hard":
        cause = (
            f"Most sampled flat groups are too hard: every completion got 0 from {rule}. Use easier prompts, make "
            "the reward denser (partial credit, a format or length term), or check that the rule can fire at all."
        )
    else:
        cause = (
            "If they all score 0 the task is too hard for the model (or the rule never fires); if they all score "
            "the maximum it is too easy. Make the reward denser (partial credit, a format or length term), or use "
            "prompts the model solves sometimes, not never and not always."
        )
    rates = _pass_rates(groups, rule)
    return [
        Finding(
            code="zero_std",
            severity=Severity.WARNING,
            title=(
                f"Most groups give no learning signal: frac_reward_zero_std > {ZERO_STD_FRACTION} for "
                f"{longest} steps in a row{split}"
            ),
            advice=(
                "In these groups every completion got the same reward, so every advantage is 0 and the group "
                f"teaches nothing. {cause} Raising temperature or num_generations"
                f"{_config_value(config, 'num_generations')} gives more varied completions."
                + (f" Pass rate by {rule} in the sampled groups: {rates}." if rates else "")
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


def _reward_trend(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Reward not rising over the latest :data:`TREND_WINDOW` logged steps (Mann-Kendall, :func:`mann_kendall`)."""
    points = [(s, v) for s, v in _points(series, "reward") if v is not None]
    if len(points) < TREND_MIN_STEPS:
        return []
    if all(_is_zero(v) for _, v in points[-FLAT_REWARD_MIN_STEPS:]):
        return []  # flat at zero: reward_zero says it, with examples
    window = points[-TREND_WINDOW:]
    trend = _trend(window)
    if trend.p_rising < TREND_P_VALUE:
        return []
    start, end = _ends(window)
    numbers = (
        f"{start:.3g} → {end:.3g} over the last {len(window)} logged steps, Sen's slope {trend.slope:+.2g}/step, "
        f"Mann-Kendall p = "
    )
    tips = _learning_advice(config)
    if trend.p_falling < TREND_P_VALUE:
        learning_rate = _config_value(config, "learning_rate")
        return [
            Finding(
                code="reward_falling",
                severity=Severity.WARNING,
                title=f"Reward is falling: {numbers}{trend.p_falling:.2g} for a fall",
                advice=(
                    "The policy is getting worse at what the rules reward. Look at the latest completions in Inspect "
                    "(a broken format, repetition, a rule being gamed), watch KL, and lower the learning rate"
                    f"{learning_rate} or raise beta{_config_value(config, 'beta')} to hold the policy nearer the "
                    "reference model."
                ),
                steps=tuple(s for s, _ in window),
            )
        ]
    earlier = points[: -len(window)][-TREND_WINDOW:]
    if len(earlier) >= TREND_MIN_STEPS and _trend(earlier).p_rising < TREND_P_VALUE:
        return [
            Finding(
                code="reward_plateau",
                severity=Severity.INFO,
                title=f"Reward rose earlier and has levelled off: {numbers}{trend.p_rising:.2g}",
                advice=(
                    "The run learned what it could from these prompts and rules. Stop here, or give it harder "
                    "prompts or a finer-grained reward to keep improving."
                ),
                steps=tuple(s for s, _ in window),
            )
        ]
    return [
        Finding(
            code="reward_flat",
            severity=Severity.WARNING,
            title=f"Reward is not improving: {numbers}{trend.p_rising:.2g} for a rise",
            advice=(
                "No upward trend in the weighted total reward. "
                + (" ".join(tips) if tips else "The config looks reasonable: check that the groups carry signal "
                   "(frac_reward_zero_std) and that the rules reward what you want (Inspect).")
            ),
            steps=tuple(s for s, _ in window),
        )
    ]


def _rule_dominates(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """One rule explains most of the within-group reward variance while it is not the task rule: the advantages,
    and so the policy, follow that rule only (a reward-hacking risk)."""
    weights = reward_weights(config)
    shares, used = rule_variance_shares(groups, weights)
    if used < RULE_SHARE_MIN_GROUPS or len(shares) < 2:
        return []
    rule, share = next(iter(shares.items()))
    weight = weights.get(rule, 1.0)
    heavier = [name for name in shares if name != rule and weights.get(name, 1.0) >= weight]
    if share < RULE_SHARE_MAX or not heavier:
        return []  # the heaviest rule carrying the signal is the task doing its job
    strictly = [name for name in heavier if weights.get(name, 1.0) > weight]
    task = task_rule(config, groups) or heavier[0]
    return [
        Finding(
            code="rule_dominates",
            severity=Severity.WARNING if strictly else Severity.INFO,
            title=f"One reward rule carries {share:.0%} of the within-group reward variance: {rule}",
            advice=(
                f"GRPO's advantages come from reward differences within a group, so the policy learns mostly what "
                f"{rule} (weight {weight:g}) rewards, while {task} (weight {weights.get(task, 1.0):g}) hardly tells "
                "completions apart. A policy can then satisfy that rule without doing the task (reward hacking). "
                f"Lower {rule}'s weight, or make {task} denser (partial credit) or the prompts easier so that it "
                "varies within groups."
            ),
            steps=tuple(sorted({g.step for g in groups})),
            examples=tuple(
                f"{name}: {value:.0%} of the variance (weight {weights.get(name, 1.0):g})" for name, value in shares.items()
            ),
        )
    ]


def _entropy_collapse(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Entropy falling towards 0 (a significant fall to :data:`ENTROPY_COLLAPSE_RATIO` of its start) while the reward
    over the same steps is not rising."""
    window = _trend_points(series, "entropy")
    if len(window) < TREND_MIN_STEPS:
        return []
    start, end = _ends(window)
    trend = _trend(window)
    if start <= 0 or end > ENTROPY_COLLAPSE_RATIO * start or trend.p_falling >= TREND_P_VALUE:
        return []
    first = window[0][0]
    reward = [(s, v) for s, v in _points(series, "reward") if v is not None and s >= first]
    if len(reward) >= TREND_MIN_STEPS and _trend(reward).p_rising < TREND_P_VALUE:
        return []  # sharpening on a rising reward is what learning looks like
    beta = _number(config.get("beta"))
    return [
        Finding(
            code="entropy_collapse",
            severity=Severity.WARNING,
            title=f"Entropy is collapsing while the reward is flat: {start:.3g} → {end:.3g} nats per token",
            advice=(
                "The policy has become nearly deterministic without getting better: completions of a group look "
                "alike, their rewards tie, and advantages vanish. Raise temperature"
                f"{_config_value(config, 'temperature')} for more varied rollouts, lower the learning rate"
                f"{_config_value(config, 'learning_rate')}"
                + (", and set beta > 0 (now 0) to hold the policy near the reference model." if beta == 0 else ".")
            ),
            steps=tuple(s for s, _ in window),
        )
    ]


def _eval_flat(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Train reward rising while the eval split's reward stays flat: the policy improves on the training prompts
    only. Compares the train ``reward`` between the first and last of at least :data:`EVAL_MIN_POINTS` evaluations
    (a significant rising trend, gain from the median of its first to its last values) with the ``eval_reward``
    gain over the same steps (last minus first evaluation)."""
    evals = [(s, v) for s, v in _points(series, "eval_reward") if v is not None]
    if len(evals) < EVAL_MIN_POINTS:
        return []
    first, last = evals[0][0], evals[-1][0]
    train = [(s, v) for s, v in _points(series, "reward") if v is not None and first <= s <= last]
    if len(train) < TREND_MIN_STEPS or _trend(train).p_rising >= TREND_P_VALUE:
        return []
    train_start, train_end = _ends(train)
    train_gain = train_end - train_start
    eval_gain = evals[-1][1] - evals[0][1]
    if train_gain <= 0 or eval_gain >= EVAL_GAIN_SHARE * train_gain:
        return []
    return [
        Finding(
            code="eval_flat",
            severity=Severity.WARNING,
            title=(
                f"Train reward rises ({train_start:.3g} → {train_end:.3g}) but the eval reward does not "
                f"({evals[0][1]:.3g} → {evals[-1][1]:.3g}, steps {first}–{last})"
            ),
            advice=(
                "The policy gets better on the training prompts only: it memorises them, or games a rule in a way "
                "the held-out prompts do not pay for. Compare train and eval groups in Inspect; more distinct "
                f"training rows, a lower learning rate{_config_value(config, 'learning_rate')}, fewer "
                f"num_iterations{_config_value(config, 'num_iterations')}, or stopping near the best eval step "
                "keep what generalises."
            ),
            steps=tuple(s for s, _ in evals),
        )
    ]


def _length_rule(config: Mapping[str, Any]) -> str:
    lengths = [
        f"{name} (weight {weight:g})"
        for name, weight in reward_weights(config).items()
        if name == "length" or name.startswith("length_")
    ]
    return f" The {', '.join(lengths)} rule pays for length; check its bounds and weight." if lengths else ""


def _length_drift(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """Mean completion length trending to ``max_completion_length``, or down to very short. Growth to the limit is
    left to the clipped finding while ``clipped_ratio`` is above :data:`CLIPPED_RATIO_MAX` at the latest step: it
    says the same with the same advice."""
    window = _trend_points(series, "completions/mean_length")
    if len(window) < TREND_MIN_STEPS:
        return []
    start, end = _ends(window)
    trend = _trend(window)
    limit = _number(config.get("max_completion_length"))
    steps = tuple(s for s, _ in window)
    clipped = [v for _, v in _points(series, "completions/clipped_ratio") if v is not None]
    if clipped and clipped[-1] > CLIPPED_RATIO_MAX:
        limit = None
    if limit and end >= LENGTH_NEAR_MAX * limit and trend.p_rising < TREND_P_VALUE:
        return [
            Finding(
                code="length_long",
                severity=Severity.WARNING,
                title=(
                    f"Completions are growing to max_completion_length: mean {start:.3g} → {end:.3g} tokens of "
                    f"{limit:g}"
                ),
                advice=(
                    "Longer completions soon get cut, and a cut completion is scored on unfinished text. Raise "
                    f"max_completion_length{_config_value(config, 'max_completion_length')} if the task needs the "
                    "room, or reward finishing (a length rule with an overlong penalty, a format rule that needs "
                    f"the closing tag).{_length_rule(config)}"
                ),
                steps=steps,
            )
        ]
    if start > 0 and end <= LENGTH_SHORT_RATIO * start and trend.p_falling < TREND_P_VALUE:
        return [
            Finding(
                code="length_short",
                severity=Severity.INFO,
                title=f"Completions are getting very short: mean {start:.3g} → {end:.3g} tokens",
                advice=(
                    "Fine if the task wants a bare answer; if it needs reasoning, the policy is cutting it. Look "
                    f"at the completions in Inspect.{_length_rule(config)}"
                ),
                steps=steps,
            )
        ]
    return []


def _beta_zero_std(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``beta > 0`` while most groups have zero std now: those groups add only the KL term to the loss."""
    beta = _number(config.get("beta"))
    if beta is None or beta <= 0:
        return []
    window = [(s, v) for s, v in _points(series, "frac_reward_zero_std") if v is not None][-BETA_ZERO_STD_WINDOW:]
    if len(window) < ZERO_STD_MIN_STEPS:
        return []
    mean = statistics.fmean(v for _, v in window)
    if mean <= ZERO_STD_FRACTION:
        return []
    return [
        Finding(
            code="beta_zero_std",
            severity=Severity.INFO,
            title=(
                f"beta {beta:g} > 0 while most groups have zero std: mean frac_reward_zero_std {mean:.0%} over the "
                f"last {len(window)} logged steps"
            ),
            advice=(
                "A group with zero std has every advantage 0, so its only gradient is the KL term: it pulls the "
                "policy back towards the reference model and teaches nothing else. Set beta to 0 (DAPO and Dr. "
                "GRPO train without it), or first give the groups signal (see the zero-std finding)."
            ),
            steps=tuple(s for s, v in window if v > ZERO_STD_FRACTION),
        )
    ]
