"""Where a run's files lie: its folder, the final adapter and TRL's checkpoints (pure path logic, no torch).

A run folder ``<data dir>/runs/run-NNNNN/`` holds ``config.yaml``, ``train.log``, TRL's ``output/checkpoint-<step>/``
folders (when ``save_steps`` > 0) and the final ``adapter/`` written when training ends. With LoRA both hold a PEFT
adapter (``adapter_config.json`` + ``adapter_model.safetensors``); without LoRA they hold full model weights.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from grpo_core.settings import Settings
from storage import RunInfo

ADAPTER_DIR_NAME = "adapter"
OUTPUT_DIR_NAME = "output"
LATEST = "latest"
FINAL = "adapter"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


class ArtifactError(ValueError):
    """A run has no trained weights where they were asked for; the message says where it looked."""


def run_folder(settings: Settings, run: RunInfo) -> Path:
    """The run's folder: the one the worker recorded in the store, else ``<runs dir>/run-NNNNN``."""
    if run.output_dir:
        return Path(run.output_dir)
    return settings.runs_dir / f"run-{run.id:05d}"


def is_weights_folder(path: Path) -> bool:
    """True when ``path`` holds a PEFT adapter or a full ``from_pretrained`` model."""
    return (path / "adapter_config.json").is_file() or (path / "config.json").is_file()


def list_checkpoints(folder: Path) -> list[tuple[int, Path]]:
    """TRL's checkpoints under ``<run folder>/output`` as ``(step, path)``, ascending by step; only loadable ones."""
    output = Path(folder) / OUTPUT_DIR_NAME
    if not output.is_dir():
        return []
    found = []
    for child in output.iterdir():
        match = _CHECKPOINT.match(child.name)
        if match and child.is_dir() and is_weights_folder(child):
            found.append((int(match.group(1)), child))
    return sorted(found)


@dataclass(frozen=True)
class WeightsChoice:
    """One set of trained weights a user can pick: a label for the UI, the value passed back, and its folder."""

    label: str
    value: str
    path: Path


def weights_choices(folder: Path) -> list[WeightsChoice]:
    """What can be sampled from a run folder: ``latest`` first, then the final adapter, then checkpoints, newest
    first. Empty when the run saved nothing yet."""
    folder = Path(folder)
    options: list[WeightsChoice] = []
    final = folder / ADAPTER_DIR_NAME
    if is_weights_folder(final):
        options.append(WeightsChoice("final adapter", FINAL, final))
    for step, path in reversed(list_checkpoints(folder)):
        options.append(WeightsChoice(f"checkpoint at step {step}", path.name, path))
    if options:
        options.insert(0, WeightsChoice(f"latest ({options[0].label})", LATEST, options[0].path))
    return options


def resolve_weights(folder: Path, choice: str | None) -> Path:
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
