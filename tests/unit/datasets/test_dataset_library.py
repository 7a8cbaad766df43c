"""Tests for grpo_core.datasets.library and grpo_core.runs.actions (submitting): datasets are imported whole or not at all, the shipped examples register once, and
runs are validated (model, dataset, columns the reward rules read) before they are queued."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from grpo_core.datasets.formats import read_normalized
from grpo_core.datasets.library import (
    ARITHMETIC_EXAMPLE,
    ARITHMETIC_LEVELS,
    HUMANEVAL_EXAMPLE,
    QUICK_START_EXAMPLE,
    import_dataset,
    register_examples,
)
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.rewards.compose import RewardSpec
from grpo_core.run_config import DEFAULT_MODEL, ConfigError, RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.submit.validate import validate_run_config
from storage import RunStatus, StoreError

HAS_HUMANEVAL_MODULE = importlib.util.find_spec("grpo_core.datasets.humaneval") is not None


def _write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


@pytest.fixture
def upload(tmp_path) -> Path:
    """A valid upload, stored under a temporary name as Gradio would."""
    rows = [{"prompt": "What is 1 + 1?", "answer": 2}, {"prompt": "What is 2 + 3?", "answer": 5}]
    return _write_jsonl(tmp_path / "gradio-tmp-1234.jsonl", rows)


def _snapshot(store, settings) -> tuple[list, list[str]]:
    """The store's datasets and every file (hidden ones too) in the datasets folder."""
    files = sorted(str(p.relative_to(settings.datasets_dir)) for p in settings.datasets_dir.rglob("*"))
    return store.list_datasets(), files


# ---------------------------------------------------------------------------------------------------- import


def test_import_dataset_writes_rows_under_datasets_dir(store, settings, upload):
    info = import_dataset(store, settings, upload, source_name="/home/user/My sums.jsonl")

    assert info.name == "My sums"
    assert info.source_name == "My sums.jsonl"  # the folder part of the uploaded name is dropped
    assert info.num_rows == 2
    assert info.columns == ["prompt", "answer"]
    assert info.prompt_kind == "text"
    path = Path(info.path)
    assert path.parent == settings.datasets_dir
    assert path.name not in (upload.name, "My sums.jsonl")
    assert read_normalized(path) == [
        {"prompt": "What is 1 + 1?", "answer": 2},
        {"prompt": "What is 2 + 3?", "answer": 5},
    ]
    assert store.find_dataset("My sums") == info


def test_import_dataset_with_explicit_name(store, settings, upload):
    info = import_dataset(store, settings, upload, source_name="sums.jsonl", name="  sums v2  ")
    assert info.name == "sums v2"


