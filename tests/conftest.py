"""Shared pytest fixtures: settings pointed at ``tmp_path`` and a store on a real SQLite file there (or, for tests
marked ``@pytest.mark.backends("sqlite", "postgres")``, on a fresh PostgreSQL database too: see tests/backends.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpo_core.settings import Settings, load_settings
from storage import Store, sqlite_url
from tests.backends import backends_of, fresh_postgres_database, postgres_admin_url

# ------------------------------------------------------------------------------------------ settings and store


def pytest_configure(config) -> None:
    config.addinivalue_line(
        "markers", 'backends(*names): run the test on each store backend named ("sqlite", "postgres"); default sqlite'
    )


def pytest_generate_tests(metafunc) -> None:
    """Parametrize ``store_url`` (and so ``settings`` and ``store``) over the backends a test is marked with."""
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is not None and "store_url" in metafunc.fixturenames:
        names = backends_of(marker)
        metafunc.parametrize("store_url", names, indirect=True, ids=names)


def pytest_collection_modifyitems(config, items) -> None:
    """Skip the tests marked ``gpu`` where torch sees no CUDA GPU (torch is imported only when such a test is
    collected)."""
    marked = [item for item in items if item.get_closest_marker("gpu") is not None]
    if not marked:
        return
    import torch

    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (torch.cuda.is_available() is False here)")
    for item in marked:
        item.add_marker(skip)


@pytest.fixture
def store_url(request, tmp_path) -> Iterator[str]:
    """SQLAlchemy URL of an empty store: SQLite ``tmp_path/data/grpo.db``, or a new PostgreSQL database."""
    backend = getattr(request, "param", "sqlite")
    if backend == "postgres":
        yield from fresh_postgres_database(postgres_admin_url())
    else:
        yield sqlite_url(tmp_path / "data" / "grpo.db")


@pytest.fixture
def settings(tmp_path, store_url) -> Settings:
    """Settings whose data folder (store file, datasets, runs, model cache) is ``tmp_path / "data"``, created;
    the store is ``store_url``."""
    result = load_settings(data_dir=tmp_path / "data", db_url=store_url)
    result.ensure_dirs()
    return result


@pytest.fixture
def store(settings) -> Iterator[Store]:
    """A :class:`storage.Store` on the store of ``settings`` (tables created), closed after the test."""
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


@pytest.fixture(scope="session")
def tiny_vlm_dir(tmp_path_factory) -> Path:
    """A random-weight tiny LLaVA (vision tower, projector, the tiny Llama) and its processor, built locally once per
    session (see tests/tiny_model.py)."""
    from tests.tiny_model import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


@pytest.fixture(scope="session")
def tiny_tool_model_dir(tmp_path_factory) -> Path:
    """The tiny Llama taught to call a tool (a few hundred supervised steps on the conversation TRL renders with a
    tool in the prompt; see tests/tiny_model.py), built once per session."""
    from tests.tiny_model import build_tiny_tool_model

    return build_tiny_tool_model(tmp_path_factory.mktemp("tiny-tool-llama"))
