"""The ``rescorings`` table: rescorings of a run's recorded groups with another reward composition (the reward
workbench, :mod:`grpo_core.rescore.job`). A rescoring is its own row beside the run; it never changes what the run
recorded."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update

from storage.base import StoreBase, get_row, split_clause
from storage.groups import with_completions
from storage.records import RESCORING_STATUSES, GroupRecord, RescoringInfo, StoreError
from storage.tables import CompletionRow, GroupRow, RescoringRow, RunRow, utcnow


class RescoringStore(StoreBase):
    """The store's rescorings (a mixin of :class:`storage.Store`)."""

    def create_rescoring(self, run_id: int, request: dict[str, Any], *, total: int, owner: str | None = None
                         ) -> RescoringInfo:
        """A new ``running`` rescoring of run ``run_id`` of ``total`` completions. Raises StoreError: no such run."""
        with self._session() as session:
            get_row(session, RunRow, run_id, "run")
            row = RescoringRow(run_id=run_id, request=request, total=int(total), owner=owner, status="running")
            session.add(row)
            session.commit()
            return row.to_record()

    def get_rescoring(self, rescoring_id: int) -> RescoringInfo:
        """One rescoring. Raises StoreError when there is none with that id."""
        with self._session() as session:
            return get_row(session, RescoringRow, rescoring_id, "rescoring").to_record()

    def list_rescorings(self, run_id: int, limit: int = 50) -> list[RescoringInfo]:
        """A run's rescorings, newest first, at most ``limit``."""
        with self._session() as session:
            rows = session.scalars(select(RescoringRow).where(RescoringRow.run_id == run_id)
                                   .order_by(RescoringRow.id.desc()).limit(max(0, int(limit)))).all()
            return [row.to_record() for row in rows]

    def set_rescoring_progress(self, rescoring_id: int, done: int) -> bool:
        """Record ``done`` completions scored; returns whether a cancel was asked since."""
        with self._session() as session:
            session.execute(update(RescoringRow).where(RescoringRow.id == rescoring_id).values(done=int(done)))
            session.commit()
            return bool(session.scalar(select(RescoringRow.cancel_requested).where(RescoringRow.id == rescoring_id)))

    def request_rescoring_cancel(self, rescoring_id: int) -> RescoringInfo:
        """Ask a running rescoring to stop (its job kills its child at the next poll). Raises StoreError: no such
        rescoring."""
        with self._session() as session:
            row = get_row(session, RescoringRow, rescoring_id, "rescoring")
            if row.status == "running":
                row.cancel_requested = True
            session.commit()
            return row.to_record()

    def finish_rescoring(self, rescoring_id: int, status: str, *, result: dict[str, Any] | None = None,
                         error: str | None = None) -> RescoringInfo:
        """End a rescoring as ``completed`` (with ``result``), ``failed`` (with ``error``) or ``cancelled``."""
        if status not in RESCORING_STATUSES or status == "running":
            raise StoreError(f"a rescoring ends completed, failed or cancelled, not {status!r}")
        with self._session() as session:
            row = get_row(session, RescoringRow, rescoring_id, "rescoring")
            row.status, row.result, row.error, row.finished_at = status, result, error, utcnow()
            if status == "completed":
                row.done = row.total
            session.commit()
            return row.to_record()

    def train_group_keys(self, run_id: int, first_step: int | None, last_step: int | None, *, limit: int
                         ) -> list[tuple[int, int, int]]:
        """``(group id, step, number of completions)`` of the training groups of run ``run_id`` in ``[first_step,
        last_step]`` (``None``: open), in recording order, at most ``limit`` (read one more to know a range is
        larger)."""
        conditions = [GroupRow.run_id == run_id, split_clause("train")]
        if first_step is not None:
            conditions.append(GroupRow.step >= int(first_step))
        if last_step is not None:
            conditions.append(GroupRow.step <= int(last_step))
        with self._session() as session:
            rows = session.execute(
                select(GroupRow.id, GroupRow.step, func.count(CompletionRow.id))
                .outerjoin(CompletionRow, CompletionRow.group_id == GroupRow.id).where(*conditions)
                .group_by(GroupRow.id, GroupRow.step).order_by(GroupRow.step, GroupRow.id).limit(max(0, int(limit)))
            ).all()
        return [(int(i), int(s), int(n)) for i, s, n in rows]

    def groups_by_id(self, run_id: int, group_ids: list[int]) -> list[GroupRecord]:
        """The groups of run ``run_id`` with these ids (others are skipped), with their completions, by step then
        id; read 500 ids a query."""
        out: list[GroupRecord] = []
        with self._session() as session:
            for start in range(0, len(group_ids), 500):
                chunk = [int(i) for i in group_ids[start:start + 500]]
                query = with_completions(GroupRow.run_id == run_id, GroupRow.id.in_(chunk))
                out += [row.to_record() for row in session.scalars(query).all()]
        return sorted(out, key=lambda g: (g.step, g.id))
