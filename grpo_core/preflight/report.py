"""The preflight report (pure, web side): what sampled groups show, before a run spends its steps.

GRPO (DeepSeekMath, Shao et al. 2024, arXiv 2402.03300) trains on group-relative advantages
``(r - mean(group)) / (std(group) + 1e-4)``: a group whose completions all get the same total reward has zero
advantage everywhere and contributes no policy gradient (only the KL term). DAPO (Yu et al. 2025, arXiv 2503.14476,
"dynamic sampling") filters such zero-std groups out for that reason; TRL logs their share as
``frac_reward_zero_std``. A run whose reward rules give most groups equal totals (a strict format rule nothing
passes, an answer the model never gets right) burns its steps learning nothing, which is cheap to find out before
training.

:func:`summarize` turns scored groups (:class:`SampledGroup`, sampled by :mod:`grpo_core.preflight.worker`) into a
:class:`PreflightReport`; :func:`grpo_core.preflight.verdict.judge` gives the verdict "will this run learn?"
and advice in plain words; :func:`format_report` writes the report for a terminal. The web process reads reports
(:mod:`grpo_core.preflight.job`) through this module; it imports no torch.
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from grpo_core.rewards.compose import GroupScore, build_reward_funcs
from grpo_core.rewards.hacking_probe import ProbeResult, describe, flagged
from grpo_core.rewards.trajectory_probe import PROBE_WORDS
from grpo_core.run_config import RunConfig

DEFAULT_PROMPTS = 4
"""Prompts sampled by default: two optimizer steps' worth with the default batch (8 completions, G = 4)."""
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
        turns: per completion of a run with tools, its turns (:func:`grpo_core.tools.turns.turns_of_completion`;
            ``None`` for a single-turn one); empty for a run without tools.
    """

    row_index: int
    prompt: str
    texts: list[str]
    num_tokens: list[int]
    truncated: list[bool]
    score: GroupScore
    probes: list[ProbeResult] = field(default_factory=list)
    turns: list[list[dict[str, Any]] | None] = field(default_factory=list)


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
    turns: list[dict[str, Any]] | None = None


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
        prompt_leak_notes: prompts that give their answer away (:func:`grpo_core.datasets.leaks.leak_lines`), one
            line per kind with example rows.
        template_opened_think: whether the model's chat template opens ``<think>`` in the prompts (format rules
            with ``template_opened_think: auto`` read completions as starting inside it).
        finish_gain: mean total reward of the finished completions minus that of the cut ones; ``None`` when the
            sample lacks either kind (whether finishing pays, i.e. whether the cuts teach or block).
        tool_call_frequency, tool_failure_frequency: for a run with tools, TRL's ``tools/call_frequency`` (tool calls
            per completion) and ``tools/failure_frequency`` (failed calls per call; ``None`` without a call) over the
            sampled rollouts; ``None`` without tools.
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
    prompt_leak_notes: list[str] = field(default_factory=list)
    template_opened_think: bool = False
    finish_gain: float | None = None
    tool_call_frequency: float | None = None
    tool_failure_frequency: float | None = None

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
                    turns=group.turns[i] if group.turns else None,
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
        **_tool_frequencies(groups, completions),
    )


def _tool_frequencies(groups: Sequence[SampledGroup], completions: int) -> dict[str, float | None]:
    """TRL's ``tools/call_frequency`` and ``tools/failure_frequency`` of the sampled rollouts, from their turns (each
    tool result is an executed call; an error result a failed one); empty for a run without tools."""
    if not any(g.turns for g in groups):
        return {}
    results = [t for g in groups for turns in g.turns for t in turns or () if t.get("kind") == "tool_result"]
    failed = sum(1 for t in results if t.get("error"))
    return {"tool_call_frequency": len(results) / completions,
            "tool_failure_frequency": failed / len(results) if results else None}


def _finish_gain(groups: Sequence[SampledGroup]) -> float | None:
    finished = [t for g in groups for t, cut in zip(g.score.total, g.truncated, strict=True) if t is not None and not cut]
    cut = [t for g in groups for t, c in zip(g.score.total, g.truncated, strict=True) if t is not None and c]
    if not finished or not cut:
        return None
    return statistics.fmean(finished) - statistics.fmean(cut)


# ------------------------------------------------------------------------------------------ the report as text


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


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
        *(f"prompts giving the answer away: {note}" for note in report.prompt_leak_notes),
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
    tried = "" if report.tool_call_frequency is None else f"; with tools: {PROBE_WORDS}"
    lines += ["", "Reward-hacking probe (empty, whitespace, prompt echo, bare code fence, answer alone, repeated "
              f"number, padding, wrong answer in format{tried}):"]
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
