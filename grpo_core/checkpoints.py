"""The checkpoints of a run: where TRL writes them and which one a resume starts from. Imports no torch.

TRL's trainer (``transformers.Trainer``) writes ``checkpoint-<global step>`` folders under its ``output_dir``,
which the worker sets to ``<run folder>/output``: every ``save_steps`` steps, at the last step when ``save_steps``
is set, and when a run is cancelled (the recorder asks for a save before stopping). ``trainer_state.json`` is the
last file a checkpoint gets, so a folder without it (the worker died while saving) is skipped.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

OUTPUT_DIR_NAME = "output"
TRAINER_STATE_FILE = "trainer_state.json"
_CHECKPOINT_NAME = re.compile(r"^checkpoint-(\d+)$")


@dataclass(frozen=True)
class Checkpoint:
    """A complete checkpoint folder and the optimizer step it holds (steps ``1..step`` are trained)."""

    path: Path
    step: int


def output_dir(run_folder: str | Path) -> Path:
    """TRL's ``output_dir`` for a run folder: checkpoints land in it."""
    return Path(run_folder) / OUTPUT_DIR_NAME


def list_checkpoints(run_folder: str | Path) -> list[Checkpoint]:
    """The complete checkpoints of a run folder, oldest step first; empty when there are none."""
    folder = output_dir(run_folder)
    if not folder.is_dir():
        return []
    found = []
    for child in folder.iterdir():
        match = _CHECKPOINT_NAME.match(child.name)
        if match and child.is_dir() and (child / TRAINER_STATE_FILE).is_file():
            found.append(Checkpoint(path=child, step=int(match.group(1))))
    return sorted(found, key=lambda c: c.step)


def last_checkpoint(run_folder: str | Path) -> Checkpoint | None:
    """The complete checkpoint with the highest step in a run folder, or ``None``."""
    checkpoints = list_checkpoints(run_folder)
    return checkpoints[-1] if checkpoints else None
