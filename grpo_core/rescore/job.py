"""The web half of a rescoring: pick a run's recorded groups, score them with another reward composition in a child
process (:mod:`grpo_core.rescore.worker`), compare, and store the result as a rescoring of the run
(:mod:`storage.rescorings`), never over what the run recorded. Imports no torch, and never the user's code.

One owner for the browser (:func:`start_rescoring`, then poll the store), the public API and ``grpo-dashboard
rescore`` (:func:`rescore_run`: the same, waited for), so all three give the same numbers. The request is untrusted:
its composition is checked against the caller's boundary (plugin targets, reward model folders:
:meth:`grpo_core.access.boundary.Boundary.check_rewards`) before anything is imported, a ``dataset_path`` run's file
against its dataset roots, and its size against :mod:`grpo_core.rescore.request`'s bounds. The child runs plugins
(as the plugin check does) and code rules (in the sandbox, as in training); it is killed with its process group on
cancel or past :data:`RESCORE_TIMEOUT_S` (the child-job protocol, :mod:`grpo_core.child_jobs.request`). Users' regular expressions are bounded per group in the child
(:data:`grpo_core.rescore.worker.GROUP_REGEX_BUDGET_S`). Rescorings share :data:`grpo_core.child_jobs.slots.RESCORE_SLOTS`:
a few at once, one a login, so one login's rescoring never holds every slot.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.access.boundary import OPEN, Boundary, BoundaryError
from grpo_core.child_jobs.request import ChildJob, RunningJob, start_child
from grpo_core.child_jobs.slots import RESCORE_SLOTS, JobSlots, SlotsBusy
from grpo_core.datasets.rows import ROW_INDEX_COLUMN, load_rows
from grpo_core.rescore.compare import compare_scorings
from grpo_core.rescore.request import (
    MAX_GROUPS,
    RescoreError,
    RescoreRequest,
    check_size,
    sample_groups,
    select_steps,
)
from grpo_core.rewards.trajectory_probe import has_tools, recipe_tools
from grpo_core.tools.turns import messages_from_turns
from storage import GroupRecord, Store, StoreError
from storage.records import RescoringInfo

log = logging.getLogger(__name__)

RESCORE_TIMEOUT_S = 3600.0
"""Wall-clock limit of one rescoring's child process, in seconds."""

POLL_S = 0.25
"""How often the job reads the child's progress and the cancel flag."""

RESCORE_JOB = ChildJob(
    module="grpo_core.rescore.worker",
    error=RescoreError,
    failed="the rescoring child failed",
    timed_out="stopped after {timeout_s} s",
)
"""The rescoring's child job (:mod:`grpo_core.child_jobs.request`); its messages are the stored rescoring's error."""

MAX_SAMPLED_FROM = 100_000
"""The most groups a ``sample`` is drawn from (the first of the range)."""

PROBE_ROWS = 8
"""Dataset rows the reward-hacking probe runs on under the new rules."""


@dataclass(frozen=True)
class PreparedRescoring:
    """A checked request with what its child needs: the groups, their rows, the run's advantage settings."""

    request: RescoreRequest
    specs: list[dict[str, Any]]
    groups: list[dict[str, Any]]
    rows: dict[int, dict[str, Any]]
    chat: bool
    scale_rewards: str
    aggregation: str
    warnings: list[str]
    tools: tuple[str, ...] = ()
    """The run's tool names (:func:`grpo_core.rewards.trajectory_probe.recipe_tools`)."""
    agentic: bool = False
    """The run gives the model tools (or an environment): the hacking probe tries trajectories too."""

    @property
    def num_completions(self) -> int:
        return sum(len(g["completions"]) for g in self.groups)


def group_as_dict(group: GroupRecord) -> dict[str, Any]:
    """A recorded group as :func:`grpo_core.rescore.compare.compare_scorings` reads it."""
    return {"id": group.id, "step": group.step, "row_index": group.row_index, "prompt": group.prompt,
            "completions": [{"index": c.index, "text": c.text, "rewards": dict(c.rewards),
                             "total_reward": c.total_reward, "advantage": c.advantage, "turns": c.turns}
                            for c in group.completions]}


