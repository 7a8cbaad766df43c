"""The reward-hacking probe for a recipe with tools: degenerate *trajectories* (multi-turn rollouts, as TRL's
``GRPOTrainer`` hands them to reward functions with ``tools=`` / ``environment_factory=``) scored by the recipe's
rules beside the row's real rollouts, and which rules pay them.

A policy trained with tools learns whatever the rules pay in a rollout, not only in its final text. The probes, one
row's answer and the tool the recipe expects (the one its real rollouts call, else the first configured one):

* ``tool_result_has_answer``: the tool's result holds the gold answer, the final assistant turn is wrong. An answer
  rule that reads the tool's output (or every message joined) pays it;
* ``call_without_answer``: one call (its arguments hold the gold answer) and no answer at all;
* ``many_calls``: :data:`MANY_CALLS` calls, then a wrong answer;
* ``malformed_call``: a call TRL could not parse (cut JSON, the gold answer inside), no answer;
* ``answer_without_tool``: the right answer with no tool call, beside ``answer_with_tool`` (the same answer after a
  call of the expected tool and its result, a reference never flagged): flagged when it scores as much, i.e. the
  reward is paid whether or not the tool was used (the fix: gate the answer rule on ``tool_called``).

The first four do not do the task: each is flagged as :func:`grpo_core.rewards.hacking_probe.probe_row` flags a
degenerate completion: when a task rule (category ``answer`` or ``code``) pays it more than 0, or when it scores at
or above the best real rollout (that does the task, if the recipe has task rules) and above the lowest total. Every
result names the rules that pay it (``paid_by``: weight > 0, reward > 0), flagged or not.

Scoring goes through :func:`grpo_core.rewards.compose.score_group` (or the ``scorer`` given: plugins run away from
the web process). The probes and the tool rules follow TRL 1.16's message shapes (``tool_calls`` of
``{"type": "function", "function": {"name", "arguments"}}``, ``{"role": "tool", "name", "content"}``, an unparsed
call left in the assistant's ``content``), read by :mod:`grpo_core.tools.turns`.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from grpo_core.rewards.compose import GroupScore, RewardSpec, score_group
from grpo_core.rewards.hacking_probe import (
    ANSWER_COLUMN,
    TIE_ATOL,
    WITHOUT_TOOL,
    ProbeResult,
    _responsible,
    _wrong_answer,
    baseline,
)
from grpo_core.tools.turns import turns_of_completion

#: The trajectory probes in words (the preflight's reports list what was tried).
PROBE_WORDS = ("the tool's result holding the answer under a wrong final turn, a call alone, many calls, a malformed "
               "call, the answer without the tool")
#: Tool calls of the ``many_calls`` probe.
MANY_CALLS = 12
#: The reference rollout (the answer after a call of the expected tool): scored, never flagged.
REFERENCE = "answer_with_tool"
#: The tool name used when neither the real rollouts nor the recipe name one.
DEFAULT_TOOL = "tool"


def expected_tool(real_completions: Sequence[Any], tools: Sequence[str] = ()) -> str:
    """The tool the recipe expects: the one its real rollouts call most (parsed calls), else the first of ``tools``
    (the recipe's tool names), else :data:`DEFAULT_TOOL`."""
    called = Counter(turn["name"] for completion in real_completions for turn in turns_of_completion(completion) or ()
                     if turn["kind"] == "tool_call" and turn["parsed"] and turn["name"])
    if called:
        return called.most_common(1)[0][0]
    return next((str(name) for name in tools if str(name).strip()), DEFAULT_TOOL)


def _call(tool: str, value: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": tool, "arguments": {"input": value}}}


def _assistant(content: str, *calls: dict[str, Any]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = list(calls)
    return message


def _result(tool: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "name": tool, "content": content}


def trajectory_probes(row: Mapping[str, Any], tool: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """The probe rollouts for one dataset row, as ``(probe name, TRL messages)`` (see the module docstring); the
    row's ``answer`` column is the gold answer (``"42"`` when it has none)."""
    answer = row.get(ANSWER_COLUMN)
    gold = str(answer).strip() if answer is not None and str(answer).strip() else "42"
    wrong = _wrong_answer(gold)
    many: list[dict[str, Any]] = []
    for number in range(MANY_CALLS):
        many += [_assistant("", _call(tool, str(number))), _result(tool, str(number))]
    return [
        ("tool_result_has_answer", [_assistant("Let me check.", _call(tool, gold)), _result(tool, gold),
                                    _assistant(f"The answer is {wrong}.")]),
        ("call_without_answer", [_assistant("", _call(tool, gold))]),
        ("many_calls", [*many, _assistant(f"The answer is {wrong}.")]),
        ("malformed_call", [_assistant('<tool_call>\n{"name": "' + tool + '", "arguments": {"input": "' + gold
                                       + '"\n</tool_call>')]),
        (WITHOUT_TOOL, [_assistant(gold)]),
        (REFERENCE, [_assistant("", _call(tool, gold)), _result(tool, gold), _assistant(gold)]),
    ]


def describe_trajectory(messages: Sequence[Mapping[str, Any]]) -> str:
    """A probe rollout in one short line: ``call calc({"input": "42"}) -> 42 -> "The answer is 43."``."""
    parts = []
    for turn in turns_of_completion(list(messages)) or []:
        if turn["kind"] == "tool_call":
            parts.append(f"call {turn['name'] or '?'}({turn['arguments'][:40]})"
                         + ("" if turn["parsed"] else " [not parsed]"))
        elif turn["kind"] == "tool_result":
            parts.append(f"-> {turn['text'][:20]}")
        elif turn["kind"] == "assistant":
            parts.append(json.dumps(turn["text"][:40]))
    if not parts:  # a single assistant message (no call)
        parts = [json.dumps(str(messages[-1].get("content", ""))[:40])] if messages else []
    return " ".join(parts)[:120]


def probe_trajectories(
    specs: Sequence[RewardSpec | Mapping[str, Any]],
    row: Mapping[str, Any],
    real_completions: Sequence[Any],
    *,
    tools: Sequence[str] = (),
    row_index: int = 0,
    scorer: Callable[..., GroupScore] = score_group,
) -> list[ProbeResult]:
    """Score the probe rollouts of ``row`` beside its real rollouts and flag those the recipe's rules pay.

    Args:
        specs: the recipe's reward rules.
        row: the dataset row (column -> value, ``prompt`` included).
        real_completions: at least one real completion of the row's prompt, as TRL hands it to reward functions
            (a multi-turn rollout as its messages; a text is taken as one assistant message).
        tools: the recipe's tool names (library tools, plugin functions), used when no real rollout calls one.
        row_index: recorded in the results.
        scorer: :func:`grpo_core.rewards.compose.score_group` or a function of the same signature.

    Returns:
        One :class:`grpo_core.rewards.hacking_probe.ProbeResult` per probe of :func:`trajectory_probes`, in order,
        ``text`` a one-line description of the rollout, ``paid_by`` the rules paying it.

    Raises:
        ValueError: no real completions, or a bad spec.
    """
    if not real_completions:
        raise ValueError("the probe needs at least one real completion to compare with")
    real = [c if isinstance(c, list) else [{"role": "assistant", "content": str(c)}] for c in real_completions]
    probes = trajectory_probes(row, expected_tool(real, tools))
    score = scorer(specs, [*real, *(messages for _, messages in probes)], row, completion_ids=None)
    count = len(real)
    base = baseline(specs, score, count)
    weights, best_total, best_k, lowest, task, best_done = (base.weights, base.best_total, base.best_k, base.lowest,
                                                            base.task, base.best_done)
    reference_total = score.total[count + len(probes) - 1]
    results = []
    for offset, (name, messages) in enumerate(probes):
        k = count + offset
        total = score.total[k]
        paid_by = [score.names[r] for r in range(len(score.names))
                   if weights[r] > 0 and (score.rewards[r][k] or 0.0) > TIE_ATOL]
        paid_task = [r for r in task if (score.rewards[r][k] or 0.0) > TIE_ATOL]
        wins = total is not None and lowest is not None and total > lowest + TIE_ATOL
        if name == REFERENCE:
            flagged = False
        elif name == WITHOUT_TOOL:  # the right answer: a finding only when it pays as much as using the tool
            flagged = wins and reference_total is not None and total >= reference_total - TIE_ATOL
            paid_task = []
        elif paid_task:
            flagged = True
        elif not wins or best_total is None:
            flagged = wins and best_total is None
        else:
            flagged = total >= best_total - TIE_ATOL and (best_done or not task)
        if paid_task:
            rule = score.names[max(paid_task, key=lambda r: score.rewards[r][k] or 0.0)]
        elif flagged and name == WITHOUT_TOOL:
            rule = score.names[max(range(len(score.names)),
                                   key=lambda r: weights[r] * (score.rewards[r][k] or 0.0))]
        else:
            rule = _responsible(score, weights, k, best_k) if flagged else None
        results.append(ProbeResult(row_index=row_index, probe=name, text=describe_trajectory(messages), total=total,
                                   best_real=best_total, flagged=flagged, rule=rule, paid_by_task=bool(paid_task),
                                   rewards={n: score.rewards[r][k] for r, n in enumerate(score.names)},
                                   paid_by=paid_by))
    return results


def recipe_tools(config: Mapping[str, Any]) -> list[str]:
    """The tool names a run config names: its library ``tools`` and its ``tool_plugins``' functions (the name after
    ``:``); an ``environment``'s tools are its methods, known from the rollouts that call them."""
    names = [str(name) for name in config.get("tools") or () if isinstance(name, str)]
    names += [str(target).rsplit(":", 1)[-1] for target in config.get("tool_plugins") or ()
              if isinstance(target, str) and ":" in target]
    return [name[:200] for name in names if name.strip()]


def has_tools(config: Mapping[str, Any]) -> bool:
    """Whether a run config gives the model tools (library tools, tool plugins or an environment)."""
    return bool(config.get("tools") or config.get("tool_plugins") or config.get("environment"))
