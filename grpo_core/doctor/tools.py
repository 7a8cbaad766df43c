"""The run doctor's checks on tool calling (a run with TRL's ``tools`` or ``environment_factory``): the policy
stopped calling its tools, most calls fail, rollouts end at the tool-calling limit, the task rule pays as well
without the tool. They read TRL's
``tools/call_frequency`` and ``tools/failure_frequency`` and the sampled groups' turns (:mod:`grpo_core.tools.turns`);
a run without tools has neither and gets none of these findings. Thresholds in :mod:`~grpo_core.doctor.thresholds`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from grpo_core.doctor.findings import Finding, Series, Severity, _points, _streaks, found, step_ranges
from grpo_core.doctor.groups import completion_outcome, task_rule
from grpo_core.doctor.registry import doctor_check
from grpo_core.doctor.thresholds import (
    ITERATION_LIMIT_SHARE,
    TOOL_FAILURES_HIGH,
    TOOL_UNUSED_MIN_EACH,
    TOOLS_STOPPED_CALLS,
    TOOLS_STREAK,
    TOOLS_USED_CALLS,
)
from grpo_core.tools.turns import clean_turns, trajectory_summary
from storage import GroupRecord

CALLS = "tools/call_frequency"
FAILURES = "tools/failure_frequency"


@doctor_check(180)
def _tools_stopped(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``tools/call_frequency`` at or above :data:`TOOLS_USED_CALLS` at some logged step, then below
    :data:`TOOLS_STOPPED_CALLS` for the last :data:`TOOLS_STREAK` logged steps or more."""
    points = _points(series, CALLS)
    used = [s for s, v in points if v is not None and v >= TOOLS_USED_CALLS]
    if not used:
        return []
    after = [(s, v) for s, v in points if s > used[0]]
    streaks = _streaks(after, lambda v: v < TOOLS_STOPPED_CALLS, TOOLS_STREAK)
    if not streaks or streaks[-1][-1] != points[-1][0]:
        return []
    peak = max(v for _, v in points if v is not None)
    return found(
        "tools_stopped", Severity.WARNING,
        title=f"The policy stopped calling tools: {CALLS} fell from {peak:.2f} to below {TOOLS_STOPPED_CALLS} "
              f"calls per completion (steps {step_ranges(streaks[-1])})",
        advice=("It now answers without its tools. If the answers stay right this may be fine; if not, the reward "
                "pays as much without the tool as with it: weight a tool rule (tool_called) or gate the answer rule "
                "on it, and check in Inspect (filter: no tool call) what the rollouts do instead."),
        steps=streaks[-1],
    )


@doctor_check(190)
def _tool_failures(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """``tools/failure_frequency`` at or above :data:`TOOL_FAILURES_HIGH` for :data:`TOOLS_STREAK` logged steps in
    a row (the latest such streak)."""
    streaks = _streaks(_points(series, FAILURES), lambda v: v >= TOOL_FAILURES_HIGH, TOOLS_STREAK)
    if not streaks:
        return []
    return found(
        "tool_failures", Severity.WARNING,
        title=f"Most tool calls fail: {FAILURES} at or above {TOOL_FAILURES_HIGH:.0%} at steps "
              f"{step_ranges(streaks[-1])}",
        advice=("The rollouts train on error messages. Inspect (filter: a tool failed) shows the calls: an unknown "
                "tool name, arguments that do not match the tool's parameters, or calls the chat template's parser "
                "could not read. Reward well-formed calls (tool_calls_well_formed, no_tool_failures), describe the "
                "tool better in its docstring, or start from a model that calls tools."),
        steps=streaks[-1],
    )


@doctor_check(200)
def _iteration_limit(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """At least :data:`ITERATION_LIMIT_SHARE` of the sampled completions end on a call that got no result."""
    completions = [(g, c) for g in groups for c in g.completions]
    if not completions:
        return []
    ended = [(g, c) for g, c in completions if trajectory_summary(clean_turns(c.turns) or [])["ended_on_call"]]
    if not ended or len(ended) < ITERATION_LIMIT_SHARE * len(completions):
        return []
    limit = config.get("max_tool_calling_iterations")
    return found(
        "iteration_limit", Severity.WARNING,
        title=f"{len(ended)} of {len(completions)} sampled rollouts end at the tool-calling limit (a call without "
              f"a result, max_tool_calling_iterations {limit if limit else 'unset'})",
        advice=("Those rollouts never give an answer. Raise max_tool_calling_iterations or max_completion_length if "
                "the task needs more calls; if the policy loops on the same call, add at_most_tool_calls or a "
                "penalty for it. Inspect's filter 'stopped at the tool-calling limit' shows them."),
        steps=sorted({g.step for g, _ in ended}),
    )


@doctor_check(210)
def _reward_without_tool(series: Series, groups: Sequence[GroupRecord], config: Mapping[str, Any]) -> list[Finding]:
    """The task rule (:func:`~grpo_core.doctor.groups.task_rule`) pays the sampled completions that made no tool
    call at least as often as those that made one, with :data:`TOOL_UNUSED_MIN_EACH` of each, in a run whose
    completions call tools (some have turns)."""
    rule = task_rule(config, groups)
    if rule is None:
        return []
    with_call, without = [], []
    for group in groups:
        for completion in group.completions:
            outcome = completion_outcome(completion, rule)
            if outcome is None:
                continue
            calls = trajectory_summary(clean_turns(completion.turns) or [])["calls"]
            (with_call if calls else without).append(outcome == "right")
    if len(with_call) < TOOL_UNUSED_MIN_EACH or len(without) < TOOL_UNUSED_MIN_EACH:
        return []
    rate_with, rate_without = sum(with_call) / len(with_call), sum(without) / len(without)
    if not rate_without or rate_without < rate_with:
        return []
    return found(
        "reward_without_tool", Severity.INFO,
        title=f"{rule} pays as well without the tool: {rate_without:.0%} right of {len(without)} sampled completions "
              f"without a call, {rate_with:.0%} of {len(with_call)} with one",
        advice=("The reward does not ask for the tool, so the policy may learn to skip it (and the doctor will say "
                "when it stops calling). If using the tool matters, add tool_called with a weight, or gate the "
                "answer rule on it (gate: tool_called >= 1)."),
        steps=sorted({g.step for g in groups}),
    )


