"""What the store hands out: frozen dataclasses (runs, datasets, metric points, groups, completions, search
results), :class:`RunStatus` and :class:`StoreError`. ORM rows (:mod:`storage.tables`) never leave the store's
modules (each row converts itself with its ``to_record``); callers get these. Plain data: no SQLAlchemy session behind
them.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any


class RunStatus(str, enum.Enum):
    """Life cycle of a run: ``queued -> running -> completed | failed | cancelled`` (the ``runs.status`` column, kept
    to these values by a CHECK constraint, see :class:`storage.tables.RunRow`)."""

    QUEUED = "queued"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def is_final(self) -> bool:
        """True for completed, failed and cancelled."""
        return self in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED)


class StoreError(ValueError):
    """A request the store refuses: unknown id, duplicate name, invalid status change."""


@dataclass(frozen=True)
class DatasetInfo:
    """An uploaded dataset. ``path`` is the normalised JSONL file under the data directory; ``owner`` the login that
    added it (``None``: no login); ``deleted_at`` when it was deleted while runs still used it (hidden from the lists,
    kept for those runs; see :func:`grpo_core.datasets.library.delete_dataset`)."""

    id: int
    name: str
    source_name: str
    format: str
    num_rows: int
    columns: list[str]
    prompt_kind: str
    path: str
    created_at: datetime
    owner: str | None = None
    deleted_at: datetime | None = None


@dataclass(frozen=True)
class RunInfo:
    """A run as the UI and the launcher see it. Times are timezone-aware UTC.

    ``run_dir`` is the run folder (:mod:`grpo_core.runs.files`; ``None`` until the run starts). ``resume_from`` is the
    checkpoint folder the run's next start loads (see :meth:`Store.requeue_run`); ``tags``
    and ``notes`` are the user's; ``gpus`` is the ``CUDA_VISIBLE_DEVICES`` its worker got (``None``: not set);
    ``provenance`` is what its worker recorded at start (``None`` before that, see :mod:`grpo_core.runs.provenance`);
    ``owner`` is the login that launched it (``None``: launched without a login, see :mod:`grpo_core.access.ownership`);
    ``alerts_sent`` the keys of its webhook messages already delivered (or given up on) and ``alert_error`` the last
    failed delivery (:mod:`grpo_core.alerts.webhooks`). ``ray_submission_id`` is the Ray job training it (``None``: a local
    worker process; see :mod:`grpo_core.training.executors`); ``sweep_id`` the sweep it is a point of (``None``: launched on
    its own, see :class:`SweepInfo`).
    """

    id: int
    name: str
    status: RunStatus
    config: dict[str, Any]
    dataset_id: int | None
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    heartbeat_at: datetime | None
    worker_pid: int | None
    run_dir: str | None
    log_path: str | None
    error: str | None
    current_step: int
    max_steps: int
    phase: str | None
    cancel_requested: bool
    resume_from: str | None = None
    notes: str = ""
    tags: list[str] = field(default_factory=list)
    gpus: str | None = None
    provenance: dict[str, Any] | None = None
    owner: str | None = None
    alerts_sent: list[str] = field(default_factory=list)
    alert_error: str | None = None
    ray_submission_id: str | None = None
    sweep_id: int | None = None


@dataclass(frozen=True)
class SweepInfo:
    """A sweep: the runs launched together, one per point of ``grid`` (run config field -> its values, in the order
    given; :mod:`grpo_core.submit.sweeps`). ``run_ids`` are its runs still in the store, ascending; ``owner`` the login that
    launched it (``None``: no login)."""

    id: int
    name: str
    grid: dict[str, list[Any]]
    created_at: datetime
    owner: str | None = None
    run_ids: list[int] = field(default_factory=list)


@dataclass(frozen=True)
class MetricPoint:
    """One scalar: metric ``key`` (TRL's name, e.g. ``reward`` or ``rewards/numeric_answer/mean``) at ``step``.

    ``value`` is ``None`` where TRL logged NaN or nothing; ``wall_time`` is seconds since the epoch.
    """

    step: int
    key: str
    value: float | None
    wall_time: float


@dataclass(frozen=True)
class TokenStats:
    """Per-token values of one completion, from TRL's own loss computation of the step it was trained at.

    ``pieces`` are the completion's tokens decoded one by one (``"".join(pieces)`` is the completion with its special
    tokens; a character split over several tokens sits on the first of them, the others are ``""``);
    ``logprobs`` the log-probability of each token under the policy (nats, <= 0); ``kl`` each token's KL to the
    reference model (TRL's k3 estimator ``exp(ref - logp) - (ref - logp) - 1``, >= 0; ``None`` when ``beta`` = 0: TRL
    then computes no reference log-probabilities); ``entropy`` the policy's entropy at each position (nats, >= 0;
    ``None`` where TRL computed none). Every list has one entry per completion token. The store keeps the values as
    float16 (about three significant digits).

    Raises:
        ValueError: the lists differ in length.
    """

    pieces: list[str]
    logprobs: list[float]
    kl: list[float] | None = None
    entropy: list[float] | None = None

    def __post_init__(self) -> None:
        lengths = {len(self.pieces), len(self.logprobs)}
        lengths |= {len(values) for values in (self.kl, self.entropy) if values is not None}
        if len(lengths) > 1:
            raise ValueError(
                f"token stats need one value per token: {len(self.pieces)} pieces, {len(self.logprobs)} logprobs, "
                f"{None if self.kl is None else len(self.kl)} kl, "
                f"{None if self.entropy is None else len(self.entropy)} entropy"
            )

    @property
    def num_tokens(self) -> int:
        """How many tokens the completion has."""
        return len(self.pieces)


@dataclass(frozen=True)
class MetricSummary:
    """One metric ``key`` of a run, downsampled (:meth:`Store.metric_summary`, :mod:`storage.summary`): one entry
    per bucket of steps, in step order, as columns of equal length.

    Bucket ``i`` covers the recorded steps ``first_steps[i]..last_steps[i]``; ``mins``/``maxs``/``means`` are over
    its ``counts[i]`` non-``None`` values (``None`` without any); ``last_values[i]`` and ``wall_times[i]`` (seconds
    since the epoch) are those of step ``last_steps[i]``, a point really recorded, so the last entry is the key's true
    last point.
    """

    key: str
    first_steps: tuple[int, ...]
    last_steps: tuple[int, ...]
    counts: tuple[int, ...]
    mins: tuple[float | None, ...]
    maxs: tuple[float | None, ...]
    means: tuple[float | None, ...]
    last_values: tuple[float | None, ...]
    wall_times: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.last_steps)


@dataclass(frozen=True)
class CompletionRecord:
    """One completion of a group, as recorded from TRL.

    ``rewards`` maps each reward function name to its reward (``None`` where the rule did not apply);
    ``total_reward`` is the weighted sum TRL used; ``advantage`` is the advantage TRL computed. ``token_stats``, when
    given to :meth:`Store.record_groups`, is stored with the completion; records read back leave it ``None`` (read
    it with :meth:`Store.token_stats`).

    A multi-turn completion (a rollout with tool calls) also has ``turns``: its assistant texts, tool calls, tool
    results and environment rewards in order, and ``tool_mask``: which of its tokens TRL trained on, as run-length
    spans ``[[1|0, length], ...]`` (0: a tool result's tokens); both are plain bounded JSON, shaped and limited by
    :mod:`grpo_core.tools.turns`, and ``None`` for a single-turn completion. Its ``text`` is then the final
    assistant turn's text (what an answer rule judges).
    """

    index: int
    text: str
    rewards: dict[str, float | None]
    total_reward: float | None
    advantage: float | None
    num_tokens: int | None = None
    truncated: bool = False
    token_stats: TokenStats | None = None
    turns: list[dict[str, Any]] | None = None
    tool_mask: list[list[int]] | None = None


@dataclass(frozen=True)
class GroupRecord:
    """A sampled group: one prompt and its G completions at one step.

    ``row_index`` is the prompt's 0-based row in the run's dataset (-1 when unknown; in the eval dataset for an eval
    group of a run with ``eval_dataset_id``); ``prompt`` its display text; ``split`` ``"train"`` for a group TRL
    trained on, ``"eval"`` for a held-out group scored at an evaluation (no gradient step).
    """

    step: int
    row_index: int
    prompt: str
    completions: list[CompletionRecord]
    extra: dict[str, Any] = field(default_factory=dict)
    id: int | None = None
    split: str = "train"
    #: PNG bytes of the prompt's images by stored name (``<sha256>.png``), set only when a training script records
    #: them (:mod:`storage.run_images` keeps them once per run); a group read back from the store has none here.
    images: dict[str, bytes] = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True)
class PromptRow:
    """A dataset row a run sampled: how many groups it has and the first and last step it was sampled at."""

    row_index: int
    num_groups: int
    first_step: int
    last_step: int


@dataclass(frozen=True)
class PromptPage:
    """One page of a dataset row's groups across steps (:meth:`Store.prompt_page`): ``groups`` in step order (then
    in recording order), the ``offset``-th to the ``offset + len(groups) - 1``-th (0-based) of the row's ``total``
    groups in the run."""

    row_index: int
    total: int
    offset: int
    limit: int
    groups: list[GroupRecord]

    @property
    def has_earlier(self) -> bool:
        """Whether the row has groups before this page."""
        return self.offset > 0

    @property
    def has_later(self) -> bool:
        """Whether the row has groups after this page."""
        return self.offset + len(self.groups) < self.total


@dataclass(frozen=True)
class SearchHit:
    """A group whose prompt or completions contain the searched text.

    ``completion_indexes`` are the :attr:`CompletionRecord.index` of the matching completions, ascending.
    """

    group: GroupRecord
    prompt_matched: bool
    completion_indexes: list[int]


@dataclass(frozen=True)
class SearchPage:
    """One page of :meth:`Store.search_groups`: ``total`` matching groups in all, ``hits`` from ``offset`` on."""

    text: str
    total: int
    offset: int
    limit: int
    hits: list[SearchHit]


# --- rescorings (the reward workbench, storage/rescorings.py) -----------------------------------------------------

RESCORING_STATUSES = ("running", "completed", "failed", "cancelled")
"""A rescoring's life cycle: ``running -> completed | failed | cancelled`` (a CHECK constraint keeps the column so)."""


@dataclass(frozen=True)
class RescoringInfo:
    """A rescoring of a run's recorded groups with another reward composition (never over what the run recorded).

    Attributes:
        request: the request as given (:class:`grpo_core.rescore.request.RescoreRequest` fields).
        done, total: completions scored so far, of ``total``.
        result: when completed, the comparison (:func:`grpo_core.rescore.compare.compare_scorings`'s dict).
        error: why it failed.
    """

    id: int
    run_id: int
    status: str
    request: dict[str, Any]
    created_at: datetime
    finished_at: datetime | None
    owner: str | None
    done: int
    total: int
    cancel_requested: bool
    result: dict[str, Any] | None
    error: str | None
