"""The database connection: URL helpers, the engine (SQLite pragmas) and schema creation with its migrations.

SQLite files get WAL mode (readers never block the writer), ``foreign_keys`` (cascading deletes), a busy timeout
(the web process and several workers share one file) and ``synchronous=NORMAL``; other databases (PostgreSQL) get
``pool_pre_ping``. :func:`create_schema` creates what a database lacks and migrates a store written by an earlier
version (:mod:`storage.migrations`).
"""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from storage.migrations import add_missing_columns, rename_columns
from storage.tables import Base, create_missing_indexes
from storage.types import read_json

SQLITE_BUSY_TIMEOUT_MS = 30_000


def sqlite_url(path: str | Path) -> str:
    """The SQLAlchemy URL of a SQLite file at ``path``."""
    return f"sqlite:///{Path(path).resolve()}"


def make_engine(url: str) -> Engine:
    """Create an engine for ``url``; SQLite files get WAL mode, foreign keys and a busy timeout.

    Raises:
        sqlalchemy.exc.ArgumentError: ``url`` is not a database URL SQLAlchemy understands.
    """
    if url.startswith("sqlite"):
        engine = create_engine(url, connect_args={"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000, "check_same_thread": False},
                               json_deserializer=read_json)

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection, _record):  # pragma: no cover - exercised by every SQLite test
            cursor = dbapi_connection.cursor()
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.close()

        return engine
    return create_engine(url, pool_pre_ping=True, json_deserializer=read_json)


SCHEMA_ATTEMPTS = 5


def create_schema(engine: Engine) -> None:
    """Create the tables, indexes and columns the database lacks (idempotent), even from several processes at once.

    ``create_all`` checks for a table, then creates it: two processes opening a new store together (the dashboard
    and a headless ``train``, several workers) can both try, and the later one fails ("table ... already exists" on
    SQLite, a unique violation in ``pg_type`` on PostgreSQL, whose DDL is rolled back). It then tries again and
    finds the tables made.

    Raises:
        sqlalchemy.exc.DBAPIError: the schema still cannot be created after ``SCHEMA_ATTEMPTS`` tries.
    """
    for attempt in range(1, SCHEMA_ATTEMPTS + 1):
        try:
            Base.metadata.create_all(engine)
            rename_columns(engine)
            create_missing_indexes(engine)
            add_missing_columns(engine)
            return
        except DBAPIError:
            if attempt == SCHEMA_ATTEMPTS:
                raise
            time.sleep(0.05 * attempt)
