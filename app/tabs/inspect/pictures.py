"""The pictures of the groups Inspect shows (its step view and one prompt across steps): each prompt's images,
read from the run's dataset for a login that may see them (:func:`grpo_core.runs.images.group_images`)."""

from __future__ import annotations

from app.context import AppContext
from app.views.images import images_html
from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.runs.images import group_images


def prompt_pictures(ctx: AppContext, run, groups, actor: Actor | None) -> dict[tuple[str, int], str]:
    """``{(split, row_index): images HTML}`` of the groups' prompts that have images, for ``actor``; empty when
    ``actor`` is ``None`` or may not read the run's images."""
    if actor is None:
        return {}
    pictures: dict[tuple[str, int], str] = {}
    for group in groups:
        key = (group.split, group.row_index)
        if key in pictures:
            continue
        try:
            found = group_images(ctx.store, run, group.row_index, split=group.split, actor=actor)
        except NotOwnerError:
            return {}
        pictures[key] = images_html([image.data_url() for image in found], f"dataset row {group.row_index}")
    return pictures
