"""What one training step records, in one transaction: its metric points with their downsampled history, its groups
per split, the run's heartbeat and step, and the read of the run's cancel flag (:meth:`StepStore.record_step`, what
the worker's recorder calls; its :class:`~storage.step_cache.StepCache` spares a step the reads)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from typing import Any

from sqlalchemy import bindparam, func, select, update
from sqlalchemy.orm import Session

from storage.base import split_clause
from storage.groups import GroupStore
from storage.history import as_bucket, bucket_columns, bucket_values, by_key, write_history
from storage.metrics import INSERT_METRICS, MetricStore, step_rows
from storage.records import GroupRecord
from storage.runs import CANCEL_READ
from storage.step_cache import StepCache
from storage.summary import SeriesState, bucket_of, fold, level_for
from storage.tables import GroupRow, MetricBucketRow, MetricRow, MetricSeriesRow, RunRow, utcnow

# Built once: a step's transaction only binds values (SQLAlchemy's compiled cache then skips building and compiling
# the statement), and runs it as Core, without ORM objects.
_STEP_BEAT = (
    update(RunRow.__table__).where(RunRow.__table__.c.id == bindparam("pk_id"))
    .values(heartbeat_at=bindparam("heartbeat_at"), current_step=bindparam("current_step"))
)


class StepStore(MetricStore, GroupStore):
    """A training step's writes in one transaction (a mixin of :class:`storage.Store`)."""

    def record_step(
        self,
        run_id: int,
        step: int,
        *,
        metrics: dict[str, Any] | None = None,
        wall_time: float | None = None,
        groups: Sequence[tuple[str, Sequence[GroupRecord]]] = (),
        cache: StepCache | None = None,
    ) -> bool:
        """Everything a training step records, in one transaction, and the run's cancel flag read in it.

        Stores the scalars ``metrics`` logged at ``step`` (as :meth:`record_metric_steps`, at ``wall_time`` seconds
        since the epoch, default now) and, per ``(split, groups)`` pair, the step's groups of that split (as
        :meth:`record_groups`), sets the run's ``heartbeat_at`` to now and its ``current_step`` to ``step``, and
        reads ``cancel_requested``. Either all of it is stored or, when a statement fails, none of it.

        ``cache`` (the :class:`~storage.step_cache.StepCache` of the run's only writer) makes a new step cost no
        read: each key's last history bucket comes from it (the new one is written in the same transaction, so the
        history never disagrees with the raw points), and a step after the last stored one deletes nothing. Keys
        the cache lacks are read from the store (two reads for all of them; a key without any point yet starts its
        history here); a replayed step, a key whose history level rises or raw points without a history take the
        general path of :meth:`record_metric_steps` for that step. The cache gets the new state only once the transaction
        committed, and is cleared when it fails.

        Returns:
            Whether a cancel was asked for the run.

        Raises:
            sqlalchemy.exc.SQLAlchemyError: the database refused a statement (nothing of the step is stored).
        """
        rows = {} if metrics is None else step_rows(run_id, step, metrics,
                                                    time.time() if wall_time is None else wall_time)
        new_series: dict[str, SeriesState] = {}
        new_group_steps: dict[str, int] = {}
        try:
            with self._session() as session:
                connection = session.connection()
                if rows:
                    new_series = self._write_step_metrics(session, connection, run_id, step, rows, cache)
                for split, of_split in groups:
                    last = None if cache is None else cache.group_steps.get(split)
                    if last is None:
                        last = connection.execute(select(func.max(GroupRow.step)).where(
                            GroupRow.run_id == run_id, split_clause(split))).scalar()
                        last = -1 if last is None else int(last)
                    self._write_groups(connection, run_id, step, of_split, split, replace=step <= last)
                    new_group_steps[split] = max(last, step)
                connection.execute(_STEP_BEAT, {"pk_id": run_id, "heartbeat_at": utcnow(), "current_step": int(step)})
                cancel = bool(connection.execute(CANCEL_READ, {"pk_id": run_id}).scalar())
                session.commit()
        except BaseException:
            if cache is not None:
                cache.clear()
            raise
        if cache is not None:
            cache.series.update(new_series)
            cache.group_steps.update(new_group_steps)
        return cancel

    def _write_step_metrics(self, session: Session, connection, run_id: int, step: int,
                            rows: dict[str, dict[str, Any]], cache: StepCache | None) -> dict[str, SeriesState]:
        """The metrics part of :meth:`record_step` (not committed); returns each key's new history state (its last
        bucket only) for ``cache``, empty without one."""
        if cache is None:
            self._write_metric_rows(session, run_id, {(step, key): row for key, row in rows.items()})
            return {}
        known = {key: cache.series.get(key) for key in rows}
        missing = [key for key, state in known.items() if state is None]
        first_points: set[str] = set()  # keys with no point stored at all: their history starts here
        if missing:  # a new process (a resume) or new keys (an evaluation's, the closing summary's): two reads
            known.update(self._series_states(connection, run_id, missing))
            unknown = [key for key in missing if known[key] is None]
            if unknown:
                stored = set(connection.execute(
                    select(MetricRow.key).where(MetricRow.run_id == run_id, MetricRow.key.in_(unknown)).distinct()
                ).scalars())
                first_points = {key for key in unknown if key not in stored}
        fast = all(
            key in first_points or (
                state is not None and state.last_step < step
                and level_for(state.first_step, step, self.summary_buckets) == state.level
            )
            for key, state in known.items()
        )
        if not fast:  # a replayed step, a level that rises, raw points without history: the general path
            self._write_metric_rows(session, run_id, {(step, key): row for key, row in rows.items()})
            return self._series_states(connection, run_id, sorted(rows))
        connection.execute(INSERT_METRICS, list(rows.values()))
        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        series_inserts: list[dict[str, Any]] = []
        series_updates: list[dict[str, Any]] = []
        new: dict[str, SeriesState] = {}
        for key, row in rows.items():
            point = [(step, row["value"], row["wall_time"])]
            state = known[key]
            if state is None:
                state, _ = fold(None, point, self.summary_buckets)
                index = None
                series_inserts.append({"run_id": run_id, "key": key, "level": state.level,
                                       "first_step": state.first_step, "last_step": step})
            else:
                ((index, bucket),) = state.buckets.items()
                state, _ = fold(SeriesState(state.level, state.first_step, state.last_step,
                                            {index: dataclasses.replace(bucket)}), point, self.summary_buckets)
                series_updates.append({"pk_run_id": run_id, "pk_key": key, "last_step": step})
            last_index = bucket_of(step, state.level)
            last_bucket = state.buckets[last_index]
            (updates if last_index == index else inserts).append(bucket_values(run_id, key, last_index, last_bucket))
            new[key] = SeriesState(state.level, state.first_step, step, {last_index: last_bucket})
        write_history(connection, inserts, [by_key(values) for values in updates], series_inserts, series_updates)
        return new

    def _series_states(self, connection, run_id: int, keys: Sequence[str]) -> dict[str, SeriesState]:
        """The stored history state of ``keys`` with their last bucket only (two reads), for a :class:`StepCache`."""
        series = connection.execute(
            select(MetricSeriesRow.key, MetricSeriesRow.level, MetricSeriesRow.first_step, MetricSeriesRow.last_step)
            .where(MetricSeriesRow.run_id == run_id, MetricSeriesRow.key.in_(keys))
        ).all()
        last = {row.key: bucket_of(row.last_step, row.level) for row in series}
        if not last:
            return {}
        states: dict[str, SeriesState] = {}
        by_key = {row.key: row for row in series}
        for row in connection.execute(bucket_columns().where(
            MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(sorted(last)),
            MetricBucketRow.bucket.in_(sorted(set(last.values()))),
        )).all():
            if last[row.key] == row.bucket:
                of_key = by_key[row.key]
                states[row.key] = SeriesState(of_key.level, of_key.first_step, of_key.last_step,
                                              {row.bucket: as_bucket(row)})
        return states
