"""The preflight on the tiny random Llama: the subprocess the dashboard starts (``python -m grpo_core.preflight.worker
--json``), the ``grpo-dashboard preflight`` command on a stored dataset, and a config it cannot use."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from app.cli.main import main as cli_main
from grpo_core.datasets.library import import_dataset
from grpo_core.preflight.job import PreflightError, preflight_report, start_preflight
from grpo_core.run_config import RunConfig

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "arithmetic.jsonl"
REWARDS = [
    {"rule": "numeric_answer", "weight": 1.0},
    {"rule": "format_regex", "weight": 0.5, "params": {"pattern": r"^\d+$"}},
    {"rule": "length", "weight": 0.25, "params": {"min_tokens": 1, "max_tokens": 6}},
]


def tiny_config(model_dir: Path, **overrides) -> RunConfig:
    values = {
        "model": str(model_dir),
        "dataset_path": str(EXAMPLE),
        "rewards": REWARDS,
        "max_completion_length": 10,
        "num_generations": 3,
        "per_device_train_batch_size": 6,
        "temperature": 1.0,
    }
    values.update(overrides)
    return RunConfig.model_validate(values)


def wait_done(job, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while not job.poll():
        assert time.monotonic() < deadline, job.log_tail()
        time.sleep(0.5)


def test_preflight_subprocess_writes_a_report(settings, tiny_model_dir):
    job = start_preflight(settings, tiny_config(tiny_model_dir), num_prompts=3)
    assert settings.db_url not in job.process.args  # the store URL travels in the environment
    try:
        wait_done(job)
        assert "prompt 3/3" in job.log_tail(50)
        messages = [event.message for event in job.read_progress()]  # the same steps, as progress messages
        assert any(m and m.startswith("prompt 3/3") for m in messages), messages
        report = preflight_report(job)
    finally:
        job.close()
    assert not job.folder.exists()

    assert (report.num_prompts, report.num_generations, report.max_completion_length) == (3, 3, 10)
    assert [r.name for r in report.rules] == ["numeric_answer", "format_regex", "length"]
    for rule in report.rules:
        assert rule.count == 9 and rule.none_share == 0
        assert 0 <= rule.nonzero_share <= 1 and 0 <= rule.varies_share <= 1
    assert 0 <= report.zero_std_share <= 1 and report.zero_std_share in (0, 1 / 3, 2 / 3, 1)
    assert 0 <= report.truncation_rate <= 1
    assert 1 <= report.mean_completion_tokens <= 10
    assert report.examples and all(e.num_tokens <= 10 for e in report.examples)
    assert "What is" in report.examples[0].prompt  # the chat prompt, rendered as role: content lines
    assert report.verdict is not None and report.verdict.level in ("ok", "warning", "problem")
    assert report.verdict.headline
    # random weights write gibberish: the answer rule cannot fire
    assert report.rules[0].nonzero_share == 0
    assert any("numeric_answer` never fires" in a for a in report.verdict.advice)


def test_preflight_command_on_a_stored_dataset(settings, store, tiny_model_dir, tmp_path, capsys):
    info = import_dataset(store, settings, EXAMPLE, source_name="arithmetic.jsonl", name="arith")
    config_path = tmp_path / "run.yaml"
    config_path.write_text(tiny_config(tiny_model_dir, dataset_path=None, max_completion_length=4).to_yaml())
    out = tmp_path / "report.json"
    status = cli_main(
        [
            "preflight",
            str(config_path),
            "--prompts",
            "2",
            "--dataset-id",
            str(info.id),
            "--data-dir",
            str(settings.data_dir),
            "--db",
            settings.db_url,
            "--json",
            str(out),
        ]
    )
    printed = capsys.readouterr().out
    assert status == 0
    assert "Preflight:" in printed and "2 prompts x 3 completions" in printed
    assert "numeric_answer" in printed and "frac_reward_zero_std" in printed and "Verdict (" in printed
    data = json.loads(out.read_text())
    assert data["num_prompts"] == 2 and data["max_completion_length"] == 4
    assert data["verdict"]["headline"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"dataset_path": "/nonexistent/rows.jsonl"}, "rows.jsonl"),
        ({"model": "/nonexistent/model"}, "does not exist"),
    ],
)
def test_preflight_reports_what_went_wrong(settings, tiny_model_dir, tmp_path, overrides, message):
    config = tiny_config(tiny_model_dir)
    data = {**config.model_dump(mode="json"), **overrides}
    config = RunConfig.model_validate(data)
    job = start_preflight(settings, config, num_prompts=1)
    try:
        wait_done(job, 120)
        with pytest.raises(PreflightError, match=message):
            preflight_report(job)
    finally:
        job.close()
