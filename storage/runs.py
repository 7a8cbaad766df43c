"""The ``runs`` table: a run's life cycle (queued, claimed, heartbeats, cancel, final status, requeue for a resume),
its annotations and alerts, and the catalog fingerprint the pages poll."""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import bindparam, delete, func, select, update

from storage.base import get_row
from storage.history import HistoryStore
from storage.records import RunInfo, RunStatus, StoreError
from storage.tables import (
    CompletionRow,
    DatasetRow,
    GroupRow,
    MetricBucketRow,
    MetricRow,
    MetricSeriesRow,
    RunImageRow,
    RunRow,
    utcnow,
)

#: A run's cancel flag by primary key, built once (a Core read: no session, no ORM); :mod:`storage.steps` reads it
#: in a step's transaction.
CANCEL_READ = select(RunRow.__table__.c.cancel_requested).where(RunRow.__table__.c.id == bindparam("pk_id"))


class RunStore(HistoryStore):
    """The store's runs (a mixin of :class:`storage.Store`; a requeue cuts the run's downsampled metric history, so
    it builds on :class:`storage.history.HistoryStore`)."""

    def create_run(
        self, *, name: str, config: dict[str, Any], dataset_id: int | None, max_steps: int, owner: str | None = None
    ) -> RunInfo:
        """Insert a run in status ``queued``, launched by login ``owner`` (``None``: no login)."""
        with self._session() as session:
            row = RunRow(name=name, config=config, dataset_id=dataset_id, max_steps=max_steps,
                         status=RunStatus.QUEUED.value, owner=owner)
            session.add(row)
            session.commit()
            return row.to_record()

    def catalog_version(self) -> tuple[int, ...]:
        """A cheap fingerprint of the dataset and run lists, for pages that poll for changes.

        Returns ``(datasets, max dataset id, runs, max run id, runs per status..., datasets' names)`` (counts in
        :class:`RunStatus` order; the last a CRC-32 of the listed datasets' ids and names): it changes when a dataset
        or run is added or deleted, a dataset renamed (or deleted and another added under the same id, which an old
        SQLite store may give), or a run changes status, and not on metrics or groups. Two aggregate queries over
        runs; the dataset list (tens of short rows) is read whole.
        """
        with self._session() as session:
            listed = session.execute(  # the listed ones: a dataset marked deleted leaves the lists
                select(DatasetRow.id, DatasetRow.name).where(DatasetRow.deleted_at.is_(None)).order_by(DatasetRow.id)
            ).all()
            runs = session.execute(select(func.count(RunRow.id), func.max(RunRow.id))).one()
            by_status = dict(session.execute(select(RunRow.status, func.count(RunRow.id)).group_by(RunRow.status)).all())
        names = zlib.crc32("\n".join(f"{dataset_id}:{name}" for dataset_id, name in listed).encode())
        return (len(listed), listed[-1][0] if listed else 0, runs[0], runs[1] or 0,
                *(by_status.get(status.value, 0) for status in RunStatus), names)

    def get_run(self, run_id: int) -> RunInfo:
        """One run. Raises StoreError when there is none with that id."""
        with self._session() as session:
            return get_row(session, RunRow, run_id, "run").to_record()

    def list_runs(self, statuses: Iterable[RunStatus] | None = None) -> list[RunInfo]:
        """Runs, newest first, optionally only those in ``statuses``."""
        query = select(RunRow).order_by(RunRow.id.desc())
        if statuses is not None:
            query = query.where(RunRow.status.in_([RunStatus(s).value for s in statuses]))
        with self._session() as session:
            return [r.to_record() for r in session.scalars(query).all()]

    def update_run(self, run_id: int, **fields: Any) -> None:
        """Set columns of a run (``run_dir``, ``log_path``, ``phase``, ``worker_pid``, ...)."""
        if "status" in fields:
            fields["status"] = RunStatus(fields["status"]).value
        with self._session() as session:
            result = session.execute(update(RunRow).where(RunRow.id == run_id).values(**fields))
            session.commit()
            if result.rowcount == 0:
                raise StoreError(f"no run with id {run_id}")

    def claim_run(self, run_id: int, worker_pid: int | None = None) -> bool:
        """Move a ``queued`` run to ``running`` atomically; False if it was not queued (someone else took it)."""
        now = utcnow()
        with self._session() as session:
            result = session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status == RunStatus.QUEUED.value)
                .values(status=RunStatus.RUNNING.value, started_at=now, heartbeat_at=now, worker_pid=worker_pid)
            )
            session.commit()
            return result.rowcount == 1

    def finish_run(self, run_id: int, status: RunStatus, error: str | None = None) -> bool:
        """Set a final status unless the run already has one; returns whether it changed.

        Raises:
            StoreError: ``status`` is not final.
        """
        status = RunStatus(status)
        if not status.is_final:
            raise StoreError(f"{status.value} is not a final status")
        final = [s.value for s in RunStatus if s.is_final]
        with self._session() as session:
            result = session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status.not_in(final))
                .values(status=status.value, finished_at=utcnow(), error=error, phase=None)
            )
            session.commit()
            return result.rowcount == 1

    def heartbeat(self, run_id: int, *, step: int | None = None, phase: str | None = None) -> bool:
        """Record that the worker is alive (and its step or phase); returns ``cancel_requested``."""
        values: dict[str, Any] = {"heartbeat_at": utcnow()}
        if step is not None:
            values["current_step"] = step
        if phase is not None:
            values["phase"] = phase
        with self._session() as session:
            session.execute(update(RunRow).where(RunRow.id == run_id).values(**values))
            session.commit()
            return bool(session.scalar(select(RunRow.cancel_requested).where(RunRow.id == run_id)))

    def cancel_requested(self, run_id: int) -> bool:
        """Whether a cancel was asked for run ``run_id`` (one primary-key read; False for an unknown run)."""
        with self.engine.connect() as connection:  # a Core read: no session, no ORM
            return bool(connection.execute(CANCEL_READ, {"pk_id": run_id}).scalar())

    def request_cancel(self, run_id: int) -> RunInfo:
        """Ask a run to stop. A queued run is cancelled at once; a running one stops at its next step.

        Both changes are conditional updates, like :meth:`claim_run`, so a launcher claiming the run at the same
        moment either loses the claim or sees ``cancel_requested``; a claimed run is never marked cancelled.
        """
        with self._session() as session:
            queued = session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status == RunStatus.QUEUED.value)
                .values(status=RunStatus.CANCELLED.value, finished_at=utcnow())
            )
            if queued.rowcount == 0:
                session.execute(
                    update(RunRow)
                    .where(RunRow.id == run_id, RunRow.status == RunStatus.RUNNING.value)
                    .values(cancel_requested=True)
                )
            session.commit()
            return get_row(session, RunRow, run_id, "run").to_record()

    def delete_run(self, run_id: int) -> None:
        """Delete a run with its metrics, groups, completions and recorded images (files are the caller's)."""
        with self._session() as session:
            group_ids = select(GroupRow.id).where(GroupRow.run_id == run_id)
            session.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(group_ids)))
            session.execute(delete(GroupRow).where(GroupRow.run_id == run_id))
            session.execute(delete(MetricRow).where(MetricRow.run_id == run_id))
            session.execute(delete(MetricBucketRow).where(MetricBucketRow.run_id == run_id))
            session.execute(delete(MetricSeriesRow).where(MetricSeriesRow.run_id == run_id))
            session.execute(delete(RunImageRow).where(RunImageRow.run_id == run_id))
            session.execute(delete(RunRow).where(RunRow.id == run_id))
            session.commit()

    def requeue_run(self, run_id: int, *, resume_from: str | None, from_step: int) -> RunInfo:
        """Move a failed or cancelled run back to ``queued``, as the same run, for the launcher to start again.

        ``resume_from`` is the checkpoint folder the worker loads (``None``: train again from the start) and
        ``from_step`` the step it holds (0 without one). In the same transaction the metrics and groups of later
        steps are deleted: they were recorded after that checkpoint and will be trained and recorded again, so each
        step ends up recorded exactly once. The previous attempt's error, cancel flag, pid, Ray job, phase, GPUs and
        times are cleared.

        Raises:
            StoreError: there is no such run, or it is not failed or cancelled (a completed run has nothing left to
                train; a queued or running one is on its way already).
        """
        resumable = [RunStatus.FAILED.value, RunStatus.CANCELLED.value]
        with self._session() as session:
            result = session.execute(
                update(RunRow)
                .where(RunRow.id == run_id, RunRow.status.in_(resumable))
                .values(
                    status=RunStatus.QUEUED.value,
                    resume_from=resume_from,
                    current_step=max(0, int(from_step)),
                    error=None,
                    cancel_requested=False,
                    worker_pid=None,
                    ray_submission_id=None,
                    phase=None,
                    gpus=None,
                    started_at=None,
                    finished_at=None,
                    heartbeat_at=None,
                )
            )
            if result.rowcount == 0:
                session.rollback()
                status = get_row(session, RunRow, run_id, "run").status
                raise StoreError(f"run {run_id} is {status}: only a failed or cancelled run can be resumed")
            later_groups = select(GroupRow.id).where(GroupRow.run_id == run_id, GroupRow.step > from_step)
            session.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(later_groups)))
            session.execute(delete(GroupRow).where(GroupRow.run_id == run_id, GroupRow.step > from_step))
            session.execute(delete(MetricRow).where(MetricRow.run_id == run_id, MetricRow.step > from_step))
            cut = session.scalars(
                select(MetricSeriesRow.key).where(MetricSeriesRow.run_id == run_id, MetricSeriesRow.last_step > from_step)
            ).all()
            self._rebuild_summary(session, run_id, cut)  # the downsampled history follows the raw points
            session.commit()
            return session.get(RunRow, run_id).to_record()

    def record_alert(self, run_id: int, key: str, error: str | None = None) -> None:
        """Note that the webhook message ``key`` of a run was delivered (``error`` None) or given up on (``error``
        says why; shown on the run). A run deleted meanwhile is skipped."""
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                return
            sent = [str(k) for k in (row.alerts_sent or [])]
            if key not in sent:
                row.alerts_sent = [*sent, key]
            row.alert_error = error
            session.commit()

    def annotate_run(self, run_id: int, *, notes: str | None = None, tags: Sequence[str] | None = None) -> RunInfo:
        """Set a run's notes and/or tags; ``None`` leaves that one as it is. Tags are stored in the order given.

        Raises:
            StoreError: there is no such run.
        """
        values: dict[str, Any] = {}
        if notes is not None:
            values["notes"] = notes
        if tags is not None:
            values["tags"] = [str(t) for t in tags]
        with self._session() as session:
            if values:
                session.execute(update(RunRow).where(RunRow.id == run_id).values(**values))
                session.commit()
            return get_row(session, RunRow, run_id, "run").to_record()

