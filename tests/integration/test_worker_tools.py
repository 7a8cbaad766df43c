"""The dashboard's own worker trains a run launched with a library tool (``tools: [calculator]``,
``max_tool_calling_iterations``) on the tool-calling tiny model: TRL runs the calls, and each completion is recorded
as its turns (the call with its arguments, the calculator's result as its own turn, the final answer apart) with the
tool mask; the answer rule judged the final turn and the tool rule the call."""

from __future__ import annotations

import json

from grpo_core.run_config import RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.tiny_model import TOOL_QUESTION, TOOL_SYSTEM


def test_a_run_with_the_calculator_records_its_trajectories(store, settings, tiny_tool_model_dir, tmp_path):
    dataset = tmp_path / "questions.jsonl"
    dataset.write_text("".join(json.dumps({"prompt": TOOL_QUESTION, "answer": "42"}) + "\n" for _ in range(8)))
    config = RunConfig.model_validate({
        "model": str(tiny_tool_model_dir), "dataset_path": str(dataset), "system_prompt": TOOL_SYSTEM,
        "rewards": [{"rule": "numeric_answer", "weight": 1.0},
                    {"rule": "tool_called", "weight": 0.5, "params": {"tool": "calculator"}}],
        "tools": ["calculator"], "max_tool_calling_iterations": 2, "max_steps": 1, "max_completion_length": 64,
        "num_generations": 4, "per_device_train_batch_size": 4, "temperature": 0.7, "learning_rate": 1e-5,
        "device": "cpu",
    })
    run = submit_run(store, config).run
    assert Launcher(store, settings).wait_idle(timeout_s=600), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error

    keys = {p.key for p in store.metrics_since(run.id)}
    assert {"tools/call_frequency", "tools/failure_frequency"} <= keys
    [group] = store.groups_at(run.id, 1)
    called = [c for c in group.completions if c.turns and any(t.get("parsed") for t in c.turns)]
    assert called, [c.turns or c.text for c in group.completions]
    for c in called:
        kinds = [t["kind"] for t in c.turns]
        call = c.turns[kinds.index("tool_call")]
        assert call["name"] == "calculator" and json.loads(call["arguments"]).get("expression")
        assert c.rewards["tool_called"] == 1.0
        if "tool_result" in kinds:
            result = c.turns[kinds.index("tool_result")]
            assert result["name"] == "calculator"
            assert result["error"] or result["text"] == "42"
            assert c.tool_mask and any(trained == 0 for trained, _ in c.tool_mask)
            # the answer rule read the final assistant turn, never the tool's "42"
            final_turns = [t["text"] for t in c.turns[kinds.index("tool_result"):] if t["kind"] == "assistant"]
            assert c.text == (final_turns[-1] if final_turns else "")
            assert c.rewards["numeric_answer"] == (1.0 if "42" in c.text else 0.0)
