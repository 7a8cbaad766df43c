"""Run actions: validate and submit a run config, resume, delete and tag runs (the checks and file handling around
the store's calls). Imports no torch.

* :func:`validate_run_config` checks what a :class:`~grpo_core.runs.config.RunConfig` refers to (model, dataset, reward
  rules, the columns the rules need) and :func:`submit_run` queues it; the launcher starts it.
* :func:`resume_run` puts a cancelled or failed run back in the queue, as the same run, to continue from its last
  complete checkpoint (:func:`grpo_core.runs.files.last_checkpoint`); the steps recorded after that checkpoint are
  dropped in the same transaction, so the resumed run records each step exactly once. Without a checkpoint it
  trains again from step 0.
* :func:`delete_run` removes a finished run's folder (only a folder under the data directory's ``runs/``) and then
  its rows (and a deleted dataset that was kept for it alone).
* :func:`stored_run_config` is a config as the store keeps it (named, local paths absolute); sweeps
  (:mod:`grpo_core.submit.sweeps`) queue theirs in one transaction.
* :func:`parse_tags` normalises the tags typed in the Runs tab.
* :func:`authorize_run_action` refuses a cancel, resume, delete or notes edit by a login that neither owns the run
  nor is an admin (:mod:`grpo_core.access.ownership`); :func:`resume_run` and :func:`delete_run` call it themselves.
"""

from __future__ import annotations

import importlib.util
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil

from grpo_core.access.boundary import OPEN, Boundary, boundary_for
from grpo_core.access.ownership import SINGLE_USER, Actor, check_may_change
from grpo_core.datasets.formats import DatasetError
from grpo_core.datasets.library import purge_deleted_dataset
from grpo_core.datasets.rows import column_mapping, load_rows, resolve_dataset_path
from grpo_core.jobs.reward_check import check_plugins, has_plugins
from grpo_core.models.prompt_lengths import model_text_folder, require_prompts_fit
from grpo_core.models.source import ModelSourceError, describe_model
from grpo_core.rewards.answer_coverage import coverage_lines, dataset_answer_coverage
from grpo_core.rewards.compose import RewardSpec, build_reward_funcs
from grpo_core.rewards.registry import get_rule
from grpo_core.runs.config import ConfigError, RunConfig
from grpo_core.runs.files import Checkpoint, last_checkpoint, run_dir
from grpo_core.runs.script_runs import describe_origin, is_script_run
from grpo_core.settings import Settings
from storage import DatasetInfo, RunInfo, RunStatus, Store, StoreError

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
        grpo_core.access.ownership.NotOwnerError: ``actor`` is logged in, not an admin and not the run's owner.
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


def _listed_dataset(store: Store, dataset_id: int) -> DatasetInfo:
    """The dataset a new run may use: not one marked deleted (kept only for the runs that used it).

    Raises:
        StoreError: no such dataset, or it was deleted.
    """
    info = store.get_dataset(dataset_id)
    if info.deleted_at is not None:
        raise StoreError(f"dataset #{dataset_id} was deleted ({info.name}); choose another")
    return info


TESTS_RULES = ("code_tests", "code_runtime")
"""Rules that read the ``tests`` column (see :func:`grpo_core.rewards.code.split_tests`)."""


def _unreadable_tests(config: RunConfig, rows: list[dict[str, Any]]) -> list[str]:
    """Warnings for the rows whose ``tests`` value the code rules cannot read (their reward would be ``None``).

    Raises:
        ConfigError: no row's ``tests`` can be read; the message names the column, a row and why.
    """
    if not rows or not any(spec.rule in TESTS_RULES for spec in config.rewards):
        return []
    from grpo_core.rewards.code import why_tests_unreadable

    problems = [
        (index, problem)
        for index, row in enumerate(rows)
        if "tests" in row and (problem := why_tests_unreadable(row.get("tests"), row.get("entry_point"))) is not None
    ]
    if not problems:
        return []
    index, problem = problems[0]
    if len(problems) == len(rows):
        raise ConfigError(
            f"rewards: code_tests cannot read the dataset column 'tests' (row {index}: {problem}); every row's "
            "reward would be None"
        )
    return [
        f"code_tests cannot read the column 'tests' of {len(problems)} of {len(rows)} rows (row {index}: {problem}); "
        "those rows get no code reward"
    ]


