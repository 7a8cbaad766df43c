"""Preflight: "will this run learn?" Sample a few groups from the run's model, score them, and say what GRPO sees.

GRPO (DeepSeekMath, Shao et al. 2024, arXiv 2402.03300) trains on group-relative advantages
``(r - mean(group)) / (std(group) + 1e-4)``: a group whose completions all get the same total reward has zero
advantage everywhere and contributes no policy gradient (only the KL term). DAPO (Yu et al. 2025, arXiv 2503.14476,
"dynamic sampling") filters such zero-std groups out for that reason; TRL logs their share as
``frac_reward_zero_std``. A run whose reward rules give most groups equal totals (a strict format rule nothing
passes, an answer the model never gets right) burns its steps learning nothing, which is cheap to find out before
training: sample a step or two of groups, no optimisation, and look at the rewards.

What it does (:func:`run_preflight`): load the model and tokenizer the way the worker does
(:func:`grpo_core.model_source.prepare_model`, float32 on the CPU, bfloat16 on a GPU), pick ``num_prompts`` rows
(seeded by the run's ``seed``), render chat prompts with the tokenizer's chat template (``add_generation_prompt``,
as TRL does), sample ``num_generations`` completions per prompt with the run's ``temperature``, ``top_p`` and
``max_completion_length`` (``top_k`` off, as TRL's default), cut each after its first end-of-sequence token,
and score every group with :func:`grpo_core.rewards.compose.score_group` (the trainer's own rule: weighted sum,
then group advantages; ``length`` counts tokens). :func:`summarize` turns the groups into a
:class:`PreflightReport`; :func:`judge` gives the verdict and advice in plain words.

What it leaves out: it samples from the model as it is before training (no LoRA update, no reference model),
one process, no vLLM; with a handful of prompts every share it reports is rough (4 prompts -> steps of 25 %).

Entry points: ``python -m grpo_core.preflight --config run.yaml [--prompts 4] [--json OUT]`` and
``grpo-dashboard preflight run.yaml``; the dashboard runs the former in a subprocess
(:mod:`grpo_core.preflight_job`). This module imports torch and transformers only inside :func:`sample_groups`,
so the web process can import the report types.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from grpo_core.config import ConfigError, RunConfig, load_run_config
from grpo_core.rewards.compose import GroupScore, build_reward_funcs, score_group
from grpo_core.rewards.registry import completion_text, get_rule

DEFAULT_PROMPTS = 4
"""Prompts sampled by default: two optimizer steps' worth with the default batch (8 completions, G = 4)."""

