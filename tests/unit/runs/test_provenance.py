"""Tests for grpo_core.runs.provenance (hashes, the hash cache, model identity, versions, differences) and where a run's
provenance goes: the store column on a real SQLite file, the export's provenance.json and YAML comment, the Compare
table's rows, the status card's "reproduce" block and the clone status notes. Nothing here may need torch."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from types import SimpleNamespace

import pytest

import grpo_core.models.identity as identity_module
import grpo_core.runs.provenance as provenance_module
from app.tabs.launch.tools import clone_drift_notes
from app.tabs.runs.compare import config_differences, run_fields
from app.views.runs import provenance_html, run_status_html
from grpo_core.models.identity import (
    UNKNOWN,
    HashCache,
    file_sha256,
    folder_weights_sha256,
    hub_revision,
    model_identity,
)
from grpo_core.run_config import load_run_config
from grpo_core.runs.export import export_config_yaml, export_run
from grpo_core.runs.provenance import (
    NOT_INSTALLED,
    PROVENANCE_PACKAGES,
    collect_provenance,
    current_environment,
    describe_differences,
    library_versions,
    plugin_files,
    provenance_differences,
    short_hash,
)
from tests.helpers import run_info

SHA_ABC = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"  # sha256(b"abc"), FIPS 180-2
DEVICE = {"type": "cpu", "name": "x86_64", "count": 1, "threads": 2}


def _record(**changes) -> dict:
    """A provenance record; ``changes`` maps a dotted field to its new value."""
    record = {
        "dataset": {"sha256": "a" * 64},
        "model": {"name": "m", "kind": "folder", "identity": "sha256:" + "b" * 64},
        "versions": {"python": "3.11.9", "torch": "2.13.0", "transformers": "5.24.0", "trl": "1.16.0",
                     "peft": "0.21.2", "accelerate": "1.15.0", "grpo-dashboard": "0.1.0"},
        "device": dict(DEVICE),
    }
    for field, value in changes.items():
        *path, last = field.split(".")
        node = record
        for part in path:
            node = node[part]
        node[last] = value
    return record


def _model_folder(root: Path, weights: bytes = b"w1") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "config.json").write_text("{}")
    (root / "tokenizer.json").write_text("{}")
    (root / "model.safetensors").write_bytes(weights)
    return root


# ------------------------------------------------------------------------------------------------------ hashing
def test_file_sha256_is_the_standard_digest(tmp_path):
    path = tmp_path / "abc.txt"
    path.write_bytes(b"abc")
    assert file_sha256(path) == SHA_ABC


def test_hash_cache_reads_a_file_once_and_shares_the_hash_through_its_file(tmp_path, monkeypatch):
    path = tmp_path / "abc.bin"
    path.write_bytes(b"abc")
    reads = []
    monkeypatch.setattr(identity_module, "file_sha256", lambda p: reads.append(p) or SHA_ABC)
    assert HashCache(tmp_path / "cache").sha256(path) == SHA_ABC
    assert HashCache(tmp_path / "cache").sha256(path) == SHA_ABC  # another process: reads the cache file
    assert len(reads) == 1
    stored = json.loads((tmp_path / "cache" / "file-hashes.json").read_text())
    assert list(stored.values()) == [SHA_ABC]
    assert next(iter(stored)).startswith(f"{path.resolve()}|3|")  # path|size|mtime_ns


def test_hash_cache_rehashes_a_changed_file(tmp_path):
    cache, path = HashCache(tmp_path / "cache"), tmp_path / "f.bin"
    path.write_bytes(b"abc")
    assert cache.sha256(path) == SHA_ABC
    path.write_bytes(b"abcd")
    os.utime(path, ns=(1, 1))  # a new mtime too, as an edit would give
    assert cache.sha256(path) == hashlib.sha256(b"abcd").hexdigest()


def test_hash_cache_ignores_a_corrupt_cache_file(tmp_path):
    (tmp_path / "file-hashes.json").write_text("{not json")
    path = tmp_path / "f.bin"
    path.write_bytes(b"abc")
    assert HashCache(tmp_path).sha256(path) == SHA_ABC
    assert json.loads((tmp_path / "file-hashes.json").read_text())  # rewritten whole


@pytest.mark.parametrize(
    ("change", "same"),
    [
        (lambda f: (f / "tokenizer.json").write_text('{"x": 1}'), True),
        (lambda f: (f / "README.md").write_text("notes"), True),
        (lambda f: (f / "model.safetensors").write_bytes(b"w2"), False),
        (lambda f: (f / "model.safetensors").rename(f / "other.safetensors"), False),
        (lambda f: (f / "extra.bin").write_bytes(b"w1"), False),
    ],
    ids=["tokenizer edit", "new readme", "weights changed", "weights renamed", "weights added"],
)
def test_folder_weights_hash_follows_the_weights_files_only(tmp_path, change, same):
    folder = _model_folder(tmp_path / "model")
    cache = HashCache(None)
    before = folder_weights_sha256(folder, cache)
    change(folder)
    assert (folder_weights_sha256(folder, cache) == before) is same


def test_a_folder_without_weights_files_has_no_hash(tmp_path):
    folder = tmp_path / "empty"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    assert folder_weights_sha256(folder, HashCache(None)) is None


def test_hub_revision_reads_the_local_cache_ref(tmp_path):
    refs = tmp_path / "models--org--model" / "refs"
    refs.mkdir(parents=True)
    (refs / "main").write_text("0123abc\n")
    assert hub_revision("org/model", tmp_path) == "0123abc"
    assert hub_revision("org/other", tmp_path) is None


@pytest.mark.parametrize(
    ("make", "kind", "identity"),
    [
        (lambda t: str(_write(t / "m.gguf", b"abc")), "gguf", "sha256:" + SHA_ABC),
        (lambda t: str(_model_folder(t / "folder", b"abc")), "folder",
         "sha256:" + hashlib.sha256(f"model.safetensors {SHA_ABC}\n".encode()).hexdigest()),
        (lambda t: "org/model", "hub", "revision:0123abc"),
        (lambda t: "org/not-cached", "hub", UNKNOWN),
        (lambda t: str(t / "missing.gguf"), UNKNOWN, UNKNOWN),
        (lambda t: str(_write(t / "noweights" / "config.json", b"{}").parent), "folder", UNKNOWN),
    ],
    ids=["gguf", "folder", "hub cached", "hub not cached", "missing file", "folder without weights"],
)
def test_model_identity(tmp_path, make, kind, identity):
    hub = tmp_path / "hub"
    _write(hub / "models--org--model" / "refs" / "main", b"0123abc")
    name = make(tmp_path)
    assert model_identity(name, HashCache(None), hub) == {"name": name, "kind": kind, "identity": identity}


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


# ---------------------------------------------------------------------------------------------------- versions
def test_library_versions_name_python_and_every_package(monkeypatch):
    versions = library_versions()
    assert list(versions) == ["python", *PROVENANCE_PACKAGES]
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    assert versions["grpo-dashboard"] == "0.1.0"

    def missing(name):
        raise provenance_module.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(provenance_module.metadata, "version", missing)
    assert set(library_versions().values()) - {versions["python"]} == {NOT_INSTALLED}


def test_collect_provenance_is_the_current_environment_plus_the_device(tmp_path):
    data = _write(tmp_path / "rows.jsonl", b"abc")
    model = str(_write(tmp_path / "m.gguf", b"abc"))
    now = current_environment(dataset_file=data, model=model, cache_dir=tmp_path / "cache")
    assert set(now) == {"dataset", "model", "versions", "plugins"} and now["plugins"] == {}
    assert now["dataset"] == {"sha256": SHA_ABC}
    record = collect_provenance(dataset_file=data, model=model, cache_dir=tmp_path / "cache", device=DEVICE)
    assert record == {**now, "device": DEVICE}
    assert current_environment(dataset_file=None, model=model, cache_dir=None)["dataset"] == {"sha256": None}


def test_the_web_side_functions_import_no_torch(tmp_path):
    data = _write(tmp_path / "rows.jsonl", b"abc")
    code = (
        "import sys, grpo_core.runs.provenance as p\n"
        f"env = p.current_environment(dataset_file={str(data)!r}, model='org/model', cache_dir={str(tmp_path)!r})\n"
        "p.provenance_differences(env, env)\n"
        "assert 'torch' not in sys.modules and 'transformers' not in sys.modules, 'imported torch'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


# ------------------------------------------------------------------------------------------------- differences
@pytest.mark.parametrize(
    ("recorded", "now", "expected"),
    [
        (_record(), _record(), []),
        (None, _record(), []),
        ({}, _record(), []),
        (_record(), _record(**{"versions.trl": "1.17.0"}), [("versions.trl", "1.16.0", "1.17.0")]),
        (_record(), _record(**{"dataset.sha256": "c" * 64, "versions.peft": "0.22.0"}),
         [("dataset.sha256", "a" * 64, "c" * 64), ("versions.peft", "0.21.2", "0.22.0")]),
        (_record(), {k: v for k, v in _record(**{"device.threads": 8}).items() if k != "device"}, []),
        (_record(), _record(**{"device.threads": 8}), [("device.threads", 2, 8)]),
        ({"versions": {"trl": "1.16.0"}}, _record(), []),  # an older record: only shared fields compare
        (_record(), _record(**{"model.identity": "unknown"}),
         [("model.identity", "sha256:" + "b" * 64, "unknown")]),
    ],
    ids=["same", "no record", "empty record", "one version", "dataset and version", "now has no device",
         "device differs", "older record", "model unknown now"],
)
def test_provenance_differences(recorded, now, expected):
    assert provenance_differences(recorded, now) == expected


@pytest.mark.parametrize(
    ("differences", "lines"),
    [
        ([], []),
        ([("dataset.sha256", "a", "b")], ["the dataset file changed since the run (its sha256 differs)"]),
        ([("model.identity", "a", "b")], ["the model changed since the run (its weights hash or revision differs)"]),
        ([("versions.trl", "1.16.0", "1.17.0"), ("versions.torch", "2.12", "2.13")],
         ["library versions changed: trl 1.16.0 -> 1.17.0, torch 2.12 -> 2.13"]),
    ],
)
def test_describe_differences(differences, lines):
    assert describe_differences(differences) == lines


def test_plugin_files_are_hashed_and_a_change_or_a_removal_is_named(tmp_path):
    rules, other = tmp_path / "rules.py", tmp_path / "other.py"
    rules.write_text("def score(completions, **kwargs):\n    return [1.0] * len(completions)\n")
    other.write_text("def score(completions, **kwargs):\n    return [0.0] * len(completions)\n")
    rewards = [
        {"rule": "numeric_answer", "weight": 1.0},
        {"rule": "plugin", "weight": 1.0, "params": {"target": f"{rules}:score"}},
        {"rule": "plugin", "weight": 0.5, "name": "again", "params": {"target": f" {rules} : score"}},
        {"rule": "plugin", "weight": 0.5, "name": "o", "params": {"target": f"{other}:score"}},
        {"rule": "plugin", "weight": 0.5, "name": "dotted", "params": {"target": "math:sqrt"}},
    ]
    files = plugin_files(rewards)
    assert files == [str(rules), str(other)]
    recorded = current_environment(dataset_file=None, model="", cache_dir=tmp_path / "cache", plugins=files)
    assert recorded["plugins"] == {str(rules): file_sha256(rules), str(other): file_sha256(other)}

    rules.write_text("def score(completions, **kwargs):\n    return [2.0] * len(completions)\n")
    other.unlink()
    now = current_environment(dataset_file=None, model="", cache_dir=tmp_path / "cache", plugins=files)
    assert describe_differences(provenance_differences(recorded, now)) == [
        f"the plugin file {other} is gone",
        f"the plugin file {rules} changed since the run (its sha256 differs)",
    ]


@pytest.mark.parametrize(
    ("value", "short"),
    [("sha256:" + "ab" * 32, "sha256:" + "ab" * 6), ("revision:0123456789abcdef", "revision:0123456789ab"),
     ("f" * 64, "f" * 12), (None, "–"), ("unknown", "unknown")],
)
def test_short_hash(value, short):
    assert short_hash(value) == short


# ------------------------------------------------------------------------------------------------------- store
def test_the_store_keeps_a_runs_provenance(store):
    run = store.create_run(name="r", config={}, dataset_id=None, max_steps=1)
    assert run.provenance is None
    store.update_run(run.id, provenance=_record())
    assert store.get_run(run.id).provenance == _record()
    assert [r.provenance for r in store.list_runs()] == [_record()]


# ------------------------------------------------------------------------------------------------------ export
def test_export_writes_provenance_json_and_a_yaml_comment_that_train_ignores(store, settings, tmp_path):
    data = _write(tmp_path / "rows.jsonl", b'{"prompt": "What is 1 + 1?", "answer": 2}\n')
    config = {"dataset_path": str(data), "rewards": [{"rule": "numeric_answer", "weight": 1.0}], "max_steps": 2}
    run = store.create_run(name="r", config=config, dataset_id=None, max_steps=2)
    store.update_run(run.id, provenance=_record(**{"model.name": "line\nbreak"}))
    result = export_run(store, settings, run.id)

    assert result.provenance == result.folder / f"run-{run.id:05d}-provenance.json"
    assert json.loads(result.provenance.read_text()) == _record(**{"model.name": "line\nbreak"})
    assert result.provenance in result.files()
    assert f"{result.folder.name}/{result.provenance.name}" in zipfile.ZipFile(result.bundle).namelist()
    text = result.config.read_text()
    assert "# provenance.versions.trl: 1.16.0\n" in text
    assert '# provenance.model.name: "line\\nbreak"\n' in text
    assert load_run_config(result.config).max_steps == 2  # still a RunConfig for `grpo-dashboard train`


def test_export_of_a_run_without_provenance_writes_no_json(store, tmp_path):
    run = store.create_run(name="r", config={"dataset_path": "/nowhere.jsonl"}, dataset_id=None, max_steps=1)
    path = export_config_yaml(store, run, tmp_path / "c.yaml").yaml
    assert "provenance" not in path.read_text()


# ------------------------------------------------------------------------------------------------------- views
def test_compare_table_lists_the_provenance_fields_that_differ():
    config = {"model": "m", "seed": 1}
    table = config_differences({
        "#1": run_fields(config, _record()),
        "#2": run_fields(config, _record(**{"versions.trl": "1.17.0", "device.name": "H100"})),
        "#3": run_fields(config, None),  # trained before provenance was recorded
    })
    rows = {row["field"]: row for _, row in table.iterrows()}
    assert rows["provenance.versions.trl"].tolist() == ["provenance.versions.trl", "1.16.0", "1.17.0", "(not set)"]
    assert rows["provenance.device.name"].tolist()[1:] == ["x86_64", "H100", "(not set)"]
    assert "provenance.versions.torch" in rows  # run 3 lacks it
    assert "seed" not in rows and "model" not in rows
    two = config_differences({"#1": run_fields(config, _record()), "#2": run_fields(config, _record())})
    assert two.empty


def test_status_card_shows_the_reproduce_block():
    record = _record(**{"dataset.sha256": "0123456789abcdef" * 4, "device.name": "<gpu>"})
    block = provenance_html(record)
    assert "dataset sha256 <code>0123456789ab</code>" in block
    assert "model folder <code>sha256:bbbbbbbbbbbb</code>" in block
    assert "trl 1.16.0" in block and "grpo-dashboard 0.1.0" in block
    assert "cpu (&lt;gpu&gt;, 2 threads)" in block
    assert "plugin" not in block
    assert block in run_status_html(run_info(provenance=record))
    with_plugin = provenance_html({**record, "plugins": {"/home/a/rules<1>.py": "c" * 64}})
    assert "plugin rules&lt;1&gt;.py <code>cccccccccccc</code>" in with_plugin
    assert provenance_html(None) == "" and "reproduce" not in run_status_html(run_info())


def test_clone_notes_say_what_changed_since_the_run(store, settings, tmp_path):
    data = _write(tmp_path / "rows.jsonl", b"abc")
    model = str(_write(tmp_path / "m.gguf", b"abc"))
    run = store.create_run(name="r", config={"dataset_path": str(data), "model": model}, dataset_id=None,
                           max_steps=1)
    ctx = SimpleNamespace(store=store, settings=settings)
    assert clone_drift_notes(ctx, run) == []  # no record: nothing to compare
    record = collect_provenance(dataset_file=data, model=model, cache_dir=settings.model_cache_dir, device=DEVICE)
    store.update_run(run.id, provenance=record)
    assert clone_drift_notes(ctx, store.get_run(run.id)) == []

    data.write_bytes(b"abcd")
    store.update_run(run.id, provenance={**record, "versions": {**record["versions"], "trl": "0.1"}})
    notes = clone_drift_notes(ctx, store.get_run(run.id))
    assert notes == ["the dataset file changed since the run (its sha256 differs)",
                     f"library versions changed: trl 0.1 -> {library_versions()['trl']}"]
