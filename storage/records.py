"""What the store hands out: frozen dataclasses (runs, datasets, metric points, groups, completions, search
results) and :class:`StoreError`. ORM rows (:mod:`storage.models`) never leave :mod:`storage.store`; callers get
these. Plain data: no SQLAlchemy session behind them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from storage.models import RunStatus


class StoreError(ValueError):
    """A request the store refuses: unknown id, duplicate name, invalid status change."""


@dataclass(frozen=True)
class DatasetInfo:
    """An uploaded dataset. ``path`` is the normalised JSONL file under the data directory; ``owner`` the login that
    added it (``None``: no login)."""

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


@dataclass(frozen=True)
class RunInfo:
    """A run as the UI and the launcher see it. Times are timezone-aware UTC.

    ``run_dir`` is the run folder (:mod:`grpo_core.run_files`; ``None`` until the run starts). ``resume_from`` is the
    checkpoint folder the run's next start loads (see :meth:`Store.requeue_run`); ``tags``
    and ``notes`` are the user's; ``gpus`` is the ``CUDA_VISIBLE_DEVICES`` its worker got (``None``: not set);
    ``provenance`` is what its worker recorded at start (``None`` before that, see :mod:`grpo_core.provenance`);
    ``owner`` is the login that launched it (``None``: launched without a login, see :mod:`grpo_core.ownership`);
    ``alerts_sent`` the keys of its webhook messages already delivered (or given up on) and ``alert_error`` the last
    failed delivery (:mod:`grpo_core.alerts`).
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
    ``total_reward`` is the weighted sum TRL used; ``advantage`` is the advantage TRL computed.
    """

    index: int
    text: str
    rewards: dict[str, float | None]
    total_reward: float | None
    advantage: float | None
    num_tokens: int | None = None
    truncated: bool = False


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


@dataclass(frozen=True)
class PromptRow:
    """A dataset row a run sampled: how many groups it has and the first and last step it was sampled at."""

    row_index: int
    num_groups: int
    first_step: int
    last_step: int


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
