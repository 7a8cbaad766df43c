"""SQLAlchemy 2 ORM tables of the store.

Layout follows MLflow's tracking store: runs with a status constrained in the schema, metrics in long format
``(run, step, key, value, wall_time)`` keyed by TRL's metric names, and the sampled groups of each logged step with
their completions. This module imports no torch.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    UniqueConstraint,
)
from sqlalchemy import inspect as orm_state
from sqlalchemy.engine import Engine
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from storage.float16 import pack_float16, unpack_float16
from storage.records import (
    CompletionRecord,
    DatasetInfo,
    GroupRecord,
    RescoringInfo,
    RunInfo,
    RunStatus,
    SweepInfo,
    TokenStats,
)

# Every String, Text and JSON column of the store stores the same values on SQLite and PostgreSQL (NUL characters,
# NaN inside JSON, over-long strings): these are SQLAlchemy's types with that bind processing, see storage/types.py.
from storage.types import BoundedString as String
from storage.types import SafeJSON as JSON
from storage.types import SafeText as Text
from storage.types import as_list, as_mapping, without_nul


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(timezone.utc)


def as_utc(value: datetime | None) -> datetime | None:
    """``value`` as an aware UTC time: SQLite drops the timezone, PostgreSQL answers in the session's time zone."""
    if value is None:
        return None
    if value.tzinfo is None:
        return value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


_STATUS_VALUES = ", ".join(f"'{s.value}'" for s in RunStatus)


class Base(DeclarativeBase):
    """Declarative base; JSON columns map ``dict``/``list`` values."""

    type_annotation_map = {dict[str, Any]: JSON, list[Any]: JSON}


class DatasetRow(Base):
    """An uploaded prompt dataset. Its normalised rows live in a JSONL file under the data directory."""

    __tablename__ = "datasets"
    # sqlite_autoincrement: a deleted dataset's id is never given to a new one (a page's list names datasets by id).
    __table_args__ = ({"sqlite_autoincrement": True},)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    source_name: Mapped[str] = mapped_column(String(300))
    format: Mapped[str] = mapped_column(String(16))
    num_rows: Mapped[int] = mapped_column(Integer)
    columns: Mapped[list[Any]] = mapped_column(JSON)
    prompt_kind: Mapped[str] = mapped_column(String(16))
    path: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the login that added it; None: no login
    # Set when deleted while runs still use it: hidden from the lists, its file kept for those runs.
    deleted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    def to_record(self) -> DatasetInfo:
        """This row as the plain record callers get (times aware UTC)."""
        return DatasetInfo(
            id=self.id,
            name=self.name,
            source_name=self.source_name,
            format=self.format,
            num_rows=self.num_rows,
            columns=list(self.columns or []),
            prompt_kind=self.prompt_kind,
            path=self.path,
            created_at=as_utc(self.created_at),
            owner=self.owner,
            deleted_at=as_utc(self.deleted_at),
        )