ZERO_STD_PROBLEM = 0.5
"""Share of all-equal groups above which the verdict is "most groups give no learning signal"."""
ZERO_STD_WARNING = 0.25
"""Share of all-equal groups above which a warning is given."""
MAIN_RULE_VARIES_MIN = 0.5
"""Share of groups in which the largest-weight rule should differ; below it, other rules carry most of the signal."""
TRUNCATION_WARNING = 0.3
"""Share of completions cut at ``max_completion_length`` above which the advice is to raise it."""
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
    """

    row_index: int
    prompt: str
    texts: list[str]
    num_tokens: list[int]
    truncated: list[bool]
    score: GroupScore


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
    )


# ------------------------------------------------------------------------------------------------- the verdict


def _fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.3g}"


def _rule_advice(report: PreflightReport) -> list[tuple[str, str]]:
    """(level, message) for each rule that adds nothing: never applies, never fires, or constant."""
    found = []
    for stats in report.rules:
        if stats.weight == 0:
            continue
        label = f"`{stats.name}`" + (f" ({stats.rule})" if stats.rule != stats.name else "")
        if stats.count == 0:
            total = report.num_prompts * report.num_generations
            message = (
                f"rule {label} never applies (None for all {total} completions): check that the dataset has the "
                "column it reads and that its parameters match it."
            )
            found.append((LEVEL_WARNING, message))
        elif stats.nonzero_share == 0:
            if "pattern" in _param_names(stats.rule):
                hint = "check its parameters, e.g. its regex, on these examples, or loosen it"
            else:
                hint = (
                    "the model never earns it on these prompts: check its parameters and the column it reads "
                    "on these examples, or give partial credit"
                )
            found.append((LEVEL_WARNING, f"rule {label} never fires (0 on all {stats.count} completions): {hint}."))
        elif stats.min == stats.max:
            message = f"rule {label} gives every completion the same reward ({_fmt(stats.min)}): it adds no signal."
            found.append((LEVEL_WARNING, message))
    return found


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


def _signal_advice(report: PreflightReport) -> list[tuple[str, str]]:
    share = report.zero_std_share
    if share > ZERO_STD_PROBLEM:
        message = (
            f"most groups give no learning signal ({share:.0%} of groups have all-equal rewards, so zero "
            "advantage): loosen the format rule / add a dense partial-credit rule, or raise temperature or "
            "num_generations."
        )
        return [(LEVEL_PROBLEM, message)]
    if share > ZERO_STD_WARNING:
        message = (
            f"{share:.0%} of groups have all-equal rewards and give no learning signal; a higher temperature or "
            "num_generations makes groups differ more often."
        )
        return [(LEVEL_WARNING, message)]
    return []


def _truncation_advice(report: PreflightReport) -> list[tuple[str, str]]:
    if report.truncation_rate > TRUNCATION_WARNING:
        message = (
            f"{report.truncation_rate:.0%} of completions are cut at max_completion_length "
            f"({report.max_completion_length} tokens) before they end: raise max_completion_length (cut answers "
            "score badly and teach nothing about the answer)."
        )
        return [(LEVEL_WARNING, message)]
    return []


def _unscorable_advice(report: PreflightReport) -> list[tuple[str, str]]:
    if report.unscorable_share > 0:
        message = (
            f"no rule applied to {report.unscorable_share:.0%} of completions (TRL gives them a NaN reward and "
            "zero advantage): add a rule that scores every completion."
        )
        return [(LEVEL_WARNING, message)]
    return []


ADVICE_CHECKS: tuple[Callable[[PreflightReport], list[tuple[str, str]]], ...] = (
    _signal_advice,
    _truncation_advice,
    _rule_advice,
    _main_rule_advice,
    _unscorable_advice,
)
"""The checks :func:`judge` runs, in the order their advice is listed."""


def judge(report: PreflightReport) -> Verdict:
    """The verdict on a report: can the run learn, and what to change.

    ``problem`` when more than :data:`ZERO_STD_PROBLEM` of the groups have all-equal totals (no learning signal);
    otherwise ``warning`` when any check in :data:`ADVICE_CHECKS` found something (many zero-std groups, many
    truncated completions, a rule that never applies, never fires or is constant, a main rule whose rewards rarely
    differ within a group while others do, unscorable completions), else ``ok``.
    """
    findings = [item for check in ADVICE_CHECKS for item in check(report)]
    advice = [message for _, message in findings]
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
    if report.verdict is not None:
        lines += ["", f"Verdict ({report.verdict.level}): {report.verdict.headline}"]
        lines += [f"  - {a}" for a in report.verdict.advice]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------- sampling


def pick_rows(num_rows: int, num_prompts: int, seed: int) -> list[int]:
    """``min(num_prompts, num_rows)`` distinct row indices, drawn with ``random.Random(seed)`` (reproducible).

    Raises:
        ValueError: the dataset is empty or ``num_prompts < 1``.
    """
    if num_rows < 1:
        raise ValueError("the dataset has no rows")
    if num_prompts < 1:
        raise ValueError(f"num_prompts must be at least 1, got {num_prompts}")
    return random.Random(seed).sample(range(num_rows), min(num_prompts, num_rows))


def prompt_as_text(prompt: Any) -> str:
    """A prompt for display: text as is, chat messages as ``role: content`` lines."""
    if isinstance(prompt, list):
        return "\n".join(
            f"{m.get('role', '?')}: {completion_text([m])}" if isinstance(m, dict) else str(m) for m in prompt
        )
    return str(prompt)


def cut_at_eos(ids: Sequence[int], eos_token_ids: Sequence[int]) -> tuple[list[int], bool]:
    """A generated sequence up to and including its first end-of-sequence token (TRL masks the rest).

    Returns:
        ``(ids, truncated)``: ``truncated`` is True when no end-of-sequence token was generated.
    """
    eos = set(eos_token_ids)
    for position, token in enumerate(ids):
        if token in eos:
            return list(ids[: position + 1]), False
    return list(ids), True


def cpu_threads(default: int) -> int:
    """Torch threads for sampling on the CPU: the cores not already busy, at least 1, at most ``default``.

    OpenMP threads that share their cores with other busy processes (training workers, a second preflight) spin at
    every barrier: on a 2-core machine with a load of 8, generating with 2 threads took 9x longer than with 1
    (215 s against 24 s for 4 x 32 tokens of SmolLM2-135M). ``OMP_NUM_THREADS``, when set, wins.
    """
    if os.environ.get("OMP_NUM_THREADS"):
        return default
    try:
        busy = round(os.getloadavg()[0])
    except OSError:
        return default
    return max(1, min(default, (os.cpu_count() or 1) - busy))


def sample_groups(
    config: RunConfig,
    rows: Sequence[Mapping[str, Any]],
    model_path: str,
    *,
    num_prompts: int = DEFAULT_PROMPTS,
    progress: Callable[[str], None] = print,
) -> list[SampledGroup]:
    """Sample and score ``num_prompts`` groups of ``config.num_generations`` completions (imports torch).

    Args:
        config: the run config (rules, sampling settings, ``seed``, ``device``).
        rows: dataset rows (``prompt`` plus the columns the rules read).
        model_path: folder or hub id for ``from_pretrained`` (see :func:`grpo_core.model_source.prepare_model`).
        num_prompts: groups to sample (fewer if the dataset is smaller).
        progress: receives one-line status messages.

    Raises:
        ValueError: no rows, a bad rule, a row without ``prompt``.
        RuntimeError: ``device: cuda`` without a GPU.
        OSError: the model cannot be loaded.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GenerationConfig

    from grpo_core.trainer import pick_device

    build_reward_funcs(config.rewards)  # fail on a bad rule before loading the model
    indices = pick_rows(len(rows), num_prompts, config.seed)
    device = pick_device(config)
    bf16 = device == "cuda" and torch.cuda.is_bf16_supported()
    if device == "cpu":
        torch.set_num_threads(cpu_threads(torch.get_num_threads()))
    progress(f"loading model from {model_path} on {device} ({torch.get_num_threads()} CPU threads)")
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16 if bf16 else torch.float32)
    model.to(device).eval()

    # The end-of-sequence ids as TRL collects them: the model's generation config plus the tokenizer's eos.
    declared = model.generation_config.eos_token_id
    eos_ids = [] if declared is None else [declared] if isinstance(declared, int) else list(declared)
    if tokenizer.eos_token_id not in eos_ids:
        eos_ids = [tokenizer.eos_token_id, *eos_ids]
    generation_config = GenerationConfig(  # as GRPOTrainer builds it (TRL 1.16), replacing the model's defaults
        max_new_tokens=config.max_completion_length,
        do_sample=True,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=eos_ids,
        temperature=config.temperature,
        top_p=config.top_p,
        top_k=0,
        num_return_sequences=config.num_generations,
    )
    torch.manual_seed(config.seed)
    groups = []
    for number, index in enumerate(indices, start=1):
        row = dict(rows[index])
        if "prompt" not in row:
            raise ValueError(f"row {index} has no 'prompt' column")
        prompt = row["prompt"]
        chat = isinstance(prompt, list)
        if chat:
            text = tokenizer.apply_chat_template(prompt, add_generation_prompt=True, tokenize=False)
            encoded = tokenizer(text, return_tensors="pt", add_special_tokens=False)
        else:
            encoded = tokenizer(str(prompt), return_tensors="pt")
        encoded = {k: v.to(device) for k, v in encoded.items()}
        progress(f"prompt {number}/{len(indices)} (row {index}): sampling {config.num_generations} completions")
        with torch.no_grad():
            output = model.generate(**encoded, generation_config=generation_config)
        generated = output[:, encoded["input_ids"].shape[1] :].tolist()
        cut = [cut_at_eos(ids, eos_ids) for ids in generated]
        ids = [c[0] for c in cut]
        texts = tokenizer.batch_decode(ids, skip_special_tokens=True)
        completions: list[Any] = [[{"role": "assistant", "content": t}] for t in texts] if chat else texts
        score = score_group(config.rewards, completions, row, completion_ids=ids, scale_rewards=config.scale_rewards)
        groups.append(
            SampledGroup(
                row_index=index,
                prompt=prompt_as_text(prompt),
                texts=texts,
                num_tokens=[len(i) for i in ids],
                truncated=[c[1] for c in cut],
                score=score,
            )
        )
    return groups


