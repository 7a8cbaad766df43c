"""The run doctor's tool-calling checks (grpo_core.doctor.tools), table-driven on TRL's tools/* series and sampled
trajectories: stopped calling tools, failures high, rollouts ending at the tool-calling limit; a run without tools
gets none of them."""

from __future__ import annotations

import pytest

from grpo_core.doctor import diagnose
from storage import CompletionRecord, GroupRecord

CALL = {"kind": "tool_call", "name": "calculator", "arguments": "{}", "parsed": True}
RESULT = {"kind": "tool_result", "name": "calculator", "text": "42", "error": False}
ANSWER = {"kind": "assistant", "text": "42"}


def _series(**columns):
    return {key.replace("__", "/"): (list(range(1, len(values) + 1)), list(values)) for key, values in columns.items()}


def _codes(series, groups=(), config=None):
    return {f.code for f in diagnose(series, groups, config or {})}


@pytest.mark.parametrize("calls, expected", [
    ([0.8, 0.6, 0.3, 0.01, 0.0, 0.0], True),
    ([0.8, 0.6, 0.3, 0.01, 0.0, 0.5], False),   # calling again
    ([0.0] * 6, False),                           # never called: not "stopped"
    ([0.8, 0.7, 0.9, 0.8, 0.8, 0.9], False),
    ([0.8, None, 0.0, 0.0], False),               # NaN breaks the streak
])
def test_the_policy_stopped_calling_tools(calls, expected):
    assert ("tools_stopped" in _codes(_series(tools__call_frequency=calls))) is expected


@pytest.mark.parametrize("failures, expected", [
    ([0.1, 0.6, 0.7, 0.9], True),
    ([0.6, 0.1, 0.7, 0.9], False),
    ([0.0] * 5, False),
])
def test_most_calls_fail(failures, expected):
    assert ("tool_failures" in _codes(_series(tools__failure_frequency=failures))) is expected


def _group(*turn_lists):
    return GroupRecord(step=4, row_index=0, prompt="q", completions=[
        CompletionRecord(index=i, text="", rewards={}, total_reward=None, advantage=None, turns=t)
        for i, t in enumerate(turn_lists)])


def test_rollouts_ending_at_the_tool_calling_limit():
    limited = [CALL, RESULT, CALL]
    finished = [CALL, RESULT, ANSWER]
    findings = diagnose({}, [_group(limited, limited, finished, None)], {"max_tool_calling_iterations": 2})
    [finding] = [f for f in findings if f.code == "iteration_limit"]
    assert "2 of 4" in finding.title and "max_tool_calling_iterations 2" in finding.title and finding.steps == (4,)
    assert "iteration_limit" not in _codes({}, [_group(limited, finished, finished, finished, finished)])


def test_a_run_without_tools_gets_no_tool_finding():
    codes = _codes(_series(reward=[0.1, 0.2, 0.3, 0.4]), [_group(None, None)])
    assert not codes & {"tools_stopped", "tool_failures", "iteration_limit"}


def _scored(turns, right: bool, index: int):
    return CompletionRecord(index=index, text="", rewards={"numeric_answer": 1.0 if right else 0.0},
                            total_reward=None, advantage=None, turns=turns)


@pytest.mark.parametrize("with_call, without, expected", [
    ([True, True, False, False], [True, True, True, False], True),    # 50% with the tool, 75% without
    ([True, True, True, True], [True, False, False, False], False),   # the tool helps
    ([True, True, True], [True, True, True, True], False),            # too few with a call to tell
    ([True, True, False, False], [False, False, False, False], False),
])
def test_a_reward_paid_whether_or_not_the_tool_was_used(with_call, without, expected):
    completions = [_scored([CALL, RESULT, ANSWER], right, i) for i, right in enumerate(with_call)]
    completions += [_scored(None, right, len(completions) + i) for i, right in enumerate(without)]
    groups = [GroupRecord(step=3, row_index=0, prompt="q", completions=completions)]
    config = {"rewards": [{"rule": "numeric_answer", "weight": 1.0}]}
    assert ("reward_without_tool" in _codes({}, groups, config)) is expected