class RunRow(Base):
    """One training run: its config, status and process bookkeeping."""

    __tablename__ = "runs"
    # sqlite_autoincrement: a deleted run's id is never given to a new run (scripts and exports name runs by id).
    __table_args__ = (
        CheckConstraint(f"status IN ({_STATUS_VALUES})", name="ck_runs_status"),
        {"sqlite_autoincrement": True},
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    status: Mapped[str] = mapped_column(String(16), default=RunStatus.QUEUED.value, index=True)
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    dataset_id: Mapped[int | None] = mapped_column(ForeignKey("datasets.id", ondelete="SET NULL"), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    worker_pid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    run_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    log_path: Mapped[str | None] = mapped_column(Text, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    current_step: Mapped[int] = mapped_column(Integer, default=0)
    max_steps: Mapped[int] = mapped_column(Integer, default=0)
    phase: Mapped[str | None] = mapped_column(String(200), nullable=True)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # Added after the first release: nullable so that storage.migrations can add them to an existing store.
    resume_from: Mapped[str | None] = mapped_column(Text, nullable=True)  # checkpoint folder the next start loads
    notes: Mapped[str | None] = mapped_column(Text, nullable=True)
    tags: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    gpus: Mapped[str | None] = mapped_column(String(200), nullable=True)  # CUDA_VISIBLE_DEVICES the worker got
    # What reproduces the run (dataset sha256, model identity, library versions, device): grpo_core.runs.provenance.
    provenance: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the login that launched it; None: no login
    # Webhook alerts (grpo_core.alerts.webhooks): the keys of the messages delivered or given up on, and the last failure.
    alerts_sent: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    alert_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # The Ray job training the run (grpo_core.training.executors.RayExecutor); None for a local worker process.
    ray_submission_id: Mapped[str | None] = mapped_column(String(200), nullable=True)
    # The sweep this run is a point of (sweeps.id; None: launched on its own). No foreign key and no index: a column
    # added to an existing store by storage.migrations gets neither, so a new store does not either.
    sweep_id: Mapped[int | None] = mapped_column(Integer, nullable=True)

    def to_record(self) -> RunInfo:
        """This row as the plain record callers get (times aware UTC, lists and dicts copied, NULLs as defaults)."""
        return RunInfo(
            id=self.id,
            name=self.name,
            status=RunStatus(self.status),
            config=as_mapping(self.config),
            dataset_id=self.dataset_id,
            created_at=as_utc(self.created_at),
            started_at=as_utc(self.started_at),
            finished_at=as_utc(self.finished_at),
            heartbeat_at=as_utc(self.heartbeat_at),
            worker_pid=self.worker_pid,
            run_dir=self.run_dir,
            log_path=self.log_path,
            error=self.error,
            current_step=self.current_step or 0,
            max_steps=self.max_steps or 0,
            phase=self.phase,
            cancel_requested=bool(self.cancel_requested),
            resume_from=self.resume_from,
            notes=self.notes or "",
            tags=[str(t) for t in as_list(self.tags)],
            gpus=self.gpus,
            provenance=as_mapping(self.provenance) if self.provenance else None,
            owner=self.owner,
            alerts_sent=[str(k) for k in (self.alerts_sent or [])],
            alert_error=self.alert_error,
            ray_submission_id=self.ray_submission_id,
            sweep_id=self.sweep_id,
        )


class SweepRow(Base):
    """A sweep: one run per point of a grid of run config fields (grpo_core.submit.sweeps), launched together."""

    __tablename__ = "sweeps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    grid: Mapped[dict[str, Any]] = mapped_column(JSON)  # field -> list of values, in the order given
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)  # the login that launched it

    def to_record(self, run_ids: list[int]) -> SweepInfo:
        """This row as the plain record callers get, with ``run_ids``, its runs still in the store (the runs table
        holds the link: ``runs.sweep_id``)."""
        return SweepInfo(
            id=self.id,
            name=self.name,
            grid={str(k): list(v) for k, v in (self.grid or {}).items()},
            created_at=as_utc(self.created_at),
            owner=self.owner,
            run_ids=run_ids,
        )


class MetricRow(Base):
    """One scalar of one step, long format: ``(run_id, step, key) -> value``."""

    __tablename__ = "metrics"
    __table_args__ = (
        UniqueConstraint("run_id", "step", "key", name="uq_metrics_run_step_key"),
        Index("ix_metrics_run_step", "run_id", "step"),
        # Covering index for one key's series (the full chart, ORDER BY key, step): read from the index alone,
        # ~25 ms for 8 keys x 1,000 points out of 20,000 steps (benchmarks/bench_store_scale.py).
        Index("ix_metrics_run_key_step", "run_id", "key", "step", "value", "wall_time"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    key: Mapped[str] = mapped_column(String(200))
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    wall_time: Mapped[float] = mapped_column(Float)


class MetricSeriesRow(Base):
    """One key of a run's downsampled metric history (:mod:`storage.summary`): the level of its buckets
    (``2**level`` steps each) and its first and last recorded step."""

    __tablename__ = "metric_series"
    __table_args__ = {"sqlite_with_rowid": False}  # rows stored in primary-key order: one key's row is one lookup

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    level: Mapped[int] = mapped_column(Integer)
    first_step: Mapped[int] = mapped_column(Integer)
    last_step: Mapped[int] = mapped_column(Integer)


class MetricBucketRow(Base):
    """One bucket of a key's downsampled history: steps ``[bucket * 2**level, (bucket + 1) * 2**level)`` with the
    min, max, sum and count of their values and the value and time of the last step (:mod:`storage.summary`)."""

    __tablename__ = "metric_buckets"
    # On SQLite the rows are stored in primary-key order (a key's buckets are adjacent: one range read, no lookups).
    __table_args__ = {"sqlite_with_rowid": False}

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    key: Mapped[str] = mapped_column(String(200), primary_key=True)
    bucket: Mapped[int] = mapped_column(Integer, primary_key=True)
    first_step: Mapped[int] = mapped_column(Integer)
    last_step: Mapped[int] = mapped_column(Integer)
    count: Mapped[int] = mapped_column(Integer)
    min: Mapped[float | None] = mapped_column(Float, nullable=True)
    max: Mapped[float | None] = mapped_column(Float, nullable=True)
    sum: Mapped[float | None] = mapped_column(Float, nullable=True)
    last_value: Mapped[float | None] = mapped_column(Float, nullable=True)
    wall_time: Mapped[float] = mapped_column(Float)


class GroupRow(Base):
    """One sampled group: a prompt of one step and its G completions."""

    __tablename__ = "groups"
    __table_args__ = (
        Index("ix_groups_run_step", "run_id", "step"),
        # One prompt across steps (Store.groups_for_prompt, Store.prompt_rows).
        Index("ix_groups_run_row", "run_id", "row_index", "step"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    row_index: Mapped[int] = mapped_column(Integer)
    prompt: Mapped[str] = mapped_column(Text)
    extra: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    split: Mapped[str | None] = mapped_column(String(8), nullable=True)  # "eval"; None (older rows) = "train"

    completions: Mapped[list[CompletionRow]] = relationship(
        back_populates="group", cascade="all, delete-orphan", order_by="CompletionRow.index"
    )

    def to_record(self) -> GroupRecord:
        """This row and its completions as the plain record callers get (load ``completions`` eagerly, e.g. with
        ``selectinload``, when converting many)."""
        return GroupRecord(
            id=self.id,
            step=self.step,
            row_index=self.row_index,
            prompt=self.prompt,
            extra=as_mapping(self.extra),
            split=self.split or "train",
            completions=[c.to_record() for c in self.completions],
        )


class CompletionRow(Base):
    """One completion of a group with its per-rule rewards, total reward and the advantage TRL computed."""

    __tablename__ = "completions"
    __table_args__ = (Index("ix_completions_group", "group_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"))
    index: Mapped[int] = mapped_column(Integer)
    text: Mapped[str] = mapped_column(Text)
    rewards: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)
    total_reward: Mapped[float | None] = mapped_column(Float, nullable=True)
    advantage: Mapped[float | None] = mapped_column(Float, nullable=True)
    num_tokens: Mapped[int | None] = mapped_column(Integer, nullable=True)
    truncated: Mapped[bool] = mapped_column(Boolean, default=False)
    # A multi-turn completion (a rollout with tool calls): its turns and TRL's tool mask as run-length spans
    # (grpo_core.tools.turns); None for a single-turn completion and for rows written before they were recorded.
    turns: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)
    tool_mask: Mapped[list[Any] | None] = mapped_column(JSON, nullable=True)

    group: Mapped[GroupRow] = relationship(back_populates="completions")

    def to_record(self) -> CompletionRecord:
        """This row as the plain record callers get (``token_stats`` left ``None``: read them with
        :meth:`storage.Store.token_stats`; ``turns`` and ``tool_mask`` ``None`` when the query left them unread,
        :func:`storage.groups.with_completions` with ``turns=False``)."""
        unread = orm_state(self).unloaded
        return CompletionRecord(
            index=self.index,
            text=self.text,
            rewards=dict(self.rewards) if isinstance(self.rewards, dict) else {},
            total_reward=self.total_reward,
            advantage=self.advantage,
            num_tokens=self.num_tokens,
            truncated=bool(self.truncated),
            turns=None if "turns" in unread or not isinstance(self.turns, list) else self.turns,
            tool_mask=None if "tool_mask" in unread or not isinstance(self.tool_mask, list) else self.tool_mask,
        )


class TokenStatsRow(Base):
    """Per-token values of one completion (:class:`storage.records.TokenStats`): the decoded token pieces and
    float16 arrays (:mod:`storage.float16`, 2 bytes a token) of the policy's log-probabilities, the KL to the
    reference (``NULL`` when ``beta`` = 0) and the entropy. Deleted with its completion (``ON DELETE CASCADE``)."""

    __tablename__ = "completion_tokens"

    completion_id: Mapped[int] = mapped_column(ForeignKey("completions.id", ondelete="CASCADE"), primary_key=True)
    num_tokens: Mapped[int] = mapped_column(Integer)
    pieces: Mapped[list[Any]] = mapped_column(JSON)
    logprobs: Mapped[bytes] = mapped_column(LargeBinary)
    kl: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)
    entropy: Mapped[bytes | None] = mapped_column(LargeBinary, nullable=True)

    @staticmethod
    def values_of(completion_id: int, stats: TokenStats) -> dict[str, Any]:
        """The column values storing ``stats`` for completion ``completion_id`` (for a Core insert): the lists packed
        as float16, NUL characters taken out of the pieces (as every text column: PostgreSQL text holds none)."""
        return {"completion_id": completion_id, "num_tokens": stats.num_tokens,
                "pieces": [without_nul(p) for p in stats.pieces],
                "logprobs": pack_float16(stats.logprobs),
                "kl": None if stats.kl is None else pack_float16(stats.kl),
                "entropy": None if stats.entropy is None else pack_float16(stats.entropy)}

    def to_record(self) -> TokenStats:
        """This row as the plain record callers get (float16 precision)."""
        return TokenStats(
            pieces=[str(p) for p in self.pieces or []],
            logprobs=unpack_float16(self.logprobs),
            kl=None if self.kl is None else unpack_float16(self.kl),
            entropy=None if self.entropy is None else unpack_float16(self.entropy),
        )


# --- API tokens and runs recorded from users' own scripts (grpo_core.integrations) ------------------------------
class ApiTokenRow(Base):
    """A login's API token for recording runs over HTTP (:mod:`storage.api_tokens`): only its sha256 is stored."""

    __tablename__ = "api_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    login: Mapped[str] = mapped_column(String(200), index=True)
    name: Mapped[str] = mapped_column(String(200))
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)  # None: never


class IngestCursorRow(Base):
    """A run recorded over HTTP: the token that created it, the sender's key for it (so that a retried create
    finds it) and the sequence number of the last batch applied (so that a resent batch is applied once)."""

    __tablename__ = "ingest_cursors"
    __table_args__ = (UniqueConstraint("token_id", "client_key", name="uq_ingest_cursors_client_key"),)

    run_id: Mapped[int] = mapped_column(Integer, primary_key=True)  # runs.id; no foreign key, like sweep_id
    token_id: Mapped[int] = mapped_column(Integer)
    client_key: Mapped[str] = mapped_column(String(64))
    last_seq: Mapped[int] = mapped_column(Integer, default=0)
class RunImageRow(Base):
    """A prompt image a training script recorded with its groups (:mod:`storage.run_images`): PNG bytes under their
    SHA-256 name, stored once per run however many groups show it; deleted with its run."""

    __tablename__ = "run_images"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(80), primary_key=True)  # "<sha256>.png"
    data: Mapped[bytes] = mapped_column(LargeBinary)


# --- end of API tokens --------------------------------------------------------------------------------------------


def create_missing_indexes(engine: Engine) -> None:
    """Create every index of the models that the database lacks (idempotent).

    ``Base.metadata.create_all`` skips tables that exist, and with them any index added to the models later; this
    adds those to a store created by an earlier version.
    """
    for table in Base.metadata.sorted_tables:
        for index in table.indexes:
            index.create(engine, checkfirst=True)


# --- rescorings (the reward workbench, storage/rescorings.py) -----------------------------------------------------

class RescoringRow(Base):
    """A rescoring of a run's recorded groups (:class:`storage.records.RescoringInfo`); deleted with its run."""

    __tablename__ = "rescorings"
    __table_args__ = (
        CheckConstraint("status IN ('running', 'completed', 'failed', 'cancelled')", name="ck_rescorings_status"),
        Index("ix_rescorings_run", "run_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    status: Mapped[str] = mapped_column(String(16), default="running")
    request: Mapped[dict[str, Any]] = mapped_column(JSON)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    owner: Mapped[str | None] = mapped_column(String(200), nullable=True)
    done: Mapped[int] = mapped_column(Integer, default=0)
    total: Mapped[int] = mapped_column(Integer, default=0)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    result: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)

    def to_record(self) -> RescoringInfo:
        """This row as the plain record callers get."""
        return RescoringInfo(
            id=self.id, run_id=self.run_id, status=self.status, request=dict(self.request or {}),
            created_at=as_utc(self.created_at), finished_at=as_utc(self.finished_at), owner=self.owner,
            done=self.done or 0, total=self.total or 0, cancel_requested=bool(self.cancel_requested),
            result=self.result, error=self.error,
        )
