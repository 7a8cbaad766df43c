"""Queue a run: :func:`submit_run` validates a run config once and stores it as a queued run; the launcher
(:mod:`grpo_core.training.launcher`) starts it. Imports no torch.

* :func:`submit_run` is the one owner of a launch (Launch tab, public API's ``launch_run``, ``grpo-dashboard train``):
  it checks the login's boundary, validates (:func:`grpo_core.submit.validate.validate_run_config`, plugins tried
  in a child process) and queues, and returns a :class:`SubmittedRun` carrying the run and the validation's warnings,
  so its callers never validate first;
* :func:`stored_run_config` is a config as the store keeps it (named, local paths absolute); sweeps
  (:mod:`grpo_core.submit.sweeps`) queue theirs in one transaction;
* :func:`resolve_relative_paths` looks a run YAML's relative paths up beside the YAML (``grpo-dashboard train`` and
  ``sweep``).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from grpo_core.access.boundary import OPEN, Boundary
from grpo_core.bounded_parse import check_shape
from grpo_core.datasets.rows import resolve_dataset_path
from grpo_core.models.source import describe_model
from grpo_core.rewards.compose import RewardSpec
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.submit.validate import validate_checked_config
from storage import RunInfo, Store


@dataclass(frozen=True)
class SubmittedRun:
    """A run :func:`submit_run` queued, with what its validation warned about.

    Attributes:
        run: the queued run (status ``queued``; its ``config`` is :func:`stored_run_config`'s).
        warnings: one sentence each (a rule that cannot read some rows, prompt lengths not checked yet, ...), in
            the order :func:`grpo_core.submit.validate.validate_run_config` found them; empty when there is none.
    """

    run: RunInfo
    warnings: tuple[str, ...] = ()


def _relative_file(target: str) -> tuple[Path, str] | None:
    """``(file, attribute)`` of a plugin target (``file.py:name``) whose file is relative; ``None`` for a module
    target or an absolute file."""
    module, _, attribute = str(target).strip().rpartition(":")
    path = Path(module.strip())
    if not module.strip().endswith(".py") or path.is_absolute():
        return None
    return path, attribute


def _relative_plugin_file(spec: RewardSpec) -> tuple[Path, str] | None:
    """``(file, function)`` of a plugin rule whose target names a relative ``file.py``; ``None`` for any other."""
    return _relative_file(spec.params.get("target", "")) if spec.rule == "plugin" else None


def _with_plugin_file(spec: RewardSpec, path: Path, function: str) -> RewardSpec:
    """``spec`` with its plugin target naming ``path`` (made absolute) and ``function``."""
    return spec.model_copy(update={"params": {**spec.params, "target": f"{path.resolve()}:{function}"}})


def _code_targets(config: RunConfig, base: Path | None) -> dict[str, Any]:
    """``tool_plugins`` and ``environment`` with each relative ``file.py`` made absolute: from the working directory
    (``base`` ``None``), or, for a file not found there, from ``base`` when it is there (a run YAML's folder)."""

    def absolute(target: str) -> str:
        found = _relative_file(target)
        if found is None:
            return target
        path, attribute = found
        if base is not None:
            if path.exists() or not (base / path).exists():
                return target
            path = base / path
        return f"{path.resolve()}:{attribute}"

    return {"tool_plugins": [absolute(t) for t in config.tool_plugins],
            "environment": absolute(config.environment) if config.environment else config.environment}


def resolve_relative_paths(config: RunConfig, base_dir: str | Path) -> RunConfig:
    """``config`` with a relative ``dataset_path`` and relative plugin ``file.py`` targets (reward rules, tool
    plugins, the environment) that do not exist from the working directory looked up in ``base_dir`` (a run YAML's
    folder), as ``grpo-dashboard train`` does."""
    base = Path(base_dir)
    updates: dict[str, Any] = {}
    if config.dataset_path:
        updates["dataset_path"] = str(resolve_dataset_path(config.dataset_path, base))
    specs = []
    for spec in config.rewards:
        found = _relative_plugin_file(spec)
        if found is not None and not found[0].exists() and (base / found[0]).exists():
            spec = _with_plugin_file(spec, base / found[0], found[1])
        specs.append(spec)
    return config.model_copy(update={**updates, "rewards": specs, **_code_targets(config, base)})


def stored_run_config(config: RunConfig) -> RunConfig:
    """``config`` as the store keeps it: named (empty name: ``grpo-<time>``), and a local model folder, a ``.gguf``
    file, ``dataset_path`` and a plugin's ``file.py`` (a reward rule's, a tool plugin's, the environment's) made
    absolute, since the worker runs in the run folder; the
    default model and hub ids stay as given. Pure apart from resolving paths against the working directory."""
    name = config.name.strip() or f"grpo-{datetime.now():%Y%m%d-%H%M%S}"
    updates: dict[str, str] = {"name": name}
    # The worker runs in the run folder, not in this process's working directory: store local paths absolute.
    source = describe_model(config.model)
    if source.kind == "folder" or (source.kind == "gguf" and config.model.strip().lower().endswith(".gguf")):
        updates["model"] = source.location
    if config.dataset_id is None and config.dataset_path:
        updates["dataset_path"] = str(Path(config.dataset_path).resolve())
    specs = [spec if (found := _relative_plugin_file(spec)) is None else _with_plugin_file(spec, *found)
             for spec in config.rewards]  # the plugin check ran from here
    return config.model_copy(update={**updates, "rewards": specs, **_code_targets(config, None)})


def check_config_size(config: RunConfig, source: str = "the run config") -> None:
    """Refuse a config whose JSON is over the bounds of config text (64 KB, 10,000 values, 32 levels:
    :data:`grpo_core.bounded_parse.DEFAULT_LIMITS`): every run listing carries the stored config (each login's run
    lists, ``list_runs``), and a Launch form's name or system prompt is not read from bounded text.

    Raises:
        ConfigError: the message starts with ``source`` and says which bound.
    """
    check_shape(config.model_dump(mode="json"), source, error=ConfigError)


def submit_run(
    store: Store, config: RunConfig, *, model_cache_dir: Path | None = None, owner: str | None = None,
    boundary: Boundary = OPEN,
) -> SubmittedRun:
    """Validate ``config`` once and queue it as a new run (the launcher starts it), owned by login ``owner``.

    The stored config is :func:`stored_run_config`'s (named, local paths absolute), after ``boundary`` replaced
    its paths by the real paths it allowed. Nothing is stored when the validation fails.

    Args:
        model_cache_dir: where a GGUF model is converted (the data dir's); with it, prompt lengths of a converted
            GGUF are checked too.
        owner: the login queueing it (``None`` without logins); its plugin checks hold its plugin check slots.
        boundary: the login's (:func:`grpo_core.access.boundary.boundary_for`); checked before any file is read.

    Returns:
        The queued run and the validation's warnings (:class:`SubmittedRun`).

    Raises:
        ConfigError: a config over the bounds of :func:`check_config_size`, then as
            :func:`grpo_core.submit.validate.validate_run_config` (a ``BoundaryError`` first).
        grpo_core.child_jobs.slots.SlotsBusy: the config has plugins to check and ``owner`` holds its share of
            :data:`grpo_core.child_jobs.slots.PLUGIN_CHECK_SLOTS` (or they are all taken); nothing was queued.
    """
    check_config_size(config)
    config = boundary.check_config(config)  # the one check of a launch: every path to a queued run passes here
    warnings = validate_checked_config(store, config, model_cache_dir=model_cache_dir, login=owner)
    config = stored_run_config(config)
    run = store.create_run(
        name=config.name, config=config.model_dump(mode="json"), dataset_id=config.dataset_id,
        max_steps=config.max_steps, owner=owner,
    )
    return SubmittedRun(run=run, warnings=tuple(warnings))
