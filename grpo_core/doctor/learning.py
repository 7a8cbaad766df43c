"""The run doctor's checks on whether a run is learning: reward trend (with the config's advice; the verdict itself
in :mod:`~grpo_core.doctor.progress`), zero-std groups by cause, one rule carrying the reward, completion length
drift, beta with zero-std groups, train up while eval is flat; and advice tied to the run's config.

Each check takes ``(series, groups, config)`` and returns its findings (see :func:`grpo_core.doctor.diagnose`)."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor import progress
from grpo_core.doctor.findings import (
    Finding,
    Series,
    Severity,
    _config_value,
    _number,
    _points,
    _streaks,
    found,
)
from grpo_core.doctor.groups import (
    completion_outcome,
    reward_weights,
    rule_variance_shares,
    task_rule,
)
from grpo_core.doctor.registry import doctor_check
from grpo_core.doctor.thresholds import (
    BETA_HIGH,
    BETA_SUGGESTED,
    BETA_ZERO_STD_WINDOW,
    CLIPPED_RATIO_MAX,
    EVAL_GAIN_SHARE,
    EVAL_MIN_POINTS,
    EXAMPLES,
    FULL_LR_LOW,
    FULL_LR_SUGGESTED,
    GRAD_MIN_STEPS,
    GRAD_ZERO,
    LENGTH_NEAR_MAX,
    LENGTH_SHORT_RATIO,
    LORA_LR_LOW,
    LORA_LR_SUGGESTED,
    NUM_GENERATIONS_LOW,
    PASS_RATE_STEPS,
    RULE_SHARE_MAX,
    RULE_SHARE_MIN_GROUPS,
    SHORT_RUN_STEPS,
    TREND_MIN_STEPS,
    TREND_P_VALUE,
    ZERO_STD_FRACTION,
    ZERO_STD_MIN_STEPS,
    ZERO_STD_WARN_STEPS,
)
from grpo_core.doctor.trends import _ends, _trend, _trend_points
from storage import GroupRecord


def _short(number: float) -> str:
    """A config number as people write it: ``1e-05`` -> ``1e-5``, ``2.5e-05`` -> ``2.5e-5``, ``0.04`` -> ``0.04``."""
    if number == 0 or abs(number) >= 1e-3:
        return f"{number:g}"
    mantissa, exponent = f"{number:.2e}".split("e")
    return f"{mantissa.rstrip('0').rstrip('.')}e{int(exponent)}"


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


def _reward_level(series: Series, config: Mapping[str, Any], steps: Sequence[int]) -> str | None:
    """Why groups are flat, read from the mean ``reward`` over ``steps`` when no sampled group says: at the most
    the rules can give (the sum of the positive weights) every completion has full marks, the prompts are too easy;
    at 0 none earns anything, too hard. ``None`` in between or without weights."""
    weights = reward_weights(config)
    best = sum(w for w in weights.values() if w > 0)
    flagged = set(steps)
    rewards = [v for s, v in _points(series, "reward") if v is not None and s in flagged]
    if not rewards or best <= 0:
        return None
    mean = statistics.fmean(rewards)
    if mean >= best - 0.02 * best:
        return (
            f"The mean reward is {mean:.3g}, the most the rules give ({best:g}): the prompts are too easy (saturated), "
            "every completion already earns full marks. Use harder prompts, or drop the rows the model always solves."
        )
    if mean <= 0.02 * best:
        return (
            f"The mean reward is {mean:.3g} of at most {best:g}: the prompts are too hard, or the rule never fires. "
            "Use easier prompts or make the reward denser (partial credit, a format term)."
        )
    return None


@doctor_check(90)
def _zero_std(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``frac_reward_zero_std`` above :data:`ZERO_STD_FRACTION` for :data:`ZERO_STD_MIN_STEPS` or more logged steps in
    a row, with the cause read from the sampled groups or the reward level: a warning from
    :data:`ZERO_STD_WARN_STEPS` steps in a row or with the reward at 0 or at the most the rules give
    (:func:`_reward_level`), information otherwise. Silent while the reward rises significantly
    (:func:`~grpo_core.doctor.progress.rising_now`): groups turning flat because the policy now solves them is what
    learning looks like, and the remaining groups carry the signal that moves the reward."""
    streaks = _streaks(_points(series, "frac_reward_zero_std"), lambda v: v > ZERO_STD_FRACTION, ZERO_STD_MIN_STEPS)
    if not streaks or progress.rising_now(series):
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
    elif (level := _reward_level(series, config, steps)) is not None:
        cause = level
    else:
        cause = (
            "If they all score 0 the task is too hard for the model (or the rule never fires); if they all score "
            "the maximum it is too easy. Make the reward denser (partial credit, a format or length term), or use "
            "prompts the model solves sometimes, not never and not always."
        )
    rates = _pass_rates(groups, rule)
    # flat at the floor (reward 0) or the ceiling of the rules is no chance streak
    flagged = set(steps)
    at_zero = [v for s, v in _points(series, "reward") if s in flagged]
    pinned = _reward_level(series, config, steps) is not None or (bool(at_zero) and all(v == 0 for v in at_zero))
    lasting = longest >= ZERO_STD_WARN_STEPS or pinned
    return found(
        "zero_std", Severity.WARNING if lasting else Severity.INFO,
        title=(
            f"Most groups give no learning signal: frac_reward_zero_std > {ZERO_STD_FRACTION} for "
            f"{longest} steps in a row{split}"
        ),
        advice=(
            "In these groups every completion got the same reward, so every advantage is 0 and the group "
            "teaches nothing."
            + ("" if lasting else f" It has lasted fewer than {ZERO_STD_WARN_STEPS} steps in a row, which happens by "
               "chance with few prompts per step; the other groups still carry the signal. If it lasts:")
            + f" {cause} Raising temperature or num_generations"
            f"{_config_value(config, 'num_generations')} gives more varied completions."
            + (f" Pass rate by {rule} in the sampled groups: {rates}." if rates else "")
        ),
        steps=steps,
        examples=examples,
    )


