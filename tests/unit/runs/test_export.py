"""Tests for grpo_core.runs.export and grpo_core.runs.files on a real SQLite store: the wide metrics CSV, the groups
Parquet (one row per completion, a column per rule), the config YAML with its dataset copy, the adapter zip, the
bundle; the trained-weights choices of a run folder; and the Try tab's prompt helpers."""

from __future__ import annotations

import json
import math
import zipfile
from datetime import datetime
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest

from grpo_core.datasets.rows import editable_prompt_text, prompt_from_text
from grpo_core.run_config import RunConfig, load_run_config
from grpo_core.runs.export import (
    ExportError,
    export_adapter_zip,
    export_config_yaml,
    export_groups_parquet,
    export_metrics_csv,
    export_run,
    metrics_frame,
)
from grpo_core.runs.files import ArtifactError, list_checkpoints, resolve_weights, run_dir, weights_choices
from grpo_core.runs.provenance import current_environment, plugin_files
from grpo_core.submit.queue import resolve_relative_paths
from grpo_core.try_model.job import build_request
from storage import CompletionRecord, GroupRecord
from tests.store_helpers import record_metrics

RULES = [{"rule": "numeric_answer", "weight": 1.0}, {"rule": "format_regex", "weight": 0.5, "params": {"pattern": "x"}}]


def _group(step: int, row_index: int) -> GroupRecord:
    return GroupRecord(
        step=step,
        row_index=row_index,
        prompt=f"What is {row_index} + {row_index}?",
        extra={"answer": 2 * row_index},
        completions=[
            CompletionRecord(
                index=i,
                text=f"answer {i}",
                rewards={"numeric_answer": float(i == 0), "format_regex": None if i == 3 else 1.0},
                total_reward=float(i == 0) + (0.0 if i == 3 else 0.5),
                advantage=0.75 - 0.5 * i,
                num_tokens=5 + i,
                truncated=i == 2,
            )
            for i in range(4)
        ],
    )


@pytest.fixture
def run(store, settings, tmp_path):
    """A run of an uploaded dataset with 3 steps of metrics, groups at steps 1 and 3, and a final adapter."""
    data = settings.datasets_dir / "doubles.jsonl"
    data.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}?", "answer": 2 * i}) + "\n" for i in range(5)))
    dataset = store.add_dataset(name="doubles", source_name="doubles.jsonl", format="jsonl", num_rows=5,
                                columns=["prompt", "answer"], prompt_kind="text", path=str(data))
    config = {"name": "exp", "model": "SmolLM2-135M-Instruct", "dataset_id": dataset.id, "rewards": RULES,
              "max_steps": 3}
    info = store.create_run(name="exp", config=config, dataset_id=dataset.id, max_steps=3)
    folder = settings.runs_dir / f"run-{info.id:05d}"
    (folder / "adapter").mkdir(parents=True)
    (folder / "adapter" / "adapter_config.json").write_text("{}")
    (folder / "adapter" / "adapter_model.safetensors").write_bytes(b"\0" * 100)
    store.update_run(info.id, run_dir=str(folder))
    for step in (1, 2, 3):
        values = {"reward": step / 10, "kl": None if step == 2 else 0.01 * step, "loss": float("nan")}
        if step == 3:
            values["rewards/numeric_answer/mean"] = 0.25
        record_metrics(store, info.id, step, values, wall_time=1000.0 + step)
    store.record_groups(info.id, 1, [_group(1, 0), _group(1, 4)])
    store.record_groups(info.id, 3, [_group(3, 2)])
    return store.get_run(info.id)


def test_metrics_frame_is_wide_one_row_per_step(store, run):
    frame = metrics_frame(store, run.id)
    assert list(frame.columns) == ["step", "wall_time", "kl", "loss", "reward", "rewards/numeric_answer/mean"]
    assert frame["step"].tolist() == [1, 2, 3]
    assert frame["wall_time"].tolist() == [1001.0, 1002.0, 1003.0]
    assert frame["reward"].tolist() == pytest.approx([0.1, 0.2, 0.3])
    assert math.isnan(frame["kl"][1]) and frame["kl"][2] == pytest.approx(0.03)
    assert frame["loss"].isna().all()  # NaN is stored as NULL and comes back empty
    assert frame["rewards/numeric_answer/mean"].isna().tolist() == [True, True, False]


