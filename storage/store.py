"""The store: every read and write of runs, metrics, groups and datasets goes through :class:`Store`.

The database is the source of truth: any number of browser tabs, a restarted dashboard and the workers read and write
the same rows. ORM rows never leave this module; callers get the frozen dataclasses of :mod:`storage.records`.
Queries used by the UI are incremental (rows after the last step the page has). The engine (SQLite pragmas) and the
schema's creation and migration are in :mod:`storage.engine`.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import re
import time
import zlib
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from itertools import groupby
from operator import itemgetter
from typing import Any

from sqlalchemy import and_, bindparam, delete, func, insert, literal_column, or_, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session, selectinload, sessionmaker

from storage.api_tokens import ApiTokenQueries  # API tokens, script runs (grpo_core.integrations)
from storage.engine import create_schema, make_engine
from storage.float16 import pack_float16, unpack_float16
from storage.records import (
    CompletionRecord,
    DatasetInfo,
    GroupRecord,
    MetricPoint,
    MetricSummary,
    PromptPage,
    PromptRow,
    RunInfo,
    SearchHit,
    SearchPage,
    StoreError,
    SweepInfo,
    TokenStats,
)
from storage.step_cache import StepCache
from storage.summary import SUMMARY_BUCKETS, Bucket, SeriesState, bucket_of, downsample, fold, level_for
from storage.tables import (
    CompletionRow,
    DatasetRow,
    GroupRow,
    MetricBucketRow,
    MetricRow,
    MetricSeriesRow,
    RunRow,
    RunStatus,
    SweepRow,
    TokenStatsRow,
    utcnow,
)
from storage.types import without_nul


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


def _metric_rows(run_id: int, step: int, values: dict[str, Any], wall_time: float) -> dict[str, dict[str, Any]]:
    """The ``metrics`` rows (key -> column values) of the scalars logged at ``step``: non-numbers skipped, a 0-d
    tensor or NumPy scalar taken as its number, NaN/inf as NULL."""
    rows: dict[str, dict[str, Any]] = {}
    for k, v in values.items():
        if v is None or (isinstance(v, numbers.Real) and not isinstance(v, bool)) or hasattr(v, "item"):
            v = v.item() if hasattr(v, "item") else v
            rows[k] = {"run_id": run_id, "step": int(step), "key": k, "value": _finite(v), "wall_time": float(wall_time)}
    return rows


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
        ray_submission_id=row.ray_submission_id,
        sweep_id=row.sweep_id,
    )


def _sweep_info(row: SweepRow, run_ids: list[int]) -> SweepInfo:
    return SweepInfo(
        id=row.id,
        name=row.name,
        grid={str(k): list(v) for k, v in (row.grid or {}).items()},
        created_at=_utc(row.created_at),
        owner=row.owner,
        run_ids=run_ids,
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
        deleted_at=_utc(row.deleted_at),
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


def _keyset(after: tuple[int, int | None] | None, before: tuple[int, int] | None) -> list:
    """The conditions of a keyset page over groups ordered by ``(step, id)``: after ``after`` and before ``before``
    (both exclusive; ``after = (step, None)``: after every group of ``step``). Each is written as a range on
    ``step`` first, so the index on ``(..., step)`` bounds the scan."""
    conditions = []
    if after is not None:
        step, group_id = int(after[0]), after[1]
        if group_id is None:
            conditions.append(GroupRow.step > step)
        else:
            conditions += [GroupRow.step >= step, or_(GroupRow.step > step, GroupRow.id > int(group_id))]
    if before is not None:
        step, group_id = int(before[0]), int(before[1])
        conditions += [GroupRow.step <= step, or_(GroupRow.step < step, GroupRow.id < group_id)]
    return conditions


def _token_stats_row(completion_id: int, stats: TokenStats) -> TokenStatsRow:
    return TokenStatsRow(
        completion_id=completion_id,
        num_tokens=stats.num_tokens,
        pieces=[without_nul(p) for p in stats.pieces],  # as every text column: PostgreSQL text holds no NUL
        logprobs=pack_float16(stats.logprobs),
        kl=None if stats.kl is None else pack_float16(stats.kl),
        entropy=None if stats.entropy is None else pack_float16(stats.entropy),
    )


def _token_stats(row: TokenStatsRow) -> TokenStats:
    return TokenStats(
        pieces=[str(p) for p in row.pieces or []],
        logprobs=unpack_float16(row.logprobs),
        kl=None if row.kl is None else unpack_float16(row.kl),
        entropy=None if row.entropy is None else unpack_float16(row.entropy),
    )


def _like_to_regex(pattern: str) -> str:
    """An SQL LIKE pattern (``%`` any run, ``_`` one character) as a regular expression."""
    return "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern)


def _bucket_columns():
    """A select of the bucket columns (plain tuples, no ORM objects)."""
    return select(
        MetricBucketRow.key, MetricBucketRow.bucket, MetricBucketRow.first_step, MetricBucketRow.last_step,
        MetricBucketRow.count, MetricBucketRow.min, MetricBucketRow.max, MetricBucketRow.sum,
        MetricBucketRow.last_value, MetricBucketRow.wall_time,
    )


def _by_primary_key(table):
    """Core ``UPDATE table SET ... WHERE run_id = :pk_run_id AND key = :pk_key [AND bucket = :pk_bucket]``, run with
    one parameter dict per row (:func:`_by_key`): an executemany, without the ORM's per-row bookkeeping."""
    return table.update().where(*(column == bindparam(f"pk_{column.name}") for column in table.primary_key.columns))


