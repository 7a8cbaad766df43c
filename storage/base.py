"""What every part of the :class:`storage.Store` shares: the engine, its sessions, and the small helpers of more than
one table family (a NaN-free float, a LIKE pattern, the groups of one split).

Each table family is a mixin on :class:`StoreBase` (:mod:`storage.datasets`, :mod:`storage.runs`,
:mod:`storage.sweeps`, :mod:`storage.metrics`, :mod:`storage.history`, :mod:`storage.steps`, :mod:`storage.groups`,
:mod:`storage.prompts`), as MLflow's tracking store splits its SQLAlchemy store; :mod:`storage.store` composes them.
"""

from __future__ import annotations

import math
import operator
from typing import Any

from sqlalchemy.orm import Session, sessionmaker

from storage.engine import create_schema, make_engine
from storage.records import StoreError
from storage.summary import SUMMARY_BUCKETS
from storage.tables import Base, GroupRow


class StoreBase:
    """The engine and session factory of a store.

    Args:
        url: any SQLAlchemy URL, e.g. ``sqlite:////data/grpo.db`` or ``postgresql+psycopg://user@host/db``.
        create: create missing tables (idempotent).

    Every method opens its own short transaction, so one store may be shared by threads.
    """

    #: Most buckets kept per metric key in the downsampled history (:mod:`storage.summary`); tests lower it.
    summary_buckets: int = SUMMARY_BUCKETS

    def __init__(self, url: str, *, create: bool = True) -> None:
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        if create:
            create_schema(self.engine)

    def close(self) -> None:
        """Release the connection pool."""
        self.engine.dispose()

    def _session(self) -> Session:
        return self._sessions()


def get_row(session: Session, table: type[Base], row_id: int, what: str, **options: Any) -> Any:
    """The row of ``table`` with primary key ``row_id`` (``options``: :meth:`Session.get`'s, e.g. eager loads).

    Raises:
        StoreError: there is none (``"no <what> with id <row_id>"``), also for an id no row can have (not a whole
            number, below 1 or beyond a 64-bit integer: SQLite would raise ``OverflowError``).
    """
    try:
        number = operator.index(row_id)
    except TypeError:
        number = 0
    if isinstance(row_id, bool) or not 1 <= number <= 2**63 - 1:
        raise StoreError(f"no {what} with id {str(row_id)[:40]}")
    row = session.get(table, number, **options)
    if row is None:
        raise StoreError(f"no {what} with id {row_id}")
    return row


def finite(value: Any) -> float | None:
    """``value`` as a float, or ``None`` for NaN, infinities and non-numbers (JSON and SQL have no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def split_clause(split: str):
    """Rows of ``split`` in the ``groups`` table (``"train"`` is also NULL, as older rows have it)."""
    return GroupRow.split.is_(None) | (GroupRow.split == "train") if split == "train" else GroupRow.split == split
