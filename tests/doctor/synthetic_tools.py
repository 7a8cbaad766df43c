"""The synthetic agentic runs of the doctor's corpus (``tests/doctor/corpus/synthetic_tools_*.json``, written by
``python -m tests.doctor.make_synthetic``): runs with TRL's ``tools`` whose series carry ``tools/call_frequency``
and ``tools/failure_frequency`` and whose sampled groups carry each completion's turns
(:mod:`grpo_core.tools.turns`), for the doctor's tool findings and for healthy agentic runs that must raise none.

A CPU cannot train a policy for hundreds of steps until it stops calling its tool or loops on calls, so these runs
are drawn: 2 groups of 4 completions a step, each completion one of a few rollouts (a call answered then a final
answer, a failed call, a call that got no result at the tool-calling limit, no call at all), mixed by step; the
series are what TRL logs for such a mix, with seeded noise.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

#: The rollouts a completion may be, as turns (the recorder's shape) and whether its final answer is right.
_CALL = {"kind": "tool_call", "name": "calculator", "arguments": '{"expression": "3 + 4"}', "parsed": True}
_RESULT = {"kind": "tool_result", "name": "calculator", "text": "7", "error": False}
_ERROR = {"kind": "tool_result", "name": "calculator", "text": "SyntaxError: invalid syntax", "error": True}
ROLLOUTS: dict[str, list[dict] | None] = {
    "answered": [{"kind": "assistant", "text": "Let me compute it."}, _CALL, _RESULT,
                 {"kind": "assistant", "text": "7"}],
    "failed": [{"kind": "assistant", "text": "Let me compute it."}, {**_CALL, "arguments": '{"expression": "3 +"}'},
               _ERROR, {"kind": "assistant", "text": "8"}],
    "at_limit": [{"kind": "assistant", "text": "Let me compute it."}, _CALL, _RESULT, _CALL],
    "no_call": None,
}
_FINAL = {"answered": "7", "failed": "8", "at_limit": "", "no_call": "The sum of 3 and 4 is 7."}

TOOL_REWARDS = [
    {"rule": "numeric_answer", "weight": 1.0, "params": {}},
    {"rule": "tool_called", "weight": 0.5, "params": {"tool": "calculator"}},
]
CONFIG = {"learning_rate": 1e-4, "beta": 0.04, "rewards": TOOL_REWARDS, "tools": ["calculator"],
          "max_tool_calling_iterations": 2, "max_steps": 300}
TOOL_REPORTS = [
    "https://github.com/huggingface/trl/issues/5366 (GRPO with tool use: what a run with tools logs and needs)",
    "https://arxiv.org/abs/2504.11536 (ReTool, Feng et al. 2025: how often the policy calls its code tool changes "
    "over RL training)",
]


def _sigmoid(t: float, middle: float, width: float) -> float:
    return 1 / (1 + math.exp(-(t - middle) / width))


def agentic_run(n: int, seed: int, mix: Callable[[int], dict[str, float]],
                right: Callable[[int, str], float]) -> tuple[dict, list[dict]]:
    """``n`` steps of an agentic run: ``(series, groups)``.

    Args:
        mix: step -> the share of each rollout of :data:`ROLLOUTS` at that step.
        right: (step, rollout) -> the chance its final answer is right (``numeric_answer`` 1, else 0).

    The series are TRL's for that mix: ``tools/call_frequency`` (calls per completion), ``tools/failure_frequency``
    (failed calls per call; 0 without calls), the reward and its per-rule means, ``reward_std``,
    ``frac_reward_zero_std``, with the entropy, KL, gradient norm and learning rate of an ordinary LoRA run.
    """
    rng = random.Random(seed)
    series: dict[str, list[list[float]]] = {}
    groups: list[dict] = []

    def add(key: str, step: int, value: float) -> None:
        series.setdefault(key, []).append([step, round(value, 6)])

    calls_of = {"answered": 1, "failed": 1, "at_limit": 2, "no_call": 0}
    for t in range(1, n + 1):
        shares = mix(t)
        kinds, weights = list(shares), list(shares.values())
        step_completions = []
        for row in range(2):
            completions = []
            for _ in range(4):
                kind = rng.choices(kinds, weights)[0]
                answer = 1.0 if kind != "at_limit" and rng.random() < right(t, kind) else 0.0
                called = 1.0 if kind != "no_call" else 0.0
                completions.append({"text": _FINAL[kind] if answer or kind != "answered" else "6",
                                    "total_reward": answer + 0.5 * called,
                                    "rewards": {"numeric_answer": answer, "tool_called": called},
                                    "turns": ROLLOUTS[kind], "kind": kind})
            step_completions += completions
            groups.append({"step": t, "row_index": (2 * t + row) % 40, "prompt": "What is 3 + 4? Use the calculator.",
                           "completions": [{k: v for k, v in c.items() if k != "kind"} for c in completions]})
        kinds_now = [c["kind"] for c in step_completions]
        calls = sum(calls_of[k] for k in kinds_now)
        failures = kinds_now.count("failed")
        totals = [c["total_reward"] for c in step_completions]
        by_group = [totals[:4], totals[4:]]
        add("tools/call_frequency", t, calls / len(kinds_now))
        add("tools/failure_frequency", t, failures / calls if calls else 0.0)
        add("reward", t, sum(totals) / len(totals))
        add("reward_std", t, sum(_pstdev(g) for g in by_group) / 2)
        add("frac_reward_zero_std", t, sum(max(g) == min(g) for g in by_group) / 2)
        add("rewards/numeric_answer/mean", t, sum(c["rewards"]["numeric_answer"] for c in step_completions) / 8)
        add("rewards/tool_called/mean", t, sum(c["rewards"]["tool_called"] for c in step_completions) / 8)
        add("entropy", t, max(0.05, 1.2 * (1 + rng.gauss(0, 0.08))))
        add("kl", t, max(0.0, 0.0006 * t**1.2 * (1 + rng.gauss(0, 0.1))))
        add("grad_norm", t, max(0.0, 0.5 * (1 + rng.gauss(0, 0.2))))
        add("completions/clipped_ratio", t, kinds_now.count("at_limit") / len(kinds_now))
        add("learning_rate", t, 1e-4)
        add("loss", t, rng.gauss(0, 0.05))
    return series, groups


def _pstdev(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def _learning(t: int, kind: str, *, start: float = 0.3, end: float = 0.85, middle: float = 25) -> float:
    """A task learned with the tool: an answered call's final answer right from ``start`` to ``end``; without a
    call or after a failed one, rarely."""
    if kind == "answered":
        return start + (end - start) * _sigmoid(t, middle, 6)
    return 0.1


def tool_runs(make_run: Callable[..., dict]) -> list[dict]:
    """The labelled agentic runs (``make_run``: ``make_synthetic._run``)."""
    runs = []

    def labelled(name: str, description: str, reports: list[str], drawn: tuple[dict, list[dict]],
                 expect: dict) -> None:
        runs.append({**make_run(name, description, reports, CONFIG, drawn[0], expect), "groups": drawn[1]})

    stopped = agentic_run(
        60, 51,
        mix=lambda t: {"answered": 0.85 * (1 - _sigmoid(t, 36, 1.5)), "failed": 0.05 * (1 - _sigmoid(t, 36, 1.5)),
                       "at_limit": 0.02 * (1 - _sigmoid(t, 36, 1.5)), "no_call": 0.08 + 0.9 * _sigmoid(t, 36, 1.5)},
        right=lambda t, kind: 0.6 if kind == "answered" else 0.45)
    labelled(
        "synthetic_tools_stopped",
        "An agentic run whose policy calls its calculator about once per completion for 30 steps, then stops "
        "calling it by step 42 (tools/call_frequency 1.0 -> 0; the last call at step 42) and answers from its own "
        "text, which the answer rule pays almost as well: the tool is learned away.",
        [*TOOL_REPORTS, "https://arxiv.org/abs/2504.20073 (RAGEN, Wang et al. 2025: multi-turn agent RL collapses "
         "into a narrow repeated behaviour, the Echo Trap)"],
        stopped,
        {"healthy": False,
         "must": {"tools_stopped": {"from_step": 45, "cause": ["stopped calling tools", "tool_called"]}},
         "must_not": ["tool_failures", "iteration_limit", "grad_zero", "policy_static", "kl"]})
    failing = agentic_run(
        50, 52,
        mix=lambda t: {"answered": 0.8 - 0.65 * _sigmoid(t, 20, 2), "failed": 0.1 + 0.65 * _sigmoid(t, 20, 2),
                       "at_limit": 0.02, "no_call": 0.08},
        right=_learning)
    labelled(
        "synthetic_tools_failing",
        "An agentic run whose calls start to fail from step 20 (the policy writes arguments the calculator cannot "
        "parse): tools/failure_frequency 0.1 -> 0.8 while it keeps calling.",
        TOOL_REPORTS, failing,
        {"healthy": False,
         "must": {"tool_failures": {"from_step": 24, "cause": ["tool calls fail", "arguments"]}},
         "must_not": ["tools_stopped", "iteration_limit", "grad_zero", "policy_static"]})
    looping = agentic_run(
        40, 53,
        mix=lambda t: {"answered": 0.85 - 0.5 * _sigmoid(t, 15, 1.5), "failed": 0.05,
                       "at_limit": 0.02 + 0.5 * _sigmoid(t, 15, 1.5), "no_call": 0.08},
        right=_learning)
    labelled(
        "synthetic_tools_iteration_limit",
        "An agentic run at max_tool_calling_iterations 2 whose policy, from step 15, calls the calculator again "
        "after its result in half of the rollouts: they end on a call that gets no result and never answer.",
        TOOL_REPORTS, looping,
        {"healthy": False,
         "must": {"iteration_limit": {"from_step": 23, "cause": ["max_tool_calling_iterations"]}},
         "must_not": ["tools_stopped", "tool_failures", "grad_zero", "policy_static"]})
    regardless = agentic_run(
        40, 54,
        mix=lambda t: {"answered": 0.5, "failed": 0.02, "at_limit": 0.0, "no_call": 0.48},
        right=lambda t, kind: 0.85 if kind == "no_call" else 0.55)
    labelled(
        "synthetic_tools_reward_regardless",
        "An agentic run whose answer rule pays the rollouts without a call at least as often as those with one "
        "(85% right without, 55% with): nothing in the reward asks for the tool, half the rollouts already skip it.",
        TOOL_REPORTS, regardless,
        {"healthy": False,
         "must": {"reward_without_tool": {"from_step": 10, "severity": "info",
                                          "cause": ["pays as well without the tool", "tool_called"]}},
         "must_not": ["tools_stopped", "tool_failures", "iteration_limit", "grad_zero", "policy_static"]})
    healthy = agentic_run(
        60, 55,
        mix=lambda t: {"answered": 0.82, "failed": 0.06, "at_limit": 0.04, "no_call": 0.08},
        right=_learning)
    labelled(
        "synthetic_tools_healthy",
        "A healthy agentic run: the policy calls its calculator about once per completion throughout, 6% of the "
        "calls fail, 4% of the rollouts end at the tool-calling limit, and the answers the tool helped with go from "
        "30% to 85% right while the few without a call stay mostly wrong.",
        TOOL_REPORTS, healthy, {"healthy": True, "must": {}, "must_not": []})
    fewer = agentic_run(
        60, 56,
        mix=lambda t: {"answered": 0.7 + 0.15 * _sigmoid(t, 25, 5), "failed": 0.04,
                       "at_limit": 0.15 - 0.13 * _sigmoid(t, 25, 5), "no_call": 0.11 - 0.02 * _sigmoid(t, 25, 5)},
        right=_learning)
    labelled(
        "synthetic_tools_healthy_fewer_calls",
        "A healthy agentic run that learns to call less: at first 15% of the rollouts call twice and stop at the "
        "limit (tools/call_frequency about 1.0), by step 40 one call then an answer in almost all (about 0.9); "
        "failures stay few. Fewer calls is not 'stopped calling'.",
        TOOL_REPORTS, fewer, {"healthy": True, "must": {}, "must_not": []})
    return runs
