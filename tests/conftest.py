"""Shared pytest fixtures: settings pointed at ``tmp_path`` and a store on a real SQLite file there."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpo_core.settings import Settings, load_settings
from storage import Store

# ------------------------------------------------------------------------------------------ settings and store


@pytest.fixture
def settings(tmp_path) -> Settings:
    """Settings whose data folder (store file, datasets, runs, model cache) is ``tmp_path / "data"``, created."""
    result = load_settings(data_dir=tmp_path / "data")
    result.ensure_dirs()
    return result


@pytest.fixture
def store(settings) -> Iterator[Store]:
    """A :class:`storage.Store` on the SQLite file of ``settings`` (tables created), closed after the test."""
    result = Store(settings.db_url)
    try:
        yield result
    finally:
        result.close()


# ---------------------------------------------------------------------------------------------------- models
# Model fixtures (the tiny local Llama of tests/tiny_model.py, ...) go here.

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing in the suite may reach a model hub
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A random-weight tiny Llama and its tokenizer, built locally once per session (see tests/tiny_model.py)."""
    from tests.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
