"""The images of a run's recorded groups, read from the run's dataset: a group keeps its ``row_index`` and the
dataset keeps the images (:mod:`grpo_core.datasets.images`), so nothing is copied twice. A group a training script
recorded (:class:`grpo_core.integrations.DashboardCallback`; its ``row_index`` is a prompt key) names images the
store keeps for its run (:mod:`storage.run_images`).

Only the run's owner and admins read them (:func:`grpo_core.access.ownership.may_change`; a dashboard without
logins is one user's); every route that shows or returns a run's images goes through :func:`group_images`, which
raises :class:`~grpo_core.access.ownership.NotOwnerError` for anyone else. Imports no torch.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from grpo_core.access.ownership import SINGLE_USER, Actor, NotOwnerError, may_change
from grpo_core.datasets.formats import read_normalized_row
from grpo_core.datasets.images import image_folder, image_in_folder, row_image_names
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.datasets.rows import dataset_file, is_prompt_key

#: Most images returned for one group (a row may hold more; the rest are left out).
MAX_GROUP_IMAGES = 16
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class GroupImage:
    """One image of a group's prompt: ``name`` is its stored name (``<sha256>.png``, the reference a client keeps),
    ``data`` the PNG's bytes."""

    name: str
    data: bytes

    def data_url(self) -> str:
        """The image as a ``data:image/png;base64,...`` URL (shown inline: no file is served)."""
        return "data:image/png;base64," + base64.b64encode(self.data).decode("ascii")


def check_may_read_images(actor: Actor, run) -> None:
    """Refuse ``actor`` the images of ``run`` (a :class:`storage.RunInfo`) unless it owns the run or is an admin.

    Raises:
        NotOwnerError: the message says who may.
    """
    if not may_change(actor, run.owner):
        raise NotOwnerError(f"{actor.user} may not see the images of run #{run.id}: it belongs to {run.owner}; only "
                            "its owner or an admin may")


def group_images(store, run, row_index: int, *, split: str = "train", actor: Actor = SINGLE_USER) -> list[GroupImage]:
    """The images of dataset row ``row_index`` of ``run`` (the eval dataset's row for an ``eval`` group of a run
    with ``eval_dataset_id``), or of the latest group of a script run's prompt key, at most
    :data:`MAX_GROUP_IMAGES`; ``[]`` for a text row, a row or file that is gone. A stored value that is not a
    stored image's name, or bytes that are not a PNG, are left out.

    Raises:
        NotOwnerError: ``actor`` is neither the run's owner nor an admin (checked before anything is read).
    """
    check_may_read_images(actor, run)
    row_index = int(row_index)
    config = run.config or {}
    if row_index < 0:
        return []
    if is_prompt_key(row_index):
        return _recorded_images(store, run.id, row_index, split)
    if split == "eval" and config.get("eval_dataset_id") is not None:
        config = {"dataset_id": config["eval_dataset_id"]}
    path = dataset_file(store, config)
    if path is None:
        return []
    try:
        row = read_normalized_row(Path(path), row_index)
    except (IndexError, DatasetError, OSError, ValueError):
        return []
    folder = image_folder(path)
    found = []
    for name in row_image_names(row)[:MAX_GROUP_IMAGES]:
        try:
            found.append(GroupImage(name, image_in_folder(folder, name).read_bytes()))
        except (OSError, ValueError):
            continue
    return found


def _recorded_images(store, run_id: int, row_index: int, split: str) -> list[GroupImage]:
    """The images a training script recorded for its latest group of prompt key ``row_index``."""
    found = []
    for name in store.prompt_image_names(run_id, row_index, split)[:MAX_GROUP_IMAGES]:
        data = store.run_image(run_id, name)
        if data is not None and data.startswith(_PNG_SIGNATURE):
            found.append(GroupImage(name, data))
    return found