def load_config_rows(config: RunConfig, *, store=None, base_dir: str | Path | None = None) -> list[dict[str, Any]]:
    """The prompt rows a config names: its stored dataset (``dataset_id``, needs ``store``) or ``dataset_path``.

    A relative ``dataset_path`` that does not exist from the working directory is looked up in ``base_dir`` (the
    config file's folder), as ``grpo-dashboard train`` does.

    Raises:
        ConfigError: no dataset named, or ``dataset_id`` without a store.
        grpo_core.datasets.DatasetError, storage.StoreError, OSError: the dataset cannot be read.
    """
    from grpo_core.datasets import load_prompt_dataset, read_normalized

    if config.dataset_id is not None:
        if store is None:
            raise ConfigError("dataset_id needs the store (--db / --data-dir)")
        return read_normalized(Path(store.get_dataset(config.dataset_id).path))
    if config.dataset_path:
        path = Path(config.dataset_path)
        if not path.is_absolute() and not path.exists() and base_dir is not None:
            candidate = Path(base_dir) / path
            if candidate.exists():
                path = candidate
        return load_prompt_dataset(path).rows
    raise ConfigError("dataset: the config names no dataset (set dataset_id or dataset_path)")


def run_preflight(
    config: RunConfig,
    rows: Sequence[Mapping[str, Any]],
    *,
    model_cache_dir: Path,
    num_prompts: int = DEFAULT_PROMPTS,
    progress: Callable[[str], None] = print,
) -> PreflightReport:
    """Prepare the model, sample and score ``num_prompts`` groups, summarise and judge them (imports torch).

    Raises:
        grpo_core.model_source.ModelSourceError: the model cannot be found or converted.
        as :func:`sample_groups`.
    """
    from grpo_core.model_source import prepare_model

    started = time.monotonic()
    model_path = prepare_model(config.model, model_cache_dir, progress)
    groups = sample_groups(config, rows, model_path, num_prompts=num_prompts, progress=progress)
    report = summarize(groups, config=config, seconds=time.monotonic() - started)
    report.verdict = judge(report)
    return report