@doctor_check(60)
def _reward_trend(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """The reward verdict (:func:`grpo_core.doctor.progress._reward_trend`), its "not improving" advice from the
    config (:func:`_learning_advice`); nothing while the gradient is 0 (the grad_zero error says why, and a higher
    learning rate cannot move parameters that get no gradient)."""
    if _gradient_is_zero(series):
        return []  # grad_zero says why nothing improves; "not improving" would add only wrong advice
    return progress._reward_trend(series, groups, config, _learning_advice(config))


def _gradient_is_zero(series: Series) -> bool:
    """Whether the latest :data:`GRAD_MIN_STEPS` logged ``grad_norm`` values are all 0."""
    latest = [v for _, v in _points(series, "grad_norm")][-GRAD_MIN_STEPS:]
    return len(latest) == GRAD_MIN_STEPS and all(v is not None and v <= GRAD_ZERO for v in latest)


@doctor_check(100)
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
    return found(
        "rule_dominates", Severity.WARNING if strictly else Severity.INFO,
        title=f"One reward rule carries {share:.0%} of the within-group reward variance: {rule}",
        advice=(
            f"GRPO's advantages come from reward differences within a group, so the policy learns mostly what "
            f"{rule} (weight {weight:g}) rewards, while {task} (weight {weights.get(task, 1.0):g}) hardly tells "
            "completions apart. A policy can then satisfy that rule without doing the task (reward hacking). "
            f"Lower {rule}'s weight, or make {task} denser (partial credit) or the prompts easier so that it "
            "varies within groups."
        ),
        steps=sorted({g.step for g in groups}),
        examples=(
            f"{name}: {value:.0%} of the variance (weight {weights.get(name, 1.0):g})"
            for name, value in shares.items()
        ),
    )


@doctor_check(160)
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
    return found(
        "eval_flat", Severity.WARNING,
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
        steps=(s for s, _ in evals),
    )


def _length_rule(config: Mapping[str, Any]) -> str:
    lengths = [
        f"{name} (weight {weight:g})"
        for name, weight in reward_weights(config).items()
        if name == "length" or name.startswith("length_")
    ]
    return f" The {', '.join(lengths)} rule pays for length; check its bounds and weight." if lengths else ""


@doctor_check(120)
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
        return found(
            "length_long", Severity.WARNING,
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
    if start > 0 and end <= LENGTH_SHORT_RATIO * start and trend.p_falling < TREND_P_VALUE:
        return found(
            "length_short", Severity.INFO,
            title=f"Completions are getting very short: mean {start:.3g} → {end:.3g} tokens",
            advice=(
                "Fine if the task wants a bare answer; if it needs reasoning, the policy is cutting it. Look "
                f"at the completions in Inspect.{_length_rule(config)}"
            ),
            steps=steps,
        )
    return []


@doctor_check(150)
def _beta_zero_std(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``beta > 0`` while most groups have zero std now: those groups add only the KL term to the loss. Silent while
    the reward rises significantly; it points at the zero-std finding only when that finding is shown."""
    beta = _number(config.get("beta"))
    if beta is None or beta <= 0 or progress.rising_now(series):
        return []  # while the reward rises, the groups that differ carry the signal (see _zero_std)
    window = [(s, v) for s, v in _points(series, "frac_reward_zero_std") if v is not None][-BETA_ZERO_STD_WINDOW:]
    if len(window) < ZERO_STD_MIN_STEPS:
        return []
    mean = statistics.fmean(v for _, v in window)
    if mean <= ZERO_STD_FRACTION:
        return []
    return found(
        "beta_zero_std", Severity.INFO,
        title=(
            f"beta {beta:g} > 0 while most groups have zero std: mean frac_reward_zero_std {mean:.0%} over the "
            f"last {len(window)} logged steps"
        ),
        advice=(
            "A group with zero std has every advantage 0, so its only gradient is the KL term: it pulls the "
            "policy back towards the reference model and teaches nothing else. Set beta to 0 (DAPO and Dr. "
            "GRPO train without it), or first give the groups signal"
            + (" (see the zero-std finding)." if _zero_std(series, groups, config) else ": harder or easier prompts, "
               "a denser reward, a higher temperature or num_generations.")
        ),
        steps=(s for s, v in window if v > ZERO_STD_FRACTION),
    )
