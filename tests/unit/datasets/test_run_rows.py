"""Tests of THE rows of a run (grpo_core.datasets.rows): which file a config names (stored dataset, dataset_path, relative
to the YAML's folder), its rows, and the prompt as text (display form, and the editable form that round-trips)."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_core.datasets.library import import_dataset
from grpo_core.datasets.rows import dataset_file, load_rows, resolve_dataset_path
from grpo_core.run_config import ConfigError, RunConfig

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "arithmetic.jsonl"


def test_a_stored_dataset_is_its_normalised_file(store, settings):
    info = import_dataset(store, settings, EXAMPLE, source_name="arithmetic.jsonl", name="arith")
    config = {"dataset_id": info.id}
    assert dataset_file(store, config) == Path(info.path)
    assert dataset_file(store, RunConfig(dataset_id=info.id)) == Path(info.path)
    assert dataset_file(None, config) is None  # no store: cannot say
    assert dataset_file(store, {"dataset_id": info.id + 1}) is None  # unknown dataset
    rows = load_rows(store, config)
    assert len(rows) == 400 and set(rows[0]) >= {"prompt", "answer"}


def test_a_dataset_path_relative_to_the_yaml_folder(tmp_path, monkeypatch):
    folder = tmp_path / "configs"
    folder.mkdir()
    (folder / "d.jsonl").write_text('{"prompt": "a", "answer": 1}\n')
    monkeypatch.chdir(tmp_path)
    assert resolve_dataset_path("d.jsonl", folder) == folder / "d.jsonl"
    assert resolve_dataset_path("d.jsonl") == Path("d.jsonl")  # without a base folder: as given
    assert dataset_file(None, {"dataset_path": "d.jsonl"}, base_dir=folder) == folder / "d.jsonl"
    assert dataset_file(None, {"dataset_path": "d.jsonl"}) is None  # not found from here
    assert load_rows(None, {"dataset_path": "d.jsonl"}, base_dir=folder) == [{"prompt": "a", "answer": 1}]


def test_a_config_without_a_dataset(store):
    assert dataset_file(store, {}) is None
    with pytest.raises(ConfigError, match="names no dataset"):
        load_rows(store, {})


def test_eval_row_indices_hold_out_a_seeded_fraction():
    from grpo_core.datasets.rows import eval_row_indices

    held = eval_row_indices(20, 0.25, seed=42)
    assert len(held) == 5 and held == sorted(held) and all(0 <= i < 20 for i in held)
    assert eval_row_indices(20, 0.25, seed=42) == held
    assert eval_row_indices(20, 0.25, seed=7) != held
    assert eval_row_indices(3, 0.01, seed=1) != []  # at least one row
    assert len(eval_row_indices(3, 0.9, seed=1)) == 2  # training keeps a row
    assert eval_row_indices(20, 0.0, seed=1) == [] and eval_row_indices(1, 0.5, seed=1) == []
