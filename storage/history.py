"""The downsampled metric history (tables ``metric_series`` and ``metric_buckets``, :mod:`storage.summary`): kept up
to date as points are recorded, rebuilt from the raw points when they are replaced or cut, and read for a chart's first
load (:meth:`HistoryStore.metric_summary`)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import bindparam, delete, func, insert, literal_column, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from storage.base import StoreBase
from storage.records import MetricSummary
from storage.summary import Bucket, SeriesState, bucket_of, downsample, fold, level_for
from storage.tables import MetricBucketRow, MetricRow, MetricSeriesRow


def _like_to_regex(pattern: str) -> str:
    """An SQL LIKE pattern (``%`` any run, ``_`` one character) as a regular expression."""
    return "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)


def bucket_columns():
    """A select of the bucket columns (plain tuples, no ORM objects)."""
    return select(
        MetricBucketRow.key, MetricBucketRow.bucket, MetricBucketRow.first_step, MetricBucketRow.last_step,
        MetricBucketRow.count, MetricBucketRow.min, MetricBucketRow.max, MetricBucketRow.sum,
        MetricBucketRow.last_value, MetricBucketRow.wall_time,
    )


def _by_primary_key(table):
    """Core ``UPDATE table SET ... WHERE run_id = :pk_run_id AND key = :pk_key [AND bucket = :pk_bucket]``, run with
    one parameter dict per row (:func:`by_key`): an executemany, without the ORM's per-row bookkeeping."""
    return table.update().where(*(column == bindparam(f"pk_{column.name}") for column in table.primary_key.columns))


# Built once: a step's transaction only binds values (SQLAlchemy's compiled cache then skips building them).
BUCKET_UPDATE = _by_primary_key(MetricBucketRow.__table__)
SERIES_UPDATE = _by_primary_key(MetricSeriesRow.__table__)
INSERT_BUCKETS = insert(MetricBucketRow.__table__)
INSERT_SERIES = insert(MetricSeriesRow.__table__)


def write_history(connection, inserts: list[dict[str, Any]], updates: list[dict[str, Any]],
                  series_inserts: list[dict[str, Any]], series_updates: list[dict[str, Any]]) -> None:
    """Write a run's new and changed history rows in ``connection``'s transaction (a session or a Core connection;
    not committed): ``metric_buckets`` rows to insert and to update, then ``metric_series`` rows to insert and to
    update (the updates as parameters of their primary-key update, see :func:`by_key`), each as one executemany."""
    for statement, rows in ((INSERT_BUCKETS, inserts), (BUCKET_UPDATE, updates),
                            (INSERT_SERIES, series_inserts), (SERIES_UPDATE, series_updates)):
        if rows:
            connection.execute(statement, rows)


