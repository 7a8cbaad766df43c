"""Run actions: cancel, resume, delete and tag runs (the checks and file handling around the store's calls). Each
action that changes a run authorises itself: its caller (the Runs tab, the public API) passes the login and never
checks ownership first. Imports no torch.

* :func:`cancel_run` asks a queued or running run to stop (a queued one is cancelled at once, a running one stops at
  the end of its current step, saving a checkpoint).
* :func:`resume_run` puts a cancelled or failed run back in the queue, as the same run, to continue from its last
  complete checkpoint (:func:`grpo_core.runs.files.last_checkpoint`); the steps recorded after that checkpoint are
  dropped in the same transaction, so the resumed run records each step exactly once. Without a checkpoint it
  trains again from step 0.
* :func:`delete_run` removes a finished run's folder (only a folder under the data directory's ``runs/``) and then
  its rows (and a deleted dataset that was kept for it alone).
* :func:`annotate_run` sets a run's notes and tags; :func:`parse_tags` normalises the tags typed in the Runs tab.
* :func:`authorize_run_action` refuses a cancel, resume, delete or notes edit by a login that neither owns the run
  nor is an admin (:mod:`grpo_core.access.ownership`); :func:`cancel_run`, :func:`resume_run`, :func:`delete_run` and
  :func:`annotate_run` call it themselves.

Validating and queueing a new run is :mod:`grpo_core.submit`'s.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import psutil

from grpo_core.access.boundary import boundary_for
from grpo_core.access.ownership import SINGLE_USER, Actor, check_may_change
from grpo_core.datasets.library import purge_deleted_dataset
from grpo_core.runs.files import Checkpoint, last_checkpoint, run_dir
from grpo_core.runs.script_runs import describe_origin, is_script_run
from grpo_core.settings import Settings
from storage import RunInfo, RunStatus, Store

MAX_TAGS = 20
MAX_TAG_CHARS = 40
#: Longest notes a run keeps, in characters: every run listing (``list_runs``, the page's run reads) carries them, so
#: unbounded notes made one login's runs cost every other login's reads (20 MB a save was kept).
MAX_NOTES_CHARS = 20_000


class RunActionError(ValueError):
    """A resume or delete that cannot be done now, or tags that cannot be stored; the message says why."""


def _worker_still_exiting(run: RunInfo) -> bool:
    """True while the previous worker of a finished run still exists (it may still be writing its folder)."""
    if not run.worker_pid:
        return False
    try:
        process = psutil.Process(run.worker_pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return "grpo_core.training.worker" in " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def authorize_run_action(store: Store, actor: Actor, run_id: int, action: str) -> RunInfo:
    """The run, when ``actor`` may ``action`` it (``"cancel"``, ``"resume"``, ``"delete"``, ``"edit the notes of"``).

    Raises:
        grpo_core.access.ownership.NotOwnerError: ``actor`` is logged in, not an admin and not the run's owner.
        storage.StoreError: there is no such run.
    """
    run = store.get_run(run_id)
    check_may_change(actor, run.owner, action, f"run #{run.id} {run.name}")
    return run


def cancel_run(
    store: Store, run_id: int, actor: Actor = SINGLE_USER, *, request_stop: Callable[[int], RunInfo] | None = None
) -> RunInfo:
    """Ask a run to stop: a queued run is cancelled at once, a running one stops at the end of its current step (its
    worker saves a checkpoint first); a finished run is left as it is.

    Args:
        actor: the login asking (:func:`authorize_run_action` checks it before anything changes).
        request_stop: what sets the stop, given the run's id: the dashboard's launcher's
            :meth:`grpo_core.training.launcher.Launcher.cancel`, which also asks a Ray job to stop at once and starts
            the grace period after which a worker still running is stopped by force. Default: the store's cancel
            flag alone (:meth:`storage.Store.request_cancel`), which a launcher serving the store acts on at its next
            pass.

    Returns:
        The run after the request (``cancelled`` when it was queued, ``cancel_requested`` set when it was running).

    Raises:
        grpo_core.access.ownership.NotOwnerError: ``actor`` may not change this run (:func:`authorize_run_action`).
        storage.StoreError: there is no such run.
    """
    run = authorize_run_action(store, actor, run_id, "cancel")
    return (request_stop or store.request_cancel)(run.id)


def resume_point(settings: Settings, run: RunInfo) -> Checkpoint | None:
    """The checkpoint a resume of ``run`` would continue from (its last complete one), or ``None``."""
    return last_checkpoint(run_dir(settings, run))


def resume_state(settings: Settings, run: RunInfo | None) -> tuple[bool, str]:
    """Whether the Runs tab offers Resume for ``run``, and the line that says why or why not.

    Offered only for a cancelled or failed run of the dashboard's own (not a script's) with a complete checkpoint to
    continue from: ``(True, "Resume continues from checkpoint-4 (steps 1-4 trained).")``. A run stopped before its
    first checkpoint has nothing to resume; ``(False, ...)`` says so, and that launching it again starts over.
    """
    if run is None:
        return False, "Choose a run first."
    if run.status not in (RunStatus.CANCELLED, RunStatus.FAILED):
        return False, f"Run #{run.id} is {run.status.value}: only a cancelled or failed run can be resumed."
    if is_script_run(run):
        return False, f"Run #{run.id} was {describe_origin(run)}; resume it there (resume_from_checkpoint)."
    try:
        checkpoint = resume_point(settings, run)
    except (OSError, ValueError):
        checkpoint = None
    if checkpoint is None:
        return False, (f"Run #{run.id} has no checkpoint to resume from (it stopped before saving one); launch it "
                       "again to train from the start.")
    return True, f"Resume continues from {checkpoint.path.name} (steps 1-{checkpoint.step} trained)."


def resume_run(store: Store, settings: Settings, run_id: int, actor: Actor = SINGLE_USER) -> RunInfo:
    """Queue a cancelled or failed run again to continue from its last checkpoint (or from step 0 without one).

    Returns the queued run; its ``resume_from`` is the checkpoint folder, or ``None`` when it starts over.

    Raises:
        RunActionError: the run is not cancelled or failed, or its previous worker is still exiting.
        grpo_core.access.ownership.NotOwnerError: ``actor`` may not change this run (:func:`authorize_run_action`).
        grpo_core.access.boundary.BoundaryError: the run's config names code or files ``actor`` may not use now.
        storage.StoreError: there is no such run, or its status changed meanwhile.
    """
    run = authorize_run_action(store, actor, run_id, "resume")
    boundary_for(settings, actor).check_stored(run.config or {}, "resume")
    if run.status not in (RunStatus.CANCELLED, RunStatus.FAILED):
        raise RunActionError(f"run #{run.id} is {run.status.value}: only a cancelled or failed run can be resumed")
    if is_script_run(run):
        raise RunActionError(f"run #{run.id} was {describe_origin(run)}; resume it there (resume_from_checkpoint)")
    if _worker_still_exiting(run):
        raise RunActionError(f"run #{run.id}'s worker (pid {run.worker_pid}) is still exiting; try again shortly")
    checkpoint = resume_point(settings, run)
    return store.requeue_run(
        run.id,
        resume_from=str(checkpoint.path) if checkpoint else None,
        from_step=checkpoint.step if checkpoint else 0,
    )


def delete_run(store: Store, settings: Settings, run_id: int, actor: Actor = SINGLE_USER) -> Path | None:
    """Delete a finished run: its folder (checkpoints, adapter, log, config), then its rows in the store.

    Only a folder strictly inside ``settings.runs_dir`` is removed (symbolic links resolved); a run whose recorded
    folder lies anywhere else is refused, and nothing is deleted. Returns the folder removed, ``None`` if it had none.

    Raises:
        RunActionError: the run is queued or running (cancel it first), its worker is still exiting, or its folder
            is outside the runs directory.
        grpo_core.access.ownership.NotOwnerError: ``actor`` may not change this run (:func:`authorize_run_action`).
        storage.StoreError: there is no such run.
        OSError: the folder could not be removed entirely (the run stays in the store; deleting again retries).
    """
    run = authorize_run_action(store, actor, run_id, "delete")
    if not run.status.is_final:
        raise RunActionError(f"run #{run.id} is {run.status.value}; cancel it before deleting it")
    if _worker_still_exiting(run):
        raise RunActionError(f"run #{run.id}'s worker (pid {run.worker_pid}) is still exiting; try again shortly")
    try:
        folder = run_dir(settings, run)
    except ValueError as exc:  # a never-started run whose folder name leads outside the runs folder
        raise RunActionError(f"refusing to delete run #{run.id}'s folder: {exc}") from None
    root = settings.runs_dir.resolve()
    target = folder.resolve()
    if target == root or root not in target.parents:
        raise RunActionError(f"refusing to delete {folder}: it is not a run folder under {root}")
    removed = None
    if target.exists():
        shutil.rmtree(target)
        removed = target
    store.delete_run(run.id)
    for dataset_id in {run.dataset_id, (run.config or {}).get("eval_dataset_id")} - {None}:
        purge_deleted_dataset(store, settings, int(dataset_id))  # a deleted dataset kept for this run alone
    return removed


def parse_tags(text: str | None) -> list[str]:
    """Tags from a comma-separated string: trimmed, blanks dropped, duplicates (ignoring case) dropped, in order.

    Raises:
        RunActionError: more than :data:`MAX_TAGS` tags, or one longer than :data:`MAX_TAG_CHARS` characters.
    """
    tags: list[str] = []
    seen: set[str] = set()
    for part in (text or "").split(","):
        tag = " ".join(part.split())
        if not tag or tag.casefold() in seen:
            continue
        if len(tag) > MAX_TAG_CHARS:
            raise RunActionError(f"tag {tag[:MAX_TAG_CHARS]!r}… is longer than {MAX_TAG_CHARS} characters")
        seen.add(tag.casefold())
        tags.append(tag)
    if len(tags) > MAX_TAGS:
        raise RunActionError(f"{len(tags)} tags: at most {MAX_TAGS}")
    return tags


def annotate_run(store: Store, run_id: int, *, notes: str, tags_text: str | None, actor: Actor = SINGLE_USER) -> RunInfo:
    """Set a run's notes and tags (``tags_text`` as :func:`parse_tags` reads it), when ``actor`` may change the run.

    Raises:
        RunActionError: the tags are not valid (too many, too long), or the notes are longer than
            :data:`MAX_NOTES_CHARS` characters.
        grpo_core.access.ownership.NotOwnerError: ``actor`` may not change the run.
        storage.StoreError: there is no such run.
    """
    authorize_run_action(store, actor, run_id, "edit the notes of")
    if len(notes or "") > MAX_NOTES_CHARS:
        raise RunActionError(f"the notes are {len(notes):,} characters long: at most {MAX_NOTES_CHARS:,}")
    return store.annotate_run(run_id, notes=notes or "", tags=parse_tags(tags_text))
