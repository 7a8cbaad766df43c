"""A reward-hacking probe (pure, web side): do degenerate completions score as well as real ones?

A reward that an empty string, a bare code fence or a padding string can max out is a reward the policy will learn
to hack: GRPO pushes up whatever wins its group. Before launching, :func:`probe_row` feeds a fixed set of
degenerate completions (:data:`PROBES`) through the run's composed rules for one dataset row and compares each
probe's weighted total with the best *real* completion of that row (sampled by the preflight, or typed into the
try-out bench). A probe is flagged when

* it scores above 0 on a *task rule* (the rules of category ``answer`` or ``code`` but ``code_style``:
  ``numeric_answer``, ``math_equivalence``, ``code_tests``...; a positive weight): a degenerate completion should
  earn nothing for the task, whatever the real completions score; the finding names that rule; or
* it scores at or above that best real completion and above the lowest total of the group (when every completion
  and probe scores the same, nothing wins), where, if the run has task rules, that best real completion earns
  something on them (a probe that only outscores completions that all fail the task, e.g. on format, shows a model
  that has not learned the format yet, not a reward to hack); the finding names the rule responsible (the one whose
  weighted reward gives the probe its edge).

The :data:`PADDED_ANSWER` probes (the row's answer followed by junk on its line, the answer then a second line of
junk, junk then the answer on its own line) are judged otherwise: they are flagged when a format rule with a positive
weight pays them, since a format rule that pays "42\nbecause I said so" does not check that the reply is the answer
and nothing else (the quick start's number-alone pattern matched in ``search`` mode with ``MULTILINE`` did).

Exceptions: ``answer_only`` (the answer column's value with no work shown) is the right answer in the form the
arithmetic defaults ask for, so it is never flagged; ``prompt_echo`` is not flagged when the prompt itself ends
with the row's answer (``What is 0 + 4?`` with answer 4: the rule reads a right final answer).

Scoring uses :func:`grpo_core.rewards.compose.score_group`, so plugin rules run too: in the web process, pass
``scorer=score_group_isolated`` (:mod:`grpo_core.reward_check.job`) when the rules include plugins (the preflight
subprocess runs it for any rules).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo_core.rewards.compose import GroupScore, RewardSpec, score_group

ANSWER_COLUMN = "answer"
"""The dataset column the answer rules read (``numeric_answer``, ``math_answer``, ``exact_answer``)."""

PADDING_CHARACTERS = 4000
"""Length of the ``long_padding`` probe, in characters."""

NEVER_FLAGGED = ("answer_only",)
"""Probes that are a right answer in the requested form (see the module docstring)."""

PADDED_ANSWER = ("answer_then_junk", "answer_then_line", "junk_then_answer")
"""Probes that are the right answer with junk text around it: a task rule may pay them (the answer is there), but a
*format* rule (category :data:`FORMAT_CATEGORY`) that pays them pays junk (see the module docstring)."""

FORMAT_CATEGORY = "format"
"""The rule category that judges the form of a reply (``format_regex``, ``think_answer_format``, ...)."""

JUNK = "because I said so, and here is some rambling"
"""The junk text of the :data:`PADDED_ANSWER` probes."""

TASK_CATEGORIES = ("answer", "code")
"""Rule categories (:class:`grpo_core.rewards.registry.RewardRule`) that judge the task itself..."""

NOT_TASK_RULES = ("code_style",)
"""... but for these, which judge the form (PEP 8 style)."""

TIE_ATOL = 1e-9
"""Totals closer than this count as equal."""

WITHOUT_TOOL = "answer_without_tool"
"""The trajectory probe of a right answer with no tool call (:mod:`grpo_core.rewards.trajectory_probe`), flagged when
it scores as much as the same answer after a call of the tool."""


def _wrong_answer(answer: Any) -> str:
    """A value that is not ``answer``: the number plus one, else a fixed word."""
    try:
        number = float(str(answer).replace(",", "").strip())
    except ValueError:
        return "wrong"
    wrong = number + 1
    return str(int(wrong)) if wrong.is_integer() else str(wrong)


def probe_completions(row: Mapping[str, Any], prompt: str) -> list[tuple[str, str]]:
    """The degenerate completions for one dataset row, as ``(probe name, completion text)``.

    Probes: ``empty``, ``whitespace``, ``prompt_echo`` (the prompt text), ``bare_fence`` (an empty Python code
    fence), ``pass`` (a fence holding ``pass``), ``answer_only`` (the row's ``answer`` value), ``answer_then_junk``,
    ``answer_then_line`` and ``junk_then_answer`` (:data:`PADDED_ANSWER`; these four are left out when the row has no
    answer), ``repeated_number`` (a wrong number 64 times),
    ``long_padding`` (:data:`PADDING_CHARACTERS` characters), ``wrong_in_format`` (``<think>`` / ``<answer>`` tags
    around a wrong answer, and ``#### wrong`` after them, so both common answer formats are present).
    """
    answer = row.get(ANSWER_COLUMN)
    wrong = _wrong_answer(answer if answer is not None else 0)
    probes = [
        ("empty", ""),
        ("whitespace", " \n\t \n"),
        ("prompt_echo", prompt),
        ("bare_fence", "```python\n```"),
        ("pass", "```python\npass\n```"),
    ]
    if answer is not None and str(answer).strip():
        value = str(answer).strip()
        probes += [
            ("answer_only", value),
            ("answer_then_junk", f"{value} {JUNK}"),
            ("answer_then_line", f"{value}\n{JUNK}"),
            ("junk_then_answer", f"{JUNK}\n{value}"),
        ]
    probes += [
        ("repeated_number", " ".join([wrong if wrong != "wrong" else "7"] * 64)),
        ("long_padding", "." * PADDING_CHARACTERS),
        ("wrong_in_format", f"<think>\nLet me work it out.\n</think>\n<answer>\n{wrong}\n</answer>\n#### {wrong}"),
    ]
    return probes


@dataclass
class ProbeResult:
    """One probe on one row.

    Attributes:
        row_index: the dataset row (0-based); ``probe``: the probe's name (see :func:`probe_completions`).
        text: the probe's completion, cut to 80 characters.
        total: its weighted total (``None``: no rule applied); ``best_real``: the best real completion's total.
        flagged: True when the probe scores above 0 on a task rule, or at or above the best real completion
            (never for :data:`NEVER_FLAGGED` probes); for :data:`PADDED_ANSWER` probes, when a format rule pays it.
        rule: when flagged, the metric name of the rule responsible, else ``None``.
        rewards: the probe's raw reward per rule (metric name -> reward).
        paid_by_task: flagged because a task rule (``rule``) gives the probe more than 0.
        paid_by: the metric names of the rules (weight > 0) that give the probe more than 0 (the trajectory probes
            of :mod:`grpo_core.rewards.trajectory_probe` fill it; empty here).
    """

    row_index: int
    probe: str
    text: str
    total: float | None
    best_real: float | None
    flagged: bool
    rule: str | None
    rewards: dict[str, float | None]
    paid_by_task: bool = False
    paid_by: list[str] = field(default_factory=list)


def _responsible(score: GroupScore, weights: Sequence[float], probe: int, best: int | None) -> str:
    """The rule whose weighted reward lifts the probe most over the best real completion (or, on no lift, the one
    that gives the probe the most)."""
    def weighted(rule: int, k: int | None) -> float:
        value = None if k is None else score.rewards[rule][k]
        return 0.0 if value is None else weights[rule] * value

    lifts = [weighted(r, probe) - weighted(r, best) for r in range(len(score.names))]
    top = max(range(len(lifts)), key=lambda r: lifts[r])
    if lifts[top] <= TIE_ATOL:
        top = max(range(len(lifts)), key=lambda r: weighted(r, probe))
    return score.names[top]


def _weighted_categories(specs: Sequence[RewardSpec | Mapping[str, Any]],
                         weights: Sequence[float]) -> list[tuple[int, str, str | None]]:
    """``(index, rule name, category or None when unknown)`` of each rule of ``specs`` with weight > 0."""
    from grpo_core.rewards.registry import get_rule

    found = []
    for index, spec in enumerate(specs):
        name = spec.rule if isinstance(spec, RewardSpec) else str(spec.get("rule"))
        try:
            category = get_rule(name).category
        except ValueError:
            category = None
        if weights[index] > 0:
            found.append((index, name, category))
    return found


def _task_rules(specs: Sequence[RewardSpec | Mapping[str, Any]], weights: Sequence[float]) -> list[int]:
    """Indices of the task rules of ``specs`` (category in :data:`TASK_CATEGORIES`, not in :data:`NOT_TASK_RULES`, weight > 0)."""
    return [index for index, name, category in _weighted_categories(specs, weights)
            if category in TASK_CATEGORIES and name not in NOT_TASK_RULES]


@dataclass(frozen=True)
class Baseline:
    """What a probe is measured against, from one scoring of the real completions then the probes.

    ``weights`` per rule; ``best_total`` the best real completion's total and ``best_k`` its index (``None`` when no
    real completion scored); ``lowest`` the lowest total of all; ``task`` the task rules' indices
    (:func:`_task_rules`); ``best_done``: a task rule pays the best real completion.
    """

    weights: list[float]
    best_total: float | None
    best_k: int | None
    lowest: float | None
    task: list[int]
    best_done: bool


def baseline(specs: Sequence[RewardSpec | Mapping[str, Any]], score: GroupScore, real: int) -> Baseline:
    """The :class:`Baseline` of ``score``, whose first ``real`` completions are the real ones."""
    weights = [float(RewardSpec.model_validate(s).weight if not isinstance(s, RewardSpec) else s.weight)
               for s in specs]
    real_totals = [(t, k) for k, t in enumerate(score.total[:real]) if t is not None]
    best_total, best_k = max(real_totals) if real_totals else (None, None)
    lowest = min((t for t in score.total if t is not None), default=None)
    task = _task_rules(specs, weights)
    best_done = best_k is not None and any((score.rewards[r][best_k] or 0.0) > TIE_ATOL for r in task)
    return Baseline(weights, best_total, best_k, lowest, task, best_done)


def _format_rules(specs: Sequence[RewardSpec | Mapping[str, Any]], weights: Sequence[float]) -> list[int]:
    """Indices of the format rules of ``specs`` (category :data:`FORMAT_CATEGORY`, weight > 0)."""
    return [index for index, _, category in _weighted_categories(specs, weights) if category == FORMAT_CATEGORY]


def _ends_with_answer(prompt: str, answer: Any) -> bool:
    """Whether ``prompt``'s last number (or its end) is the row's ``answer``."""
    if answer is None or not str(answer).strip():
        return False
    wanted = str(answer).strip()
    numbers = re.findall(r"-?\d+(?:\.\d+)?", prompt)
    if numbers:
        try:
            return float(numbers[-1]) == float(wanted.replace(",", ""))
        except ValueError:
            pass
    return prompt.rstrip().rstrip("?.!\"'}]").endswith(wanted)


def probe_row(
    specs: Sequence[RewardSpec | Mapping[str, Any]],
    row: Mapping[str, Any],
    real_completions: Sequence[str],
    *,
    row_index: int = 0,
    prompt: str | None = None,
    tokenize: Callable[[str], list[int]] | None = None,
    scorer: Callable[..., GroupScore] = score_group,
) -> list[ProbeResult]:
    """Score every probe of ``row`` beside its real completions and flag the probes that win.

    Args:
        specs: the run's reward rules.
        row: the dataset row (column -> value, ``prompt`` included).
        real_completions: at least one real completion of the row's prompt (sampled, or typed into the bench).
        row_index: recorded in the results.
        prompt: the prompt as text for ``prompt_echo``; default ``str(row["prompt"])``.
        tokenize: text -> token ids, so ``length`` counts tokens as in training; ``None`` lets it count words.
        scorer: :func:`grpo_core.rewards.compose.score_group`, or a function of the same signature that scores
            elsewhere (:func:`grpo_core.reward_check.job.score_group_isolated` keeps plugins out of the web process).

    Returns:
        One :class:`ProbeResult` per probe, in :func:`probe_completions` order.

    Raises:
        ValueError: no real completions, or a bad spec (see :func:`grpo_core.rewards.compose.build_reward_funcs`).
    """
    if not real_completions:
        raise ValueError("the probe needs at least one real completion to compare with")
    prompt_text = prompt if prompt is not None else str(row.get("prompt") or "")
    probes = probe_completions(row, prompt_text)
    texts = [*real_completions, *(text for _, text in probes)]
    ids = [tokenize(t) for t in texts] if tokenize is not None else None
    score = scorer(specs, texts, row, completion_ids=ids)
    real = len(real_completions)
    base = baseline(specs, score, real)
    weights, best_total, best_k, lowest, task, best_done = (base.weights, base.best_total, base.best_k, base.lowest,
                                                            base.task, base.best_done)
    echo_answers = _ends_with_answer(prompt_text, row.get(ANSWER_COLUMN))
    form = _format_rules(specs, weights)
    results = []
    for offset, (name, text) in enumerate(probes):
        k = real + offset
        total = score.total[k]
        paid = [r for r in task if (score.rewards[r][k] or 0.0) > TIE_ATOL]
        exempt = name in NEVER_FLAGGED or (name == "prompt_echo" and echo_answers)
        if name in PADDED_ANSWER:  # the answer is there: only a format rule paying the junk is a finding
            paid = [r for r in form if (score.rewards[r][k] or 0.0) > TIE_ATOL]
            flagged = bool(paid)
        elif exempt:
            paid = []
            flagged = False
        elif paid:
            flagged = True
        elif total is None or lowest is None or total <= lowest + TIE_ATOL:
            flagged = False  # it wins over nothing: every completion scores the same (or it scores the least)
        elif task:  # it does not do the task: a hack when it scores as much as a real completion that does
            flagged = best_done and total >= best_total - TIE_ATOL
        elif best_total is None:
            flagged = True
        else:
            flagged = total >= best_total - TIE_ATOL
        if paid and name in PADDED_ANSWER:
            rule = score.names[paid[0]]
            paid = []  # not paid by a task rule: described as a win, not as task pay
        elif paid:
            rule = score.names[max(paid, key=lambda r: score.rewards[r][k] or 0.0)]
        else:
            rule = _responsible(score, weights, k, best_k) if flagged else None
        results.append(
            ProbeResult(
                row_index=row_index,
                probe=name,
                text=text[:80],
                total=total,
                best_real=best_total,
                flagged=flagged,
                rule=rule,
                paid_by_task=bool(paid),
                rewards={n: score.rewards[r][k] for r, n in enumerate(score.names)},
            )
        )
    return results


def flagged(results: Sequence[ProbeResult]) -> list[ProbeResult]:
    """The flagged results, at most one per (probe, rule): the first row that shows it."""
    seen: dict[tuple[str, str | None], ProbeResult] = {}
    for result in results:
        if result.flagged:
            seen.setdefault((result.probe, result.rule), result)
    return list(seen.values())


def _fmt(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.3g}"


def describe(results: Sequence[ProbeResult]) -> list[str]:
    """One plain-words line per flagged (probe, rule), e.g. ``the probe 'empty' scores 1 on row 3, at or above the
    best real completion (0.4): rule `length` rewards it``; empty when nothing is flagged. The probe's text is left
    out (a bare code fence would break Markdown); see :func:`probe_completions`."""
    lines = []
    for r in flagged(results):
        if r.probe in PADDED_ANSWER:
            lines.append(f"the probe '{r.probe}' (the answer with junk text) scores "
                         f"{_fmt(r.rewards.get(r.rule or ''))} on the format rule `{r.rule}` on row {r.row_index}: it "
                         "pays a reply that is not the answer alone")
        elif r.probe == WITHOUT_TOOL:
            lines.append(f"the probe '{r.probe}' (the right answer with no tool call) scores {_fmt(r.total)} on row "
                         f"{r.row_index}, as much as the same answer after a call of the tool: rule `{r.rule}` pays "
                         "whether or not the tool was used")
        elif r.paid_by_task:
            reward = r.rewards.get(r.rule or "")
            lines.append(f"the probe '{r.probe}' scores {_fmt(reward)} on rule `{r.rule}` on row {r.row_index}: a "
                         "degenerate completion should earn nothing for the task")
        else:
            lines.append(f"the probe '{r.probe}' scores {_fmt(r.total)} on row {r.row_index}, at or above the best "
                         f"real completion ({_fmt(r.best_real)}): rule `{r.rule}` rewards it")
    return lines