def prepare_rescoring(store: Store, request: RescoreRequest, *, boundary: Boundary = OPEN) -> PreparedRescoring:
    """Check ``request`` for the caller and read what it scores.

    Raises:
        RescoreError: no such run, no recorded groups in the range, a selection over the bounds, a composition the
            boundary refuses (``BoundaryError``'s message).
    """
    try:
        run = store.get_run(request.run_id)
    except StoreError:
        raise RescoreError(f"no run with id {request.run_id}") from None
    try:
        specs = [s.model_dump(mode="json") for s in boundary.check_rewards(request.rewards)]
        config = run.config or {}
        if boundary.enforced and config.get("dataset_path") and config.get("dataset_id") is None:
            boundary.dataset_file(str(config["dataset_path"]), "the run's dataset_path")
    except BoundaryError as exc:
        raise RescoreError(f"rescore: {exc}") from None
    limit = (MAX_GROUPS if request.sample is None else MAX_SAMPLED_FROM) + 1
    keys = store.train_group_keys(run.id, request.first_step, request.last_step, limit=limit)
    if not keys:
        select_steps(store.group_steps(run.id), request.first_step, request.last_step)  # raises, naming the steps
        raise RescoreError("no recorded training groups in that range")
    warnings = []
    if request.sample is not None and len(keys) > MAX_SAMPLED_FROM:
        keys = keys[:MAX_SAMPLED_FROM]
        warnings.append(f"sampled from the first {MAX_SAMPLED_FROM} groups of the range")
    chosen = sample_groups(keys, request.sample, request.seed)
    check_size(len(chosen), sum(n for _, _, n in chosen))
    groups = [group_as_dict(g) for g in store.groups_by_id(run.id, [gid for gid, _, _ in chosen])]
    rows, row_warnings = _rows(store, config, {g["row_index"] for g in groups})
    warnings += row_warnings
    chat = any(isinstance(row.get("prompt"), list) for row in rows.values())
    scale = request.scale_rewards or str(config.get("scale_rewards") or "group")
    aggregation = str(config.get("multi_objective_aggregation") or "sum_then_normalize")
    return PreparedRescoring(request, specs, groups, rows, chat, scale, aggregation, warnings,
                             tools=tuple(recipe_tools(config)), agentic=has_tools(config))


def _rows(store: Store, config: Mapping[str, Any], wanted: set[int]) -> tuple[dict[int, dict[str, Any]], list[str]]:
    """The dataset rows the groups came from (with :data:`ROW_INDEX_COLUMN`), or none and a warning when the run's
    dataset cannot be read (rules that read a column, such as ``answer``, then do not apply)."""
    try:
        all_rows = load_rows(store, config)
    except Exception as exc:  # noqa: BLE001 - the dataset may be gone; the rescoring still scores what it can
        return {}, [f"the run's dataset cannot be read ({type(exc).__name__}: {exc}); rules that read its columns "
                    "score without them"]
    return {i: {**all_rows[i], ROW_INDEX_COLUMN: i} for i in wanted if 0 <= i < len(all_rows)}, []


def _child_request(prepared: PreparedRescoring, workers: int | None) -> dict[str, Any]:
    return {"specs": prepared.specs, "chat": prepared.chat, "probe_rows": PROBE_ROWS,
            "tools": list(prepared.tools), "agentic": prepared.agentic,
            "workers": workers or os.cpu_count() or 1,
            "rows": {str(k): v for k, v in prepared.rows.items()},
            "groups": [{"id": g["id"], "row_index": g["row_index"], "prompt": g["prompt"],
                        "completions": [_scored_form(c) for c in g["completions"]]} for g in prepared.groups]}


def _scored_form(completion: Mapping[str, Any]) -> str | list[dict[str, Any]]:
    """What a recorded completion is scored as: its text, or for a multi-turn completion its turns as TRL's
    messages (:func:`grpo_core.tools.turns.messages_from_turns`), so tool rules and answer rules read them as in
    training."""
    messages = messages_from_turns(completion.get("turns"))
    return messages if messages else completion["text"]