def validate_run_config(
    store: Store, config: RunConfig, *, model_cache_dir: Path | None = None, boundary: Boundary = OPEN
) -> list[str]:
    """Check what a :class:`RunConfig` refers to, without loading a model. Returns warnings (may be empty).

    The dataset's rows are read with the config's column mapping, and, when the model's tokenizer files are on disk
    (a local folder, or the packaged GGUF once converted into ``model_cache_dir``), every prompt is counted against
    the model's context (:func:`grpo_core.models.prompt_lengths.require_prompts_fit`); otherwise a warning says the worker
    checks the lengths before loading the model.

    An answer rule that cannot read some rows' ``answer`` (missing, prose, not one number) adds a warning naming how
    many rows and a few of them (:mod:`grpo_core.rewards.answer_coverage`).

    Plugin reward rules are imported and called once on the dataset's first row, in a child process
    (:func:`grpo_core.jobs.reward_check.check_plugins`), so a broken plugin is refused here in seconds rather than after
    the worker has loaded the model.

    ``boundary`` (the login's, :func:`grpo_core.access.boundary.boundary_for`) is checked first, before any file is read
    or any plugin imported.

    Raises:
        grpo_core.access.boundary.BoundaryError: (a ``ConfigError``) the config names code or a file the login may not use.
        ConfigError: the model cannot be found, the dataset (or the eval dataset) does not exist or its column
            mapping names a column it lacks, a reward rule or parameter is invalid, a rule needs a column the dataset
            (or the eval dataset) lacks, prompts are longer than the model's context minus ``max_completion_length``
            (the message names the rows), every rule is a ``reward_model``, or a plugin does not import, does not fit
            TRL's call or does not return one number (or None) per completion.
    """
    config = boundary.check_config(config)
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
            columns = _listed_dataset(store, config.dataset_id).columns
        except StoreError as exc:
            raise ConfigError(f"dataset: {exc}") from None
    elif config.dataset_path:
        if not Path(config.dataset_path).exists():
            raise ConfigError(f"dataset_path: {config.dataset_path} does not exist")
    else:
        raise ConfigError("dataset: choose a dataset")
    try:
        rows = load_rows(store, config)
    except (DatasetError, OSError) as exc:
        raise ConfigError(f"dataset: {exc}") from None
    if columns is None or column_mapping(config) is not None:
        columns = list(dict.fromkeys(key for row in rows for key in row))
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
    warnings += _unreadable_tests(config, rows)
    if config.eval_dataset_id is not None:
        try:
            eval_columns = _listed_dataset(store, config.eval_dataset_id).columns
        except StoreError as exc:
            raise ConfigError(f"eval_dataset_id: {exc}") from None
        for spec in config.rewards:
            missing = [c for c in get_rule(spec.rule).columns if c not in eval_columns]
            if missing:
                raise ConfigError(
                    f"eval_dataset_id: reward rule {spec.rule} reads column {missing[0]!r}, which the eval dataset "
                    f"lacks; its columns are {', '.join(eval_columns)}"
                )
    if all(spec.rule == "reward_model" for spec in config.rewards):
        raise ConfigError("rewards: a reward_model needs at least one other reward rule beside it")
    if has_plugins(config.rewards):
        try:
            check_plugins(config.rewards, rows[0] if rows else {})
        except ValueError as exc:
            raise ConfigError(f"rewards: {exc}") from None
    if config.max_completion_length < 16:
        warnings.append("max_completion_length below 16 tokens truncates most completions")
    # rows whose answer an answer rule cannot read give it None on every completion: no learning signal
    warnings += coverage_lines(dataset_answer_coverage(rows, [spec.rule for spec in config.rewards]))
    folder = model_text_folder(config.model, model_cache_dir)
    if folder is None:
        if describe_model(config.model).kind != "folder":
            warnings.append(
                "prompt lengths not checked yet: the model's tokenizer is not on disk (a GGUF is converted at its "
                "first run); the run checks them before loading the model"
            )
    else:
        try:
            require_prompts_fit(rows, folder, config.max_completion_length)
        except ValueError as exc:  # PromptTooLongError, or a chat prompt the model's template refuses
            raise ConfigError(f"dataset: {exc}") from None
    return warnings