def by_key(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` of a summary row as parameters of its ``_by_primary_key`` update (the key columns renamed)."""
    return {(f"pk_{k}" if k in ("run_id", "key", "bucket") else k): v for k, v in values.items()}


def as_bucket(row) -> Bucket:
    """A row of :func:`bucket_columns` as a :class:`storage.summary.Bucket`."""
    return Bucket(row.first_step, row.last_step, row.count, row.min, row.max, row.sum, row.last_value, row.wall_time)


def bucket_values(run_id: int, key: str, index: int, bucket: Bucket) -> dict[str, Any]:
    """The ``metric_buckets`` column values of bucket ``index`` of ``key``."""
    return {"run_id": run_id, "key": key, "bucket": index, "first_step": bucket.first_step,
            "last_step": bucket.last_step, "count": bucket.count, "min": bucket.min, "max": bucket.max,
            "sum": bucket.sum, "last_value": bucket.last_value, "wall_time": bucket.wall_time}


class HistoryStore(StoreBase):
    """The store's downsampled metric history (a mixin of :class:`storage.Store`)."""

    def _update_summary(
        self, session: Session, run_id: int, points: dict[str, list[tuple[int, float | None, float]]], *, replaced: bool
    ) -> None:
        """Fold new points (per key, ascending steps) into the run's downsampled history (:mod:`storage.summary`).

        A key whose points are not all after its last recorded step (a replayed step, a late point), or that has
        raw points but no history yet (a store written before the history existed), is rebuilt from its raw points.
        """
        keys = sorted(points)
        series = {
            row.key: row
            for row in session.execute(
                select(MetricSeriesRow.key, MetricSeriesRow.level, MetricSeriesRow.first_step, MetricSeriesRow.last_step)
                .where(MetricSeriesRow.run_id == run_id, MetricSeriesRow.key.in_(keys))
            ).all()
        }
        rebuild: list[str] = []
        rising: list[str] = []
        steady: list[str] = []
        for key in keys:
            known = series.get(key)
            first_new = points[key][0][0]
            if replaced or (known is not None and first_new <= known.last_step):
                rebuild.append(key)
            elif known is None:
                earlier = session.scalar(
                    select(MetricRow.step).where(
                        MetricRow.run_id == run_id, MetricRow.key == key, MetricRow.step < first_new
                    ).limit(1)
                )
                (rebuild if earlier is not None else steady).append(key)
            elif level_for(known.first_step, points[key][-1][0], self.summary_buckets) != known.level:
                rising.append(key)
            else:
                steady.append(key)
        self._rebuild_summary(session, run_id, rebuild)

        # Each steady key needs its last bucket only (keys logged together share it: two IN lists read them with a
        # few index lookups), a rising key all of its buckets (they merge in pairs).
        last_buckets = {k: bucket_of(series[k].last_step, series[k].level) for k in steady if k in series}
        stored: dict[str, dict[int, Bucket]] = {}
        if last_buckets:
            for row in session.execute(bucket_columns().where(
                MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(sorted(last_buckets)),
                MetricBucketRow.bucket.in_(sorted(set(last_buckets.values()))),
            )).all():
                if last_buckets[row.key] == row.bucket:
                    stored.setdefault(row.key, {})[row.bucket] = as_bucket(row)
        if rising:
            for row in session.execute(bucket_columns().where(
                MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(rising)
            )).all():
                stored.setdefault(row.key, {})[row.bucket] = as_bucket(row)

        inserts: list[dict[str, Any]] = []
        updates: list[dict[str, Any]] = []
        series_inserts: list[dict[str, Any]] = []
        series_updates: list[dict[str, Any]] = []
        for key in steady + rising:
            known = series.get(key)
            before = stored.get(key, {})
            state = None if known is None else SeriesState(known.level, known.first_step, known.last_step, dict(before))
            state, _ = fold(state, points[key], self.summary_buckets)
            new_steps = {step for step, _, _ in points[key]}
            for index, bucket in state.buckets.items():
                if key in rising or index not in before:
                    inserts.append(bucket_values(run_id, key, index, bucket))
                elif bucket.last_step in new_steps:
                    updates.append(bucket_values(run_id, key, index, bucket))
            values = {"run_id": run_id, "key": key, "level": state.level, "first_step": state.first_step,
                      "last_step": state.last_step}
            (series_inserts if known is None else series_updates).append(values)
        if rising:
            session.execute(
                delete(MetricBucketRow).where(MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(rising))
            )
        write_history(session, inserts, [by_key(values) for values in updates], series_inserts,
                      [by_key(values) for values in series_updates])

    def _rebuild_summary(self, session: Session, run_id: int, keys: Sequence[str]) -> None:
        """Recompute the downsampled history of ``keys`` from the run's raw points (a key without any loses its
        history): the same buckets :func:`storage.summary.fold` builds point by point (see its module)."""
        for key in keys:
            session.execute(
                delete(MetricBucketRow).where(MetricBucketRow.run_id == run_id, MetricBucketRow.key == key)
            )
            session.execute(
                delete(MetricSeriesRow).where(MetricSeriesRow.run_id == run_id, MetricSeriesRow.key == key)
            )
            of_key = (MetricRow.run_id == run_id, MetricRow.key == key)
            first, last = session.execute(select(func.min(MetricRow.step), func.max(MetricRow.step)).where(*of_key)).one()
            if first is None:
                continue
            level = level_for(first, last, self.summary_buckets)
            index = MetricRow.step.op(">>", return_type=MetricRow.step.type)(literal_column(str(int(level))))
            aggregates = session.execute(
                select(
                    index, func.min(MetricRow.step), func.max(MetricRow.step), func.count(MetricRow.value),
                    func.min(MetricRow.value), func.max(MetricRow.value), func.sum(MetricRow.value),
                ).where(*of_key).group_by(index)
            ).all()
            ends = [row[2] for row in aggregates]
            last_points: dict[int, tuple[float | None, float]] = {}
            for start in range(0, len(ends), 500):
                for step, value, wall_time in session.execute(
                    select(MetricRow.step, MetricRow.value, MetricRow.wall_time).where(
                        *of_key, MetricRow.step.in_(ends[start:start + 500])
                    )
                ).all():
                    last_points[step] = (value, wall_time)
            rows = [
                bucket_values(run_id, key, int(b), Bucket(int(lo), int(hi), int(n), vmin, vmax,
                                                           None if total is None else float(total),
                                                           *last_points[hi]))
                for b, lo, hi, n, vmin, vmax, total in aggregates
            ]
            session.execute(INSERT_BUCKETS, rows)
            session.execute(
                insert(MetricSeriesRow),
                [{"run_id": run_id, "key": key, "level": level, "first_step": first, "last_step": last}],
            )

    def rebuild_metric_summary(self, run_id: int) -> int:
        """Compute a run's downsampled history from its raw metric points, replacing any it has (the backfill of a
        run recorded before the history existed; :meth:`metric_summary` does it by itself, once, for a run that
        lacks one). Returns the number of keys."""
        with self._session() as session:
            keys = session.scalars(select(MetricRow.key).where(MetricRow.run_id == run_id).distinct()).all()
            stale = session.scalars(select(MetricSeriesRow.key).where(MetricSeriesRow.run_id == run_id)).all()
            self._rebuild_summary(session, run_id, sorted(set(keys) | set(stale)))
            session.commit()
            return len(keys)

    def metric_keys(self, run_id: int) -> list[str]:
        """The names of every metric a run recorded, sorted: one row per key of its downsampled history (the run's
        raw points are read only for a run recorded before the history existed, one index scan)."""
        with self.engine.connect() as conn:
            keys = conn.execute(select(MetricSeriesRow.key).where(MetricSeriesRow.run_id == run_id)).scalars().all()
            if not keys:
                keys = conn.execute(select(MetricRow.key).where(MetricRow.run_id == run_id).distinct()).scalars().all()
        return sorted(keys)

    def metric_summary(
        self,
        run_id: int,
        *,
        keys: Sequence[str] = (),
        key_patterns: Sequence[str] = (),
        max_points: int | None = None,
    ) -> list[MetricSummary]:
        """A chart's first load, independent of the run's length: the downsampled history of ``keys`` (and of keys
        matching the SQL LIKE ``key_patterns``, e.g. ``rewards/%/mean``; neither given: every key), at most
        ``max_points`` buckets per key, one :class:`MetricSummary` per key (columns), ordered by key.

        Each bucket carries the min, max and mean of its steps and its last recorded point, so the last bucket of a
        key ends on the key's true last point and the extremes stay visible (:mod:`storage.summary`, after
        TensorBoard's reservoir and W&B's sampled history). Reads at most
        :data:`storage.summary.SUMMARY_BUCKETS` rows per key. A run recorded before the history existed gets it
        computed from its raw points here, once. Later refreshes read the new raw points with
        :meth:`metrics_since`. ``max_points`` defaults to :attr:`summary_buckets`.
        """
        max_points = self.summary_buckets if max_points is None else max_points
        with self._session() as session:
            known = session.scalars(select(MetricSeriesRow.key).where(MetricSeriesRow.run_id == run_id)).all()
            if not known:
                if session.scalar(select(MetricRow.id).where(MetricRow.run_id == run_id).limit(1)) is None:
                    return []
                raw = session.scalars(select(MetricRow.key).where(MetricRow.run_id == run_id).distinct()).all()
                try:
                    self._rebuild_summary(session, run_id, sorted(raw))
                    session.commit()
                except IntegrityError:  # another process computed it at the same time
                    session.rollback()
                known = session.scalars(select(MetricSeriesRow.key).where(MetricSeriesRow.run_id == run_id)).all()
            wanted = set(keys) & set(known) if (keys or key_patterns) else set(known)
            patterns = [re.compile(_like_to_regex(p)) for p in key_patterns]
            wanted.update(k for k in known if any(p.fullmatch(k) for p in patterns))
            if not wanted:
                return []
            rows = session.execute(
                bucket_columns()
                .where(MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(sorted(wanted)))
                .order_by(MetricBucketRow.key, MetricBucketRow.bucket)
            ).all()
        out: list[MetricSummary] = []
        for key, of_key in groupby(rows, key=itemgetter(0)):
            of_key = list(of_key)
            if len(of_key) > max_points:
                merged = downsample({row.bucket: as_bucket(row) for row in of_key}, max_points).values()
                of_key = [(key, 0, b.first_step, b.last_step, b.count, b.min, b.max, b.sum, b.last_value, b.wall_time)
                          for b in merged]
            _, _, firsts, lasts, counts, mins, maxs, sums, values, walls = zip(*of_key, strict=True)
            means = tuple(t / n if n and t is not None else None for t, n in zip(sums, counts, strict=True))
            out.append(MetricSummary(key, firsts, lasts, counts, mins, maxs, means, values, walls))
        return out