def execute_rescoring(store: Store, rescoring_id: int, prepared: PreparedRescoring, *, workdir: Path,
                      workers: int | None = None, timeout_s: float = RESCORE_TIMEOUT_S,
                      on_progress: Callable[[int, int], None] | None = None) -> RescoringInfo:
    """Run the child for rescoring ``rescoring_id`` (:data:`RESCORE_JOB`) and store how it ended (completed,
    failed or cancelled); its job folder under ``workdir`` holds its request, answer, progress and log while it runs
    and is removed after."""
    try:
        with start_child(RESCORE_JOB, _child_request(prepared, workers), timeout_s=timeout_s,
                         workdir=Path(workdir)) as job:
            return _follow(store, rescoring_id, prepared, job, on_progress)
    except Exception as exc:  # noqa: BLE001 - nothing is lost: the rescoring says why it failed
        log.exception("rescoring %s failed", rescoring_id)
        return store.finish_rescoring(rescoring_id, "failed", error=f"{type(exc).__name__}: {exc}")


def _follow(store: Store, rescoring_id: int, prepared: PreparedRescoring, job: RunningJob,
            on_progress: Callable[[int, int], None] | None) -> RescoringInfo:
    """Copy the child's count into the store every :data:`POLL_S`; the store's cancel flag cancels it."""
    total = prepared.num_completions
    for _ in job.watch(POLL_S):
        done = job.latest.done or 0
        if on_progress is not None:
            on_progress(done, total)
        if store.set_rescoring_progress(rescoring_id, done):
            job.cancel()
            return store.finish_rescoring(rescoring_id, "cancelled")
    try:
        answer = job.result()
    except RescoreError as exc:
        return store.finish_rescoring(rescoring_id, "failed", error=str(exc))
    result = compare_scorings(prepared.groups, answer, scale_rewards=prepared.scale_rewards,
                              multi_objective_aggregation=prepared.aggregation)
    result.update(run_id=prepared.request.run_id, rewards=prepared.specs, probe=answer.get("probe") or [],
                  errors=answer.get("errors") or {}, warnings=prepared.warnings)
    if on_progress is not None:
        on_progress(total, total)
    return store.finish_rescoring(rescoring_id, "completed", result=result)


def start_rescoring(store: Store, request: RescoreRequest, *, workdir: Path, boundary: Boundary = OPEN,
                    owner: str | None = None, workers: int | None = None, wait: bool = False,
                    on_progress: Callable[[int, int], None] | None = None, slots: JobSlots = RESCORE_SLOTS,
                    timeout_s: float = RESCORE_TIMEOUT_S) -> RescoringInfo:
    """Check ``request``, take one of ``slots`` for ``owner``, store a ``running`` rescoring and score it in a
    child: on a background thread (poll :meth:`storage.Store.get_rescoring`; cancel with
    :meth:`storage.Store.request_rescoring_cancel`), or here when ``wait`` (then the finished rescoring is returned).
    The slot is given back when the child ends (at the latest after ``timeout_s``).

    Raises:
        RescoreError: see :func:`prepare_rescoring`, or ``owner`` runs as many rescorings as one login may (or the
            pool is full; :class:`grpo_core.child_jobs.slots.SlotsBusy`'s message); nothing is stored then.
    """
    prepared = prepare_rescoring(store, request, boundary=boundary)
    try:
        slots.acquire(owner)
    except SlotsBusy as exc:
        raise RescoreError(str(exc)) from None
    try:
        info = store.create_rescoring(request.run_id, request.model_dump(mode="json"),
                                      total=prepared.num_completions, owner=owner)
    except BaseException:
        slots.release(owner)
        raise

    def run() -> RescoringInfo:
        try:
            return execute_rescoring(store, info.id, prepared, workdir=workdir, workers=workers,
                                     timeout_s=timeout_s, on_progress=on_progress if wait else None)
        finally:
            slots.release(owner)

    if wait:
        return run()
    threading.Thread(target=run, name=f"rescoring-{info.id}", daemon=True).start()
    return info


def rescore_run(store: Store, request: RescoreRequest, *, workdir: Path, boundary: Boundary = OPEN,
                owner: str | None = None, workers: int | None = None,
                on_progress: Callable[[int, int], None] | None = None) -> dict[str, Any]:
    """:func:`start_rescoring`, waited for: the comparison (with ``rescoring_id``), as the API and the CLI return it.

    Raises:
        RescoreError: the request is refused, or the rescoring failed or was cancelled (the message says why).
    """
    info = start_rescoring(store, request, workdir=workdir, boundary=boundary, owner=owner, workers=workers,
                           wait=True, on_progress=on_progress)
    if info.status != "completed" or info.result is None:
        raise RescoreError(f"rescoring {info.id} {info.status}: {info.error or 'no result'}")
    return {"rescoring_id": info.id, **info.result}

