"""A GSM8K-layout file trains through the launcher with the column mapping set in the run config (a tiny local
Llama, two steps), and a run whose prompts do not fit the model's context fails before its model is loaded,
naming the rows (the worker's own check, for models whose tokenizer was not on disk at launch)."""

from __future__ import annotations

import json
from pathlib import Path

from grpo_core.run_config import RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from grpo_core.training.worker import train_run
from storage import RunStatus

SYSTEM = "Solve the problem. End with '#### <number>'."
REWARDS = [
    {"rule": "numeric_answer", "weight": 1.0},
    {"rule": "length", "weight": 0.25, "params": {"min_tokens": 1, "max_tokens": 6}},
]


def _gsm8k_like(path: Path, count: int = 8) -> Path:
    rows = [{"question": f"Tom has {a} apples and buys {a + 3} more. How many apples does he have?",
             "answer": f"He has {a} + {a + 3} = <<{a}+{a + 3}={2 * a + 3}>>{2 * a + 3} apples.\n#### {2 * a + 3}"}
            for a in range(1, count + 1)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


def test_gsm8k_layout_trains_with_the_mapping_through_the_launcher(store, settings, tiny_model_dir, tmp_path):
    config = RunConfig.model_validate({
        "model": str(tiny_model_dir), "dataset_path": str(_gsm8k_like(tmp_path / "gsm8k.jsonl")),
        "prompt_column": "question", "system_prompt": SYSTEM, "rewards": REWARDS, "max_steps": 2,
        "max_completion_length": 12, "num_generations": 4, "per_device_train_batch_size": 8,
        "temperature": 1.0, "learning_rate": 1e-3,
    })
    run = submit_run(store, config, model_cache_dir=settings.model_cache_dir).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=240), "the run did not finish"

    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    assert final.current_step == 2
    assert final.config["prompt_column"] == "question" and final.config["system_prompt"] == SYSTEM
    groups = store.groups_since(run.id)
    assert groups, "no groups recorded"
    for group in groups:  # the recorded prompt is the mapped chat prompt: the system prompt, then the question
        assert group.prompt.startswith(f"system: {SYSTEM}\nuser: Tom has ")


def test_worker_refuses_too_long_prompts_before_loading_the_model(store, settings, tiny_model_dir, tmp_path):
    long_question = "Add: " + " + ".join(str(7 + i % 90) for i in range(3000))
    path = tmp_path / "long.jsonl"
    path.write_text(json.dumps({"question": "1 + 1?", "answer": "2"}) + "\n"
                    + json.dumps({"question": long_question, "answer": "0"}) + "\n", encoding="utf-8")
    config = RunConfig(model=str(tiny_model_dir), dataset_path=str(path), prompt_column="question",
                       rewards=REWARDS, max_completion_length=64)
    # Queued directly, as a run whose tokenizer was not on disk at launch would be.
    run = store.create_run(name="too-long", config=config.model_dump(mode="json"), dataset_id=None, max_steps=2)

    assert train_run(store, settings, run.id) == RunStatus.FAILED

    final = store.get_run(run.id)
    assert "PromptTooLongError: 1 of 2 prompts are too long for the model: its context is 1,024 tokens" in final.error
    assert "row 1: " in final.error and "max_completion_length = 64 leaves 960 tokens" in final.error
    assert store.metrics_since(run.id) == []


def test_preflight_reports_too_long_prompts_naming_rows(tiny_model_dir, tmp_path, capsys):
    from grpo_core.preflight.worker import preflight_command

    long_question = "Add: " + " + ".join(str(7 + i % 90) for i in range(3000))
    data = tmp_path / "long.jsonl"
    data.write_text(json.dumps({"question": long_question, "answer": "0"}) + "\n"
                    + json.dumps({"question": "1 + 1?", "answer": "2"}) + "\n", encoding="utf-8")
    config = RunConfig(model=str(tiny_model_dir), dataset_path=data.name, prompt_column="question",
                       rewards=REWARDS, max_completion_length=64)
    config_path = tmp_path / "run.yaml"
    config_path.write_text(config.to_yaml(), encoding="utf-8")
    report = tmp_path / "report.json"

    status = preflight_command(str(config_path), data_dir=str(tmp_path / "data"), json_out=str(report))

    assert status == 1
    error = json.loads(report.read_text(encoding="utf-8"))["error"]
    assert error.startswith("PromptTooLongError: 1 of 2 prompts are too long for the model: its context is 1,024")
    assert "row 0: " in error and "leaves 960 tokens for a prompt" in error
    assert "1 of 2 prompts are too long" in capsys.readouterr().err
