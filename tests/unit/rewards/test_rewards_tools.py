"""Rewards on multi-turn rollouts (TRL's tools / environment_factory message lists): answer rules judge the model's
final assistant turn, never a tool's output or a call's arguments; the tool-use rules (grpo_core.rewards.tools)
are table-driven, hostile inputs included, and compose with weights and gates like the others."""

from __future__ import annotations

import pytest

from grpo_core.rewards import RewardSpec, build_reward_funcs, get_rule, score_group


def call(name="lookup", arguments=None):
    return {"type": "function", "function": {"name": name, "arguments": {"key": "secret"} if arguments is None
                                             else arguments}}


def rollout(final: str, result: str = "42", calls=None) -> list[dict]:
    calls = [call()] if calls is None else calls
    return [{"role": "assistant", "content": "", "tool_calls": calls},
            *({"role": "tool", "name": c["function"]["name"], "content": result} for c in calls),
            {"role": "assistant", "content": final}]


@pytest.mark.parametrize("rule, params", [
    ("numeric_answer", {}), ("math_equivalence", {}), ("exact_match", {}),
])
def test_an_answer_rule_is_not_paid_by_the_tool_s_output(rule, params):
    func = get_rule(rule).build(params)
    wrong = rollout("7", result="42")  # the tool returned the gold answer; the model's final turn is wrong
    right = rollout("42", result="42")
    assert func(completions=[wrong], answer=["42"], prompts=["q"]) == [0.0]
    assert func(completions=[right], answer=["42"], prompts=["q"])[0] in (1.0, pytest.approx(1.0))


def test_an_answer_rule_is_not_paid_by_a_call_s_arguments():
    func = get_rule("numeric_answer").build({})
    in_arguments = rollout("I do not know.", result="unknown", calls=[call(arguments={"guess": 42})])
    unparsed = [{"role": "assistant", "content": '<tool_call>{"name": "f", "arguments": {"x": 42}</tool_call>'}]
    assert func(completions=[in_arguments, unparsed], answer=["42", "42"], prompts=["q", "q"]) == [0.0, 0.0]


FAILED = [{"role": "assistant", "content": "", "tool_calls": [call()]},
          {"role": "tool", "name": "lookup", "content": str({"error": "boom"})},
          {"role": "assistant", "content": "sorry"}]
UNPARSED = [{"role": "assistant", "content": '<tool_call>{"name": "lookup", "argu</tool_call>'}]
NO_CALL = [{"role": "assistant", "content": "42"}]
TWO_CALLS = rollout("42", calls=[call(), call("other")])
HOSTILE = [{"role": "assistant", "content": None, "tool_calls": ["junk", {"function": "x"}, {"type": "web"}]},
           "not a message", {"role": "tool"}]


@pytest.mark.parametrize("rule, params, completion, expected", [
    ("tool_called", {}, rollout("42"), 1.0),
    ("tool_called", {}, NO_CALL, 0.0),
    ("tool_called", {}, "plain text", 0.0),
    ("tool_called", {"tool": "lookup"}, rollout("42", calls=[call("other")]), 0.0),
    ("tool_called", {"tool": "lookup"}, UNPARSED, 0.0),
    ("tool_called", {"tool": "lookup"}, HOSTILE, 0.0),
    ("tool_calls_well_formed", {}, rollout("42"), 1.0),
    ("tool_calls_well_formed", {}, UNPARSED, 0.0),
    ("tool_calls_well_formed", {}, NO_CALL, None),
    ("tool_calls_well_formed", {}, HOSTILE, 0.0),
    ("no_tool_failures", {}, rollout("42"), 1.0),
    ("no_tool_failures", {}, FAILED, 0.0),
    ("no_tool_failures", {}, UNPARSED, 0.0),
    ("no_tool_failures", {}, NO_CALL, None),
    ("at_most_tool_calls", {"max_calls": 1}, rollout("42"), 1.0),
    ("at_most_tool_calls", {"max_calls": 1}, TWO_CALLS, 0.0),
    ("at_most_tool_calls", {"max_calls": 0}, NO_CALL, 1.0),
])
def test_tool_use_rules(rule, params, completion, expected):
    assert get_rule(rule).build(params)(completions=[completion]) == [expected]


def test_at_most_tool_calls_refuses_a_negative_limit():
    with pytest.raises(ValueError, match="max_calls"):
        get_rule("at_most_tool_calls").build({"max_calls": -1})


def test_tool_rules_compose_with_weights_and_gates():
    specs = [RewardSpec(rule="tool_called", params={"tool": "lookup"}, weight=0.5),
             RewardSpec(rule="numeric_answer", weight=1.0, gate={"rule": "tool_called", "min": 1.0})]
    funcs, weights, names = build_reward_funcs(specs)
    assert names == ["tool_called", "numeric_answer"] and weights == [0.5, 1.0]
    # right answer without the tool: the gate withholds the answer's reward
    score = score_group(specs, [rollout("The answer is 42."), NO_CALL, rollout("7")],
                        {"prompt": "q", "answer": "42"})
    assert score.total[0] == pytest.approx(1.5)
    assert score.total[1] == pytest.approx(0.0)
    assert score.total[2] == pytest.approx(0.5)
