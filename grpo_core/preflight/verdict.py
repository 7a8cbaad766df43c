"""The preflight's verdict (pure, web side): will this run learn, and what to change.

:func:`judge` reads a :class:`~grpo_core.preflight.report.PreflightReport` through the checks of
:data:`ADVICE_CHECKS`, each giving ``(level, message)`` pairs: the share of zero-std groups (no learning signal)
judged by the lower bound of its 95% Wilson interval (a sample of a few groups cannot tell 25% from 75%), cut
completions that block the reward, reward rules that never apply, never fire or are constant, a main rule whose
rewards rarely differ within a group while shaping rules do, unscorable completions, answers a rule cannot read, and
flagged reward-hacking probes. Thresholds are the constants below, each with its reason.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from grpo_core.preflight.report import LEVEL_OK, LEVEL_PROBLEM, LEVEL_WARNING, PreflightReport, RuleStats, Verdict
from grpo_core.rewards.hacking_probe import describe
from grpo_core.rewards.registry import get_rule

ZERO_STD_PROBLEM = 0.5
"""Share of all-equal groups above which the verdict is "most groups give no learning signal"."""
ZERO_STD_WARNING = 0.4
"""Share of all-equal groups above which (at the lower bound of its 95% interval) a warning is given. The quick start,
which learns, has about 30% flat groups at first (TRL's ``frac_reward_zero_std`` over its first 10 steps, 0.25-0.3):
that share is ordinary in GRPO; a share confidently above 40% is not."""
MAIN_RULE_VARIES_MIN = 0.5
"""Share of groups in which the largest-weight rule should differ; below it, other rules carry most of the signal."""
TRUNCATION_WARNING = 0.3
"""Share of completions cut at ``max_completion_length`` above which the cuts are reported."""
TRUNCATION_NEARLY_ALL = 0.9
"""Without both finished and cut completions in the sample, the cuts block the reward from this share on."""
FINISH_GAIN_MIN = 0.05
"""Finished completions must score this much more (mean total) than cut ones for the cuts to teach finishing: GRPO's
advantages then push the policy to end within the limit (the quick start: 75% cut at first, learned away)."""
SHARE_Z = 1.96
"""z of the Wilson score interval (95%) around the zero-std share of a sample of a few groups: with 4 groups, 2 flat
ones are as consistent with a true 25% as with 75%, so the verdict reads the interval's lower bound (Wilson 1927,
"Probable inference, the law of succession, and statistical inference", JASA 22)."""
LEVEL_NOTE = "note"
"""Advice that does not make the verdict a warning (listed after the warnings)."""


def _main_rule(report: PreflightReport) -> RuleStats | None:
    weighted = [r for r in report.rules if r.weight != 0]
    return max(weighted, key=lambda r: abs(r.weight)) if weighted else None


def _rule_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """(level, message) for each rule that adds nothing: never applies, never fires, or constant. A rule other than
    the main one that did not fire in the sample while the main rule varies within groups is a note: a sample of a
    few groups misses a rule the model earns rarely (the quick start's number-only format rule, about 1 completion in
    20 at first), and the main rule already gives the run its signal."""
    found = []
    main = _main_rule(report)
    for stats in report.rules:
        if stats.weight == 0:
            continue
        label = f"`{stats.name}`" + (f" ({stats.rule})" if stats.rule != stats.name else "")
        if stats.count == 0:
            total = report.num_prompts * report.num_generations
            if "tests" in _rule_columns(stats.rule):  # the column is there (the launch checks that): its values
                why = ("the sampled rows' `tests` could not be run: a format the rule does not read (the pre-launch "
                       "check names such rows) or a sandbox failure (see the log).")
            else:
                why = "check that the dataset has the column it reads and that its parameters match it."
            message = f"rule {label} never applies (None for all {total} completions): {why}"
            found.append((LEVEL_WARNING, message))
        elif stats.nonzero_share == 0:
            if "pattern" in _param_names(stats.rule):
                hint = "check its parameters, e.g. its regex, on these examples, or loosen it"
            else:
                hint = (
                    "the model never earns it on these prompts: check its parameters and the column it reads "
                    "on these examples, or give partial credit"
                )
            shaping = main is not None and stats is not main and main.varies_share > 0
            if shaping:
                found.append((
                    LEVEL_NOTE,
                    f"rule {label} did not fire on any of the {stats.count} sampled completions; the main rule "
                    f"`{main.name}` varies within {main.varies_share:.0%} of groups, so the run can learn, and a rule "
                    f"the model earns rarely can miss a sample this small. If it should fire on these, {hint}.",
                ))
            else:
                found.append((LEVEL_WARNING, f"rule {label} never fires (0 on all {stats.count} completions): {hint}."))
        elif stats.min == stats.max:
            message = f"rule {label} gives every completion the same reward ({stats.min:.3g}): it adds no signal."
            found.append((LEVEL_WARNING, message))
    return found


def _rule_columns(rule: str) -> tuple[str, ...]:
    try:
        return tuple(get_rule(rule).columns)
    except ValueError:
        return ()


def _param_names(rule: str) -> set[str]:
    try:
        return {param.name for param in get_rule(rule).params}
    except ValueError:
        return set()


def signal_mostly_from(report: PreflightReport) -> tuple[RuleStats, list[str]] | None:
    """``(main rule, rules that vary in more groups)`` when the largest-|weight| rule differs within fewer than
    :data:`MAIN_RULE_VARIES_MIN` of the groups while other rules differ in more: in the remaining groups the whole
    learning signal comes from those others (typically shaping terms such as ``length`` or ``code_style``); else
    None. ``main.varies_share == 0`` means all of the signal comes from them."""
    weighted = [r for r in report.rules if r.weight != 0]
    if len(weighted) < 2 or report.zero_std_share >= 1:
        return None
    main = max(weighted, key=lambda r: abs(r.weight))
    others = [r.name for r in weighted if r is not main and r.varies_share > main.varies_share]
    if main.varies_share >= MAIN_RULE_VARIES_MIN or not others or main.count == 0:
        return None
    return main, others


def _names(names: Sequence[str]) -> str:
    return ", ".join(f"`{n}`" for n in names)


def _main_rule_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """Warn when the largest-weight rule never varies within a group while others do (the signal is elsewhere)."""
    found = signal_mostly_from(report)
    if found is None:
        return []
    main, others = found
    that = "that" if len(others) == 1 else "those"
    if main.varies_share == 0:
        where = "is the same within every group, so the learning signal comes only from"
    else:
        share = f"{main.varies_share:.0%}"
        where = f"differs within only {share} of groups; in the others the learning signal comes only from"
    message = (
        f"the main rule `{main.name}` (weight {main.weight:g}) {where} {_names(others)}: the policy will optimise "
        f"{that} first (look at the best-scored examples). Make the main rule reachable (easier prompts, partial "
        "credit), lower the shaping weights, or raise num_generations."
    )
    return [(LEVEL_WARNING, message)]


def wilson_interval(successes: int, n: int, z: float = SHARE_Z) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``successes / n`` (0-1 bounds); ``(0, 1)`` when ``n`` is 0."""
    if n <= 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _signal_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """Zero-std groups judged by the lower bound of the share's 95% Wilson interval over the sampled groups: a
    problem when even that is above :data:`ZERO_STD_PROBLEM`, a warning above :data:`ZERO_STD_WARNING`, a note
    when the share itself is above it (a few groups cannot tell)."""
    share = report.zero_std_share
    flat = round(share * report.num_prompts)
    low, high = wilson_interval(flat, report.num_prompts)
    interval = f"{flat} of {report.num_prompts} groups, 95% interval {low:.0%}-{high:.0%}"
    if low > ZERO_STD_PROBLEM or share >= 1:
        message = (
            f"most groups give no learning signal ({share:.0%} of groups have all-equal rewards, so zero "
            f"advantage; {interval}): loosen the format rule / add a dense partial-credit rule, or raise temperature "
            "or num_generations."
        )
        return [(LEVEL_PROBLEM, message)]
    if low > ZERO_STD_WARNING:
        message = (
            f"{share:.0%} of groups have all-equal rewards and give no learning signal ({interval}); a higher "
            "temperature or num_generations makes groups differ more often."
        )
        return [(LEVEL_WARNING, message)]
    if share > ZERO_STD_WARNING:
        message = (
            f"{share:.0%} of groups had all-equal rewards ({interval}): too few groups to tell a real share above "
            f"{ZERO_STD_WARNING:.0%} from chance; sample more prompts to know."
        )
        return [(LEVEL_NOTE, message)]
    return []


