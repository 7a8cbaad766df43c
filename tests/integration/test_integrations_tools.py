"""An agentic script written from TRL's docs (tests/integration/scripts/trl_tool_script.py: ``environment_factory``
with one tool, an environment reward and a final-answer reward) recorded through ``DashboardCallback``: each
completion is stored as its turns (the call with its arguments, the tool's result as its own turn, the final answer
apart, the environment's reward) with TRL's tool mask, and the named API returns them."""

from __future__ import annotations

from grpo_core.tools.turns import trained_flags, trajectory_summary
from storage import RunStatus


def _check_trajectories(store, run_id: int) -> None:
    groups = store.groups_at(run_id, 1)
    completions = [c for g in groups for c in g.completions]
    assert len(completions) == 4
    called = [c for c in completions if c.turns and any(t.get("parsed") for t in c.turns)]
    assert called, [c.turns or c.text for c in completions]
    for c in called:
        kinds = [t["kind"] for t in c.turns]
        call = next(t for t in c.turns if t["kind"] == "tool_call")
        assert call["name"] == "calculator" and call["parsed"] is True and '"expression"' in call["arguments"]
        if "tool_result" in kinds:
            result = c.turns[kinds.index("tool_result")]
            assert kinds.index("tool_result") > kinds.index("tool_call")
            assert result["name"] == "calculator" and (result["text"] == "42" or result["error"])
            # the tool's output is its own turn, not the model's text: the text is the final assistant turn
            finals = [t for t in c.turns[kinds.index("tool_result"):] if t["kind"] == "assistant"]
            assert c.text == (finals[-1]["text"] if finals else "")
            # TRL trained on the model's tokens, not on the tool result's
            assert c.tool_mask and any(trained == 0 for trained, _ in c.tool_mask)
            flags = trained_flags(c.tool_mask, sum(n for _, n in c.tool_mask))
            assert not all(flags) and flags[0]
        assert kinds[-1] == "reward" and c.turns[-1]["name"] == "CalculatorEnv"
        assert c.turns[-1]["value"] == c.rewards["CalculatorEnv"]
        assert trajectory_summary(c.turns)["calls"] >= 1


def test_an_environment_factory_script_records_each_completion_as_its_turns(settings, store, tiny_tool_model_dir,
                                                                           tmp_path):
    from grpo_core.integrations import DashboardCallback
    from tests.integration.scripts.trl_tool_script import make_trainer

    callback = DashboardCallback(settings.db_url, name="agent")
    trainer = make_trainer(str(tiny_tool_model_dir), str(tmp_path / "out"), steps=1, callbacks=[callback])
    trainer.train()
    [run] = store.list_runs()
    assert run.status == RunStatus.COMPLETED, run.error
    _check_trajectories(store, run.id)
    keys = {p.key for p in store.metrics_since(run.id)}
    assert {"tools/call_frequency", "tools/failure_frequency", "rewards/CalculatorEnv/mean"} <= keys
    # the named API returns the turns
    from app.api.public import group_dict

    plain = group_dict(store.groups_at(run.id, 1)[0])
    assert any(c["turns"] for c in plain["completions"])
    assert all(c["tool_mask"] is None or c["turns"] for c in plain["completions"])


def test_the_same_script_records_its_turns_over_http(tmp_path, tiny_tool_model_dir):
    import subprocess
    import sys
    from pathlib import Path

    from storage import Store
    from tests.integration.scripts.runner import REPO, script_env
    from tests.servers import serving

    data = tmp_path / "data"
    data.mkdir()
    store = Store(f"sqlite:///{data}/grpo.db")
    token = store.create_api_token("alice", "agents")[1]
    script = Path(REPO) / "tests" / "integration" / "scripts" / "trl_tool_script.py"
    try:
        with serving(data) as served:
            log = tmp_path / "log.txt"
            with open(log, "w") as handle:
                code = subprocess.run(
                    [sys.executable, str(script), "--model", str(tiny_tool_model_dir), "--output-dir",
                     str(tmp_path / "out"), "--target", served.url, "--token", token, "--steps", "1"],
                    cwd=REPO, env=script_env(), stdout=handle, stderr=subprocess.STDOUT, timeout=600).returncode
            assert code == 0, log.read_text()[-3000:]
            [run] = store.list_runs()
            assert run.status == RunStatus.COMPLETED and run.owner == "alice", run.error
            _check_trajectories(store, run.id)
    finally:
        store.close()
