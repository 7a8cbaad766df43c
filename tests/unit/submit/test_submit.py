"""Tests of queueing a run (grpo_core.submit.queue): submit_run validates once and returns the run with the
validation's warnings, so a launch (the public API's launch_run, the built dashboard's handler) tries a plugin in one
child process, not two; an invalid config queues nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import gradio as gr
import pytest

import grpo_core.reward_check.job as reward_check
from app.server import build_blocks, create_context
from grpo_core.datasets.library import import_dataset
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.submit.queue import SubmittedRun, submit_run
from grpo_core.submit.validate import validate_run_config
from storage import RunStatus


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    path = tmp_path / "plugin.py"
    path.write_text("def reward(completions, **kwargs):\n    return [0.5 for _ in completions]\n", encoding="utf-8")
    return path


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """The plugin checks run from now on (each one child process), recorded as their requests."""
    seen: list[dict] = []
    real = reward_check.ask_reward_check

    def counting(request, **kwargs):
        seen.append(request)
        return real(request, **kwargs)

    monkeypatch.setattr(reward_check, "ask_reward_check", counting)
    return seen


def _dataset(store, settings, tmp_path: Path, name: str, rows: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return import_dataset(store, settings, path, source_name=name)


def _config(store, settings, tmp_path: Path, model_folder: Path, plugin: Path, **fields) -> RunConfig:
    dataset = _dataset(store, settings, tmp_path, "sums.jsonl", [{"prompt": "1 + 1?", "answer": "2"}])
    rewards = [{"rule": "numeric_answer"}, {"rule": "plugin", "params": {"target": f"{plugin}:reward"}}]
    return RunConfig(model=str(model_folder), dataset_id=dataset.id, rewards=rewards, **fields)


def test_submit_run_validates_once_and_returns_the_run_with_its_warnings(
    store, settings, tmp_path, model_folder, plugin, checks
) -> None:
    config = _config(store, settings, tmp_path, model_folder, plugin, max_completion_length=8, name="short")
    submitted = submit_run(store, config, owner="alice")
    assert isinstance(submitted, SubmittedRun)
    assert len(checks) == 1  # one plugin check, one child process
    assert submitted.run == store.get_run(submitted.run.id)
    assert (submitted.run.status, submitted.run.name, submitted.run.owner) == (RunStatus.QUEUED, "short", "alice")
    assert submitted.warnings == tuple(validate_run_config(store, config))
    assert any("max_completion_length below 16" in w for w in submitted.warnings)
    with pytest.raises(dataclasses.FrozenInstanceError):
        submitted.warnings = ()  # type: ignore[misc]


def test_submit_run_without_warnings_returns_none(store, settings, tmp_path, model_folder, plugin) -> None:
    assert submit_run(store, _config(store, settings, tmp_path, model_folder, plugin)).warnings == ()


def test_a_refused_plugin_queues_nothing(store, settings, tmp_path, model_folder, plugin, checks) -> None:
    plugin.write_text("def reward(completions, **kwargs):\n    return [1.0]\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^rewards: reward rule 2 \(plugin\): .* must return a list of 2 numbers"):
        submit_run(store, _config(store, settings, tmp_path, model_folder, plugin))
    assert len(checks) == 1
    assert store.list_runs() == []


def _handler(blocks, name):
    found = [f.fn for f in blocks.fns.values() if getattr(f.fn, "__name__", "") == name]
    assert len(found) == 1, name
    return found[0]


def test_the_public_apis_launch_checks_a_plugin_once(
    settings, tmp_path, model_folder, plugin, checks, monkeypatch
) -> None:
    ctx = create_context(settings)
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)  # queued, never started: no worker in a unit test
    try:
        launch = _handler(build_blocks(ctx), "launch_run")
        config = _config(ctx.store, settings, tmp_path, model_folder, plugin, max_completion_length=8)
        answer = launch(json.dumps(config.model_dump(mode="json")), gr.Request())
        assert len(checks) == 1
        assert answer["run"]["status"] == "queued"
        assert [w for w in answer["warnings"] if "max_completion_length" in w]
        assert isinstance(answer["warnings"], list)
    finally:
        ctx.store.close()


# ------------------------------------------------------------------ a rule that reads a column the data lacks


def test_the_launch_names_the_rule_and_the_column_the_dataset_lacks(store, settings, tmp_path, model_folder) -> None:
    prompts = _dataset(store, settings, tmp_path, "prompts.jsonl", [{"prompt": "1 + 1?"}])
    rewards = [{"rule": "length"}, {"rule": "numeric_answer"}]
    config = RunConfig(model=str(model_folder), dataset_id=prompts.id, rewards=rewards)
    message = r"^reward rule 2 \(numeric_answer\) reads column 'answer', which the dataset lacks; its columns are prompt$"
    with pytest.raises(ConfigError, match=message):
        validate_run_config(store, config)
    with pytest.raises(ConfigError, match=message):
        submit_run(store, config)
    assert store.list_runs() == []  # nothing queued


def test_the_launch_names_the_rule_and_the_column_the_eval_dataset_lacks(store, settings, tmp_path, model_folder):
    sums = _dataset(store, settings, tmp_path, "sums.jsonl", [{"prompt": "1 + 1?", "answer": "2"}])
    prompts = _dataset(store, settings, tmp_path, "prompts.jsonl", [{"prompt": "2 + 2?"}])
    config = RunConfig(model=str(model_folder), dataset_id=sums.id, eval_dataset_id=prompts.id,
                       rewards=[{"rule": "numeric_answer"}])
    with pytest.raises(ConfigError, match=r"^eval_dataset_id: reward rule numeric_answer reads column 'answer', "
                                          r"which the eval dataset lacks; its columns are prompt$"):
        validate_run_config(store, config)
    assert validate_run_config(store, config.model_copy(update={"eval_dataset_id": sums.id})) == []


def test_an_environment_trl_cannot_use_is_refused_at_launch_and_queues_nothing(store, settings, tmp_path,
                                                                               model_folder, plugin):
    (tmp_path / "env.py").write_text("class Shop:\n    def add(self, item: str) -> str:\n        return item\n",
                                     encoding="utf-8")
    config = _config(store, settings, tmp_path, model_folder, plugin).model_copy(
        update={"environment": f"{tmp_path}/env.py:Shop"})
    with pytest.raises(ConfigError, match=r"^environment '.*env\.py:Shop': the environment class Shop has no "
                                          r"callable reset"):
        submit_run(store, config)
    assert store.list_runs() == []
