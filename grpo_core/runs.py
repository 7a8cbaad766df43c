"""Run actions: validate and submit a run config, resume, delete and tag runs (the checks and file handling around
the store's calls). Imports no torch.

* :func:`validate_run_config` checks what a :class:`~grpo_core.config.RunConfig` refers to (model, dataset, reward
  rules, the columns the rules need) and :func:`submit_run` queues it; the launcher starts it.
* :func:`resume_run` puts a cancelled or failed run back in the queue, as the same run, to continue from its last
  complete checkpoint (:func:`grpo_core.run_files.last_checkpoint`); the steps recorded after that checkpoint are
  dropped in the same transaction, so the resumed run records each step exactly once. Without a checkpoint it
  trains again from step 0.
* :func:`delete_run` removes a finished run's folder (only a folder under the data directory's ``runs/``) and then
  its rows.
* :func:`parse_tags` normalises the tags typed in the Runs tab.
* :func:`authorize_run_action` refuses a cancel, resume, delete or notes edit by a login that neither owns the run
  nor is an admin (:mod:`grpo_core.ownership`); :func:`resume_run` and :func:`delete_run` call it themselves.
"""

from __future__ import annotations

import importlib.util
import shutil
from datetime import datetime
from pathlib import Path

import psutil

from grpo_core.config import ConfigError, RunConfig
from grpo_core.model_source import ModelSourceError, describe_model
from grpo_core.ownership import SINGLE_USER, Actor, check_may_change
from grpo_core.rewards.compose import build_reward_funcs
from grpo_core.rewards.registry import get_rule
from grpo_core.run_files import Checkpoint, last_checkpoint, run_dir
from grpo_core.settings import Settings
from storage import RunInfo, RunStatus, Store, StoreError

MAX_TAGS = 20
MAX_TAG_CHARS = 40


class RunActionError(ValueError):
    """A resume or delete that cannot be done now; the message says why."""


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


def authorize_run_action(store: Store, actor: Actor, run_id: int, action: str) -> RunInfo:
    """The run, when ``actor`` may ``action`` it (``"cancel"``, ``"resume"``, ``"delete"``, ``"edit the notes of"``).

    Raises:
        grpo_core.ownership.NotOwnerError: ``actor`` is logged in, not an admin and not the run's owner.
        storage.StoreError: there is no such run.
    """
    run = store.get_run(run_id)
    check_may_change(actor, run.owner, action, f"run #{run.id} {run.name}")
    return run


def resume_point(settings: Settings, run: RunInfo) -> Checkpoint | None:
    """The checkpoint a resume of ``run`` would continue from (its last complete one), or ``None``."""
    return last_checkpoint(run_dir(settings, run))


def resume_run(store: Store, settings: Settings, run_id: int, actor: Actor = SINGLE_USER) -> RunInfo:
    """Queue a cancelled or failed run again to continue from its last checkpoint (or from step 0 without one).

    Returns the queued run; its ``resume_from`` is the checkpoint folder, or ``None`` when it starts over.

    Raises:
        RunActionError: the run is not cancelled or failed, or its previous worker is still exiting.
        grpo_core.ownership.NotOwnerError: ``actor`` may not change this run (:func:`authorize_run_action`).
        storage.StoreError: there is no such run, or its status changed meanwhile.
    """
    run = authorize_run_action(store, actor, run_id, "resume")
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


def delete_run(store: Store, settings: Settings, run_id: int, actor: Actor = SINGLE_USER) -> Path | None:
    """Delete a finished run: its folder (checkpoints, adapter, log, config), then its rows in the store.

    Only a folder strictly inside ``settings.runs_dir`` is removed (symbolic links resolved); a run whose recorded
    folder lies anywhere else is refused, and nothing is deleted. Returns the folder removed, ``None`` if it had none.

    Raises:
        RunActionError: the run is queued or running (cancel it first), its worker is still exiting, or its folder
            is outside the runs directory.
        grpo_core.ownership.NotOwnerError: ``actor`` may not change this run (:func:`authorize_run_action`).
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


def validate_run_config(store: Store, config: RunConfig) -> list[str]:
    """Check what a :class:`RunConfig` refers to, without loading a model. Returns warnings (may be empty).

    Raises:
        ConfigError: the model cannot be found, the dataset does not exist, a reward rule or parameter is invalid,
            or a rule needs a column the dataset lacks.
    """
    if config.use_vllm and importlib.util.find_spec("vllm") is None:
        raise ConfigError(
            "use_vllm: vLLM is not installed in this environment; install it (pip install vllm, on a CUDA machine) "
            "or turn use_vllm off to generate with transformers"
        )
    try:
        describe_model(config.model)
    except ModelSourceError as exc:
        raise ConfigError(f"model: {exc}") from None
    columns: list[str] | None = None
    if config.dataset_id is not None:
        try:
            columns = store.get_dataset(config.dataset_id).columns
        except StoreError as exc:
            raise ConfigError(f"dataset: {exc}") from None
    elif config.dataset_path:
        if not Path(config.dataset_path).is_file():
            raise ConfigError(f"dataset_path: {config.dataset_path} does not exist")
    else:
        raise ConfigError("dataset: choose a dataset")
    try:
        build_reward_funcs(config.rewards)
    except ValueError as exc:
        raise ConfigError(f"rewards: {exc}") from None
    warnings = []
    if columns is not None:
        for index, spec in enumerate(config.rewards, start=1):
            rule = get_rule(spec.rule)
            missing = [c for c in rule.columns if c not in columns]
            if missing:
                raise ConfigError(
                    f"reward rule {index} ({spec.rule}) reads column {missing[0]!r}, which the dataset lacks; "
                    f"its columns are {', '.join(columns)}"
                )
    if config.max_completion_length < 16:
        warnings.append("max_completion_length below 16 tokens truncates most completions")
    return warnings


def submit_run(store: Store, config: RunConfig, owner: str | None = None) -> RunInfo:
    """Validate ``config`` and queue it as a new run (the launcher starts it), owned by login ``owner``.

    A local model folder, a ``.gguf`` file and ``dataset_path`` are stored as absolute paths, since the worker runs
    in the run folder; the default model and hub ids are stored as given.

    Raises:
        ConfigError: as :func:`validate_run_config`.
    """
    validate_run_config(store, config)
    name = config.name.strip() or f"grpo-{datetime.now():%Y%m%d-%H%M%S}"
    updates: dict[str, str] = {"name": name}
    # The worker runs in the run folder, not in this process's working directory: store local paths absolute.
    source = describe_model(config.model)
    if source.kind == "folder" or (source.kind == "gguf" and config.model.strip().lower().endswith(".gguf")):
        updates["model"] = source.location
    if config.dataset_id is None and config.dataset_path:
        updates["dataset_path"] = str(Path(config.dataset_path).resolve())
    config = config.model_copy(update=updates)
    return store.create_run(
        name=name, config=config.model_dump(mode="json"), dataset_id=config.dataset_id, max_steps=config.max_steps,
        owner=owner,
    )
