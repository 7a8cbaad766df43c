"""The store: every read and write of runs, metrics, groups and datasets goes through :class:`Store`.

The database is the source of truth: any number of browser tabs, a restarted dashboard and the workers read and write
the same rows. ORM rows never leave this module; callers get the frozen dataclasses of :mod:`storage.records`.
Queries used by the UI are incremental (rows after the last step the page has). The engine (SQLite pragmas) and the
schema's creation and migration are in :mod:`storage.engine`.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import Any

from sqlalchemy import and_, delete, func, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from storage.engine import create_schema, make_engine
from storage.models import (
    CompletionRow,
    DatasetRow,
    GroupRow,
    MetricRow,
    RunRow,
    RunStatus,
    utcnow,
)
from storage.records import (
    CompletionRecord,
    DatasetInfo,
    GroupRecord,
    MetricPoint,
    PromptRow,
    RunInfo,
    SearchHit,
    SearchPage,
    StoreError,
)


def _like_pattern(text: str) -> str:
    """A ``LIKE ... ESCAPE '\\'`` pattern matching ``text`` anywhere, its ``%``, ``_`` and ``\\`` taken literally."""
    escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def _utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC time: SQLite drops the timezone, PostgreSQL answers in the session's time zone."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def _finite(value: Any) -> float | None:
    """``value`` as a float, or ``None`` for NaN, infinities and non-numbers (JSON and SQL have no NaN)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _run_info(row: RunRow) -> RunInfo:
    return RunInfo(
        id=row.id,
        name=row.name,
        status=RunStatus(row.status),
        config=dict(row.config or {}),
        dataset_id=row.dataset_id,
        created_at=_utc(row.created_at),
        started_at=_utc(row.started_at),
        finished_at=_utc(row.finished_at),
        heartbeat_at=_utc(row.heartbeat_at),
        worker_pid=row.worker_pid,
        run_dir=row.run_dir,
        log_path=row.log_path,
        error=row.error,
        current_step=row.current_step or 0,
        max_steps=row.max_steps or 0,
        phase=row.phase,
        cancel_requested=bool(row.cancel_requested),
        resume_from=row.resume_from,
        notes=row.notes or "",
        tags=[str(t) for t in (row.tags or [])],
        gpus=row.gpus,
        provenance=dict(row.provenance) if row.provenance else None,
        owner=row.owner,
        alerts_sent=[str(k) for k in (row.alerts_sent or [])],
        alert_error=row.alert_error,
    )


def _dataset_info(row: DatasetRow) -> DatasetInfo:
    return DatasetInfo(
        id=row.id,
        name=row.name,
        source_name=row.source_name,
        format=row.format,
        num_rows=row.num_rows,
        columns=list(row.columns or []),
        prompt_kind=row.prompt_kind,
        path=row.path,
        created_at=_utc(row.created_at),
        owner=row.owner,
    )


def _group_record(row: GroupRow) -> GroupRecord:
    return GroupRecord(
        id=row.id,
        step=row.step,
        row_index=row.row_index,
        prompt=row.prompt,
        extra=dict(row.extra or {}),
        split=row.split or "train",
        completions=[
            CompletionRecord(
                index=c.index,
                text=c.text,
                rewards=dict(c.rewards or {}),
                total_reward=c.total_reward,
                advantage=c.advantage,
                num_tokens=c.num_tokens,
                truncated=bool(c.truncated),
            )
            for c in row.completions
        ],
    )


def _like_to_regex(pattern: str) -> str:
    """An SQL LIKE pattern (``%`` any run, ``_`` one character) as a regular expression."""
    return "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)


