"""Prompt images recorded by a training script (:class:`grpo_core.integrations.DashboardCallback`): a script's
dataset is not one the dashboard stores, so the pictures of its groups are kept in the store, once per run.

A group names its images in ``extra[GROUP_IMAGES_KEY]`` (stored names, ``<sha256>.png``); the bytes are rows of
``run_images`` keyed by ``(run_id, name)``, so a group can only ever show images of its own run. Writes are bounded
per image (:data:`MAX_IMAGE_BYTES`) and per run (:data:`MAX_RUN_IMAGES`, :data:`MAX_RUN_IMAGE_BYTES`): images past a
bound are not stored (their groups show fewer pictures), the step is. Who may read them is the caller's check
(:mod:`grpo_core.runs.images`). Deleted with the run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from sqlalchemy import func, insert, select

from storage.base import StoreBase, split_clause
from storage.records import GroupRecord
from storage.tables import GroupRow, RunImageRow

#: The key of a group's ``extra`` naming its prompt's recorded images.
GROUP_IMAGES_KEY = "prompt_images"
#: A stored image's name: the PNG's SHA-256 and ``.png`` (never a path).
IMAGE_NAME = re.compile(r"^[0-9a-f]{64}\.png$")
#: Most bytes of one recorded image (a PNG).
MAX_IMAGE_BYTES = 4 << 20
#: Most distinct images, and most bytes of them together, one run keeps.
MAX_RUN_IMAGES = 4096
MAX_RUN_IMAGE_BYTES = 512 << 20


def write_group_images(connection, run_id: int, groups: Sequence[GroupRecord]) -> int:
    """Store the images the ``groups`` carry (:attr:`GroupRecord.images`) that ``run_id`` lacks, in
    ``connection``'s transaction (not committed). Names of another form, images over :data:`MAX_IMAGE_BYTES` and
    those past the run's bounds are skipped. Returns how many were stored."""
    offered: dict[str, bytes] = {}
    for group in groups:
        for name, data in (group.images or {}).items():
            if (isinstance(name, str) and IMAGE_NAME.match(name) and isinstance(data, bytes)
                    and 0 < len(data) <= MAX_IMAGE_BYTES):
                offered.setdefault(name, data)
    if not offered:
        return 0
    existing = set(connection.execute(select(RunImageRow.name).where(
        RunImageRow.run_id == run_id, RunImageRow.name.in_(list(offered)))).scalars())
    new = [(name, data) for name, data in offered.items() if name not in existing]
    if not new:
        return 0
    count, total = connection.execute(select(func.count(), func.coalesce(func.sum(func.length(RunImageRow.data)), 0))
                                      .where(RunImageRow.run_id == run_id)).one()
    count, total = int(count), int(total)
    rows = []
    for name, data in new:
        if count + 1 > MAX_RUN_IMAGES or total + len(data) > MAX_RUN_IMAGE_BYTES:
            break
        rows.append({"run_id": run_id, "name": name, "data": data})
        count, total = count + 1, total + len(data)
    if rows:
        connection.execute(insert(RunImageRow), rows)
    return len(rows)


class RunImageStore(StoreBase):
    """Reads of the images a training script recorded (see the module's docstring)."""

    def run_image(self, run_id: int, name: str) -> bytes | None:
        """The PNG bytes of image ``name`` of ``run_id``; ``None`` when it has none of that name (or the name is not
        a stored image's)."""
        if not isinstance(name, str) or not IMAGE_NAME.match(name):
            return None
        with self._session() as session:
            data = session.execute(select(RunImageRow.data).where(
                RunImageRow.run_id == int(run_id), RunImageRow.name == name)).scalar()
        return bytes(data) if data is not None else None

    def prompt_image_names(self, run_id: int, row_index: int, split: str = "train") -> list[str]:
        """The image names the latest group of ``run_id`` with ``row_index`` and ``split`` recorded (``[]``:
        none); values of another form are left out."""
        with self._session() as session:
            extra = session.execute(
                select(GroupRow.extra).where(GroupRow.run_id == int(run_id), GroupRow.row_index == int(row_index),
                                             split_clause(split))
                .order_by(GroupRow.step.desc(), GroupRow.id.desc()).limit(1)).scalar()
        names = extra.get(GROUP_IMAGES_KEY) if isinstance(extra, dict) else None
        if not isinstance(names, list):
            return []
        return [name for name in names if isinstance(name, str) and IMAGE_NAME.match(name)]