def test_failed_upload_leaves_store_and_folder_as_they_were(store, settings, upload, tmp_path):
    import_dataset(store, settings, upload, source_name="good.jsonl")
    before = _snapshot(store, settings)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "fine"}\n{"prompt": "broken",\n{"prompt": "fine"}\n', encoding="utf-8")

    with pytest.raises(DatasetError, match=r"bad\.jsonl, line 2"):
        import_dataset(store, settings, bad, source_name="bad.jsonl")

    assert _snapshot(store, settings) == before


def test_duplicate_name_is_refused_and_leaves_no_file(store, settings, upload):
    import_dataset(store, settings, upload, source_name="sums.jsonl")
    before = _snapshot(store, settings)
    with pytest.raises(StoreError, match="sums"):
        import_dataset(store, settings, upload, source_name="other.jsonl", name="sums")
    assert _snapshot(store, settings) == before


def test_duplicate_name_lost_in_a_race_leaves_no_file(store, settings, upload, monkeypatch):
    """Two uploads of the same name at once: the pre-check passes for both, the unique index stops the second."""
    import_dataset(store, settings, upload, source_name="sums.jsonl")
    before = _snapshot(store, settings)
    monkeypatch.setattr(store, "find_dataset", lambda name: None)
    with pytest.raises(StoreError, match="sums"):
        import_dataset(store, settings, upload, source_name="sums.jsonl")
    assert _snapshot(store, settings) == before


@pytest.mark.parametrize(
    ("source_name", "name"),
    [
        ("ok.jsonl", "../x"),
        ("ok.jsonl", "a/b"),
        ("ok.jsonl", "..\\x"),
        ("ok.jsonl", "x;rm -rf"),
        ("ok.jsonl", "n" * 121),
        ("bad|name.jsonl", None),  # no name given: the file's stem is used, and checked the same way
        ("bad|name.jsonl", "   "),
    ],
)
def test_dataset_names_with_path_characters_are_rejected(store, settings, upload, source_name, name):
    before = _snapshot(store, settings)
    with pytest.raises(DatasetError, match="dataset name"):
        import_dataset(store, settings, upload, source_name=source_name, name=name)
    assert _snapshot(store, settings) == before


# -------------------------------------------------------------------------------------------------- examples


def test_register_examples_registers_arithmetic_and_is_idempotent(store, settings):
    added = register_examples(store, settings)
    arithmetic = store.find_dataset(ARITHMETIC_EXAMPLE)
    assert arithmetic is not None
    assert arithmetic in added
    assert arithmetic.num_rows == 400
    assert "answer" in arithmetic.columns
    assert arithmetic.prompt_kind == "chat"
    assert Path(arithmetic.path).parent == settings.datasets_dir

    files = sorted(settings.datasets_dir.iterdir())
    assert register_examples(store, settings) == []
    assert sorted(settings.datasets_dir.iterdir()) == files
    assert len(store.list_datasets()) == len(added)


def test_register_examples_registers_every_arithmetic_level_the_quick_start_first(store, settings):
    added = register_examples(store, settings)
    levels = [store.find_dataset(name) for _, name in ARITHMETIC_LEVELS]
    assert all(dataset in added for dataset in levels)
    assert [dataset.num_rows for dataset in levels] == [50, 400, 400, 400]
    assert all(dataset.columns == ["prompt", "answer"] and dataset.prompt_kind == "chat" for dataset in levels)
    assert levels[0].name == QUICK_START_EXAMPLE
    assert read_normalized(levels[0].path)[0]["prompt"][1]["content"].startswith("What is ")


@pytest.mark.skipif(not HAS_HUMANEVAL_MODULE, reason="grpo_core.datasets.humaneval is not written yet")
def test_register_examples_registers_humaneval(store, settings):
    register_examples(store, settings)
    humaneval = store.find_dataset(HUMANEVAL_EXAMPLE)
    assert humaneval is not None
    assert humaneval.num_rows == 164
    assert "tests" in humaneval.columns
    register_examples(store, settings)
    assert len([d for d in store.list_datasets() if d.name == HUMANEVAL_EXAMPLE]) == 1


# ------------------------------------------------------------------------------------------- run validation


@pytest.fixture
def dataset(store, settings, upload):
    return import_dataset(store, settings, upload, source_name="sums.jsonl")


@pytest.fixture
def model_folder(tmp_path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    return folder


def test_validate_ok(store, dataset, model_folder):
    config = RunConfig(model=str(model_folder), dataset_id=dataset.id)
    assert validate_run_config(store, config) == []


def test_validate_warns_about_short_completions(store, dataset, model_folder):
    config = RunConfig(model=str(model_folder), dataset_id=dataset.id, max_completion_length=8)
    assert any("max_completion_length" in w for w in validate_run_config(store, config))


def test_validate_unknown_dataset_id(store, model_folder):
    with pytest.raises(ConfigError, match=r"^dataset: no dataset with id 999"):
        validate_run_config(store, RunConfig(model=str(model_folder), dataset_id=999))


def test_validate_checks_the_eval_dataset(store, dataset, model_folder):
    config = RunConfig(model=str(model_folder), dataset_id=dataset.id, eval_dataset_id=dataset.id)
    assert validate_run_config(store, config) == []
    with pytest.raises(ConfigError, match=r"^eval_dataset_id: no dataset with id 999"):
        validate_run_config(store, RunConfig(model=str(model_folder), dataset_id=dataset.id, eval_dataset_id=999))


def test_validate_without_dataset(store, model_folder):
    with pytest.raises(ConfigError, match="choose a dataset"):
        validate_run_config(store, RunConfig(model=str(model_folder)))


def test_validate_missing_dataset_path(store, model_folder, tmp_path):
    with pytest.raises(ConfigError, match="dataset_path"):
        validate_run_config(store, RunConfig(model=str(model_folder), dataset_path=str(tmp_path / "nope.jsonl")))


def test_validate_rule_needing_a_missing_column(store, settings, tmp_path, model_folder):
    upload = _write_jsonl(tmp_path / "u.jsonl", [{"prompt": "hi", "topic": "greeting"}])
    dataset = import_dataset(store, settings, upload, source_name="chat.jsonl")
    config = RunConfig(model=str(model_folder), dataset_id=dataset.id, rewards=[RewardSpec(rule="numeric_answer")])
    with pytest.raises(ConfigError) as info:
        validate_run_config(store, config)
    message = str(info.value)
    assert "numeric_answer" in message
    assert "'answer'" in message
    assert "prompt, topic" in message


def test_validate_rule_without_columns_on_any_dataset(store, settings, tmp_path, model_folder):
    upload = _write_jsonl(tmp_path / "u.jsonl", [{"prompt": "hi"}])
    dataset = import_dataset(store, settings, upload, source_name="plain.jsonl")
    config = RunConfig(model=str(model_folder), dataset_id=dataset.id, rewards=[RewardSpec(rule="length")])
    assert validate_run_config(store, config) == []


@pytest.mark.parametrize(
    "rewards",
    [[RewardSpec(rule="no_such_rule")], [RewardSpec(rule="format_regex", params={"pattern": "("})]],
    ids=["unknown-rule", "bad-regex"],
)
def test_validate_bad_reward_rule(store, dataset, model_folder, rewards):
    with pytest.raises(ConfigError, match=r"^rewards: reward rule 1"):
        validate_run_config(store, RunConfig(model=str(model_folder), dataset_id=dataset.id, rewards=rewards))


@pytest.mark.parametrize("model", ["/no/such/folder", "./missing", "a/b/c", "weights.gguf", "CONFIGLESS"])
def test_validate_bad_model(store, dataset, tmp_path, model):
    if model == "CONFIGLESS":
        model = str(tmp_path / "empty")
        Path(model).mkdir()
    with pytest.raises(ConfigError, match=r"^model: "):
        validate_run_config(store, RunConfig(model=model, dataset_id=dataset.id))


# ---------------------------------------------------------------------------------------------------- submit


def test_submit_run_names_and_stores_config(store, dataset, model_folder):
    run = submit_run(store, RunConfig(model=str(model_folder), dataset_id=dataset.id, max_steps=3)).run

    assert run.status is RunStatus.QUEUED
    assert run.name.startswith("grpo-")
    assert run.dataset_id == dataset.id
    assert run.max_steps == 3
    stored = store.get_run(run.id).config
    assert stored["name"] == run.name
    assert stored["model"] == str(model_folder)
    assert stored["max_steps"] == 3
    assert RunConfig.model_validate(stored) == RunConfig(
        name=run.name, model=str(model_folder), dataset_id=dataset.id, max_steps=3
    )
    json.dumps(stored)  # plain JSON, no pydantic objects


def test_submit_run_keeps_a_given_name(store, dataset, model_folder):
    run = submit_run(store, RunConfig(name="  mine ", model=str(model_folder), dataset_id=dataset.id)).run
    assert run.name == "mine"


def test_submit_run_stores_local_paths_absolute(store, tmp_path, monkeypatch):
    """The worker runs in the run folder: relative paths valid here must still point at the same files there."""
    (tmp_path / "models" / "tiny").mkdir(parents=True)
    (tmp_path / "models" / "tiny" / "config.json").write_text("{}", encoding="utf-8")
    _write_jsonl(tmp_path / "prompts.jsonl", [{"prompt": "hi", "answer": 1}])
    monkeypatch.chdir(tmp_path)

    run = submit_run(store, RunConfig(model="models/tiny", dataset_path="prompts.jsonl")).run

    assert run.config["model"] == str((tmp_path / "models" / "tiny").resolve())
    assert run.config["dataset_path"] == str((tmp_path / "prompts.jsonl").resolve())


@pytest.mark.parametrize("model", ["", DEFAULT_MODEL, "org/name"])
def test_submit_run_keeps_the_default_model_and_hub_ids_as_given(store, dataset, model):
    run = submit_run(store, RunConfig(model=model, dataset_id=dataset.id)).run
    assert run.config["model"] == model


def test_submit_run_does_not_store_an_invalid_run(store, model_folder):
    with pytest.raises(ConfigError):
        submit_run(store, RunConfig(model=str(model_folder), dataset_id=42))
    assert store.list_runs() == []


def test_use_vllm_without_vllm_installed_is_refused_with_advice(store, settings):
    """vLLM generation is an option only where vLLM is installed; here it is not."""
    import importlib.util

    from grpo_core.datasets.library import ARITHMETIC_EXAMPLE, register_examples
    from grpo_core.run_config import ConfigError, RunConfig
    from grpo_core.submit.validate import validate_run_config

    assert importlib.util.find_spec("vllm") is None
    register_examples(store, settings)
    dataset = store.find_dataset(ARITHMETIC_EXAMPLE)
    config = RunConfig(dataset_id=dataset.id, use_vllm=True)
    with pytest.raises(ConfigError, match="vLLM is not installed"):
        validate_run_config(store, config)
    assert validate_run_config(store, config.model_copy(update={"use_vllm": False})) is not None


# ----------------------------------------------------------------------------------------- reward plugins at submit


def test_validate_calls_a_plugin_once_on_the_datasets_first_row(store, settings, tmp_path, model_folder):
    upload = _write_jsonl(tmp_path / "u.jsonl", [{"prompt": "first", "answer": 1}, {"prompt": "second", "answer": 2}])
    dataset = import_dataset(store, settings, upload, source_name="rows.jsonl")
    plugin = tmp_path / "row_check.py"
    plugin.write_text(
        "def reward(prompts, completions, answer):\n"
        "    assert prompts == ['first'] * len(completions) and answer == [1] * len(completions), (prompts, answer)\n"
        "    return [None] * len(completions)\n"
        "def needs_solution(completions, solution):\n"
        "    return [0.0] * len(completions)\n"
    )
    ok = RunConfig(model=str(model_folder), dataset_id=dataset.id, rewards=[RewardSpec(rule="plugin", params={"target": f"{plugin}:reward"})])
    assert validate_run_config(store, ok) == []
    bad = ok.model_copy(update={"rewards": [RewardSpec(rule="plugin", params={"target": f"{plugin}:needs_solution"})]})
    with pytest.raises(ConfigError, match=r"^rewards: reward rule 1 \(plugin\): .*'solution'.* dataset columns: answer"):
        validate_run_config(store, bad)


def test_submit_stores_a_relative_plugin_file_as_an_absolute_path(store, dataset, model_folder, tmp_path, monkeypatch):
    (tmp_path / "mine.py").write_text("def reward(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    monkeypatch.chdir(tmp_path)
    rewards = [RewardSpec(rule="plugin", params={"target": "mine.py:reward"}), RewardSpec(rule="length")]
    run = submit_run(store, RunConfig(model=str(model_folder), dataset_id=dataset.id, rewards=rewards)).run
    stored = store.get_run(run.id).config["rewards"]
    assert stored[0]["params"]["target"] == f"{tmp_path.resolve() / 'mine.py'}:reward"
    assert stored[1] == RewardSpec(rule="length").model_dump(mode="json")
