"""The preflight report (pure, web side): what sampled groups show, and the verdict "will this run learn?".

GRPO (DeepSeekMath, Shao et al. 2024, arXiv 2402.03300) trains on group-relative advantages
``(r - mean(group)) / (std(group) + 1e-4)``: a group whose completions all get the same total reward has zero
advantage everywhere and contributes no policy gradient (only the KL term). DAPO (Yu et al. 2025, arXiv 2503.14476,
"dynamic sampling") filters such zero-std groups out for that reason; TRL logs their share as
``frac_reward_zero_std``. A run whose reward rules give most groups equal totals (a strict format rule nothing
passes, an answer the model never gets right) burns its steps learning nothing, which is cheap to find out before
training.

:func:`summarize` turns scored groups (:class:`SampledGroup`, sampled by :mod:`grpo_core.worker.preflight`) into a
:class:`PreflightReport`; :func:`judge` gives the verdict and advice in plain words; :func:`format_report` writes it
for a terminal. The web process reads reports (:mod:`grpo_core.jobs.preflight`) through this module; it imports no
torch.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grpo_core.rewards.compose import GroupScore, build_reward_funcs
from grpo_core.rewards.hacking_probe import ProbeResult, describe, flagged
from grpo_core.rewards.registry import get_rule
from grpo_core.runs.config import RunConfig

DEFAULT_PROMPTS = 4
"""Prompts sampled by default: two optimizer steps' worth with the default batch (8 completions, G = 4)."""

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
EQUAL_ATOL = 1e-6
"""Totals closer than this count as equal (TRL: ``torch.isclose(std, 0)``)."""

LEVEL_OK = "ok"
LEVEL_WARNING = "warning"
LEVEL_PROBLEM = "problem"


# ------------------------------------------------------------------------------------------------- the report


@dataclass
class SampledGroup:
    """One prompt's group of sampled completions with their scores (input of :func:`summarize`).

    Attributes:
        row_index: 0-based row of the dataset the prompt came from.
        prompt: the prompt as text (chat prompts as ``role: content`` lines).
        texts: the G completion texts.
        num_tokens: tokens of each completion (its end-of-sequence token included, as TRL counts).
        truncated: per completion, True when it reached ``max_completion_length`` without ending.
        score: the rewards, totals and advantages of :func:`grpo_core.rewards.compose.score_group`.
        probes: the reward-hacking probe of this row against these completions (:func:`grpo_core.rewards.hacking_probe.
            probe_row`); empty when it was not run.
    """

    row_index: int
    prompt: str
    texts: list[str]
    num_tokens: list[int]
    truncated: list[bool]
    score: GroupScore
    probes: list[ProbeResult] = field(default_factory=list)


@dataclass
class RuleStats:
    """One reward rule over every sampled completion.

    Attributes:
        name, rule, weight: metric name (``rewards/<name>/mean`` in TRL), registry rule, weight in the sum.
        count: completions scored by the rule (``None`` rewards excluded).
        mean, std, min, max: of the rule's non-``None`` rewards (``std`` unbiased, like TRL's ``rewards/<name>/std``;
            all ``None`` when ``count`` is 0, ``std`` also with one value).
        none_share: share of completions the rule returned ``None`` for (did not apply), 0..1.
        nonzero_share: share of scored completions with a non-zero reward, 0..1 (0: the rule never fires).
        varies_share: share of groups in which the rule's rewards are not all equal, 0..1 (its own signal).
    """

    name: str
    rule: str
    weight: float
    count: int
    mean: float | None
    std: float | None
    min: float | None
    max: float | None
    none_share: float
    nonzero_share: float
    varies_share: float


@dataclass
class ExampleCompletion:
    """A sampled completion shown in the report (the best and the worst of the first groups)."""

    row_index: int
    prompt: str
    text: str
    rewards: dict[str, float | None]
    total: float | None
    advantage: float
    num_tokens: int
    truncated: bool


@dataclass
class Verdict:
    """The plain-words conclusion.

    Attributes:
        level: ``"ok"`` (the run can learn), ``"warning"`` (it can, but see the advice) or ``"problem"`` (most
            groups give no learning signal).
        headline: one sentence.
        advice: one sentence per finding, most important first.
    """

    level: str
    headline: str
    advice: list[str] = field(default_factory=list)


