"""The reward workbench's hacking probe for a run with tools (grpo_core/rescore/job.py, worker.py): the run's tools
travel with the request, and the worker tries degenerate trajectories beside the recorded rollouts."""

from __future__ import annotations

from grpo_core.rescore.job import _child_request, prepare_rescoring
from grpo_core.rescore.request import RescoreRequest
from grpo_core.rescore.worker import score_batch
from storage import CompletionRecord, GroupRecord


def rollout(final: str, result: str = "42", tool: str = "calculator") -> list[dict]:
    return [{"role": "assistant", "content": "", "tool_calls": [
                {"type": "function", "function": {"name": tool, "arguments": {"expression": "6 * 7"}}}]},
            {"role": "tool", "name": tool, "content": result},
            {"role": "assistant", "content": final}]


def test_the_workbench_s_probe_tries_trajectories_for_a_recipe_with_tools():
    request = {"specs": [{"rule": "numeric_answer"}], "chat": True, "probe_rows": 4,
               "rows": {"0": {"prompt": "What is 6 * 7?", "answer": "42", "_row_index": 0}},
               "groups": [{"id": 1, "row_index": 0, "prompt": "q", "completions": [rollout("42"), "41"]}]}
    flagged = {p["probe"]: p for p in score_batch(request)["probe"]}
    assert flagged["answer_without_tool"]["paid_by"] == ["numeric_answer"]
    assert flagged["answer_without_tool"]["rule"] == "numeric_answer"
    # recorded as text only (no rollout called a tool): tried when the run gives the model tools
    request["groups"][0]["completions"] = ["42", "41"]
    assert "answer_without_tool" not in {p["probe"] for p in score_batch(request)["probe"]}
    request.update(tools=["calculator"], agentic=True)
    assert "answer_without_tool" in {p["probe"] for p in score_batch(request)["probe"]}


def test_a_run_with_tools_sends_its_tools_to_the_probe(store):
    config = {"tools": ["calculator"], "tool_plugins": ["/srv/plugins/t.py:weather"], "dataset_path": "gone.jsonl"}
    run = store.create_run(name="agent", config=config, dataset_id=None, max_steps=2)
    store.record_groups(run.id, 1, [GroupRecord(step=1, row_index=0, prompt="q", completions=[
        CompletionRecord(index=0, text="42", rewards={}, total_reward=0.0, advantage=0.0)])])
    prepared = prepare_rescoring(store, RescoreRequest(run_id=run.id, rewards=[{"rule": "numeric_answer"}]))
    request = _child_request(prepared, workers=1)
    assert request["tools"] == ["calculator", "weather"] and request["agentic"] is True
    plain = store.create_run(name="plain", config={"dataset_path": "gone.jsonl"}, dataset_id=None, max_steps=2)
    store.record_groups(plain.id, 1, [GroupRecord(step=1, row_index=0, prompt="q", completions=[
        CompletionRecord(index=0, text="42", rewards={}, total_reward=0.0, advantage=0.0)])])
    request = _child_request(prepare_rescoring(store, RescoreRequest(run_id=plain.id,
                                                                     rewards=[{"rule": "numeric_answer"}])), 1)
    assert request["tools"] == [] and request["agentic"] is False


def test_the_workbench_names_every_rule_that_pays_a_flagged_trajectory():
    from app.views.rescore import probe_html

    evil = "<b>x</b>"
    shown = probe_html({"probe": [{"probe": "tool_result_has_answer", "text": "call calculator", "total": 1.0,
                                   "best_real": 1.0, "rule": "joined", "paid_by": ["joined", evil]},
                                  {"probe": "empty", "text": "", "total": 1.0, "best_real": 1.0, "rule": "length"}]})
    assert "paid by joined, &lt;b&gt;x&lt;/b&gt;" in shown and "paid by length" in shown and evil not in shown
