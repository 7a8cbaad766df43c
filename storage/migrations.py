"""Schema migration of a store written by an earlier version: renamed columns, then added ones.

``Base.metadata.create_all`` creates missing tables but never alters an existing one. Two steps bring an existing
table up to the models, run by :func:`storage.engine.create_schema` in this order:

1. :func:`rename_columns` applies :data:`RENAMED_COLUMNS` with ``ALTER TABLE ... RENAME COLUMN`` (SQLite >= 3.25,
   PostgreSQL), rows kept, and drops the indexes of :data:`RENAMED_INDEXES` (named after the old column);
   :func:`storage.tables.create_missing_indexes` then creates their successors.
2. :func:`add_missing_columns` adds each nullable column added since (``runs.resume_from``, ``runs.notes``, ...)
   with ``ALTER TABLE ... ADD COLUMN`` (an existing row has no value for a new column).

Anything else (drops, type changes) needs a real migration tool.
"""

from __future__ import annotations

import logging

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from storage.tables import Base

log = logging.getLogger(__name__)

RENAMED_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("runs", "output_dir", "run_dir"),  # it always held the run folder; output_dir is TRL's <run_dir>/output
    ("groups", "prompt_index", "row_index"),  # the dataset row, called row_index everywhere
)
"""``(table, old name, new name)`` of every column renamed since the first release, oldest first."""

RENAMED_INDEXES: tuple[tuple[str, str], ...] = (("groups", "ix_groups_run_prompt"),)
"""``(table, index)`` of indexes named after a renamed column; dropped, then recreated under the models' name."""


def rename_columns(engine: Engine) -> list[str]:
    """Rename the columns of :data:`RENAMED_COLUMNS` that an existing table still has under the old name, and drop the
    stale indexes of :data:`RENAMED_INDEXES`. Returns the renames done, as ``table.old -> new``.

    Safe to run from several processes at once: a rename another process did meanwhile is skipped.

    Raises:
        sqlalchemy.exc.DBAPIError: the database refused a rename (SQLite older than 3.25).
    """
    done = []
    preparer = engine.dialect.identifier_preparer
    for table_name, old, new in RENAMED_COLUMNS:
        if old not in _columns(engine, table_name):
            continue
        statement = (
            f"ALTER TABLE {preparer.quote(table_name)} RENAME COLUMN {preparer.quote(old)} TO {preparer.quote(new)}"
        )
        if not _alter(engine, statement, still_needed=lambda t=table_name, c=old: c in _columns(engine, t)):
            continue  # another process renamed it first
        log.info("store: renamed column %s.%s to %s", table_name, old, new)
        done.append(f"{table_name}.{old} -> {new}")
    existing_tables = set(inspect(engine).get_table_names())
    for table_name, index in RENAMED_INDEXES:
        if table_name not in existing_tables:
            continue
        if index in {i["name"] for i in inspect(engine).get_indexes(table_name)}:
            with engine.begin() as connection:
                connection.execute(text(f"DROP INDEX IF EXISTS {preparer.quote(index)}"))
            log.info("store: dropped index %s (recreated under its new name)", index)
    return done


def _alter(engine: Engine, statement: str, still_needed) -> bool:
    """Run one DDL ``statement`` in its own transaction; True if it ran, False if it failed because another process
    made the change first (``still_needed()`` is then False).

    Raises:
        sqlalchemy.exc.DBAPIError: it failed and the change is still needed.
    """
    try:
        with engine.begin() as connection:
            connection.execute(text(statement))
    except DBAPIError:
        if still_needed():
            raise
        return False
    return True


def _columns(engine: Engine, table_name: str) -> set[str]:
    """The column names of a table; empty when the table does not exist."""
    inspector = inspect(engine)
    if table_name not in inspector.get_table_names():
        return set()
    return {c["name"] for c in inspector.get_columns(table_name)}


def missing_columns(engine: Engine) -> list[tuple[str, str]]:
    """``(table, column)`` for every model column that an existing table of the database lacks, in model order."""
    inspector = inspect(engine)
    existing_tables = set(inspector.get_table_names())
    missing = []
    for table in Base.metadata.sorted_tables:
        if table.name not in existing_tables:
            continue  # create_all makes it whole
        present = {c["name"] for c in inspector.get_columns(table.name)}
        missing.extend((table.name, c.name) for c in table.columns if c.name not in present)
    return missing


def add_missing_columns(engine: Engine) -> list[str]:
    """Add the nullable model columns that existing tables lack; returns them as ``table.column``.

    Safe to run from several processes at once: a column another process added meanwhile is skipped.

    Raises:
        RuntimeError: a missing column is not nullable (it cannot be added to a table that has rows).
    """
    added = []
    for table_name, column_name in missing_columns(engine):
        column = Base.metadata.tables[table_name].columns[column_name]
        if not column.nullable:
            raise RuntimeError(
                f"the store's table {table_name!r} lacks the required column {column_name!r}; "
                "it cannot be added automatically"
            )
        column_type = column.type.compile(dialect=engine.dialect)
        preparer = engine.dialect.identifier_preparer
        statement = (
            f"ALTER TABLE {preparer.quote(table_name)} ADD COLUMN {preparer.quote(column_name)} {column_type}"
        )
        if not _alter(engine, statement, still_needed=lambda t=table_name, c=column_name: (t, c) in missing_columns(engine)):
            continue  # another process added it first
        log.info("store: added column %s.%s", table_name, column_name)
        added.append(f"{table_name}.{column_name}")
    return added