def test_metric_names_that_a_spreadsheet_reads_as_formulas_are_quoted_in_the_csv(store, tmp_path):
    hostile = ["=HYPERLINK(\"http://x\")", "+1+cmd|' /C calc'!A0", "-2+3", "@SUM(A1)", "\t=1", "\uff1d1+1"]
    info = store.create_run(name="csv", config={}, dataset_id=None, max_steps=1)
    record_metrics(store, info.id, 1, {**{k: 1.0 for k in hostile}, "reward": -0.5}, wall_time=1.0)
    header = pd.read_csv(export_metrics_csv(store, info.id, tmp_path / "m.csv"), dtype=str)
    names = [c for c in header.columns if c not in ("step", "wall_time", "reward")]
    assert sorted(names) == sorted("'" + k for k in hostile)
    assert header["reward"].tolist() == ["-0.5"]  # a negative number stays a number


def test_metrics_frame_of_a_run_without_metrics(store):
    empty = store.create_run(name="e", config={}, dataset_id=None, max_steps=1)
    frame = metrics_frame(store, empty.id)
    assert list(frame.columns) == ["step", "wall_time"] and len(frame) == 0


def test_groups_parquet_has_one_row_per_completion_and_a_column_per_rule(store, run, tmp_path):
    path = export_groups_parquet(store, run.id, tmp_path / "g.parquet")
    table = pq.read_table(path)
    assert table.column_names == [
        "run_id", "step", "row_index", "prompt", "completion_index", "text", "reward_numeric_answer",
        "reward_format_regex", "total_reward", "advantage", "num_tokens", "truncated",
    ]
    frame = table.to_pandas()
    assert len(frame) == 12
    assert frame["step"].tolist() == [1] * 8 + [3] * 4
    assert frame["row_index"].tolist() == [0] * 4 + [4] * 4 + [2] * 4
    assert frame["completion_index"].tolist() == [0, 1, 2, 3] * 3
    assert frame["prompt"][4] == "What is 4 + 4?"
    assert frame["reward_numeric_answer"].tolist()[:4] == [1.0, 0.0, 0.0, 0.0]
    assert frame["reward_format_regex"].isna().tolist()[:4] == [False, False, False, True]
    assert frame["total_reward"].tolist()[:4] == [1.5, 0.5, 0.5, 0.0]
    assert frame["advantage"].tolist()[:4] == [0.75, 0.25, -0.25, -0.75]
    assert frame["num_tokens"].tolist()[:4] == [5, 6, 7, 8]
    assert frame["truncated"].tolist()[:4] == [False, False, True, False]
    assert (frame["run_id"] == run.id).all()


def test_groups_parquet_of_a_run_without_groups_is_empty_but_readable(store, tmp_path):
    empty = store.create_run(name="e", config={}, dataset_id=None, max_steps=1)
    frame = pd.read_parquet(export_groups_parquet(store, empty.id, tmp_path / "g.parquet"))
    assert len(frame) == 0 and "advantage" in frame.columns


def test_config_yaml_names_a_copy_of_the_uploaded_dataset(store, run, tmp_path):
    path, copied, plugins, missing, _changed = export_config_yaml(store, run, tmp_path / "out" / "run-00001-config.yaml")
    assert plugins == () and missing == ()
    assert copied == tmp_path / "out" / "run-00001-dataset.jsonl"
    assert copied.read_text() == Path(store.get_dataset(run.dataset_id).path).read_text()
    config = load_run_config(path)
    assert config.dataset_id is None and config.dataset_path == "run-00001-dataset.jsonl"
    assert [r.rule for r in config.rewards] == ["numeric_answer", "format_regex"]
    assert config.max_steps == 3


def test_config_yaml_without_the_dataset_copy_is_the_stored_config(store, run, tmp_path):
    path, copied, _, _, _ = export_config_yaml(store, run, tmp_path / "c.yaml", copy_dataset=False)
    assert copied is None
    assert load_run_config(path).dataset_id == run.config["dataset_id"]