class Store:
    """Reads and writes the dashboard's state in a SQL database.

    Args:
        url: any SQLAlchemy URL, e.g. ``sqlite:////data/grpo.db`` or ``postgresql+psycopg://user@host/db``.
        create: create missing tables (idempotent).

    Every method opens its own short transaction, so one ``Store`` may be shared by threads.
    """

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

    # ----------------------------------------------------------------------------------------------- datasets
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
            try:
                session.commit()
            except IntegrityError:
                session.rollback()
                raise StoreError(f"a dataset named {name!r} already exists") from None
            return _dataset_info(row)

    def list_datasets(self) -> list[DatasetInfo]:
        """All datasets, newest first."""
        with self._session() as session:
            rows = session.scalars(select(DatasetRow).order_by(DatasetRow.id.desc())).all()
            return [_dataset_info(r) for r in rows]

    def get_dataset(self, dataset_id: int) -> DatasetInfo:
        """One dataset. Raises StoreError when there is none with that id."""
        with self._session() as session:
            row = session.get(DatasetRow, dataset_id)
            if row is None:
                raise StoreError(f"no dataset with id {dataset_id}")
            return _dataset_info(row)

    def find_dataset(self, name: str) -> DatasetInfo | None:
        """The dataset named ``name``, or None."""
        with self._session() as session:
            row = session.scalars(select(DatasetRow).where(DatasetRow.name == name)).first()
            return _dataset_info(row) if row else None

    # --------------------------------------------------------------------------------------------------- runs
    def create_run(
        self, *, name: str, config: dict[str, Any], dataset_id: int | None, max_steps: int, owner: str | None = None
    ) -> RunInfo:
        """Insert a run in status ``queued``, launched by login ``owner`` (``None``: no login)."""
        with self._session() as session:
            row = RunRow(
                name=name,
                config=config,
                dataset_id=dataset_id,
                max_steps=max_steps,
                status=RunStatus.QUEUED.value,
                owner=owner,
            )
            session.add(row)
            session.commit()
            return _run_info(row)

    def catalog_version(self) -> tuple[int, ...]:
        """A cheap fingerprint of the dataset and run lists, for pages that poll for changes.

        Returns ``(datasets, max dataset id, runs, max run id, runs per status...)`` (counts in
        :class:`RunStatus` order): it changes when a dataset or run is added or deleted or a run changes status,
        and not on metrics or groups. Three aggregate queries, no rows read.
        """
        with self._session() as session:
            datasets = session.execute(select(func.count(DatasetRow.id), func.max(DatasetRow.id))).one()
            runs = session.execute(select(func.count(RunRow.id), func.max(RunRow.id))).one()
            by_status = dict(session.execute(select(RunRow.status, func.count(RunRow.id)).group_by(RunRow.status)).all())
        return (datasets[0], datasets[1] or 0, runs[0], runs[1] or 0,
                *(by_status.get(status.value, 0) for status in RunStatus))

    def get_run(self, run_id: int) -> RunInfo:
        """One run. Raises StoreError when there is none with that id."""
        with self._session() as session:
            row = session.get(RunRow, run_id)
            if row is None:
                raise StoreError(f"no run with id {run_id}")
            return _run_info(row)

    def list_runs(self, statuses: Iterable[RunStatus] | None = None) -> list[RunInfo]:
        """Runs, newest first, optionally only those in ``statuses``."""
        query = select(RunRow).order_by(RunRow.id.desc())
        if statuses is not None:
            query = query.where(RunRow.status.in_([RunStatus(s).value for s in statuses]))
        with self._session() as session:
            return [_run_info(r) for r in session.scalars(query).all()]

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
        with self._session() as session:
            return bool(session.scalar(select(RunRow.cancel_requested).where(RunRow.id == run_id)))

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
            row = session.get(RunRow, run_id)
            if row is None:
                raise StoreError(f"no run with id {run_id}")
            return _run_info(row)

    def delete_run(self, run_id: int) -> None:
        """Delete a run with its metrics, groups and completions (files are the caller's)."""
        with self._session() as session:
            group_ids = select(GroupRow.id).where(GroupRow.run_id == run_id)
            session.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(group_ids)))
            session.execute(delete(GroupRow).where(GroupRow.run_id == run_id))
            session.execute(delete(MetricRow).where(MetricRow.run_id == run_id))
            session.execute(delete(RunRow).where(RunRow.id == run_id))
            session.commit()

    def requeue_run(self, run_id: int, *, resume_from: str | None, from_step: int) -> RunInfo:
        """Move a failed or cancelled run back to ``queued``, as the same run, for the launcher to start again.

        ``resume_from`` is the checkpoint folder the worker loads (``None``: train again from the start) and
        ``from_step`` the step it holds (0 without one). In the same transaction the metrics and groups of later
        steps are deleted: they were recorded after that checkpoint and will be trained and recorded again, so each
        step ends up recorded exactly once. The previous attempt's error, cancel flag, pid, phase, GPUs and times
        are cleared.

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
                    phase=None,
                    gpus=None,
                    started_at=None,
                    finished_at=None,
                    heartbeat_at=None,
                )
            )
            if result.rowcount == 0:
                session.rollback()
                row = session.get(RunRow, run_id)
                if row is None:
                    raise StoreError(f"no run with id {run_id}")
                raise StoreError(f"run {run_id} is {row.status}: only a failed or cancelled run can be resumed")
            later_groups = select(GroupRow.id).where(GroupRow.run_id == run_id, GroupRow.step > from_step)
            session.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(later_groups)))
            session.execute(delete(GroupRow).where(GroupRow.run_id == run_id, GroupRow.step > from_step))
            session.execute(delete(MetricRow).where(MetricRow.run_id == run_id, MetricRow.step > from_step))
            session.commit()
            return _run_info(session.get(RunRow, run_id))

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
            row = session.get(RunRow, run_id)
            if row is None:
                raise StoreError(f"no run with id {run_id}")
            return _run_info(row)

    # ------------------------------------------------------------------------------------------------ metrics
    def record_metrics(self, run_id: int, step: int, values: dict[str, Any], wall_time: float) -> int:
        """Store the scalars logged at ``step``; non-numbers are skipped, NaN/inf stored as NULL.

        A key already recorded for that step is overwritten, so a replayed step never duplicates rows.
        Returns the number of scalars stored.
        """
        items = {
            k: (v.item() if hasattr(v, "item") else v)
            for k, v in values.items()
            if v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool)) or hasattr(v, "item")
        }
        if not items:
            return 0
        with self._session() as session:
            session.execute(
                delete(MetricRow).where(
                    MetricRow.run_id == run_id, MetricRow.step == step, MetricRow.key.in_(list(items))
                )
            )
            session.add_all(
                MetricRow(run_id=run_id, step=step, key=k, value=_finite(v), wall_time=wall_time)
                for k, v in items.items()
            )
            session.execute(
                update(RunRow).where(RunRow.id == run_id, RunRow.current_step < step).values(current_step=step)
            )
            session.commit()
        return len(items)

    def metrics_since(self, run_id: int, after_step: int = -1, keys: Sequence[str] | None = None) -> list[MetricPoint]:
        """Metric points with ``step > after_step``, ordered by step then key (incremental chart refresh)."""
        # Plain column tuples, not ORM objects: about 6x faster for a full chart (benchmarks/bench_store_scale.py).
        query = select(MetricRow.step, MetricRow.key, MetricRow.value, MetricRow.wall_time).where(
            MetricRow.run_id == run_id, MetricRow.step > after_step
        )
        if keys is not None:
            query = query.where(MetricRow.key.in_(list(keys)))
        with self._session() as session:
            rows = session.execute(query.order_by(MetricRow.step, MetricRow.key)).all()
            return [MetricPoint(r.step, r.key, r.value, r.wall_time) for r in rows]

    def metrics_overview(
        self,
        run_id: int,
        *,
        keys: Sequence[str] = (),
        key_patterns: Sequence[str] = (),
        max_points: int = 1000,
    ) -> list[MetricPoint]:
        """A chart's first load: the points of ``keys`` (and of keys matching the SQL LIKE ``key_patterns``, e.g.
        ``rewards/%/mean``) at no more than about ``max_points`` evenly strided steps, always including the last.

        Like TensorBoard's down-sampling, this keeps the first view of a 20,000-step run fast; later refreshes read
        every new step with :meth:`metrics_since`. Ordered by step then key.
        """
        with self._session() as session:
            last = session.scalar(select(func.max(MetricRow.step)).where(MetricRow.run_id == run_id))
            if last is None:
                return []
            stride = max(1, -(-int(last) // max(1, max_points)))
            wanted = set(keys)
            if key_patterns:
                # Resolve the patterns against the keys of the last step (a few rows), so that the main query is a
                # plain `key IN (...)` read in the order of the (run_id, key, step) covering index.
                recent = session.scalars(
                    select(MetricRow.key).where(MetricRow.run_id == run_id, MetricRow.step == last)
                ).all()
                patterns = [re.compile(_like_to_regex(p)) for p in key_patterns]
                matched = {k for k in recent if any(p.fullmatch(k) for p in patterns)}
                if not matched:  # the last step logged other keys only (e.g. TRL's end-of-training summary)
                    every = session.scalars(
                        select(MetricRow.key).where(MetricRow.run_id == run_id).distinct()
                    ).all()
                    matched = {k for k in every if any(p.fullmatch(k) for p in patterns)}
                wanted.update(matched)
            query = select(MetricRow.step, MetricRow.key, MetricRow.value, MetricRow.wall_time).where(
                MetricRow.run_id == run_id
            )
            if wanted:
                query = query.where(MetricRow.key.in_(sorted(wanted)))
            if stride > 1:
                query = query.where(or_(MetricRow.step % stride == 0, MetricRow.step == last))
            rows = session.execute(query.order_by(MetricRow.key, MetricRow.step)).all()
            points = [MetricPoint(r.step, r.key, r.value, r.wall_time) for r in rows]
            points.sort(key=lambda p: (p.step, p.key))
            return points

    def metric_keys(self, run_id: int) -> list[str]:
        """The distinct metric names recorded for a run, sorted."""
        with self._session() as session:
            rows = session.scalars(select(MetricRow.key).where(MetricRow.run_id == run_id).distinct()).all()
            return sorted(rows)

    # ------------------------------------------------------------------------------------------------- groups
    def record_groups(self, run_id: int, step: int, groups: Sequence[GroupRecord], *, split: str = "train") -> int:
        """Store the sampled groups of ``step`` of one ``split`` (``"train"`` or ``"eval"``), replacing any already
        stored for that step and split. Returns how many."""
        same_split = GroupRow.split.is_(None) | (GroupRow.split == "train") if split == "train" else GroupRow.split == split
        with self._session() as session:
            old = select(GroupRow.id).where(GroupRow.run_id == run_id, GroupRow.step == step, same_split)
            session.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(old)))
            session.execute(delete(GroupRow).where(GroupRow.run_id == run_id, GroupRow.step == step, same_split))
            for group in groups:
                row = GroupRow(
                    run_id=run_id,
                    step=step,
                    row_index=group.row_index,
                    prompt=group.prompt,
                    extra=group.extra,
                    split=None if split == "train" else split,
                )
                row.completions = [
                    CompletionRow(
                        index=c.index,
                        text=c.text,
                        rewards={k: _finite(v) for k, v in c.rewards.items()},
                        total_reward=_finite(c.total_reward),
                        advantage=_finite(c.advantage),
                        num_tokens=c.num_tokens,
                        truncated=bool(c.truncated),
                    )
                    for c in group.completions
                ]
                session.add(row)
            session.commit()
        return len(groups)

    def group_steps(self, run_id: int) -> list[int]:
        """The steps of a run that have recorded groups, ascending."""
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow.step).where(GroupRow.run_id == run_id).distinct().order_by(GroupRow.step)
            ).all()
            return list(rows)

    def groups_at(self, run_id: int, step: int) -> list[GroupRecord]:
        """The groups of one step with their completions, in the order TRL sampled them."""
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow)
                .where(GroupRow.run_id == run_id, GroupRow.step == step)
                .options(selectinload(GroupRow.completions))
                .order_by(GroupRow.id)
            ).all()
            return [_group_record(r) for r in rows]

    def groups_since(self, run_id: int, after_step: int = -1, *, limit: int = 200) -> list[GroupRecord]:
        """The groups recorded after ``after_step`` (step ascending, then in sampling order), at most ``limit``.

        Pass the last step seen to read only what is new (``-1``: from the start).
        """
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow)
                .where(GroupRow.run_id == run_id, GroupRow.step > after_step)
                .options(selectinload(GroupRow.completions))
                .order_by(GroupRow.step, GroupRow.id)
                .limit(max(0, limit))
            ).all()
            return [_group_record(r) for r in rows]

    def count_groups(self, run_id: int) -> int:
        """How many groups a run has recorded."""
        with self._session() as session:
            return session.scalar(select(func.count(GroupRow.id)).where(GroupRow.run_id == run_id)) or 0

    # --------------------------------------------------------------------------------------- inspecting groups
    def get_group(self, group_id: int) -> GroupRecord:
        """One group with its completions. Raises StoreError when there is none with that id."""
        with self._session() as session:
            row = session.get(GroupRow, group_id, options=[selectinload(GroupRow.completions)])
            if row is None:
                raise StoreError(f"no group with id {group_id}")
            return _group_record(row)

    def groups_for_prompt(self, run_id: int, row_index: int, limit: int = 500) -> list[GroupRecord]:
        """The groups a run sampled for one dataset row, in step order (at most ``limit``, the earliest).

        ``row_index`` is the row's index in the run's dataset (:attr:`GroupRecord.row_index`); a row sampled
        twice in one step gives two groups of that step, in the order they were recorded.
        """
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow)
                .where(GroupRow.run_id == run_id, GroupRow.row_index == row_index)
                .options(selectinload(GroupRow.completions))
                .order_by(GroupRow.step, GroupRow.id)
                .limit(limit)
            ).all()
            return [_group_record(r) for r in rows]

    def prompt_rows(self, run_id: int, limit: int = 500) -> list[PromptRow]:
        """The dataset rows a run sampled, the most often sampled first (then by row index); at most ``limit``."""
        count = func.count(GroupRow.id)
        with self._session() as session:
            rows = session.execute(
                select(GroupRow.row_index, count, func.min(GroupRow.step), func.max(GroupRow.step))
                .where(GroupRow.run_id == run_id)
                .group_by(GroupRow.row_index)
                .order_by(count.desc(), GroupRow.row_index)
                .limit(limit)
            ).all()
            return [PromptRow(int(i), int(n), int(first), int(last)) for i, n, first, last in rows]

    def recent_groups(self, run_id: int, limit: int = 8) -> list[GroupRecord]:
        """The ``limit`` most recently sampled groups of a run, newest step first (the run doctor's sample)."""
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow)
                .where(GroupRow.run_id == run_id)
                .options(selectinload(GroupRow.completions))
                .order_by(GroupRow.step.desc(), GroupRow.id)
                .limit(limit)
            ).all()
            return [_group_record(r) for r in rows]

    def search_groups(self, run_id: int, text: str, *, limit: int = 10, offset: int = 0) -> SearchPage:
        """The groups of a run whose prompt or any completion contains ``text``, in step order, one page of them.

        Matching is SQL ``LIKE`` (case-insensitive for ASCII letters; ``%`` and ``_`` in ``text`` are literal).
        Blank ``text`` matches nothing. ``total`` counts every matching group, so the caller can page with
        ``offset``.
        """
        limit, offset = max(1, int(limit)), max(0, int(offset))
        if not text.strip():
            return SearchPage(text=text, total=0, offset=offset, limit=limit, hits=[])
        pattern = _like_pattern(text)
        completion_matches = (
            select(CompletionRow.group_id)
            .join(GroupRow, CompletionRow.group_id == GroupRow.id)
            .where(GroupRow.run_id == run_id, CompletionRow.text.ilike(pattern, escape="\\"))
        )
        condition = and_(
            GroupRow.run_id == run_id,
            or_(GroupRow.prompt.ilike(pattern, escape="\\"), GroupRow.id.in_(completion_matches)),
        )
        with self._session() as session:
            total = session.scalar(select(func.count(GroupRow.id)).where(condition)) or 0
            ids = session.scalars(
                select(GroupRow.id).where(condition).order_by(GroupRow.step, GroupRow.id).limit(limit).offset(offset)
            ).all()
            rows = session.scalars(
                select(GroupRow)
                .where(GroupRow.id.in_(ids))
                .options(selectinload(GroupRow.completions))
                .order_by(GroupRow.step, GroupRow.id)
            ).all()
            matched: dict[int, list[int]] = {}
            for group_id, index in session.execute(
                select(CompletionRow.group_id, CompletionRow.index)
                .where(CompletionRow.group_id.in_(ids), CompletionRow.text.ilike(pattern, escape="\\"))
                .order_by(CompletionRow.group_id, CompletionRow.index)
            ):
                matched.setdefault(group_id, []).append(index)
            prompt_ids = set(
                session.scalars(
                    select(GroupRow.id).where(GroupRow.id.in_(ids), GroupRow.prompt.ilike(pattern, escape="\\"))
                ).all()
            )
            hits = [
                SearchHit(
                    group=_group_record(r), prompt_matched=r.id in prompt_ids, completion_indexes=matched.get(r.id, [])
                )
                for r in rows
            ]
        return SearchPage(text=text, total=total, offset=offset, limit=limit, hits=hits)
