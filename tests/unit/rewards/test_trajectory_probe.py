"""The reward-hacking probe on trajectories (grpo_core/rewards/trajectory_probe.py): for a recipe with tools, the
agentic hacks (the tool's result holding the gold answer under a wrong final turn, a call alone, many calls, a
malformed call, the answer without the tool) scored by the recipe's rules, with the rules that pay each."""

from __future__ import annotations

import textwrap

from grpo_core.rewards.hacking_probe import describe
from grpo_core.rewards.trajectory_probe import expected_tool, probe_trajectories, recipe_tools

ROW = {"prompt": "What is 6 * 7?", "answer": "42"}


def rollout(final: str, result: str = "42", tool: str = "calculator") -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": tool, "arguments": {"expression": "6 * 7"}}}]},
            {"role": "tool", "name": tool, "content": result},
            {"role": "assistant", "content": final}]


REAL = [rollout("42"), rollout("41")]


def by_probe(results):
    return {r.probe: r for r in results}


def test_every_agentic_hack_is_tried_and_a_gated_recipe_pays_none_of_them():
    specs = [{"rule": "numeric_answer", "gate": {"rule": "tool_called", "min": 1.0}},
             {"rule": "tool_called", "weight": 0.5, "params": {"tool": "calculator"}},
             {"rule": "at_most_tool_calls", "weight": 0.5, "params": {"max_calls": 4}}]
    found = by_probe(probe_trajectories(specs, ROW, REAL))
    assert list(found) == ["tool_result_has_answer", "call_without_answer", "many_calls", "malformed_call",
                           "answer_without_tool", "answer_with_tool"]
    assert not any(r.flagged for r in found.values())
    # the answer rule reads the final turn: the tool's gold result pays it nothing; the call pays the tool rules
    assert found["tool_result_has_answer"].rewards["numeric_answer"] == 0.0
    assert found["tool_result_has_answer"].paid_by == ["tool_called", "at_most_tool_calls"]
    assert found["many_calls"].paid_by == ["tool_called"]  # 12 calls: at_most_tool_calls withholds
    assert found["malformed_call"].paid_by == ["at_most_tool_calls"]  # not parsed: no tool_called
    assert found["answer_without_tool"].paid_by == ["at_most_tool_calls"]  # the gate withholds the answer
    assert "call calculator" in found["tool_result_has_answer"].text and "-> 42" in found["tool_result_has_answer"].text


def test_an_answer_paid_whether_or_not_the_tool_was_used_is_flagged_with_its_rule():
    results = probe_trajectories([{"rule": "numeric_answer"}], ROW, REAL)
    found = by_probe(results)
    without = found["answer_without_tool"]
    [line] = describe(results)  # the preflight's words
    assert "'answer_without_tool'" in line and "`numeric_answer` pays whether or not the tool was used" in line
    assert without.flagged and without.rule == "numeric_answer" and without.paid_by == ["numeric_answer"]
    assert not found["answer_with_tool"].flagged  # the reference
    assert not any(found[name].flagged for name in ("tool_result_has_answer", "call_without_answer", "many_calls",
                                                     "malformed_call"))


def test_a_tool_rule_alone_pays_a_call_without_an_answer_and_many_calls():
    found = by_probe(probe_trajectories([{"rule": "tool_called"}], ROW, REAL))
    assert found["call_without_answer"].flagged and found["call_without_answer"].rule == "tool_called"
    assert found["many_calls"].flagged and found["many_calls"].paid_by == ["tool_called"]
    assert not found["malformed_call"].flagged  # a call TRL could not parse is no call


def test_a_rule_reading_every_message_is_paid_by_the_tool_s_gold_result(tmp_path):
    plugin = tmp_path / "joined.py"
    plugin.write_text(textwrap.dedent("""
        def joined(completions, answer, **kwargs):
            out = []
            for completion, gold in zip(completions, answer):
                text = " ".join(str(m.get("content", "")) for m in completion) if isinstance(completion, list) \\
                    else str(completion)
                out.append(1.0 if str(gold) in text else 0.0)
            return out
    """))
    specs = [{"rule": "plugin", "params": {"target": f"{plugin}:joined"}}]
    found = by_probe(probe_trajectories(specs, ROW, REAL))
    hack = found["tool_result_has_answer"]
    assert hack.flagged and hack.paid_by == [hack.rule] and "joined" in hack.rule
    assert found["answer_without_tool"].flagged  # the same rule pays the answer without the tool


def test_the_expected_tool_is_the_one_the_rollouts_call_else_the_recipe_s():
    assert expected_tool([rollout("42", tool="lookup"), "plain text"], ["calculator"]) == "lookup"
    assert expected_tool(["plain text"], ["calculator"]) == "calculator"
    assert recipe_tools({"tools": ["calculator"], "tool_plugins": ["/srv/p/t.py:weather"]}) == ["calculator",
                                                                                               "weather"]
    found = by_probe(probe_trajectories([{"rule": "tool_called", "params": {"tool": "weather"}}], ROW, ["43"],
                                        tools=["weather"]))
    assert found["call_without_answer"].paid_by == ["tool_called"]