def test_export_carries_plugin_files_and_its_yaml_trains_from_anywhere(store, settings, tmp_path, monkeypatch):
    first, second = tmp_path / "a" / "rules.py", tmp_path / "b" / "rules.py"
    for path, value in ((first, 1.0), (second, 0.5)):
        path.parent.mkdir()
        path.write_text(f"def score(completions, **kwargs):\n    return [{value}] * len(completions)\n")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"prompt": "p", "answer": "1"}\n')
    rewards = [
        {"rule": "plugin", "weight": 1.0, "params": {"target": f"{first}:score"}},
        {"rule": "plugin", "weight": 1.0, "name": "again", "params": {"target": f"{first}:score"}},
        {"rule": "plugin", "weight": 1.0, "name": "other", "params": {"target": f"{second}:score"}},
        {"rule": "plugin", "weight": 1.0, "name": "dotted", "params": {"target": "math:sqrt"}},
    ]
    info = store.create_run(name="p", config={"dataset_path": str(dataset), "rewards": rewards}, dataset_id=None,
                            max_steps=1)
    result = export_run(store, settings, info.id)
    assert [p.relative_to(result.folder).as_posix() for p in result.plugins] == ["plugins/rules.py",
                                                                               "plugins/rules-2.py"]
    assert result.plugins[1].read_text() == second.read_text()
    assert set(result.plugins) <= set(result.files())
    names = zipfile.ZipFile(result.bundle).namelist()
    assert f"{result.folder.name}/plugins/rules.py" in names and f"{result.folder.name}/plugins/rules-2.py" in names
    assert result.warnings() == []
    first.unlink(), second.unlink()  # the export no longer needs the originals
    monkeypatch.chdir(tmp_path)
    config = resolve_relative_paths(load_run_config(result.config), result.config.parent)
    targets = [spec.params["target"] for spec in config.rewards]
    assert targets[:3] == [f"{result.plugins[0]}:score", f"{result.plugins[0]}:score", f"{result.plugins[1]}:score"]
    assert targets[3] == "math:sqrt"
    # exported again now that the files are gone: nothing to copy, and the export says so
    again = export_run(store, settings, info.id)
    assert again.plugins == () and again.missing_plugins == (f"{first}:score", f"{second}:score")
    assert again.warnings()[0] == f"plugin file gone, not copied: {first}:score (the YAML still names it)"


