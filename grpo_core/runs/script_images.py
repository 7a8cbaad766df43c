"""The prompt images a training script records with its groups (:class:`grpo_core.integrations.DashboardCallback`):
made into bounded PNG copies on the script's side, checked again by decoding where the dashboard receives them.

* :func:`recorded_copy` (the script's writer thread): a picture TRL handed the reward functions (a PIL image, as a
  ``datasets.Image`` column gives it, or encoded bytes) becomes a PNG of at most :data:`MAX_SIDE` pixels a side and
  :data:`storage.run_images.MAX_IMAGE_BYTES` bytes, named by its SHA-256. A string or a ``{"path": ...}`` is a path
  on the script's machine: never read, never sent.
* :func:`checked_copy` (the dashboard, for each image a request carries): the bytes must be a PNG of at most
  :data:`MAX_SIDE` x :data:`MAX_SIDE` pixels (read from the header before any pixel is decoded, as for datasets:
  :func:`grpo_core.datasets.images.decode_image`), decoded and re-encoded; its name is the SHA-256 of the re-encoded
  bytes, whatever name the request gave.

Imports no torch; Pillow only inside functions.
"""

from __future__ import annotations

import hashlib
import io
from typing import Any

from grpo_core.datasets.images import decode_image
from storage.run_images import MAX_IMAGE_BYTES

#: Longest side of a recorded copy, in pixels (Inspect shows pictures at most 224 pixels wide; 1024 keeps detail).
MAX_SIDE = 1024
#: Most images recorded for one group's prompt.
MAX_GROUP_IMAGES = 16
#: Most pixels of a picture the script side copies (a larger one in a script's memory is not recorded).
MAX_SOURCE_PIXELS = 8192 * 8192
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


class ImageRefused(Exception):
    """An image a request carries is not one the dashboard keeps; the message says why. Not a ``ValueError``:
    :func:`~grpo_core.datasets.images.decode_image` reads one as a picture that does not decode."""


def _named(png: bytes) -> tuple[str, bytes]:
    return hashlib.sha256(png).hexdigest() + ".png", png


def recorded_copy(picture: Any) -> tuple[str, bytes] | None:
    """A bounded PNG copy of ``picture`` and its stored name, or ``None`` when it is not a picture in memory (a
    path, a URL, a dict without bytes, ``None``), is larger than :data:`MAX_SOURCE_PIXELS`, does not decode, or its
    copy stays over :data:`~storage.run_images.MAX_IMAGE_BYTES`."""
    from PIL import Image

    if isinstance(picture, dict):
        picture = picture.get("bytes")
    if isinstance(picture, (bytes, bytearray)):
        try:
            png, _ = decode_image(bytes(picture[:64 << 20]), MAX_SOURCE_PIXELS, ValueError)
            picture = Image.open(io.BytesIO(png), formats=["PNG"])
        except ValueError:
            return None
    if not isinstance(picture, Image.Image):
        return None
    width, height = picture.size
    if width < 1 or height < 1 or width * height > MAX_SOURCE_PIXELS:
        return None
    try:
        mode = "RGBA" if picture.mode in ("RGBA", "LA", "PA") or "transparency" in picture.info else "RGB"
        for side in (MAX_SIDE, MAX_SIDE // 2):
            copy = picture.convert(mode)
            copy.thumbnail((side, side))
            out = io.BytesIO()
            copy.save(out, format="PNG")
            if out.tell() <= MAX_IMAGE_BYTES:
                return _named(out.getvalue())
    except (OSError, ValueError):
        return None
    return None


def checked_copy(data: Any) -> tuple[str, bytes]:
    """The stored name and bytes of an image a request carries, re-encoded after checking (module docstring).

    Raises:
        ImageRefused: not bytes, over :data:`~storage.run_images.MAX_IMAGE_BYTES`, not a PNG, over
            :data:`MAX_SIDE` x :data:`MAX_SIDE` pixels, or corrupt.
    """
    if not isinstance(data, (bytes, bytearray)) or not data:
        raise ImageRefused("an image must be PNG bytes")
    if len(data) > MAX_IMAGE_BYTES:
        raise ImageRefused(f"an image is {len(data):,} bytes; the limit is {MAX_IMAGE_BYTES:,}")
    if not bytes(data[:8]) == _PNG_SIGNATURE:
        raise ImageRefused("an image is not a PNG")
    png, _ = decode_image(bytes(data), MAX_SIDE * MAX_SIDE, ImageRefused)
    if len(png) > MAX_IMAGE_BYTES:
        raise ImageRefused(f"an image re-encoded is {len(png):,} bytes; the limit is {MAX_IMAGE_BYTES:,}")
    return _named(png)