def _truncation_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """Cut completions: a warning when the cuts block the reward: :data:`TRUNCATION_NEARLY_ALL` or more are cut, the
    few finished ones do not score more than the cut ones by :data:`FINISH_GAIN_MIN` (or none finished), and the
    groups are mostly flat (more than :data:`ZERO_STD_WARNING` of them: the cut texts all score alike); a note
    otherwise (with more finishing, GRPO teaches the policy to finish within the limit, as in the quick start; the
    mean score of the 2-5 finished completions of a small sample is too noisy to say more)."""
    rate = report.truncation_rate
    if rate <= TRUNCATION_WARNING:
        return []
    limit = f"{rate:.0%} of completions are cut at max_completion_length ({report.max_completion_length} tokens)"
    gain = report.finish_gain
    signal = report.zero_std_share <= ZERO_STD_WARNING  # the cut completions still differ within groups
    pays = rate < TRUNCATION_NEARLY_ALL or (gain is not None and gain > FINISH_GAIN_MIN) or signal
    if pays:
        if gain is not None and gain > 0:
            why = f"finished completions score {gain:+.2g} more than cut ones"
        elif rate < TRUNCATION_NEARLY_ALL:
            why = f"{1 - rate:.0%} finish"
        else:
            why = f"rewards still differ within {1 - report.zero_std_share:.0%} of groups"
        message = (
            f"{limit}, but {why}, so GRPO's advantages teach the policy to finish within the limit; raise "
            "max_completion_length if the task needs longer answers."
        )
        return [(LEVEL_NOTE, message)]
    message = (
        f"{limit} before they end and finishing does not pay"
        + (f" (finished completions score {gain:+.2g} against cut ones)" if gain is not None else "")
        + ": raise max_completion_length (cut answers score badly and teach nothing about the answer)."
    )
    return [(LEVEL_WARNING, message)]


