"""Tests of the one check of "a reward rule reads a column the data lacks" (grpo_core.rewards.registry's
first_missing_column) and of its users: the launch's validation (the dataset, the eval dataset) and the try-the-model
request (one row). Each names the rule and the column."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from grpo_core.datasets.library import import_dataset
from grpo_core.rewards.registry import MissingColumn, first_missing_column
from grpo_core.runs.config import ConfigError, RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.submit.validate import validate_run_config


@pytest.mark.parametrize(
    ("rules", "columns", "expected"),
    [
        ([], [], None),
        (["length", "format_regex"], [], None),  # rules that read no column
        (["numeric_answer"], ["prompt", "answer"], None),
        (["numeric_answer"], ["prompt"], MissingColumn(1, "numeric_answer", "answer")),
        (["length", "code_tests"], ["prompt", "answer"], MissingColumn(2, "code_tests", "tests")),
        (["exact_match", "code_runtime"], ["prompt"], MissingColumn(1, "exact_match", "answer")),  # the first one
        (["numeric_answer"], ["Answer", "answers", " answer"], MissingColumn(1, "numeric_answer", "answer")),  # exact
        (["code_tests"], {"prompt": "P", "tests": None}, None),  # a row: its keys are its columns
    ],
)
def test_first_missing_column(rules, columns, expected) -> None:
    assert first_missing_column(rules, columns) == expected


def test_an_unknown_rule_is_named() -> None:
    with pytest.raises(ValueError, match="unknown reward rule 'no_such_rule'"):
        first_missing_column(["no_such_rule"], ["prompt"])


@pytest.fixture
def model_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


def _dataset(store, settings, tmp_path: Path, name: str, rows: list[dict]):
    path = tmp_path / name
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return import_dataset(store, settings, path, source_name=name)


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
