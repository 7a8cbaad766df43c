"""The ``sweeps`` table: a sweep and its runs queued in one transaction, listed with their runs, and the final and
best value of a metric across runs (the sweep's comparison)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, func, select

from storage.base import StoreBase
from storage.records import RunInfo, RunStatus, StoreError, SweepInfo
from storage.tables import MetricRow, RunRow, SweepRow


class SweepStore(StoreBase):
    """The store's sweeps (a mixin of :class:`storage.Store`)."""

    def create_sweep(
        self, *, name: str, grid: dict[str, list[Any]], runs: Sequence[dict[str, Any]], owner: str | None = None
    ) -> tuple[SweepInfo, list[RunInfo]]:
        """Insert a sweep and its runs, all ``queued``, in one transaction: either every run is queued or none is.

        Args:
            name: the sweep's name.
            grid: run config field -> its values (JSON-able), as the sweep was written.
            runs: one mapping per point, the keyword arguments of :meth:`create_run` but ``owner`` (``name``,
                ``config``, ``dataset_id``, ``max_steps``). Each run gets ``sweep_id`` and the tag ``sweep:<id>``.
            owner: the login that launched it (``None``: no login).

        Returns:
            The sweep and its runs, in the order of ``runs``.

        Raises:
            StoreError: ``runs`` is empty.
        """
        if not runs:
            raise StoreError("a sweep needs at least one run")
        with self._session() as session:
            sweep = SweepRow(name=name, grid=dict(grid), owner=owner)
            session.add(sweep)
            session.flush()  # the sweep's id, for its runs' column and tag
            rows = [
                RunRow(name=run["name"], config=run["config"], dataset_id=run.get("dataset_id"),
                       max_steps=run["max_steps"], status=RunStatus.QUEUED.value, owner=owner, sweep_id=sweep.id,
                       tags=[f"sweep:{sweep.id}"])
                for run in runs
            ]
            session.add_all(rows)
            session.commit()
            infos = [row.to_record() for row in rows]
            return sweep.to_record([info.id for info in infos]), infos

    def get_sweep(self, sweep_id: int) -> SweepInfo:
        """One sweep, with the ids of its runs still in the store. Raises StoreError when there is none."""
        with self._session() as session:
            row = session.get(SweepRow, sweep_id)
            if row is None:
                raise StoreError(f"no sweep with id {sweep_id}")
            run_ids = session.scalars(select(RunRow.id).where(RunRow.sweep_id == sweep_id).order_by(RunRow.id)).all()
            return row.to_record(list(run_ids))

    def list_sweeps(self) -> list[SweepInfo]:
        """Every sweep, newest first, each with the ids of its runs still in the store (two queries)."""
        with self._session() as session:
            rows = session.scalars(select(SweepRow).order_by(SweepRow.id.desc())).all()
            members: dict[int, list[int]] = {}
            for run_id, sweep_id in session.execute(
                select(RunRow.id, RunRow.sweep_id).where(RunRow.sweep_id.is_not(None)).order_by(RunRow.id)
            ):
                members.setdefault(sweep_id, []).append(run_id)
            return [row.to_record(members.get(row.id, [])) for row in rows]

    def sweep_runs(self, sweep_id: int) -> list[RunInfo]:
        """The runs of a sweep still in the store, in launch order (ascending id); empty for an unknown sweep."""
        with self._session() as session:
            rows = session.scalars(select(RunRow).where(RunRow.sweep_id == sweep_id).order_by(RunRow.id)).all()
            return [row.to_record() for row in rows]

    def final_and_best(self, run_ids: Sequence[int], key: str) -> dict[int, tuple[float | None, float | None]]:
        """``run id -> (final, best)`` of metric ``key``: its value at the run's last recorded step, and its largest
        value over all steps (NULLs, i.e. NaN, skipped). Runs without that metric are left out. Two aggregate
        queries, whatever the number of steps."""
        ids = [int(i) for i in run_ids]
        if not ids:
            return {}
        with self._session() as session:
            best = dict(session.execute(
                select(MetricRow.run_id, func.max(MetricRow.value))
                .where(MetricRow.run_id.in_(ids), MetricRow.key == key)
                .group_by(MetricRow.run_id)
            ).all())
            last_step = (
                select(MetricRow.run_id, func.max(MetricRow.step).label("step"))
                .where(MetricRow.run_id.in_(ids), MetricRow.key == key)
                .group_by(MetricRow.run_id)
                .subquery()
            )
            final = dict(session.execute(
                select(MetricRow.run_id, MetricRow.value).join(
                    last_step, and_(MetricRow.run_id == last_step.c.run_id, MetricRow.step == last_step.c.step)
                ).where(MetricRow.key == key)
            ).all())
        return {run_id: (final.get(run_id), best.get(run_id)) for run_id in ids if run_id in best or run_id in final}