_BUCKET_UPDATE = _by_primary_key(MetricBucketRow.__table__)
_SERIES_UPDATE = _by_primary_key(MetricSeriesRow.__table__)


def _by_key(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` of a summary row as parameters of its ``_by_primary_key`` update (the key columns renamed)."""
    return {(f"pk_{k}" if k in ("run_id", "key", "bucket") else k): v for k, v in values.items()}


def _bucket(row) -> Bucket:
    return Bucket(row.first_step, row.last_step, row.count, row.min, row.max, row.sum, row.last_value, row.wall_time)


def _bucket_values(run_id: int, key: str, index: int, bucket: Bucket) -> dict[str, Any]:
    return {"run_id": run_id, "key": key, "bucket": index, "first_step": bucket.first_step,
            "last_step": bucket.last_step, "count": bucket.count, "min": bucket.min, "max": bucket.max,
            "sum": bucket.sum, "last_value": bucket.last_value, "wall_time": bucket.wall_time}


# The statements of Store.record_step, built once: a step's transaction only binds values (SQLAlchemy's compiled
# cache then skips building and compiling them), and runs them as Core executemany, without ORM objects.
_GROUPS = GroupRow.__table__
_COMPLETIONS = CompletionRow.__table__
_STEP_BEAT = (
    update(RunRow.__table__).where(RunRow.__table__.c.id == bindparam("pk_id"))
    .values(heartbeat_at=bindparam("heartbeat_at"), current_step=bindparam("current_step"))
)
_CANCEL_READ = select(RunRow.__table__.c.cancel_requested).where(RunRow.__table__.c.id == bindparam("pk_id"))
_INSERT_METRICS = insert(MetricRow.__table__)
_INSERT_BUCKETS = insert(MetricBucketRow.__table__)
_INSERT_SERIES = insert(MetricSeriesRow.__table__)
_INSERT_GROUPS = insert(_GROUPS).returning(_GROUPS.c.id, sort_by_parameter_order=True)
_INSERT_COMPLETIONS = insert(_COMPLETIONS)
_INSERT_COMPLETIONS_IDS = insert(_COMPLETIONS).returning(_COMPLETIONS.c.id, sort_by_parameter_order=True)
_INSERT_TOKEN_STATS = insert(TokenStatsRow.__table__)


def _split_clause(split: str):
    """Rows of ``split`` in the ``groups`` table (``"train"`` is also NULL, as older rows have it)."""
    return GroupRow.split.is_(None) | (GroupRow.split == "train") if split == "train" else GroupRow.split == split


def _group_values(run_id: int, step: int, group: GroupRecord, split: str) -> dict[str, Any]:
    return {"run_id": run_id, "step": step, "row_index": group.row_index, "prompt": group.prompt,
            "extra": group.extra, "split": None if split == "train" else split}


def _completion_values(group_id: int, c: CompletionRecord) -> dict[str, Any]:
    return {"group_id": group_id, "index": c.index, "text": c.text,
            "rewards": {k: _finite(v) for k, v in c.rewards.items()}, "total_reward": _finite(c.total_reward),
            "advantage": _finite(c.advantage), "num_tokens": c.num_tokens, "truncated": bool(c.truncated)}


def _token_stats_values(completion_id: int, stats: TokenStats) -> dict[str, Any]:
    return {"completion_id": completion_id, "num_tokens": stats.num_tokens,
            "pieces": [without_nul(p) for p in stats.pieces],
            "logprobs": pack_float16(stats.logprobs),
            "kl": None if stats.kl is None else pack_float16(stats.kl),
            "entropy": None if stats.entropy is None else pack_float16(stats.entropy)}


class Store(ApiTokenQueries):
    """Reads and writes the dashboard's state in a SQL database.

    Args:
        url: any SQLAlchemy URL, e.g. ``sqlite:////data/grpo.db`` or ``postgresql+psycopg://user@host/db``.
        create: create missing tables (idempotent).

    Every method opens its own short transaction, so one ``Store`` may be shared by threads.
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
            _commit_dataset_name(session, name)
            return _dataset_info(row)

    def list_datasets(self, *, include_deleted: bool = False) -> list[DatasetInfo]:
        """All datasets, newest first; those marked deleted (:meth:`mark_dataset_deleted`) only with
        ``include_deleted``."""
        with self._session() as session:
            query = select(DatasetRow).order_by(DatasetRow.id.desc())
            if not include_deleted:
                query = query.where(DatasetRow.deleted_at.is_(None))
            return [_dataset_info(r) for r in session.scalars(query).all()]

    def get_dataset(self, dataset_id: int) -> DatasetInfo:
        """One dataset, also one marked deleted (the runs that used it still read it). Raises StoreError when there
        is none with that id."""
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

    def rename_dataset(self, dataset_id: int, name: str) -> DatasetInfo:
        """Give a dataset a new name (runs refer to it by id, so they follow).

        Raises:
            StoreError: no dataset with that id, or another dataset is called ``name``.
        """
        with self._session() as session:
            row = session.get(DatasetRow, dataset_id)
            if row is None:
                raise StoreError(f"no dataset with id {dataset_id}")
            row.name = name
            _commit_dataset_name(session, name)
            return _dataset_info(row)

    def mark_dataset_deleted(self, dataset_id: int) -> DatasetInfo:
        """Hide a dataset that runs still use: ``deleted_at`` set, and its name changed to ``"<name> (deleted #id)"``
        so that the name is free for a new dataset. Its row and file stay for those runs (resume, export, prompts).

        Raises:
            StoreError: no dataset with that id.
        """
        with self._session() as session:
            row = session.get(DatasetRow, dataset_id)
            if row is None:
                raise StoreError(f"no dataset with id {dataset_id}")
            if row.deleted_at is None:
                row.deleted_at = datetime.now(timezone.utc)
                row.name = f"{row.name} (deleted #{row.id})"[:200]
                session.commit()
            return _dataset_info(row)

    def delete_dataset(self, dataset_id: int) -> None:
        """Delete a dataset's row (its file is the caller's); runs that pointed at it keep their config, their
        ``dataset_id`` column is set to NULL by the foreign key."""
        with self._session() as session:
            session.execute(update(RunRow).where(RunRow.dataset_id == dataset_id).values(dataset_id=None))
            session.execute(delete(DatasetRow).where(DatasetRow.id == dataset_id))
            session.commit()

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
            infos = [_run_info(row) for row in rows]
            return _sweep_info(sweep, [info.id for info in infos]), infos

    def get_sweep(self, sweep_id: int) -> SweepInfo:
        """One sweep, with the ids of its runs still in the store. Raises StoreError when there is none."""
        with self._session() as session:
            row = session.get(SweepRow, sweep_id)
            if row is None:
                raise StoreError(f"no sweep with id {sweep_id}")
            run_ids = session.scalars(select(RunRow.id).where(RunRow.sweep_id == sweep_id).order_by(RunRow.id)).all()
            return _sweep_info(row, list(run_ids))

    def list_sweeps(self) -> list[SweepInfo]:
        """Every sweep, newest first, each with the ids of its runs still in the store (two queries)."""
        with self._session() as session:
            rows = session.scalars(select(SweepRow).order_by(SweepRow.id.desc())).all()
            members: dict[int, list[int]] = {}
            for run_id, sweep_id in session.execute(
                select(RunRow.id, RunRow.sweep_id).where(RunRow.sweep_id.is_not(None)).order_by(RunRow.id)
            ):
                members.setdefault(sweep_id, []).append(run_id)
            return [_sweep_info(row, members.get(row.id, [])) for row in rows]

    def sweep_runs(self, sweep_id: int) -> list[RunInfo]:
        """The runs of a sweep still in the store, in launch order (ascending id); empty for an unknown sweep."""
        with self._session() as session:
            rows = session.scalars(select(RunRow).where(RunRow.sweep_id == sweep_id).order_by(RunRow.id)).all()
            return [_run_info(row) for row in rows]

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
        with self.engine.connect() as connection:  # a Core read: no session, no ORM
            return bool(connection.execute(_CANCEL_READ, {"pk_id": run_id}).scalar())

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
            session.execute(delete(MetricBucketRow).where(MetricBucketRow.run_id == run_id))
            session.execute(delete(MetricSeriesRow).where(MetricSeriesRow.run_id == run_id))
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
                row = session.get(RunRow, run_id)
                if row is None:
                    raise StoreError(f"no run with id {run_id}")
                raise StoreError(f"run {run_id} is {row.status}: only a failed or cancelled run can be resumed")
            later_groups = select(GroupRow.id).where(GroupRow.run_id == run_id, GroupRow.step > from_step)
            session.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(later_groups)))
            session.execute(delete(GroupRow).where(GroupRow.run_id == run_id, GroupRow.step > from_step))
            session.execute(delete(MetricRow).where(MetricRow.run_id == run_id, MetricRow.step > from_step))
            cut = session.scalars(
                select(MetricSeriesRow.key).where(MetricSeriesRow.run_id == run_id, MetricSeriesRow.last_step > from_step)
            ).all()
            self._rebuild_summary(session, run_id, cut)  # the downsampled history follows the raw points
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

        A key already recorded for that step is overwritten, so a replayed step never duplicates rows. The run's
        downsampled history (:meth:`metric_summary`) is updated in the same transaction. Returns the number of
        scalars stored.
        """
        return self.record_metric_steps(run_id, [(step, values, wall_time)])

    def record_metric_steps(self, run_id: int, steps: Sequence[tuple[int, dict[str, Any], float]]) -> int:
        """:meth:`record_metrics` for several steps at once, ``(step, values, wall_time)`` each, in one transaction
        (a bulk import, or a writer that fell behind). Returns the number of scalars stored.

        Cost: one insert of the raw points, plus per key one read and one write of its last bucket of the
        downsampled history (:mod:`storage.summary`); when a key's level rises (each time the run doubles past
        :data:`storage.summary.SUMMARY_BUCKETS` steps) its buckets are rewritten, at most that many rows.
        """
        rows: dict[tuple[int, str], dict[str, Any]] = {}
        for step, values, wall_time in steps:
            for key, row in _metric_rows(run_id, step, values, wall_time).items():
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
        session.execute(insert(MetricRow.__table__), list(rows.values()))  # core: no ORM bookkeeping
        last = max(keys_of_step)
        session.execute(
            update(RunRow).where(RunRow.id == run_id, RunRow.current_step < last).values(current_step=last)
        )
        points: dict[str, list[tuple[int, float | None, float]]] = {}
        for row in sorted(rows.values(), key=lambda r: r["step"]):
            points.setdefault(row["key"], []).append((row["step"], row["value"], row["wall_time"]))
        self._update_summary(session, run_id, points, replaced=replaced > 0)

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

        Stores the scalars ``metrics`` logged at ``step`` (as :meth:`record_metrics`, at ``wall_time`` seconds
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
        rows = {} if metrics is None else _metric_rows(run_id, step, metrics,
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
                            GroupRow.run_id == run_id, _split_clause(split))).scalar()
                        last = -1 if last is None else int(last)
                    self._write_groups(connection, run_id, step, of_split, split, replace=step <= last)
                    new_group_steps[split] = max(last, step)
                connection.execute(_STEP_BEAT, {"pk_id": run_id, "heartbeat_at": utcnow(), "current_step": int(step)})
                cancel = bool(connection.execute(_CANCEL_READ, {"pk_id": run_id}).scalar())
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
        connection.execute(_INSERT_METRICS, list(rows.values()))
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
            (updates if last_index == index else inserts).append(_bucket_values(run_id, key, last_index, last_bucket))
            new[key] = SeriesState(state.level, state.first_step, step, {last_index: last_bucket})
        if inserts:
            connection.execute(_INSERT_BUCKETS, inserts)
        if updates:
            connection.execute(_BUCKET_UPDATE, [_by_key(values) for values in updates])
        if series_inserts:
            connection.execute(_INSERT_SERIES, series_inserts)
        if series_updates:
            connection.execute(_SERIES_UPDATE, series_updates)
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
        for row in connection.execute(_bucket_columns().where(
            MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(sorted(last)),
            MetricBucketRow.bucket.in_(sorted(set(last.values()))),
        )).all():
            if last[row.key] == row.bucket:
                of_key = by_key[row.key]
                states[row.key] = SeriesState(of_key.level, of_key.first_step, of_key.last_step,
                                              {row.bucket: _bucket(row)})
        return states

    # ----------------------------------------------------------------------------- downsampled metric history
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
            for row in session.execute(_bucket_columns().where(
                MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(sorted(last_buckets)),
                MetricBucketRow.bucket.in_(sorted(set(last_buckets.values()))),
            )).all():
                if last_buckets[row.key] == row.bucket:
                    stored.setdefault(row.key, {})[row.bucket] = _bucket(row)
        if rising:
            for row in session.execute(_bucket_columns().where(
                MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(rising)
            )).all():
                stored.setdefault(row.key, {})[row.bucket] = _bucket(row)

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
                    inserts.append(_bucket_values(run_id, key, index, bucket))
                elif bucket.last_step in new_steps:
                    updates.append(_bucket_values(run_id, key, index, bucket))
            values = {"run_id": run_id, "key": key, "level": state.level, "first_step": state.first_step,
                      "last_step": state.last_step}
            (series_inserts if known is None else series_updates).append(values)
        if rising:
            session.execute(
                delete(MetricBucketRow).where(MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(rising))
            )
        if inserts:
            session.execute(insert(MetricBucketRow.__table__), inserts)
        if updates:
            session.execute(_BUCKET_UPDATE, [_by_key(values) for values in updates])
        if series_inserts:
            session.execute(insert(MetricSeriesRow.__table__), series_inserts)
        if series_updates:
            session.execute(_SERIES_UPDATE, [_by_key(values) for values in series_updates])

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
                _bucket_values(run_id, key, int(b), Bucket(int(lo), int(hi), int(n), vmin, vmax,
                                                           None if total is None else float(total),
                                                           *last_points[hi]))
                for b, lo, hi, n, vmin, vmax, total in aggregates
            ]
            session.execute(insert(MetricBucketRow.__table__), rows)
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
                _bucket_columns()
                .where(MetricBucketRow.run_id == run_id, MetricBucketRow.key.in_(sorted(wanted)))
                .order_by(MetricBucketRow.key, MetricBucketRow.bucket)
            ).all()
        out: list[MetricSummary] = []
        for key, of_key in groupby(rows, key=itemgetter(0)):
            of_key = list(of_key)
            if len(of_key) > max_points:
                merged = downsample({row.bucket: _bucket(row) for row in of_key}, max_points).values()
                of_key = [(key, 0, b.first_step, b.last_step, b.count, b.min, b.max, b.sum, b.last_value, b.wall_time)
                          for b in merged]
            _, _, firsts, lasts, counts, mins, maxs, sums, values, walls = zip(*of_key, strict=True)
            means = tuple(t / n if n and t is not None else None for t, n in zip(sums, counts, strict=True))
            out.append(MetricSummary(key, firsts, lasts, counts, mins, maxs, means, values, walls))
        return out

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
        stored for that step and split (with their per-token values). Completions that carry
        :attr:`CompletionRecord.token_stats` get them stored too (:meth:`token_stats` reads them). Returns how many."""
        with self._session() as session:
            self._write_groups(session.connection(), run_id, step, groups, split, replace=True)
            session.commit()
        return len(groups)

    def _write_groups(self, connection, run_id: int, step: int, groups: Sequence[GroupRecord], split: str, *,
                      replace: bool) -> None:
        """Insert ``groups`` of ``step`` and ``split`` with their completions and per-token values, in
        ``connection``'s transaction (not committed), after deleting the step's groups of that split when
        ``replace`` (a step that may have been stored before). Core executemany: one insert per table, the new
        ids read back in order through ``RETURNING`` (SQLAlchemy's insertmanyvalues, SQLite and PostgreSQL)."""
        if replace:
            old = select(GroupRow.id).where(GroupRow.run_id == run_id, GroupRow.step == step, _split_clause(split))
            connection.execute(delete(CompletionRow).where(CompletionRow.group_id.in_(old)))
            connection.execute(delete(GroupRow).where(GroupRow.run_id == run_id, GroupRow.step == step,
                                                      _split_clause(split)))
        if not groups:
            return
        group_ids = connection.execute(
            _INSERT_GROUPS, [_group_values(run_id, step, group, split) for group in groups]
        ).scalars().all()
        completions = [(group_id, c) for group_id, group in zip(group_ids, groups, strict=True) for c in group.completions]
        if not completions:
            return
        values = [_completion_values(group_id, c) for group_id, c in completions]
        if not any(c.token_stats is not None for _, c in completions):
            connection.execute(_INSERT_COMPLETIONS, values)
            return
        completion_ids = connection.execute(_INSERT_COMPLETIONS_IDS, values).scalars().all()
        connection.execute(_INSERT_TOKEN_STATS, [
            _token_stats_values(completion_id, c.token_stats)
            for completion_id, (_, c) in zip(completion_ids, completions, strict=True) if c.token_stats is not None
        ])

    def record_token_stats(self, group_id: int, index: int, stats: TokenStats) -> None:
        """Store (or replace) the per-token values of completion ``index`` of group ``group_id``.

        The values are kept as float16 (:mod:`storage.float16`); :meth:`record_groups` does the same for completions
        that carry :attr:`CompletionRecord.token_stats`.

        Raises:
            StoreError: there is no such completion.
        """
        with self._session() as session:
            completion_id = session.scalar(
                select(CompletionRow.id).where(CompletionRow.group_id == group_id, CompletionRow.index == index)
            )
            if completion_id is None:
                raise StoreError(f"no completion {index} in group {group_id}")
            session.execute(delete(TokenStatsRow).where(TokenStatsRow.completion_id == completion_id))
            session.add(_token_stats_row(completion_id, stats))
            session.commit()

    def token_stats(self, group_id: int, index: int) -> TokenStats | None:
        """The per-token values of completion ``index`` of group ``group_id`` (float16 precision), or ``None`` when
        none were recorded (or there is no such completion)."""
        with self._session() as session:
            row = session.scalar(
                select(TokenStatsRow)
                .join(CompletionRow, CompletionRow.id == TokenStatsRow.completion_id)
                .where(CompletionRow.group_id == group_id, CompletionRow.index == index)
            )
            return None if row is None else _token_stats(row)

    def token_stats_indexes(self, group_id: int) -> list[int]:
        """The indexes of group ``group_id``'s completions that have per-token values, ascending."""
        with self._session() as session:
            rows = session.scalars(
                select(CompletionRow.index)
                .join(TokenStatsRow, TokenStatsRow.completion_id == CompletionRow.id)
                .where(CompletionRow.group_id == group_id)
                .order_by(CompletionRow.index)
            ).all()
            return list(rows)

    def group_steps(self, run_id: int) -> list[int]:
        """The steps of a run that have recorded groups, ascending."""
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow.step).where(GroupRow.run_id == run_id).distinct().order_by(GroupRow.step)
            ).all()
            return list(rows)

    def latest_group_steps(self, run_id: int, limit: int = 1000) -> list[int]:
        """The latest ``limit`` steps of a run that have recorded groups, newest first: a bounded read of the index
        ``ix_groups_run_step`` (backwards, stopping after ``limit`` distinct steps), whatever the run's length."""
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow.step).where(GroupRow.run_id == run_id).distinct()
                .order_by(GroupRow.step.desc()).limit(max(0, int(limit)))
            ).all()
            return list(rows)

    def nearest_group_step(self, run_id: int, step: float) -> int | None:
        """The recorded step (one with groups) closest to ``step``, the earlier one on a tie; ``None`` when the run
        has no groups. Two index lookups (the last step at or before, the first after)."""
        with self._session() as session:
            below = session.scalar(select(func.max(GroupRow.step)).where(
                GroupRow.run_id == run_id, GroupRow.step <= math.floor(step)))
            above = session.scalar(select(func.min(GroupRow.step)).where(
                GroupRow.run_id == run_id, GroupRow.step >= math.ceil(step)))
        found = [s for s in (below, above) if s is not None]
        return min(found, key=lambda s: (abs(s - step), s)) if found else None

    def best_totals(self, run_id: int, first_step: int, last_step: int) -> dict[int, list[float | None]]:
        """Per step in ``[first_step, last_step]`` that has groups, each group's best completion total reward
        (``None``: a group without one), the groups in recording order: what pass@G per step needs, in one
        aggregate over those steps' completions instead of reading every group."""
        with self._session() as session:
            rows = session.execute(
                select(GroupRow.step, GroupRow.id, func.max(CompletionRow.total_reward))
                .outerjoin(CompletionRow, CompletionRow.group_id == GroupRow.id)
                .where(GroupRow.run_id == run_id, GroupRow.step >= first_step, GroupRow.step <= last_step)
                .group_by(GroupRow.step, GroupRow.id)
                .order_by(GroupRow.step, GroupRow.id)
            ).all()
        out: dict[int, list[float | None]] = {}
        for step, _, best in rows:
            out.setdefault(int(step), []).append(None if best is None else float(best))
        return out

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

    def groups_since(
        self, run_id: int, after_step: int = -1, *, limit: int = 200, after_group: int | None = None
    ) -> list[GroupRecord]:
        """The groups recorded after ``after_step`` (step ascending, then in sampling order), at most ``limit``.

        Pass the last step seen to read only what is new (``-1``: from the start). A page cut by ``limit`` inside a
        step goes on with ``after_group``, the id of the last group read: then the groups of ``after_step`` after
        it come first (the keyset ``(step, id)``, see :meth:`groups_for_prompt`).
        """
        with self._session() as session:
            rows = session.scalars(
                select(GroupRow)
                .where(GroupRow.run_id == run_id, *_keyset((after_step, after_group), None))
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

    def groups_for_prompt(
        self,
        run_id: int,
        row_index: int,
        limit: int = 500,
        *,
        after: tuple[int, int | None] | None = None,
        before: tuple[int, int] | None = None,
    ) -> list[GroupRecord]:
        """The training groups a run sampled for one dataset row, in step order (then in recording order): at most
        ``limit``, the earliest ones, or with ``before`` the latest ones. Eval groups are left out: their
        ``row_index`` counts the rows of the eval dataset, another prompt.

        ``row_index`` is the row's index in the run's dataset (:attr:`GroupRecord.row_index`); a row sampled
        twice in one step gives two groups of that step, in the order they were recorded. ``after`` and ``before``
        are keyset cursors ``(step, group id)`` of a group already shown (exclusive; ``(step, None)`` in ``after``:
        every group of ``step`` seen), so a late page costs what the first does: one range of the index
        ``ix_groups_run_row`` (``run_id, row_index, step``), never a skip over the earlier groups.
        """
        query = (
            select(GroupRow)
            .where(GroupRow.run_id == run_id, GroupRow.row_index == row_index, _split_clause("train"),
                   *_keyset(after, before))
            .options(selectinload(GroupRow.completions))
        )
        if before is not None and after is None:  # the page ending just before the cursor: read it backwards
            query = query.order_by(GroupRow.step.desc(), GroupRow.id.desc())
        else:
            query = query.order_by(GroupRow.step, GroupRow.id)
        with self._session() as session:
            rows = session.scalars(query.limit(max(0, int(limit)))).all()
        records = [_group_record(r) for r in rows]
        return records[::-1] if before is not None and after is None else records

    def prompt_page(
        self,
        run_id: int,
        row_index: int,
        *,
        limit: int = 50,
        after: tuple[int, int | None] | None = None,
        before: tuple[int, int] | None = None,
        from_step: int | None = None,
        last: bool = False,
    ) -> PromptPage:
        """One page of a dataset row's groups across steps (the Inspect tab's "one prompt across steps"): at most
        ``limit`` groups in step order, with how many the row has in all and where the page starts.

        Which page: the first one; the one after the cursor ``after`` or before the cursor ``before``
        (:meth:`groups_for_prompt`'s keyset cursors, the last or first group shown); the one starting at the first
        group at or after ``from_step``; or with ``last`` the one ending on the row's latest group. A page past the
        end is empty (``offset == total``). Cost: the page's groups plus two counts over the row's entries of the
        index ``ix_groups_run_row``, whatever the page (the row's groups, not the run's).
        """
        limit = max(1, int(limit))
        if from_step is not None:
            after = (int(from_step) - 1, None)
        if last:
            after, before = None, (2**31 - 1, 2**31 - 1)  # past every (step, id): the largest INTEGER
        groups = self.groups_for_prompt(run_id, row_index, limit, after=after, before=before)
        of_row = (GroupRow.run_id == run_id, GroupRow.row_index == row_index, _split_clause("train"))
        with self._session() as session:
            total = session.scalar(select(func.count()).select_from(GroupRow).where(*of_row)) or 0
            if groups:
                # Two counts, not one with the keyset's OR: the steps before the page's first step are counted from
                # the index alone (PostgreSQL's index lacks the id: the OR would read every earlier group's row).
                first = groups[0]
                offset = (session.scalar(
                    select(func.count()).select_from(GroupRow).where(*of_row, GroupRow.step < first.step)
                ) or 0) + (session.scalar(
                    select(func.count()).select_from(GroupRow).where(
                        *of_row, GroupRow.step == first.step, GroupRow.id < first.id
                    )
                ) or 0)
            else:
                offset = 0 if before is not None and after is None else total
        return PromptPage(row_index=int(row_index), total=int(total), offset=int(offset), limit=limit, groups=groups)

    def prompt_rows(self, run_id: int, limit: int = 500, *, recent: int | None = None) -> list[PromptRow]:
        """The dataset rows a run sampled for training, the most often sampled first (then by row index); at most
        ``limit``.

        ``recent`` counts only the run's latest ``recent`` groups (by step; the whole steps of the boundary): a
        bounded read for a long run, where counting every group grows with its length.
        """
        count = func.count(GroupRow.id)
        conditions = [GroupRow.run_id == run_id, _split_clause("train")]
        with self._session() as session:
            if recent is not None:
                boundary = session.scalar(
                    select(GroupRow.step).where(GroupRow.run_id == run_id).order_by(GroupRow.step.desc())
                    .offset(max(0, int(recent) - 1)).limit(1)
                )
                if boundary is not None:
                    conditions.append(GroupRow.step >= boundary)
            # ``row_index + 0`` for a window: grouping by the bare column, SQLite walks the index on (run_id,
            # row_index, step) in row order across the whole run (~140 ms at 2.5M groups) instead of seeking each
            # row's recent steps in it (~8 ms); PostgreSQL plans both the same.
            row = GroupRow.row_index + 0 if len(conditions) > 2 else GroupRow.row_index
            rows = session.execute(
                select(row, count, func.min(GroupRow.step), func.max(GroupRow.step))
                .where(*conditions)
                .group_by(row)
                .order_by(count.desc(), row)
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
