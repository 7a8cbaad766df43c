"""Reward rules on tool use in a multi-turn rollout (TRL's ``tools`` / ``environment_factory``): the expected tool
called, every call well formed, no failed call, at most N calls.

Each reads a completion's turns (:func:`grpo_core.tools.turns.turns_of_completion`: TRL's assistant and tool
messages; a call TRL could not parse is one that failed) and returns TRL's ``list[float | None]``, so it composes with
weights and gates like any rule. A string completion (no tools in the run) has no calls. Registered in the
``tools`` category. Pure: imports no torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from grpo_core.rewards.registry import RewardRule, RuleParam, register
from grpo_core.tools.turns import trajectory_summary, turns_of_completion


def _summary(completion: Any) -> dict[str, Any]:
    return trajectory_summary(turns_of_completion(completion))


class ToolCalledReward:
    """1.0 when the rollout made a parsed call to ``tool`` (any tool when ``tool`` is empty), else 0.0."""

    __name__ = "tool_called"

    def __init__(self, tool: str = "") -> None:
        self.tool = tool.strip()

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        rewards: list[float | None] = []
        for completion in completions:
            turns = turns_of_completion(completion) or []
            called = [t["name"] for t in turns if t["kind"] == "tool_call" and t["parsed"]]
            rewards.append(1.0 if (called and not self.tool) or self.tool in called else 0.0)
        return rewards


class WellFormedCallsReward:
    """1.0 when every tool call of the rollout parsed (a name and a JSON object of arguments), 0.0 when one did not;
    ``None`` (the rule does not apply) for a rollout without a call."""

    __name__ = "tool_calls_well_formed"

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        rewards: list[float | None] = []
        for completion in completions:
            summary = _summary(completion)
            rewards.append(None if not summary["calls"] else float(summary["unparsed"] == 0))
        return rewards


class NoToolFailuresReward:
    """1.0 when no call of the rollout failed (no tool error, no unparsed call), 0.0 otherwise; ``None`` for a
    rollout without a call."""

    __name__ = "no_tool_failures"

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        rewards: list[float | None] = []
        for completion in completions:
            summary = _summary(completion)
            rewards.append(None if not summary["calls"] else float(summary["failures"] == 0))
        return rewards


class AtMostCallsReward:
    """1.0 when the rollout made at most ``max_calls`` tool calls, 0.0 otherwise."""

    __name__ = "at_most_tool_calls"

    def __init__(self, max_calls: int = 4) -> None:
        if max_calls < 0:
            raise ValueError(f"parameter 'max_calls': {max_calls} is negative")
        self.max_calls = max_calls

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return [float(_summary(c)["calls"] <= self.max_calls) for c in completions]


def make_tool_called(tool: str = "") -> ToolCalledReward:
    """Build ``tool_called``."""
    return ToolCalledReward(tool)


def make_well_formed_calls() -> WellFormedCallsReward:
    """Build ``tool_calls_well_formed``."""
    return WellFormedCallsReward()


def make_no_tool_failures() -> NoToolFailuresReward:
    """Build ``no_tool_failures``."""
    return NoToolFailuresReward()


def make_at_most_calls(max_calls: int = 4) -> AtMostCallsReward:
    """Build ``at_most_tool_calls``.

    Raises:
        ValueError: ``max_calls`` is negative.
    """
    return AtMostCallsReward(max_calls)


register(RewardRule(name="tool_called", description="1 if the rollout called the expected tool (any tool if empty)",
                    factory=make_tool_called,
                    params=(RuleParam("tool", "str", "", "tool name; empty: any tool"),), category="tools"))
register(RewardRule(name="tool_calls_well_formed",
                    description="1 if every tool call parsed (name and JSON arguments); skipped without a call",
                    factory=make_well_formed_calls, category="tools"))
register(RewardRule(name="no_tool_failures",
                    description="1 if no tool call failed (error or unparsed); skipped without a call",
                    factory=make_no_tool_failures, category="tools"))
register(RewardRule(name="at_most_tool_calls", description="1 if the rollout made at most max_calls tool calls",
                    factory=make_at_most_calls,
                    params=(RuleParam("max_calls", "int", 4, "most tool calls rewarded"),), category="tools"))
