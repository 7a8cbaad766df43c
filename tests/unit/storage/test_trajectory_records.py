"""Multi-turn completions through the recording path: TRL's buffers -> groups with turns and tool-mask spans
(grpo_core.engine.group_capture), the store (real SQLite, and a store of the previous version migrated), and the HTTP
wire (grpo_core.integrations.wire), with hostile values bounded. Single-turn completions are unchanged. (A store of the previous version gets the turn columns:
tests/unit/storage/test_store_migrations.py.)"""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from grpo_core.integrations.wire import Batch, groups_from_wire, step_record
from grpo_core.tools.turns import MAX_TURN_CHARS, MAX_TURNS
from storage import CompletionRecord, GroupRecord

CALL = {"type": "function", "function": {"name": "lookup", "arguments": {"key": "secret"}}}
ROLLOUT = [{"role": "assistant", "content": "", "tool_calls": [CALL]},
           {"role": "tool", "name": "lookup", "content": "42"},
           {"role": "assistant", "content": "The answer is 7."}]
SINGLE = [{"role": "assistant", "content": "no tool, 42"}]


def _trl_logs():
    # TRL 1.16's GRPOTrainer._logs after one generation of one group of 2, with the tap's extra columns
    return {"prompt": [[{"role": "user", "content": "q"}]] * 2, "completion": [ROLLOUT, SINGLE],
            "advantages": [0.7, -0.7], "rewards": {"answer": [0.0, 1.0], "SecretEnv": [1.0, 0.0]},
            "extra": {"_num_tokens": [9, 4], "_truncated": [False, False],
                      "_tool_mask": [[[1, 3], [0, 4], [1, 2]], None]}}


def test_trl_s_buffers_become_completions_with_turns_and_the_tool_mask():
    from grpo_core.engine.group_capture import groups_from_trl_logs

    [group] = groups_from_trl_logs(_trl_logs(), step=1, num_generations=2, reward_names=["answer", "SecretEnv"],
                                   reward_weights=[1.0, 1.0], environment_rewards=["SecretEnv"])
    multi, single = group.completions
    assert multi.text == "The answer is 7."  # the final assistant turn; the tool's "42" is a turn of its own
    assert [t["kind"] for t in multi.turns] == ["tool_call", "tool_result", "assistant", "reward"]
    assert multi.turns[-1] == {"kind": "reward", "name": "SecretEnv", "value": 1.0}
    assert multi.tool_mask == [[1, 3], [0, 4], [1, 2]]
    assert (single.text, single.turns, single.tool_mask) == ("no tool, 42", None, None)


def test_turns_and_the_tool_mask_are_stored_and_read_back(store):
    run = store.create_run(name="agent", config={"max_steps": 1}, dataset_id=None, max_steps=1)
    turns = [{"kind": "assistant", "text": "<script>x</script>"},
             {"kind": "tool_call", "name": "lookup", "arguments": "{}", "parsed": True}]
    store.record_groups(run.id, 1, [GroupRecord(step=1, row_index=0, prompt="q", completions=[
        CompletionRecord(index=0, text="a", rewards={}, total_reward=None, advantage=None, turns=turns,
                         tool_mask=[[1, 2], [0, 3]]),
        CompletionRecord(index=1, text="b", rewards={}, total_reward=None, advantage=None)])])
    first, second = store.groups_at(run.id, 1)[0].completions
    assert first.turns == turns and first.tool_mask == [[1, 2], [0, 3]]
    assert second.turns is None and second.tool_mask is None
    # A view of rewards and labels reads the same rows without the turns (unread: None), by step and by row.
    for light in (store.groups_at(run.id, 1, turns=False)[0], store.groups_for_prompt(run.id, 0, turns=False)[0]):
        assert [(c.index, c.text, c.turns, c.tool_mask) for c in light.completions] == [(0, "a", None, None),
                                                                                         (1, "b", None, None)]
    assert store.groups_for_prompt(run.id, 0)[0].completions[0].turns == turns


def _wire_batch(turns, tool_mask):
    group = GroupRecord(step=1, row_index=0, prompt="q", completions=[
        CompletionRecord(index=0, text="a", rewards={"r": 1.0}, total_reward=1.0, advantage=0.0, turns=turns,
                         tool_mask=tool_mask)])
    return {"records": [step_record(1, 1, metrics={"tools/call_frequency": 1.0}, wall_time=1.0,
                                    groups=[("train", [group])])]}


def test_turns_cross_the_wire_and_hostile_ones_are_cut_to_their_bounds():
    turns = [{"kind": "tool_call", "name": "lookup", "arguments": '{"key": "secret"}', "parsed": True},
             {"kind": "tool_result", "name": "lookup", "text": "42", "error": False}]
    batch = Batch.model_validate(_wire_batch(turns, [[1, 5], [0, 2]]))
    [(split, [group])] = groups_from_wire(batch.records[0])
    assert group.completions[0].turns == turns and group.completions[0].tool_mask == [[1, 5], [0, 2]]

    hostile = [{"kind": "assistant", "text": "x" * (MAX_TURN_CHARS * 2), "onload": "alert(1)"},
               {"kind": "bogus", "text": "?"}]
    batch = Batch.model_validate(_wire_batch(hostile, None))
    [turn] = groups_from_wire(batch.records[0])[0][1][0].completions[0].turns
    assert set(turn) == {"kind", "text"} and len(turn["text"]) == MAX_TURN_CHARS
    with pytest.raises(ValidationError):
        Batch.model_validate(_wire_batch([{"kind": "assistant", "text": "t"}] * (MAX_TURNS + 1), None))
    with pytest.raises(ValidationError, match="tool_mask"):
        Batch.model_validate(_wire_batch(None, [[7, 1]]))