def _absolute_plugin_path(spec: RewardSpec) -> RewardSpec:
    """``spec`` with a plugin target's relative ``file.py`` made absolute (the plugin check ran from here)."""
    target = str(spec.params.get("target", "")).strip()
    if spec.rule != "plugin" or ":" not in target:
        return spec
    module, function = target.rsplit(":", 1)
    if not module.strip().endswith(".py") or Path(module.strip()).is_absolute():
        return spec
    return spec.model_copy(update={"params": {**spec.params, "target": f"{Path(module.strip()).resolve()}:{function}"}})


def resolve_relative_paths(config: RunConfig, base_dir: str | Path) -> RunConfig:
    """``config`` with a relative ``dataset_path`` and relative plugin ``file.py`` targets that do not exist from the
    working directory looked up in ``base_dir`` (a run YAML's folder), as ``grpo-dashboard train`` does."""
    base = Path(base_dir)
    updates: dict[str, Any] = {}
    if config.dataset_path:
        updates["dataset_path"] = str(resolve_dataset_path(config.dataset_path, base))
    specs = []
    for spec in config.rewards:
        target = str(spec.params.get("target", "")).strip()
        module, _, function = target.rpartition(":")
        path = Path(module.strip())
        if spec.rule == "plugin" and module.strip().endswith(".py") and not path.is_absolute() and not path.exists() \
                and (base / path).exists():
            spec = spec.model_copy(update={"params": {**spec.params, "target": f"{(base / path).resolve()}:{function}"}})
        specs.append(spec)
    return config.model_copy(update={**updates, "rewards": specs})


def stored_run_config(config: RunConfig) -> RunConfig:
    """``config`` as the store keeps it: named (empty name: ``grpo-<time>``), and a local model folder, a ``.gguf``
    file, ``dataset_path`` and a plugin's ``file.py`` made absolute, since the worker runs in the run folder; the
    default model and hub ids stay as given. Pure apart from resolving paths against the working directory."""
    name = config.name.strip() or f"grpo-{datetime.now():%Y%m%d-%H%M%S}"
    updates: dict[str, str] = {"name": name}
    # The worker runs in the run folder, not in this process's working directory: store local paths absolute.
    source = describe_model(config.model)
    if source.kind == "folder" or (source.kind == "gguf" and config.model.strip().lower().endswith(".gguf")):
        updates["model"] = source.location
    if config.dataset_id is None and config.dataset_path:
        updates["dataset_path"] = str(Path(config.dataset_path).resolve())
    return config.model_copy(update={**updates, "rewards": [_absolute_plugin_path(s) for s in config.rewards]})


def submit_run(
    store: Store, config: RunConfig, *, model_cache_dir: Path | None = None, owner: str | None = None,
    boundary: Boundary = OPEN,
) -> RunInfo:
    """Validate ``config`` and queue it as a new run (the launcher starts it), owned by login ``owner``.

    The stored config is :func:`stored_run_config`'s (named, local paths absolute), after ``boundary`` replaced
    its paths by the real paths it allowed.

    Raises:
        ConfigError: as :func:`validate_run_config` (a ``BoundaryError`` first).
    """
    config = boundary.check_config(config)
    validate_run_config(store, config, model_cache_dir=model_cache_dir, boundary=boundary)
    config = stored_run_config(config)
    return store.create_run(
        name=config.name, config=config.model_dump(mode="json"), dataset_id=config.dataset_id,
        max_steps=config.max_steps, owner=owner,
    )
