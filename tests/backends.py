"""The store backends the suite runs against: a SQLite file under ``tmp_path``, and a real PostgreSQL server.

A test (or a module, through ``pytestmark``) opts in to several backends with ``@pytest.mark.backends("sqlite",
"postgres")``; ``tests/conftest.py`` then parametrizes its ``store_url`` fixture, and with it ``settings`` and
``store``. Tests without the marker run on SQLite only.

PostgreSQL comes from ``GRPO_TEST_POSTGRES_URL`` (e.g. ``postgresql+psycopg://grpo:grpo@127.0.0.1:5432/grpo_test``,
a role allowed to create databases; ``.ci/run`` sets one up). Each test gets a database of its own, created from
``template0`` and dropped (with any connection a worker left open) after the test. Without the variable the
postgres cases are skipped, unless ``CI`` or ``GRPO_E2E_REQUIRED`` is set: there a missing server fails them.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

BACKENDS = ("sqlite", "postgres")
ENV_POSTGRES_URL = "GRPO_TEST_POSTGRES_URL"
ENV_REQUIRED = ("GRPO_E2E_REQUIRED", "CI")


def _required() -> bool:
    return any(os.environ.get(name, "").strip().lower() not in ("", "0", "false", "no") for name in ENV_REQUIRED)


def postgres_admin_url() -> str:
    """``GRPO_TEST_POSTGRES_URL``; skips the test when unset, fails it when CI or ``GRPO_E2E_REQUIRED`` is set."""
    url = os.environ.get(ENV_POSTGRES_URL, "").strip()
    if url:
        return url
    message = (
        f"{ENV_POSTGRES_URL} is not set (a PostgreSQL URL whose role may create databases; .ci/postgres sets one up)"
    )
    if _required():
        pytest.fail(message + f"; it is required when {' or '.join(ENV_REQUIRED)} is set", pytrace=False)
    pytest.skip(message)


def fresh_postgres_database(admin_url: str) -> Iterator[str]:
    """Create a uniquely named UTF-8 database next to ``admin_url``'s, yield its URL, and drop it afterwards.

    The admin connection is opened only to create and to drop (``WITH (FORCE)``, PostgreSQL 13+, so that a
    worker killed mid-transaction cannot keep the database alive).
    """
    from sqlalchemy import create_engine
    from sqlalchemy.engine import make_url
    from sqlalchemy.pool import NullPool

    admin = create_engine(admin_url, isolation_level="AUTOCOMMIT", poolclass=NullPool)
    name = f"grpo_test_{uuid.uuid4().hex[:16]}"
    try:
        with admin.connect() as conn:
            conn.exec_driver_sql(
                f"CREATE DATABASE \"{name}\" TEMPLATE template0 ENCODING 'UTF8' LC_COLLATE 'C' LC_CTYPE 'C'"
            )
        try:
            yield make_url(admin_url).set(database=name).render_as_string(hide_password=False)
        finally:
            with admin.connect() as conn:
                conn.exec_driver_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
    finally:
        admin.dispose()


def backends_of(marker: pytest.Mark | None) -> list[str]:
    """The backends a ``backends`` marker names (default: SQLite only).

    Raises:
        ValueError: the marker names an unknown backend.
    """
    names = list(marker.args) if marker is not None else ["sqlite"]
    unknown = [n for n in names if n not in BACKENDS]
    if unknown or not names:
        raise ValueError(f"@pytest.mark.backends takes some of {BACKENDS}, got {tuple(names)}")
    return names
