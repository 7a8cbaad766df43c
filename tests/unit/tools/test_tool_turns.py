"""The turns of a multi-turn completion (grpo_core.tools.turns), from the message lists TRL 1.16's tool-calling loop
builds (``GRPOTrainer._tool_call_loop``): calls, results, errors, unparsed calls, limits, hostile values."""

from __future__ import annotations

import pytest

from grpo_core.tools.turns import (
    CUT_MARK,
    MAX_ARGUMENT_CHARS,
    MAX_MASK_SPANS,
    MAX_TURN_CHARS,
    MAX_TURNS,
    clean_spans,
    clean_turns,
    final_assistant_text,
    is_error_result,
    mask_spans,
    trained_flags,
    trajectory_summary,
    turns_of_completion,
)

CALL = {"type": "function", "function": {"name": "lookup", "arguments": {"key": "secret"}}}
ROLLOUT = [
    {"role": "assistant", "content": "Let me look.", "tool_calls": [CALL]},
    {"role": "tool", "name": "lookup", "content": "42"},
    {"role": "assistant", "content": "The answer is 42."},
]


def test_a_rollout_becomes_its_turns_in_order_with_the_environment_reward():
    assert turns_of_completion(ROLLOUT, {"SecretEnv": 1.0}) == [
        {"kind": "assistant", "text": "Let me look."},
        {"kind": "tool_call", "name": "lookup", "arguments": '{"key": "secret"}', "parsed": True},
        {"kind": "tool_result", "name": "lookup", "text": "42", "error": False},
        {"kind": "assistant", "text": "The answer is 42."},
        {"kind": "reward", "name": "SecretEnv", "value": 1.0},
    ]


@pytest.mark.parametrize("completion", [
    "plain text",
    [{"role": "assistant", "content": "one turn"}],
    None,
    [],
])
def test_a_single_turn_completion_has_no_turns(completion):
    assert turns_of_completion(completion) is None


def test_a_failed_call_is_an_error_result_and_counts_as_a_failure():
    # TRL records a tool that raised as str({"error": str(exc)})
    rollout = [{"role": "assistant", "content": "", "tool_calls": [CALL]},
               {"role": "tool", "name": "lookup", "content": str({"error": "'nope'"})},
               {"role": "assistant", "content": "I could not."}]
    turns = turns_of_completion(rollout)
    assert turns[1] == {"kind": "tool_result", "name": "lookup", "text": "'nope'", "error": True}
    assert trajectory_summary(turns) == {"calls": 1, "failures": 1, "unparsed": 0, "ended_on_call": False,
                                         "tools": ["lookup"]}


@pytest.mark.parametrize("content, error", [
    ("{'error': 'boom'}", True),
    ({"error": "boom"}, True),
    ("{'error': 'boom', 'x': 1}", False),
    ("error: boom", False),
    ("{'error': __import__('os')}", False),  # never evaluated
])
def test_error_results_are_recognised_only_in_trl_s_shape(content, error):
    assert is_error_result(content) is error


def test_an_unparsed_call_is_kept_as_written_and_marked_not_parsed():
    text = 'Checking <tool_call>\n{"name": "lookup", "arguments": {"key": "secret"\n</tool_call>'
    turns = turns_of_completion([{"role": "assistant", "content": text}])
    assert turns == [{"kind": "assistant", "text": "Checking"},
                     {"kind": "tool_call", "name": "lookup", "arguments": '{"name": "lookup", "arguments": {"key": "secret"',
                      "parsed": False}]
    assert trajectory_summary(turns)["unparsed"] == 1


def test_a_rollout_that_ends_on_a_call_stopped_at_the_limit():
    rollout = [{"role": "assistant", "content": "", "tool_calls": [CALL]},
               {"role": "tool", "name": "lookup", "content": "42"},
               {"role": "assistant", "content": "", "tool_calls": [CALL]}]
    assert trajectory_summary(turns_of_completion(rollout))["ended_on_call"] is True
    assert trajectory_summary(turns_of_completion(ROLLOUT))["ended_on_call"] is False


def test_the_final_assistant_turn_is_what_an_answer_rule_reads():
    assert final_assistant_text(ROLLOUT) == "The answer is 42."
    tool_says_gold = [{"role": "assistant", "content": "", "tool_calls": [CALL]},
                      {"role": "tool", "name": "lookup", "content": "42"},
                      {"role": "assistant", "content": "It is 7."}]
    assert final_assistant_text(tool_says_gold) == "It is 7."
    unparsed_args = [{"role": "assistant", "content": '<tool_call>{"name": "f", "arguments": {"x": 42}}</tool_call>'}]
    assert "42" not in final_assistant_text(unparsed_args)
    assert final_assistant_text("just text") == "just text"
    assert final_assistant_text([{"role": "assistant", "content": "single"}]) == "single"


