"""Where a run's files live: THE run folder and everything in it (pure path logic; imports no torch).

A run folder ``<data dir>/runs/run-NNNNN/`` (its ``run_dir``) holds:

* ``config.yaml``: the run config as the worker trained it;
* ``train.log``: the worker's standard output and error (:data:`LOG_FILE_NAME`);
* ``output/``: TRL's ``output_dir`` (:func:`output_dir`), where ``transformers.Trainer`` writes
  ``checkpoint-<global step>/`` folders every ``save_steps`` steps, at the last step, and when a run is cancelled;
* ``adapter/``: the final weights written when training ends (:func:`adapter_dir`).

With LoRA a checkpoint and the final folder hold a PEFT adapter (``adapter_config.json`` +
``adapter_model.safetensors``); without LoRA full model weights (``config.json`` + ``model.safetensors``).
``trainer_state.json`` is the last file a checkpoint gets, so a checkpoint folder without it (the worker died while
saving) is not complete and is neither offered nor resumed from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grpo_core.settings import Settings
from storage import RunInfo

OUTPUT_DIR_NAME = "output"
ADAPTER_DIR_NAME = "adapter"
LOG_FILE_NAME = "train.log"
CONFIG_FILE_NAME = "config.yaml"
TRAINER_STATE_FILE = "trainer_state.json"
LATEST = "latest"
FINAL = ADAPTER_DIR_NAME
_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")


class ArtifactError(ValueError):
    """A run has no trained weights where they were asked for; the message says where it looked."""


def run_dir(settings: Settings, run: int | RunInfo) -> Path:
    """The folder of a run.

    For a :class:`storage.RunInfo` whose worker recorded its folder (``run.run_dir``), that folder; otherwise (a run
    id, or a run that never started) ``<data dir>/runs/run-00042``.

    Raises:
        ValueError: a run id that is not a positive whole number, or a computed folder (a symbolic link, say) that
            resolves to a place outside the runs folder: run folders are written to and deleted, so they stay under
            the data directory.
    """
    if isinstance(run, RunInfo):
        if run.run_dir:
            return Path(run.run_dir)
        run = run.id
    if isinstance(run, bool) or not isinstance(run, int) or run < 1:
        raise ValueError(f"a run id is a positive whole number, not {run!r}")
    folder = settings.runs_dir / f"run-{run:05d}"
    root = settings.runs_dir.resolve()
    if folder.resolve().parent != root:
        raise ValueError(f"the run folder {folder} leads to {folder.resolve()}, outside the runs folder {root}")
    return folder


def output_dir(folder: str | Path) -> Path:
    """TRL's ``output_dir`` (``GRPOConfig.output_dir``) of a run folder: ``<run_dir>/output``, where checkpoints land."""
    return Path(folder) / OUTPUT_DIR_NAME


def log_path(folder: str | Path) -> Path:
    """The worker's log file of a run folder: ``<run_dir>/train.log``."""
    return Path(folder) / LOG_FILE_NAME


def adapter_dir(folder: str | Path) -> Path:
    """The final weights of a run folder: ``<run_dir>/adapter`` (a PEFT adapter, or full weights without LoRA)."""
    return Path(folder) / ADAPTER_DIR_NAME


def is_weights_folder(path: Path) -> bool:
    """True when ``path`` holds a PEFT adapter or a full ``from_pretrained`` model."""
    return (path / "adapter_config.json").is_file() or (path / "config.json").is_file()


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint folder (weights and ``trainer_state.json``) and the optimizer step it holds
    (steps ``1..step`` are trained)."""

    path: Path
    step: int


def list_checkpoints(folder: str | Path) -> list[Checkpoint]:
    """The complete checkpoints of a run folder (weights and ``trainer_state.json`` present), oldest step first;
    empty when there are none."""
    output = output_dir(folder)
    if not output.is_dir():
        return []
    found = []
    for child in output.iterdir():
        match = _CHECKPOINT_NAME.match(child.name)
        if match and child.is_dir() and (child / TRAINER_STATE_FILE).is_file() and is_weights_folder(child):
            found.append(Checkpoint(path=child, step=int(match.group(1))))
    return sorted(found, key=lambda c: c.step)


def last_checkpoint(folder: str | Path) -> Checkpoint | None:
    """The complete checkpoint with the highest step in a run folder, or ``None``."""
    checkpoints = list_checkpoints(folder)
    return checkpoints[-1] if checkpoints else None


@dataclass(frozen=True)
class WeightsChoice:
    """One set of trained weights a user can pick: a label for the UI, the value passed back, and its folder."""

    label: str
    value: str
    path: Path


def weights_choices(folder: str | Path) -> list[WeightsChoice]:
    """What can be sampled from a run folder: ``latest`` first, then the final adapter, then checkpoints, newest
    first. Empty when the run saved nothing yet."""
    options: list[WeightsChoice] = []
    final = adapter_dir(folder)
    if is_weights_folder(final):
        options.append(WeightsChoice("final adapter", FINAL, final))
    for checkpoint in reversed(list_checkpoints(folder)):
        options.append(WeightsChoice(f"checkpoint at step {checkpoint.step}", checkpoint.path.name, checkpoint.path))
    if options:
        options.insert(0, WeightsChoice(f"latest ({options[0].label})", LATEST, options[0].path))
    return options


def resolve_weights(folder: str | Path, choice: str | None) -> Path:
    """The folder of the weights named ``choice`` (``latest``, ``adapter`` or ``checkpoint-<step>``) in a run folder.

    ``latest`` (also ``None`` or "") is the final adapter when training finished, else the newest checkpoint.

    Raises:
        ArtifactError: the run folder has no such weights (or none at all, for ``latest``).
    """
    choice = (choice or LATEST).strip()
    for option in weights_choices(folder):
        if option.value == choice:
            return option.path
    if choice == LATEST:
        raise ArtifactError(
            f"run folder {folder} has no trained weights yet (no {ADAPTER_DIR_NAME}/ and no "
            f"{OUTPUT_DIR_NAME}/checkpoint-*/); wait for the run to finish or set save_steps"
        )
    raise ArtifactError(f"run folder {folder} has no weights named {choice!r}")