# ------------------------------------------------------------------------------------------------- entry point


def build_arg_parser(prog: str = "python -m grpo_core.preflight") -> argparse.ArgumentParser:
    """Arguments of the preflight command (shared with ``grpo-dashboard preflight``)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Will this run learn? Sample a few groups from the run's model with its reward rules "
        "(no training) and report how much the rewards vary within groups.",
    )
    parser.add_argument("--config", required=True, help="run config YAML file")
    parser.add_argument("--prompts", type=int, default=DEFAULT_PROMPTS, help="prompts (groups) to sample")
    parser.add_argument("--dataset-id", type=int, help="use this stored dataset instead of the config's")
    parser.add_argument("--db", help="SQLAlchemy URL of the store (env GRPO_DB_URL; default SQLite in the data dir)")
    parser.add_argument(
        "--data-dir", help="data directory: store, model cache (env GRPO_DATA_DIR; default ./grpo_data)"
    )
    parser.add_argument("--json", dest="json_out", help="also write the report as JSON to this file")
    return parser


def preflight_command(
    config_path: str,
    *,
    prompts: int = DEFAULT_PROMPTS,
    dataset_id: int | None = None,
    data_dir: str | None = None,
    db_url: str | None = None,
    json_out: str | None = None,
    prog: str = "preflight",
) -> int:
    """Run a preflight from a config file, print the report; exit status 0, 2 for a bad config, 1 on failure.

    With ``json_out`` the report (or ``{"error": message}``) is written there as JSON, atomically.
    """
    from grpo_core.settings import load_settings

    def write_json(data: dict[str, Any]) -> None:
        if json_out:
            target = Path(json_out)
            tmp = target.with_name(target.name + ".tmp")
            tmp.write_text(json.dumps(data, ensure_ascii=False, allow_nan=False), encoding="utf-8")
            os.replace(tmp, target)

    def progress(message: str) -> None:
        print(f"[preflight] {message}", flush=True)

    store = None
    try:
        config = load_run_config(config_path)
        if dataset_id is not None:
            config = config.model_copy(update={"dataset_id": dataset_id})
        settings = load_settings(data_dir=data_dir, db_url=db_url)
        if config.dataset_id is not None:
            from storage import Store

            store = Store(settings.db_url)
        rows = load_config_rows(config, store=store, base_dir=Path(config_path).resolve().parent)
    except (ConfigError, ValueError, OSError) as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
        write_json({"error": str(exc)})
        return 2
    finally:
        if store is not None:
            store.close()
    progress(f"sampling {min(prompts, len(rows))} prompts x {config.num_generations} completions from {config.model}")
    try:
        settings.model_cache_dir.mkdir(parents=True, exist_ok=True)
        report = run_preflight(
            config, rows, model_cache_dir=settings.model_cache_dir, num_prompts=prompts, progress=progress
        )
    except Exception as exc:  # noqa: BLE001 - any failure is reported, to the terminal and to the JSON file
        message = f"{type(exc).__name__}: {exc}"
        print(f"{prog}: {message}", file=sys.stderr)
        write_json({"error": message})
        return 1
    print(format_report(report), flush=True)
    write_json(report.to_dict())
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m grpo_core.preflight``."""
    args = build_arg_parser().parse_args(argv)
    return preflight_command(
        args.config,
        prompts=args.prompts,
        dataset_id=args.dataset_id,
        data_dir=args.data_dir,
        db_url=args.db,
        json_out=args.json_out,
        prog="grpo_core.preflight",
    )


if __name__ == "__main__":
    sys.exit(main())
