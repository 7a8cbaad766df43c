"""The ``datasets`` table: register, list, rename and delete uploaded datasets (their files are
:mod:`grpo_core.datasets.library`'s)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone

from sqlalchemy import delete, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.base import StoreBase, get_row
from storage.records import DatasetInfo, StoreError
from storage.tables import DatasetRow, RunRow


def _commit_dataset_name(session: Session, name: str) -> None:
    """Commit a dataset row named ``name`` (added or renamed).

    Raises:
        StoreError: another dataset is called ``name`` (the unique name constraint; the session is rolled back).
    """
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise StoreError(f"a dataset named {name!r} already exists") from None


class DatasetStore(StoreBase):
    """The store's datasets (a mixin of :class:`storage.Store`)."""

    def add_dataset(
        self,
        *,
        name: str,
        source_name: str,
        format: str,
        num_rows: int,
        columns: Sequence[str],
        prompt_kind: str,
        path: str,
        owner: str | None = None,
    ) -> DatasetInfo:
        """Register a dataset whose normalised rows were already written to ``path``, added by login ``owner``.

        Raises:
            StoreError: a dataset named ``name`` exists.
        """
        with self._session() as session:
            row = DatasetRow(
                name=name,
                source_name=source_name,
                format=format,
                num_rows=num_rows,
                columns=list(columns),
                prompt_kind=prompt_kind,
                path=path,
                owner=owner,
            )
            session.add(row)
            _commit_dataset_name(session, name)
            return row.to_record()

    def list_datasets(self, *, include_deleted: bool = False) -> list[DatasetInfo]:
        """All datasets, newest first; those marked deleted (:meth:`mark_dataset_deleted`) only with
        ``include_deleted``."""
        with self._session() as session:
            query = select(DatasetRow).order_by(DatasetRow.id.desc())
            if not include_deleted:
                query = query.where(DatasetRow.deleted_at.is_(None))
            return [r.to_record() for r in session.scalars(query).all()]

    def get_dataset(self, dataset_id: int) -> DatasetInfo:
        """One dataset, also one marked deleted (the runs that used it still read it). Raises StoreError when there
        is none with that id."""
        with self._session() as session:
            row = get_row(session, DatasetRow, dataset_id, "dataset")
            return row.to_record()

    def find_dataset(self, name: str) -> DatasetInfo | None:
        """The dataset named ``name``, or None."""
        with self._session() as session:
            row = session.scalars(select(DatasetRow).where(DatasetRow.name == name)).first()
            return row.to_record() if row else None

    def rename_dataset(self, dataset_id: int, name: str) -> DatasetInfo:
        """Give a dataset a new name (runs refer to it by id, so they follow).

        Raises:
            StoreError: no dataset with that id, or another dataset is called ``name``.
        """
        with self._session() as session:
            row = get_row(session, DatasetRow, dataset_id, "dataset")
            row.name = name
            _commit_dataset_name(session, name)
            return row.to_record()

    def mark_dataset_deleted(self, dataset_id: int) -> DatasetInfo:
        """Hide a dataset that runs still use: ``deleted_at`` set, and its name changed to ``"<name> (deleted #id)"``
        so that the name is free for a new dataset. Its row and file stay for those runs (resume, export, prompts).

        Raises:
            StoreError: no dataset with that id.
        """
        with self._session() as session:
            row = get_row(session, DatasetRow, dataset_id, "dataset")
            if row.deleted_at is None:
                row.deleted_at = datetime.now(timezone.utc)
                row.name = f"{row.name} (deleted #{row.id})"[:200]
                session.commit()
            return row.to_record()

    def delete_dataset(self, dataset_id: int) -> None:
        """Delete a dataset's row (its file is the caller's); runs that pointed at it keep their config, their
        ``dataset_id`` column is set to NULL by the foreign key."""
        with self._session() as session:
            session.execute(update(RunRow).where(RunRow.dataset_id == dataset_id).values(dataset_id=None))
            session.execute(delete(DatasetRow).where(DatasetRow.id == dataset_id))
            session.commit()

