"""The pictures of the groups Inspect shows (its step view and one prompt across steps): each prompt's images,
read from the run's dataset for a login that may see them (:func:`grpo_core.runs.images.group_images`)."""

from __future__ import annotations

from app.context import AppContext
from app.views.images import images_html
from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.runs.images import MAX_GROUP_IMAGE_BYTES, group_images

#: Most bytes of PNG one view shows, all its groups together (a step of groups whose rows name the same large
#: pictures held each again); the groups past it show none.
MAX_VIEW_IMAGE_BYTES = 2 * MAX_GROUP_IMAGE_BYTES


def prompt_pictures(ctx: AppContext, run, groups, actor: Actor | None) -> dict[tuple[str, int], str]:
    """``{(split, row_index): images HTML}`` of the groups' prompts that have images, for ``actor``; empty when
    ``actor`` is ``None`` or may not read the run's images."""
    if actor is None:
        return {}
    pictures: dict[tuple[str, int], str] = {}
    left = MAX_VIEW_IMAGE_BYTES
    for group in groups:
        key = (group.split, group.row_index)
        if key in pictures:
            continue
        try:
            found = group_images(ctx.store, run, group.row_index, split=group.split, actor=actor,
                                 max_bytes=min(left, MAX_GROUP_IMAGE_BYTES))
        except NotOwnerError:
            return {}
        left -= sum(len(image.data) for image in found)
        pictures[key] = images_html([image.data_url() for image in found], f"dataset row {group.row_index}")
    return pictures
