"""The images of a run's recorded groups, read from the run's dataset: a group keeps its ``row_index`` and the
dataset keeps the images (:mod:`grpo_core.datasets.images`), so nothing is copied twice. A group a training script
recorded (:class:`grpo_core.integrations.DashboardCallback`; its ``row_index`` is a prompt key) names images the
store keeps for its run (:mod:`storage.run_images`).

Only the run's owner and admins read them, and only when that login may also see the dataset's images (its owner
or an admin: a run of bob's, launched or recorded over the ingest API, may name alice's ``dataset_id``)
(:func:`grpo_core.access.ownership.may_change`; a dashboard without logins is one user's); every route that shows or returns a run's images goes through :func:`group_images`, which
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
from grpo_core.datasets.rows import is_prompt_key

#: Most images returned for one group (a row may hold more; the rest are left out).
MAX_GROUP_IMAGES = 16
#: Most bytes of PNG returned for one group (the images past it are left out): 16 stored pictures of 4096 x 4096
#: pixels of noise are about 800 MB, and every row may name the same ones, so a step's view would hold gigabytes.
MAX_GROUP_IMAGE_BYTES = 24 << 20
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


def group_images(store, run, row_index: int, *, split: str = "train", actor: Actor = SINGLE_USER,
                 max_bytes: int = MAX_GROUP_IMAGE_BYTES) -> list[GroupImage]:
    """The images of dataset row ``row_index`` of ``run`` (the eval dataset's row for an ``eval`` group of a run
    with ``eval_dataset_id``), or of the latest group of a script run's prompt key (the pictures the script
    recorded; a stored value that is not a stored image's name, or bytes that are not a PNG, are left out), at most
    :data:`MAX_GROUP_IMAGES` and ``max_bytes`` of PNG together (the first images that fit); ``[]`` for a text row,
    a run without a stored dataset (images live only in stored datasets: a ``dataset_path``, which may name another
    login's rows file under the data directory, gives none), a row or file that is gone.

    Raises:
        NotOwnerError: ``actor`` is neither the run's owner nor an admin, or neither the dataset's owner nor an
            admin (checked before any row or image is read).
    """
    check_may_read_images(actor, run)
    row_index = int(row_index)
    config = run.config or {}
    if row_index < 0:
        return []
    if is_prompt_key(row_index):
        return _recorded_images(store, run.id, row_index, split, max_bytes)
    dataset_id = config.get("eval_dataset_id") if split == "eval" else None
    if dataset_id is None:
        dataset_id = config.get("dataset_id")
    try:
        info = store.get_dataset(int(dataset_id)) if dataset_id is not None else None
    except (TypeError, ValueError, OverflowError):  # storage.StoreError (a ValueError): no such dataset
        return []
    if info is None:
        return []
    if not may_change(actor, info.owner):
        raise NotOwnerError(f"{actor.user} may not see the images of dataset #{info.id} (run #{run.id} names it): it "
                            f"belongs to {info.owner}; only its owner or an admin may")
    path = Path(info.path)
    if not path.is_file():
        return []
    try:
        row = read_normalized_row(Path(path), row_index)
    except (IndexError, DatasetError, OSError, ValueError):
        return []
    folder = image_folder(path)
    found, total = [], 0
    for name in row_image_names(row)[:MAX_GROUP_IMAGES]:
        try:
            path = image_in_folder(folder, name)
            size = path.stat().st_size
            if total + size > max_bytes:
                break
            found.append(GroupImage(name, path.read_bytes()))
            total += size
        except (OSError, ValueError):
            continue
    return found


def _recorded_images(store, run_id: int, row_index: int, split: str, max_bytes: int) -> list[GroupImage]:
    """The images a training script recorded for its latest group of prompt key ``row_index`` (the run's own
    store rows: a group names only pictures its record carried), at most ``max_bytes`` together."""
    found, total = [], 0
    for name in store.prompt_image_names(run_id, row_index, split)[:MAX_GROUP_IMAGES]:
        data = store.run_image(run_id, name)
        if data is None or not data.startswith(_PNG_SIGNATURE):
            continue
        if total + len(data) > max_bytes:
            break
        found.append(GroupImage(name, data))
        total += len(data)
    return found