def test_export_says_when_a_plugin_file_changed_since_the_run_trained(store, settings, tmp_path):
    rules = tmp_path / "rules.py"
    rules.write_text("def score(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    dataset = tmp_path / "d.jsonl"
    dataset.write_text('{"prompt": "p", "answer": "1"}\n')
    rewards = [{"rule": "plugin", "weight": 1.0, "params": {"target": f"{rules}:score"}}]
    info = store.create_run(name="p", config={"dataset_path": str(dataset), "rewards": rewards}, dataset_id=None,
                            max_steps=1)
    store.update_run(info.id, provenance=current_environment(
        dataset_file=dataset, model="", cache_dir=None, plugins=plugin_files(rewards)))
    assert export_run(store, settings, info.id).warnings() == []  # as trained

    rules.write_text("def score(completions, **kwargs):\n    return [0.0] * len(completions)\n")
    changed = export_run(store, settings, info.id)
    assert changed.changed_plugins == (str(rules),)
    assert changed.warnings() == [f"plugin file changed since the run trained: {rules} (copied as it is now)"]
    assert changed.plugins[0].read_text() == rules.read_text()
    assert f"# plugin file changed since the run trained: {rules} (copied as it is now)\n" in changed.config.read_text()


def test_adapter_zip_holds_the_adapter_folder(settings, run, tmp_path):
    path = export_adapter_zip(settings, run, tmp_path / "a.zip")
    assert sorted(zipfile.ZipFile(path).namelist()) == ["adapter/adapter_config.json",
                                                         "adapter/adapter_model.safetensors"]


def test_adapter_zip_of_a_run_without_adapter_is_refused(store, settings, tmp_path):
    other = store.create_run(name="e", config={}, dataset_id=None, max_steps=1)
    with pytest.raises(ExportError, match="no adapter yet"):
        export_adapter_zip(settings, other, tmp_path / "a.zip")


def test_export_run_writes_every_file_and_a_bundle(store, settings, run):
    when = datetime(2025, 1, 2, 3, 4, 5)
    first = export_run(store, settings, run.id, now=when)
    second = export_run(store, settings, run.id, now=when)
    assert first.folder == settings.data_dir / "exports" / f"run-{run.id:05d}-20250102-030405"
    assert second.folder.name.endswith("-2")  # never overwrites an earlier export
    assert [p.name for p in first.files()] == [
        f"run-{run.id:05d}-{part}" for part in ("config.yaml", "dataset.jsonl", "metrics.csv", "groups.parquet",
                                                "adapter.zip")
    ] + [f"{first.folder.name}.zip"]
    names = zipfile.ZipFile(first.bundle).namelist()
    root = first.folder.name
    assert f"{root}/run-{run.id:05d}-config.yaml" in names
    assert f"{root}/adapter/adapter_config.json" in names
    assert not any(n.endswith("adapter.zip") for n in names)
    assert pd.read_csv(first.metrics)["step"].tolist() == [1, 2, 3]


def test_export_run_of_a_run_still_training_has_no_adapter(store, settings):
    info = store.create_run(name="live", config={"dataset_path": "/nowhere.jsonl"}, dataset_id=None, max_steps=5)
    result = export_run(store, settings, info.id)
    assert result.adapter is None and result.dataset is None
    assert load_run_config(result.config).dataset_path == "/nowhere.jsonl"


def _weights(folder: Path, adapter: bool = True) -> Path:
    """A weights folder as TRL saves it; ``trainer_state.json`` last (a checkpoint is complete with it)."""
    folder.mkdir(parents=True)
    (folder / ("adapter_config.json" if adapter else "config.json")).write_text("{}")
    (folder / "trainer_state.json").write_text("{}")
    return folder


def test_weights_choices_latest_is_the_final_adapter_then_the_newest_checkpoint(tmp_path):
    folder = tmp_path / "run-00001"
    assert weights_choices(folder) == []
    with pytest.raises(ArtifactError, match="no trained weights yet"):
        resolve_weights(folder, "latest")
    _weights(folder / "output" / "checkpoint-2")
    _weights(folder / "output" / "checkpoint-10", adapter=False)  # full weights (no LoRA)
    (folder / "output" / "checkpoint-5").mkdir()  # half-written: not offered
    assert [c.step for c in list_checkpoints(folder)] == [2, 10]
    assert resolve_weights(folder, "latest") == folder / "output" / "checkpoint-10"
    _weights(folder / "adapter")
    assert [c.value for c in weights_choices(folder)] == ["latest", "adapter", "checkpoint-10", "checkpoint-2"]
    assert resolve_weights(folder, None) == folder / "adapter"
    assert resolve_weights(folder, "checkpoint-2") == folder / "output" / "checkpoint-2"
    with pytest.raises(ArtifactError, match="checkpoint-7"):
        resolve_weights(folder, "checkpoint-7")


def test_run_dir_prefers_the_recorded_run_dir(store, settings):
    info = store.create_run(name="r", config={}, dataset_id=None, max_steps=1)
    assert run_dir(settings, info) == settings.runs_dir / f"run-{info.id:05d}"
    store.update_run(info.id, run_dir="/elsewhere/run")
    assert run_dir(settings, store.get_run(info.id)) == Path("/elsewhere/run")


@pytest.mark.parametrize(
    ("text", "chat", "expected"),
    [
        ("What is 2 + 2?", False, "What is 2 + 2?"),
        ("What is 2 + 2?", True, [{"role": "user", "content": "What is 2 + 2?"}]),
        ('[{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]', False,
         [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]),
        ("[1, 2] is a list", True, [{"role": "user", "content": "[1, 2] is a list"}]),
        ("[not json", False, "[not json"),
    ],
)
def test_prompt_from_text(text, chat, expected):
    assert prompt_from_text(text, chat) == expected


def test_prompt_from_text_refuses_a_blank_prompt():
    with pytest.raises(ValueError, match="empty"):
        prompt_from_text("  \n", True)


def test_editable_prompt_text_round_trips_messages():
    messages = [{"role": "user", "content": "Wie viel ist 2 + 2?"}]
    assert prompt_from_text(editable_prompt_text(messages), chat=False) == messages
    assert editable_prompt_text("plain") == "plain"


def test_build_request_takes_the_runs_model_rules_and_sampling_settings(store, settings, run):
    request = build_request(settings, run, prompt="What is 1 + 1?", row={"answer": 2, "prompt": "ignored"})
    assert request.model == "SmolLM2-135M-Instruct"
    assert request.weights == str(run_dir(settings, run) / "adapter")
    assert request.row == {"answer": 2}
    assert [r["rule"] for r in request.rewards] == ["numeric_answer", "format_regex"]
    defaults = RunConfig()  # the run stores the default sampling settings
    assert (request.max_new_tokens, request.temperature) == (defaults.max_completion_length, defaults.temperature)
    assert request.model_cache_dir == str(settings.model_cache_dir)
    assert build_request(settings, run, prompt="x", row={"answer": 2}, weights=None).weights is None


def test_build_request_refuses_a_row_without_the_columns_the_rules_read(settings, run):
    with pytest.raises(ValueError, match="numeric_answer reads the column 'answer'"):
        build_request(settings, run, prompt="What is 1 + 1?", row={})
