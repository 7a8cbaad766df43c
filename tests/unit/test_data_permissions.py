"""The data folder and the SQLite store are readable by their owner only: created so, and restricted at start."""

from __future__ import annotations

import logging
import os
import stat

import pytest

from grpo_core.settings import load_settings
from storage import Store, sqlite_url


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask():
    """A permissive umask (0022, the usual default), so only the code under test makes files private."""
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_new_data_folder_and_store_are_owner_only(tmp_path, open_umask):
    settings = load_settings(data_dir=tmp_path / "data")
    settings.ensure_dirs()
    assert settings.store_file == tmp_path / "data" / "grpo.db"
    store = Store(settings.db_url)  # creates its tables (and SQLite's WAL files) in the existing file
    store.close()
    assert mode(settings.data_dir) == 0o700
    assert mode(settings.store_file) == 0o600
    for side in ("grpo.db-wal", "grpo.db-shm"):  # SQLite gives them the store file's mode
        path = settings.data_dir / side
        if path.exists():
            assert mode(path) & 0o077 == 0


def test_existing_open_folder_and_store_are_restricted_at_start(tmp_path, open_umask, caplog):
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    db = data / "grpo.db"
    db.write_bytes(b"")
    db.chmod(0o644)
    settings = load_settings(data_dir=data)
    with caplog.at_level(logging.WARNING, logger="grpo_core.settings"):
        settings.ensure_dirs()
    assert mode(data) == 0o700
    assert mode(db) == 0o600
    assert "readable beyond its owner" in caplog.text


def test_store_file_of_other_urls(tmp_path):
    assert load_settings(data_dir=tmp_path, db_url="postgresql://u@h/db").store_file is None
    assert load_settings(data_dir=tmp_path, db_url="sqlite://").store_file is None
    other = tmp_path / "elsewhere" / "s.db"
    settings = load_settings(data_dir=tmp_path / "d", db_url=sqlite_url(other))
    settings.ensure_dirs()
    assert settings.store_file == other.resolve()
    assert mode(other) == 0o600