def _unscorable_advice(report: PreflightReport) -> list[tuple[str, str]]:
    if report.unscorable_share > 0:
        message = (
            f"no rule applied to {report.unscorable_share:.0%} of completions (TRL gives them a NaN reward and "
            "zero advantage): add a rule that scores every completion."
        )
        return [(LEVEL_WARNING, message)]
    return []


def _answer_coverage_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """A warning per answer rule that cannot read some rows' ``answer`` (those rows teach that rule nothing)."""
    return [(LEVEL_WARNING, f"{note}; fix or drop those rows.") for note in report.answer_coverage_notes]


def _prompt_leak_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """A warning per kind of prompt that gives its answer away: GRPO would pay for copying, not solving."""
    return [(LEVEL_WARNING, f"{note}.") for note in report.prompt_leak_notes]


def _probe_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """A warning per flagged reward-hacking probe: GRPO would push the policy towards that degenerate output."""
    return [
        (LEVEL_WARNING, f"reward hacking: {line}; gate or reweight that rule (e.g. `gate: {{rule: ..., min: ...}}`).")
        for line in describe(report.probes)
    ]


ADVICE_CHECKS: tuple[Callable[[PreflightReport], list[tuple[str, str]]], ...] = (
    _probe_advice,
    _signal_advice,
    _truncation_advice,
    _rule_advice,
    _main_rule_advice,
    _unscorable_advice,
    _answer_coverage_advice,
    _prompt_leak_advice,
)
"""The checks :func:`judge` runs, in the order their advice is listed."""


def judge(report: PreflightReport) -> Verdict:
    """The verdict on a report: can the run learn, and what to change.

    ``problem`` when the share of groups with all-equal totals (no learning signal) is above
    :data:`ZERO_STD_PROBLEM` even at the lower bound of its 95% interval; otherwise ``warning`` when any check in
    :data:`ADVICE_CHECKS` found something (zero-std groups above :data:`ZERO_STD_WARNING` by the same bound, cuts
    that block the reward, the main rule never firing, a rule that never applies or is constant, a main rule whose
    rewards rarely differ within a group while others do, unscorable completions, a flagged probe), else ``ok``.
    Notes (:data:`LEVEL_NOTE`: a share a few groups cannot settle, cuts that teach finishing, a shaping rule absent
    from the sample) are listed after the warnings and leave the verdict as it is.
    """
    found = [item for check in ADVICE_CHECKS for item in check(report)]
    # notes (a sample too small to tell, cuts that teach) are listed after the warnings and leave the verdict as is
    findings = [item for item in found if item[0] != LEVEL_NOTE]
    advice = [message for _, message in findings] + [message for level, message in found if level == LEVEL_NOTE]
    varying = 1 - report.zero_std_share
    if any(level == LEVEL_PROBLEM for level, _ in findings):
        if varying == 0:
            headline = "No group gives a learning signal: every completion of a group gets the same reward."
        else:
            headline = f"Most groups give no learning signal: rewards vary within only {varying:.0%} of groups."
        return Verdict(LEVEL_PROBLEM, headline, advice)
    shaping_only = signal_mostly_from(report)
    if shaping_only is not None and shaping_only[0].varies_share == 0:
        main, others = shaping_only
        return Verdict(
            LEVEL_WARNING,
            f"Rewards vary within {varying:.0%} of groups, but only through "
            f"{_names(others)}: this run can learn that, not `{main.name}`.",
            advice,
        )
    if findings:
        return Verdict(
            LEVEL_WARNING,
            f"Rewards vary within {varying:.0%} of groups: this run can learn, but see the advice.",
            advice,
        )
    return Verdict(LEVEL_OK, f"Rewards vary within groups ({varying:.0%} of them): this run can learn.", advice)
