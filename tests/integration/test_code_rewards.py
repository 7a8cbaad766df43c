"""Code rewards through the worker: the tiny Llama trains one GRPO step on the HumanEval example with
``code_tests`` + ``code_style`` + ``code_runtime`` + ``length``, through the launcher's subprocess, and every
completion is run in the sandbox from inside the worker (as root, under a pool uid; see docs/sandbox.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_core.datasets.humaneval import write_humaneval_jsonl
from grpo_core.run_config import RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus

CODE_REWARDS = [
    {"rule": "code_tests", "weight": 0.7, "params": {"timeout_s": 5.0}},
    {"rule": "code_style", "weight": 0.1},
    {"rule": "code_runtime", "weight": 0.1},
    {"rule": "length", "weight": 0.1, "params": {"min_tokens": 1, "max_tokens": 24}},
]
RULE_NAMES = {"code_tests", "code_style", "code_runtime", "length"}


@pytest.fixture
def humaneval_path(tmp_path):
    """The HumanEval example without its longest prompts: the tiny test model's context (1,024 tokens) is refused
    before launch for the two longest (1,066 and 1,178 of its tokens), as the launch check should."""
    path = tmp_path / "humaneval.jsonl"
    try:
        write_humaneval_jsonl(path)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    lines = [line for line in path.read_text().splitlines() if len(json.loads(line)["prompt"]) < 1200]
    assert len(lines) >= 150
    path.write_text("\n".join(lines) + "\n")
    return path


def test_one_step_on_humaneval_records_every_code_rule(store, settings, tiny_model_dir, humaneval_path):
    config = RunConfig.model_validate(
        {
            "model": str(tiny_model_dir),
            "dataset_path": str(humaneval_path),
            "rewards": CODE_REWARDS,
            "max_steps": 1,
            "max_completion_length": 24,
            "num_generations": 4,
            "per_device_train_batch_size": 8,
            "temperature": 1.0,
        }
    )
    run = submit_run(store, config).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=300), "the run did not finish"

    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    keys = {point.key for point in store.metrics_since(run.id)}
    for name in RULE_NAMES:
        assert f"rewards/{name}/mean" in keys, sorted(keys)
        assert f"rewards/{name}/errors" in keys, sorted(keys)  # 0 here: a reward error is counted per rule
    assert {"reward", "reward_std", "frac_reward_zero_std"} <= keys

    groups = store.groups_at(run.id, 1)
    assert len(groups) == 2
    for group in groups:
        assert group.extra.get("entry_point") and "def check" in group.extra.get("tests", "")
        assert "Complete the following Python function" in group.prompt
        for completion in group.completions:
            assert set(completion.rewards) == RULE_NAMES
            # None would mean the sandbox could not start a child inside the worker (a setup error); random
            # text is a syntax error (0.0) or, rarely, a timeout (-0.1).
            assert completion.rewards["code_tests"] is not None
            assert -0.1 <= completion.rewards["code_tests"] <= 1.0
            assert completion.rewards["code_style"] is not None
            assert 0.0 <= completion.rewards["length"] <= 1.0
    log = (Path(final.run_dir) / "train.log").read_text(encoding="utf-8")
    assert "the sandbox failed" not in log
    assert "children will run as root" not in log


def test_gated_code_recipe_trains_with_per_rule_rewards(store, settings, tiny_model_dir, humaneval_path):
    """The gated recipe (examples/code_gated.yaml) through the worker: TRL still logs every rule's own mean, and a
    gated rule pays only completions whose code passes a test (random text passes none: the gated rules give 0)."""
    from grpo_core.run_config import load_run_config

    recipe = load_run_config(Path(__file__).resolve().parents[2] / "examples" / "code_gated.yaml")
    config = recipe.model_copy(update={
        "model": str(tiny_model_dir), "dataset_path": str(humaneval_path), "max_steps": 1,
        "max_completion_length": 24, "num_generations": 4, "per_device_train_batch_size": 8, "temperature": 1.0,
    })
    run = submit_run(store, RunConfig.model_validate(config.model_dump())).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=300), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    keys = {point.key for point in store.metrics_since(run.id)}
    for name in RULE_NAMES:
        assert f"rewards/{name}/mean" in keys, sorted(keys)
    for group in store.groups_at(run.id, 1):
        for completion in group.completions:
            assert set(completion.rewards) == RULE_NAMES
            passed = (completion.rewards["code_tests"] or 0.0) >= 0.01
            for gated in ("code_style", "code_runtime", "length"):
                if not passed:
                    assert completion.rewards[gated] in (0.0, None), (gated, completion.rewards)
