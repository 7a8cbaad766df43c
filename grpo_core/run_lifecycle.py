"""Resume, delete and annotate runs: the checks and file handling around the store's calls. Imports no torch.

* :func:`resume_run` puts a cancelled or failed run back in the queue, as the same run, to continue from its last
  complete checkpoint (:mod:`grpo_core.checkpoints`); the steps recorded after that checkpoint are dropped in the
  same transaction, so the resumed run records each step exactly once. Without a checkpoint it trains again from
  step 0.
* :func:`delete_run` removes a finished run's folder (only a folder under the data directory's ``runs/``) and then
  its rows.
* :func:`parse_tags` normalises the tags typed in the Runs tab.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import psutil

from grpo_core.checkpoints import Checkpoint, last_checkpoint
from grpo_core.settings import Settings
from storage import RunInfo, RunStatus, Store

MAX_TAGS = 20
MAX_TAG_CHARS = 40


class RunActionError(ValueError):
    """A resume or delete that cannot be done now; the message says why."""


def run_folder(settings: Settings, run: RunInfo) -> Path:
    """The run's folder: the one recorded in the store, else ``<runs dir>/run-NNNNN`` (a run that never started)."""
    return Path(run.output_dir) if run.output_dir else settings.runs_dir / f"run-{run.id:05d}"


def _worker_still_exiting(run: RunInfo) -> bool:
    """True while the previous worker of a finished run still exists (it may still be writing its folder)."""
    if not run.worker_pid:
        return False
    try:
        process = psutil.Process(run.worker_pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return False
        return "grpo_core.worker" in " ".join(process.cmdline())
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def resume_point(settings: Settings, run: RunInfo) -> Checkpoint | None:
    """The checkpoint a resume of ``run`` would continue from (its last complete one), or ``None``."""
    return last_checkpoint(run_folder(settings, run))


def resume_run(store: Store, settings: Settings, run_id: int) -> RunInfo:
    """Queue a cancelled or failed run again to continue from its last checkpoint (or from step 0 without one).

    Returns the queued run; its ``resume_from`` is the checkpoint folder, or ``None`` when it starts over.

    Raises:
        RunActionError: the run is not cancelled or failed, or its previous worker is still exiting.
        storage.StoreError: there is no such run, or its status changed meanwhile.
    """
    run = store.get_run(run_id)
    if run.status not in (RunStatus.CANCELLED, RunStatus.FAILED):
        raise RunActionError(f"run #{run.id} is {run.status.value}: only a cancelled or failed run can be resumed")
    if _worker_still_exiting(run):
        raise RunActionError(f"run #{run.id}'s worker (pid {run.worker_pid}) is still exiting; try again shortly")
    checkpoint = resume_point(settings, run)
    return store.requeue_run(
        run.id,
        resume_from=str(checkpoint.path) if checkpoint else None,
        from_step=checkpoint.step if checkpoint else 0,
    )


def delete_run(store: Store, settings: Settings, run_id: int) -> Path | None:
    """Delete a finished run: its folder (checkpoints, adapter, log, config), then its rows in the store.

    Only a folder strictly inside ``settings.runs_dir`` is removed (symbolic links resolved); a run whose recorded
    folder lies anywhere else is refused, and nothing is deleted. Returns the folder removed, ``None`` if it had none.

    Raises:
        RunActionError: the run is queued or running (cancel it first), its worker is still exiting, or its folder
            is outside the runs directory.
        storage.StoreError: there is no such run.
        OSError: the folder could not be removed entirely (the run stays in the store; deleting again retries).
    """
    run = store.get_run(run_id)
    if not run.status.is_final:
        raise RunActionError(f"run #{run.id} is {run.status.value}; cancel it before deleting it")
    if _worker_still_exiting(run):
        raise RunActionError(f"run #{run.id}'s worker (pid {run.worker_pid}) is still exiting; try again shortly")
    folder = run_folder(settings, run)
    root = settings.runs_dir.resolve()
    target = folder.resolve()
    if target == root or root not in target.parents:
        raise RunActionError(f"refusing to delete {folder}: it is not a run folder under {root}")
    removed = None
    if target.exists():
        shutil.rmtree(target)
        removed = target
    store.delete_run(run.id)
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
