"""The ``metrics`` table: scalars in long format ``(run, step, key) -> value``, keyed by TRL's metric names; written
with the run's downsampled history (:mod:`storage.history`) in the same transaction, read incrementally (points after
the last step a page has)."""

from __future__ import annotations

import numbers
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, insert, select, update
from sqlalchemy.orm import Session

from storage.base import finite
from storage.history import HistoryStore
from storage.records import MetricPoint
from storage.tables import MetricRow, MetricSeriesRow, RunRow

#: Insert raw points, built once (Core executemany, no ORM objects).
INSERT_METRICS = insert(MetricRow.__table__)


def step_rows(run_id: int, step: int, values: dict[str, Any], wall_time: float) -> dict[str, dict[str, Any]]:
    """The ``metrics`` rows (key -> column values) of the scalars logged at ``step``: non-numbers skipped, a 0-d
    tensor or NumPy scalar taken as its number, NaN/inf as NULL."""
    rows: dict[str, dict[str, Any]] = {}
    for k, v in values.items():
        if v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool)) or hasattr(v, "item"):
            v = v.item() if hasattr(v, "item") else v
            rows[k] = {"run_id": run_id, "step": int(step), "key": k, "value": finite(v), "wall_time": float(wall_time)}
    return rows


class MetricStore(HistoryStore):
    """The store's metric points (a mixin of :class:`storage.Store`)."""

    def record_metric_steps(self, run_id: int, steps: Sequence[tuple[int, dict[str, Any], float]]) -> int:
        """Store the scalars logged at several steps, ``(step, values, wall_time)`` each (``wall_time`` in seconds
        since the epoch), in one transaction (a bulk import, or a writer that fell behind); non-numbers are skipped,
        NaN/inf stored as NULL. A key already recorded for that step is overwritten, so a replayed step never
        duplicates rows. The run's downsampled history (:meth:`metric_summary`) is updated in the same transaction.
        Returns the number of scalars stored.

        Cost: one insert of the raw points, plus per key one read and one write of its last bucket of the
        downsampled history (:mod:`storage.summary`); when a key's level rises (each time the run doubles past
        :data:`storage.summary.SUMMARY_BUCKETS` steps) its buckets are rewritten, at most that many rows.
        """
        rows: dict[tuple[int, str], dict[str, Any]] = {}
        for step, values, wall_time in steps:
            for key, row in step_rows(run_id, step, values, wall_time).items():
                rows[(int(step), key)] = row
        if not rows:
            return 0
        with self._session() as session:
            self._write_metric_rows(session, run_id, rows)
            session.commit()
        return len(rows)

    def _write_metric_rows(self, session: Session, run_id: int, rows: dict[tuple[int, str], dict[str, Any]]) -> None:
        """The raw points ``rows`` ((step, key) -> row values) replacing any stored at the same step and key, the
        run's ``current_step`` raised to their last step, and the downsampled history updated (or rebuilt, for
        replaced points), in ``session``'s transaction (not committed)."""
        keys_of_step: dict[int, set[str]] = {}
        for step, key in rows:
            keys_of_step.setdefault(step, set()).add(key)
        steps_of_keys: dict[frozenset[str], list[int]] = {}
        for step, keys in keys_of_step.items():
            steps_of_keys.setdefault(frozenset(keys), []).append(step)
        replaced = 0
        for keys, same in steps_of_keys.items():
            replaced += session.execute(
                delete(MetricRow).where(
                    MetricRow.run_id == run_id,
                    MetricRow.step.in_(sorted(same)) if len(same) > 1 else MetricRow.step == same[0],
                    MetricRow.key.in_(sorted(keys)),
                )
            ).rowcount
        session.execute(INSERT_METRICS, list(rows.values()))  # core: no ORM bookkeeping
        last = max(keys_of_step)
        session.execute(
            update(RunRow).where(RunRow.id == run_id, RunRow.current_step < last).values(current_step=last)
        )
        points: dict[str, list[tuple[int, float | None, float]]] = {}
        for row in sorted(rows.values(), key=lambda r: r["step"]):
            points.setdefault(row["key"], []).append((row["step"], row["value"], row["wall_time"]))
        self._update_summary(session, run_id, points, replaced=replaced > 0)

    def metrics_since(self, run_id: int, after_step: int = -1, keys: Sequence[str] | None = None) -> list[MetricPoint]:
        """Metric points with ``step > after_step``, ordered by step then key (incremental chart refresh)."""
        return [MetricPoint(step, key, value, wall_time)
                for step, key, value, wall_time in self.metric_rows(run_id, after_step, keys)]

    def metric_rows(
        self, run_id: int, after_step: int = -1, keys: Sequence[str] | None = None
    ) -> list[tuple[int, str, float | None, float]]:
        """:meth:`metrics_since` as plain ``(step, key, value, wall_time)`` tuples, for a reader of many points (the
        run doctor's first read: 1,000 steps x 40 keys), which a :class:`MetricPoint` per point would slow down
        several-fold."""
        # Plain column tuples, not ORM objects: about 6x faster for a full chart (benchmarks/bench_store_scale.py).
        query = select(MetricRow.step, MetricRow.key, MetricRow.value, MetricRow.wall_time).where(
            MetricRow.run_id == run_id, MetricRow.step > after_step
        )
        if keys is not None:
            query = query.where(MetricRow.key.in_(list(keys)))
        # A plain connection, not an ORM session (no ORM row processing), and rows as tuples rather than read by
        # attribute name: about half the cost of the doctor's first read of 40,000 points.
        with self.engine.connect() as conn:
            return conn.execute(query.order_by(MetricRow.step, MetricRow.key)).all()

    def metric_nan_steps(
        self, run_id: int, after_step: int = -1, exclude: Sequence[str] = ()
    ) -> dict[str, tuple[list[int], bool]]:
        """Where a run's metrics were NaN (stored as NULL) at steps ``> after_step``, for the keys not in ``exclude``:
        ``key -> (its NaN steps ascending, whether it also has a number there)``; keys never NaN are left out.

        What the run doctor's NaN check needs of the keys whose values it does not read: the index on
        (run, key, step, value) answers it without a row per point reaching Python. The keys come from the run's
        downsampled history (one row per key), or, for a run recorded before the history, from the steps read.
        """
        skip = set(exclude)
        with self.engine.connect() as conn:
            keys = conn.execute(select(MetricSeriesRow.key).where(MetricSeriesRow.run_id == run_id)).scalars().all()
            if not keys:
                keys = conn.execute(
                    select(MetricRow.key).where(MetricRow.run_id == run_id, MetricRow.step > after_step).distinct()
                ).scalars().all()
            keys = [key for key in keys if key not in skip]
            if not keys:
                return {}
            window = (MetricRow.run_id == run_id, MetricRow.key.in_(keys), MetricRow.step > after_step)
            nulls = conn.execute(
                select(MetricRow.key, MetricRow.step).where(*window, MetricRow.value.is_(None))
                .order_by(MetricRow.key, MetricRow.step)
            ).all()
            steps: dict[str, list[int]] = {}
            for key, step in nulls:
                steps.setdefault(key, []).append(step)
            if not steps:
                return {}
            numbered = set(conn.execute(
                select(MetricRow.key).where(MetricRow.run_id == run_id, MetricRow.key.in_(list(steps)),
                                            MetricRow.step > after_step, MetricRow.value.is_not(None)).distinct()
            ).scalars())
        return {key: (of_key, key in numbered) for key, of_key in steps.items()}