def test_hostile_sizes_are_bounded():
    huge = "x" * (MAX_TURN_CHARS * 3)
    call = {"type": "function", "function": {"name": "n" * 10_000, "arguments": {"a": huge}}}
    rollout = []
    for _ in range(MAX_TURNS * 3):
        rollout += [{"role": "assistant", "content": huge, "tool_calls": [call]},
                    {"role": "tool", "name": "n", "content": huge}]
    rollout.append({"role": "assistant", "content": "final"})
    turns = turns_of_completion(rollout, {"Env": float("nan")})
    assert len(turns) == MAX_TURNS
    assert {"kind": "omitted", "count": len(turns) and turns[[t["kind"] for t in turns].index("omitted")]["count"]} \
        in turns
    assert turns[-2] == {"kind": "assistant", "text": "final"} and turns[-1] == {"kind": "reward", "name": "Env",
                                                                                "value": None}
    for turn in turns:
        assert len(turn.get("text", "")) <= MAX_TURN_CHARS and len(turn.get("name", "")) <= 200
        assert len(turn.get("arguments", "")) <= MAX_ARGUMENT_CHARS
    assert turns[0]["text"].endswith(CUT_MARK)


def test_turns_read_back_are_cleaned_to_their_shape():
    hostile = [{"kind": "assistant", "text": "a" * 10**6, "script": "<x>"}, {"kind": "evil"}, "str",
               {"kind": "tool_call", "name": 5, "arguments": ["x"], "parsed": "yes"},
               {"kind": "omitted", "count": -3}] + [{"kind": "assistant", "text": "t"}] * 500
    cleaned = clean_turns(hostile)
    assert len(cleaned) <= MAX_TURNS
    assert cleaned[0] == {"kind": "assistant", "text": cleaned[0]["text"]} and len(cleaned[0]["text"]) == MAX_TURN_CHARS
    assert cleaned[1] == {"kind": "tool_call", "name": "5", "arguments": "['x']", "parsed": False}
    assert cleaned[2] == {"kind": "omitted", "count": 0}
    assert clean_turns("not a list") is None


def test_the_tool_mask_is_kept_as_spans():
    assert mask_spans([1, 1, 0, 0, 0, 1]) == [[1, 2], [0, 3], [1, 1]]
    assert mask_spans([1, 1, 1]) is None and mask_spans(None) is None
    assert trained_flags([[1, 2], [0, 3], [1, 1]], 7) == [True, True, False, False, False, True, True]
    alternating = mask_spans([i % 2 for i in range(1000)])
    assert len(alternating) == MAX_MASK_SPANS and sum(n for _, n in alternating) == 1000


@pytest.mark.parametrize("spans, ok", [
    ([[1, 2], [0, 3]], True), ([[2, 1]], False), ([[1, 0]], False), ([[1, True]], False), ("x", False),
    ([[1, 1]] * (MAX_MASK_SPANS + 1), False), ([], False),
])
def test_mask_spans_read_back_are_checked(spans, ok):
    assert (clean_spans(spans) is not None) is ok


def test_recorded_turns_become_trl_s_messages_again_for_rescoring():
    from grpo_core.tools.turns import messages_from_turns

    failed = [{"role": "assistant", "content": "", "tool_calls": [CALL]},
              {"role": "tool", "name": "lookup", "content": str({"error": "boom"})},
              {"role": "assistant", "content": 'again <tool_call>{"name": "lookup", "argu</tool_call>'}]
    for rollout in (ROLLOUT, failed):
        turns = turns_of_completion(rollout, {"Env": 1.0})
        again = messages_from_turns(turns)
        assert turns_of_completion(again, {"Env": 1.0}) == turns
        assert final_assistant_text(again) == final_assistant_text(rollout)
    assert messages_from_turns(None) == [] and messages_from_turns([{"kind": "bogus"}]) == []


def test_the_workbench_rescores_trajectories_from_their_turns():
    from grpo_core.rescore.job import _scored_form
    from grpo_core.rescore.worker import score_batch

    turns = turns_of_completion([{"role": "assistant", "content": "", "tool_calls": [CALL]},
                                 {"role": "tool", "name": "lookup", "content": "42"},
                                 {"role": "assistant", "content": "It is 7."}])
    recorded = [{"text": "It is 7.", "turns": turns}, {"text": "42", "turns": None}]
    request = {"specs": [{"rule": "numeric_answer"}, {"rule": "tool_called", "params": {"tool": "lookup"}}],
               "chat": True, "rows": {"0": {"prompt": "q", "answer": "42"}},
               "groups": [{"id": 1, "row_index": 0, "prompt": "q",
                           "completions": [_scored_form(c) for c in recorded]}]}
    [group] = score_batch(request)["groups"]
    assert group["rewards"] == [[0.0, 1.0], [1.0, 0.0]]  # the answer read from the final turn; the call seen