@dataclass
class PreflightReport:
    """What a preflight found (JSON-serialisable with :meth:`to_dict`).

    Attributes:
        model: the run's model field.
        num_prompts, num_generations: groups sampled and completions per group (G).
        max_completion_length: the generation limit, in tokens; ``temperature``, ``top_p``: sampling settings.
        rules: per-rule statistics, in the run's order.
        zero_std_share: share of groups whose totals are all equal (or that have fewer than two scorable
            completions): no learning signal. TRL's ``frac_reward_zero_std``.
        truncation_rate: share of completions with no end-of-sequence token within ``max_completion_length``.
        mean_completion_tokens: mean completion length in tokens.
        unscorable_share: share of completions no rule applied to (TRL: NaN total, advantage 0).
        mean_total, std_total: of the weighted totals over all scorable completions.
        examples: a few completions (best and worst of the first groups).
        seconds: wall time of loading and sampling.
        verdict: see :func:`judge`.
        probes: the flagged reward-hacking probes (degenerate completions scoring at or above a row's best sampled
            completion), one per (probe, rule); see :mod:`grpo_core.rewards.hacking_probe`.
        answers_not_judged: answer rule -> rows of the whole dataset whose ``answer`` it cannot read (it gives them
            ``None``); only rules that miss rows (:mod:`grpo_core.rewards.answer_coverage`).
        answer_coverage_notes: one line per such rule, with example rows.
        template_opened_think: whether the model's chat template opens ``<think>`` in the prompts (format rules
            with ``template_opened_think: auto`` read completions as starting inside it).
        finish_gain: mean total reward of the finished completions minus that of the cut ones; ``None`` when the
            sample lacks either kind (whether finishing pays, i.e. whether the cuts teach or block).
    """

    model: str
    num_prompts: int
    num_generations: int
    max_completion_length: int
    temperature: float
    top_p: float
    rules: list[RuleStats]
    zero_std_share: float
    truncation_rate: float
    mean_completion_tokens: float
    unscorable_share: float
    mean_total: float | None
    std_total: float | None
    examples: list[ExampleCompletion]
    seconds: float = 0.0
    verdict: Verdict | None = None
    probes: list[ProbeResult] = field(default_factory=list)
    answers_not_judged: dict[str, int] = field(default_factory=dict)
    answer_coverage_notes: list[str] = field(default_factory=list)
    template_opened_think: bool = False
    finish_gain: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready data (round-trips through :meth:`from_dict`); NaN and infinities become ``None``."""
        return _finite(asdict(self))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PreflightReport:
        """Rebuild a report from :meth:`to_dict` output (e.g. the ``--json`` file).

        Raises:
            KeyError, TypeError: ``data`` is not such a mapping.
        """
        values = dict(data)
        values["rules"] = [RuleStats(**r) for r in values["rules"]]
        values["examples"] = [ExampleCompletion(**e) for e in values["examples"]]
        values["probes"] = [ProbeResult(**p) for p in values.get("probes") or []]
        verdict = values.get("verdict")
        values["verdict"] = Verdict(**verdict) if verdict else None
        return cls(**values)


def _finite(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, inf) inside it replaced by ``None`` (strict JSON has none)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _mean(values: Sequence[float]) -> float | None:
    return math.fsum(values) / len(values) if values else None


def _std(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = math.fsum(values) / len(values)
    return math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1))


def _all_equal(values: Sequence[float]) -> bool:
    return not values or max(values) - min(values) <= EQUAL_ATOL


def summarize(
    groups: Sequence[SampledGroup],
    *,
    config: RunConfig,
    seconds: float = 0.0,
    max_examples_groups: int = 3,
) -> PreflightReport:
    """Statistics of sampled, scored groups (pure; the verdict is filled in by :func:`judge`).

    Args:
        groups: at least one group, each scored with ``config.rewards`` (same rules, same order).
        config: the run config (model, rules and weights, sampling settings).
        seconds: wall time to record.
        max_examples_groups: the best and the worst completion of this many groups become examples.

    Raises:
        ValueError: no groups.
    """
    if not groups:
        raise ValueError("no groups were sampled")
    _, weights, names = build_reward_funcs(config.rewards)
    rules = []
    for k, (name, weight, spec) in enumerate(zip(names, weights, config.rewards, strict=True)):
        per_group = [[r for r in g.score.rewards[k] if r is not None] for g in groups]
        values = [r for rewards in per_group for r in rewards]
        total = sum(len(g.score.rewards[k]) for g in groups)
        rules.append(
            RuleStats(
                name=name,
                rule=spec.rule,
                weight=weight,
                count=len(values),
                mean=_mean(values),
                std=_std(values),
                min=min(values) if values else None,
                max=max(values) if values else None,
                none_share=1 - len(values) / total if total else 1.0,
                nonzero_share=sum(1 for v in values if v != 0) / len(values) if values else 0.0,
                varies_share=sum(1 for rewards in per_group if not _all_equal(rewards)) / len(groups),
            )
        )

    totals = [[t for t in g.score.total if t is not None] for g in groups]
    flat_totals = [t for group_totals in totals for t in group_totals]
    completions = sum(len(g.texts) for g in groups)
    no_signal = sum(1 for group_totals in totals if len(group_totals) < 2 or _all_equal(group_totals))
    examples = []
    for group in groups[:max_examples_groups]:
        order = sorted(range(len(group.texts)), key=lambda i: group.score.advantages[i], reverse=True)
        for i in dict.fromkeys([order[0], order[-1]]):
            examples.append(
                ExampleCompletion(
                    row_index=group.row_index,
                    prompt=group.prompt[-300:],
                    text=group.texts[i][:600],
                    rewards={n: group.score.rewards[k][i] for k, n in enumerate(group.score.names)},
                    total=group.score.total[i],
                    advantage=group.score.advantages[i],
                    num_tokens=group.num_tokens[i],
                    truncated=group.truncated[i],
                )
            )
    return PreflightReport(
        model=config.model,
        num_prompts=len(groups),
        num_generations=config.num_generations,
        max_completion_length=config.max_completion_length,
        temperature=config.temperature,
        top_p=config.top_p,
        rules=rules,
        zero_std_share=no_signal / len(groups),
        truncation_rate=sum(sum(g.truncated) for g in groups) / completions,
        mean_completion_tokens=sum(sum(g.num_tokens) for g in groups) / completions,
        unscorable_share=sum(1 for g in groups for t in g.score.total if t is None) / completions,
        mean_total=_mean(flat_totals),
        std_total=_std(flat_totals),
        examples=examples,
        seconds=seconds,
        probes=flagged([p for g in groups for p in g.probes]),
        finish_gain=_finish_gain(groups),
    )


def _finish_gain(groups: Sequence[SampledGroup]) -> float | None:
    finished = [t for g in groups for t, cut in zip(g.score.total, g.truncated, strict=True) if t is not None and not cut]
    cut = [t for g in groups for t, c in zip(g.score.total, g.truncated, strict=True) if t is not None and c]
    if not finished or not cut:
        return None
    return statistics.fmean(finished) - statistics.fmean(cut)


# ------------------------------------------------------------------------------------------------- the verdict


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


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
            message = f"rule {label} gives every completion the same reward ({_fmt(stats.min)}): it adds no signal."
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


def format_report(report: PreflightReport) -> str:
    """The report as plain text for a terminal (the CLI prints it)."""
    lines = [
        f"Preflight: {report.model}, {report.num_prompts} prompts x {report.num_generations} completions "
        f"(temperature {report.temperature:g}, top_p {report.top_p:g}, max {report.max_completion_length} tokens), "
        f"{report.seconds:.1f} s",
        "",
        f"{'rule':<22}{'weight':>8}{'mean':>9}{'std':>9}{'min':>8}{'max':>8}{'None':>7}{'nonzero':>9}{'varies':>8}",
    ]
    for r in report.rules:
        lines.append(
            f"{r.name[:21]:<22}{r.weight:>8.3g}{_fmt(r.mean):>9}{_fmt(r.std):>9}{_fmt(r.min):>8}{_fmt(r.max):>8}"
            f"{r.none_share:>7.0%}{r.nonzero_share:>9.0%}{r.varies_share:>8.0%}"
        )
    lines += [
        "(varies: share of groups in which the rule's rewards differ)",
        "",
        f"total reward: mean {_fmt(report.mean_total)}, std {_fmt(report.std_total)}",
        f"groups with all-equal totals (no learning signal, TRL frac_reward_zero_std): {report.zero_std_share:.0%}",
        f"truncated (no EOS within {report.max_completion_length} tokens): {report.truncation_rate:.0%}",
        f"mean completion length: {report.mean_completion_tokens:.1f} tokens",
        f"chat template opens <think> in the prompt: {'yes' if report.template_opened_think else 'no'}",
        *(f"answer rows not judged: {note}" for note in report.answer_coverage_notes),
        "",
        "Examples (best and worst of a group):",
    ]
    for ex in report.examples:
        rewards = ", ".join(f"{k} {_fmt(v)}" for k, v in ex.rewards.items())
        cut = ", truncated" if ex.truncated else ""
        lines.append(
            f"  row {ex.row_index}: total {_fmt(ex.total)}, advantage {ex.advantage:+.2f} "
            f"({ex.num_tokens} tokens{cut}; {rewards})"
        )
        lines.append("    " + json.dumps(ex.text[:200], ensure_ascii=False))
    lines += ["", "Reward-hacking probe (empty, whitespace, prompt echo, bare code fence, answer alone, repeated "
              "number, padding, wrong answer in format):"]
    probe_lines = describe(report.probes)
    if probe_lines and report.verdict is not None and any(a.startswith("reward hacking:") for a in report.verdict.advice):
        lines.append(f"  {len(probe_lines)} finding(s), listed once in the verdict below")  # each finding once
    else:
        lines += [f"  - {line}" for line in probe_lines] or [
            "  no degenerate completion scores at or above the best sampled one"
        ]
    if report.verdict is not None:
        lines += ["", f"Verdict ({report.verdict.level}): {report.verdict.headline}"]
        lines += [f"  - {a}" for a in report.verdict.advice]
    return "\n".join(lines)
