"""Additive schema migration: columns added to the models after a store was created.

``Base.metadata.create_all`` creates missing tables but never alters an existing one, so a store written by an
earlier version lacks the columns added since (``runs.resume_from``, ``runs.notes``, ...). :func:`add_missing_columns`
adds each one with ``ALTER TABLE ... ADD COLUMN``. Only nullable columns are added this way (an existing row has no
value for a new column); anything else (renames, drops, type changes) needs a real migration tool.
"""

from __future__ import annotations

import logging

from sqlalchemy import inspect, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

from storage.models import Base

log = logging.getLogger(__name__)


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
        try:
            with engine.begin() as connection:
                connection.execute(text(statement))
        except DBAPIError:
            if (table_name, column_name) in missing_columns(engine):
                raise
            continue  # another process added it first
        log.info("store: added column %s.%s", table_name, column_name)
        added.append(f"{table_name}.{column_name}")
    return added
