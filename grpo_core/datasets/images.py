"""Images in prompt datasets: found in the row's ``image`` / ``images`` column or in its prompt's image blocks,
decoded with Pillow under bounds, re-encoded as PNG and stored once beside the dataset's rows.

The layouts read (the ones TRL's ``GRPOTrainer`` trains from, with its ``image`` / ``images`` columns):

* Parquet or a ``save_to_disk`` folder with ``datasets.Image`` features: each cell a ``{"bytes", "path"}`` struct
  (:mod:`grpo_core.datasets.columnar` keeps the bytes as bytes), or a list of them;
* JSON Lines, JSON or CSV inside a ``.zip`` whose ``image`` / ``images`` column names image files inside the zip
  (one name, a list of names, or in CSV a JSON list of names);
* chat prompts whose message content is a list of blocks, ``{"type": "text", "text": ...}`` and ``{"type":
  "image"}``; an image block may carry its picture (``"image"`` or ``"path"``: a file in the zip, or
  ``{"bytes", "path"}``).

Every image is refused with a :class:`~grpo_core.datasets.prompt_dataset.DatasetError` naming the file, the row
and the column when it is missing, names a file outside the upload (an absolute name, ``..``, a symbolic link, a URL:
nothing is fetched), is not one of :data:`ALLOWED_FORMATS`, does not decode, is larger than
:attr:`ImageBudget.max_file_bytes`, or has more than :attr:`ImageBudget.max_pixels` pixels: its size is read from
its header before any pixel is decoded, so a decompression bomb (a small PNG of 50,000 x 50,000 pixels) never
reaches the memory (Pillow's own ``DecompressionBombError`` is the second line). The whole dataset is bounded too
(:attr:`ImageBudget.max_total_pixels`).

Stored rows carry the images as :data:`IMAGES_COLUMN`: a list of file names (``"<sha256>.png"``) in the dataset's
image folder (:func:`image_folder`: ``<rows file>.images/`` beside the rows), each picture stored once however many
rows use it; a chat prompt keeps bare ``{"type": "image"}`` blocks, a text prompt becomes one user message (TRL puts
the image blocks before it). Imports no torch; Pillow only inside functions.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_core.datasets.plain_values import json_type, plain
from grpo_core.datasets.prompt_dataset import PROMPT_COLUMN, DatasetError, PromptDataset

IMAGES_COLUMN = "images"
IMAGE_COLUMN = "image"
#: Pillow format names accepted; anything else (SVG, PDF, TIFF, PSD, a text file) is refused.
ALLOWED_FORMATS = ("PNG", "JPEG", "GIF", "WEBP", "BMP")
#: File names in an image folder: the PNG's SHA-256 and ``.png`` (nothing a login chooses).
STORED_NAME = re.compile(r"^[0-9a-f]{64}\.png$")


@dataclass(frozen=True)
class ImageBudget:
    """Bounds on one dataset's images.

    Attributes:
        max_pixels: most pixels (width x height) of one image, read from its header before decoding (default
            4096 x 4096, about 16.8 million).
        max_file_bytes: most bytes of one encoded image (default 32 MiB).
        max_total_pixels: most pixels decoded for one dataset, its distinct images' together (equal bytes are
            decoded once; default 2**28, 268 million, about 1 GB as RGB).
        max_images: most distinct images decoded for one dataset (default 20,000): a 4 MB zip of 20,000 one-pixel
            PNGs took 7.6 s of the web process's CPU, so the pixel budget alone let a 200 MB upload cost minutes.
    """

    max_pixels: int = 4096 * 4096
    max_file_bytes: int = 32 << 20
    max_total_pixels: int = 1 << 28
    max_images: int = 20_000


@dataclass
class StagedImages:
    """Images decoded for one dataset, not yet stored: ``files`` maps each stored name to its PNG bytes."""

    files: dict[str, bytes] = field(default_factory=dict)
    total_pixels: int = 0

    def write(self, folder: Path) -> None:
        """Write every image into ``folder`` (created; existing names are kept, they hold the same bytes).

        Raises:
            OSError: a file cannot be written.
        """
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in self.files.items():
            target = folder / name
            if not target.exists():
                tmp = folder / f".{name}.tmp"
                tmp.write_bytes(data)
                os.replace(tmp, target)


def image_folder(rows_file: str | Path) -> Path:
    """The folder holding a stored dataset's images: its rows file with the suffix ``.images``."""
    return Path(rows_file).with_suffix(".images")


def has_images(columns: list[str] | tuple[str, ...]) -> bool:
    """Whether a stored dataset with these columns carries images."""
    return IMAGES_COLUMN in columns


def stored_image_path(rows_file: str | Path, name: Any) -> Path:
    """The path of a stored image ``name`` of the dataset whose rows are in ``rows_file``.

    Raises:
        ValueError: ``name`` is not a stored image's name (``<sha256>.png``); it is never used as a path then.
    """
    return image_in_folder(image_folder(rows_file), name)


def image_in_folder(folder: Path, name: Any) -> Path:
    """The path of a stored image ``name`` in an image ``folder``.

    Raises:
        ValueError: ``name`` is not a stored image's name (``<sha256>.png``); it is never used as a path then.
    """
    if not isinstance(name, str) or not STORED_NAME.match(name):
        raise ValueError(f"not a stored image name: {str(name)[:80]!r}")
    return folder / name


def rows_images_folder(store: Any, config: Any, rows: list[dict[str, Any]]) -> Path | None:
    """The image folder of the stored dataset a run config names, when its ``rows`` carry images; else ``None``."""
    if not any(row_image_names(row) for row in rows[:1]):
        return None
    from grpo_core.datasets.rows import dataset_file

    path = dataset_file(store, config)
    return image_folder(path) if path is not None else None


def row_image_names(row: dict[str, Any]) -> list[str]:
    """The stored image names of one stored row (``[]`` without images); names of another form are left out."""
    names = row.get(IMAGES_COLUMN)
    if not isinstance(names, list):
        return []
    return [n for n in names if isinstance(n, str) and STORED_NAME.match(n)]


def dataset_has_image_values(dataset: PromptDataset) -> bool:
    """Whether a checked dataset has an ``image`` / ``images`` column or a prompt with an image block."""
    if IMAGE_COLUMN in dataset.columns or IMAGES_COLUMN in dataset.columns:
        return True
    return any(_image_blocks(row.get(PROMPT_COLUMN)) for row in dataset.rows)


def attach_images(
    dataset: PromptDataset, base: Path | None, budget: ImageBudget | None = None
) -> tuple[PromptDataset, StagedImages]:
    """Decode every image of ``dataset`` and give its rows the stored form (see the module's docstring).

    Args:
        dataset: checked rows, as the readers give them (image cells still as names, structs or bytes).
        base: the folder image file names are relative to (the unpacked zip's folder holding the data file), or
            ``None`` when the upload was one file (then only embedded bytes are accepted).
        budget: the bounds (default :class:`ImageBudget`).

    Returns:
        (the dataset with :data:`IMAGES_COLUMN` holding stored names, the images to store). A dataset without
        images is returned as is, with nothing staged.

    Raises:
        DatasetError: an image is missing, outside the upload, of a refused format, corrupt or over a bound; both
            ``image`` and ``images`` columns; a row with no image; a prompt whose image blocks do not match its
            images in number. The message names the file, row and column.
    """
    budget = budget or ImageBudget()
    staged = StagedImages()
    if not dataset_has_image_values(dataset):
        if dataset.format in ("parquet", "arrow"):  # an image struct under another name: its bytes made plain
            rows = [{k: plain(v) for k, v in row.items()} for row in dataset.rows]
            dataset = PromptDataset(rows=rows, columns=dataset.columns, format=dataset.format,
                                    source_name=dataset.source_name)
        return dataset, staged
    name = dataset.source_name
    if IMAGE_COLUMN in dataset.columns and IMAGES_COLUMN in dataset.columns:
        raise DatasetError(name, "both an 'image' and an 'images' column; keep one (rename the other)")
    column = IMAGE_COLUMN if IMAGE_COLUMN in dataset.columns else IMAGES_COLUMN
    decode = _Decoder(name, base, budget, staged)
    rows = []
    for number, row in enumerate(dataset.rows, start=1):
        prompt, from_blocks, placeholders = _prompt_images(row.get(PROMPT_COLUMN), decode, number)
        names = list(from_blocks)
        cell = row.get(column)
        if dataset.format == "csv" and isinstance(cell, str) and cell.lstrip().startswith("["):
            cell = _json_list_or_text(cell)  # CSV holds several names as a JSON list
        cells = cell if isinstance(cell, list) else ([] if cell is None else [cell])
        for position, value in enumerate(cells, start=1):
            names.append(decode(value, number, column, position if len(cells) > 1 else None))
        if not names:
            raise DatasetError(name, "the row has no image; every row of an image dataset needs one", row=number,
                               field=column)
        if placeholders and placeholders != len(names):
            raise DatasetError(name, f"the prompt has {placeholders} image blocks but the row has {len(names)} "
                                     "images; give one image a block", row=number, field=PROMPT_COLUMN)
        kept = {k: plain(v) for k, v in row.items() if k not in (IMAGE_COLUMN, IMAGES_COLUMN)}
        rows.append({**kept, PROMPT_COLUMN: prompt, IMAGES_COLUMN: names})
    columns = [c for c in dataset.columns if c not in (IMAGE_COLUMN, IMAGES_COLUMN)] + [IMAGES_COLUMN]
    return PromptDataset(rows=rows, columns=columns, format=dataset.format, source_name=name), staged


def _json_list_or_text(cell: str) -> Any:
    try:
        value = json.loads(cell)
    except (RecursionError, ValueError):
        return cell
    return value if isinstance(value, list) else cell


def _image_blocks(prompt: Any) -> list[dict[str, Any]]:
    if not isinstance(prompt, list):
        return []
    return [block for message in prompt if isinstance(message, dict) and isinstance(message.get("content"), list)
            for block in message["content"] if isinstance(block, dict) and block.get("type") == "image"]


def _prompt_images(prompt: Any, decode: _Decoder, row: int) -> tuple[Any, list[str], int]:
    """(the prompt as stored, the images its blocks carried, its number of image blocks). A text prompt becomes
    one user message; an image block keeps only its ``type``."""
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}], [], 0
    names: list[str] = []
    count = 0
    messages = []
    for message in prompt:
        content = message.get("content")
        if not isinstance(content, list):
            messages.append(message)
            continue
        blocks = []
        for block in content:
            if block.get("type") == "image":
                count += 1
                carried = next((block[k] for k in ("image", "path", "url") if block.get(k) is not None), None)
                if carried is not None:
                    if "url" in block and block.get("url") is not None:
                        carried = {"url": block["url"]}
                    names.append(decode(carried, row, PROMPT_COLUMN, count))
                blocks.append({"type": "image"})
            else:
                blocks.append(block)
        messages.append({**message, "content": blocks})
    if names and len(names) != count:
        raise DatasetError(decode.name, f"{len(names)} of the prompt's {count} image blocks carry their image; "
                                        "give every block its image, or none (then the image column gives them)",
                           row=row, field=PROMPT_COLUMN)
    return messages, names, count


class _Decoder:
    """Turns one image cell into a stored name, staging its PNG; every refusal names the row and column."""

    def __init__(self, name: str, base: Path | None, budget: ImageBudget, staged: StagedImages) -> None:
        self.name, self.base, self.budget, self.staged = name, base, budget, staged
        self.by_source: dict[str, str] = {}  # a file name in the upload -> its stored name
        self.by_digest: dict[bytes, str] = {}  # the SHA-256 of an image's bytes as uploaded -> its stored name

    def __call__(self, value: Any, row: int, column: str, position: int | None) -> str:
        where = {"row": row, "field": column}
        which = f"image {position}: " if position is not None else ""

        def refuse(reason: str) -> DatasetError:
            return DatasetError(self.name, which + reason, **where)

        if isinstance(value, dict):
            data, path = value.get("bytes"), value.get("path")
            if value.get("url") is not None:
                raise refuse("images are not fetched from URLs; put the file in the zip and name it")
            if isinstance(data, bytes | bytearray) and data:
                return self._stage(bytes(data), refuse)
            if data is not None and not isinstance(data, bytes | bytearray):
                raise refuse(f"the image's 'bytes' is {json_type(data)}; expected binary data")
            value = path
        if value is None:
            raise refuse("the image is missing")
        if not isinstance(value, str):
            raise refuse(f"expected an image file name or image data, got {json_type(value)}")
        # keyed by the name's parts, not its spelling: "a.png", "./a.png" and ".//./a.png" are one file, read once
        # (before, each spelling read and hashed the file again: 100 rows naming one 30 MB file cost 2.3 s of CPU)
        key = "/".join(p for p in value.replace("\\", "/").split("/") if p not in ("", "."))
        if key in self.by_source and _plain_name(value):
            return self.by_source[key]
        data = self._read_inside(value, refuse)
        stored = self._stage(data, refuse)
        self.by_source[key] = stored
        return stored

    def _read_inside(self, relative: str, refuse: Callable[[str], DatasetError]) -> bytes:
        """The bytes of the upload's file ``relative``: a plain relative name inside the upload, no link."""
        shown = relative[:100]
        if self.base is None:
            raise refuse(f"names the image file {shown!r}, but the upload is one file; upload a .zip holding the "
                         "dataset and its images, or embed the images' bytes (Parquet, save_to_disk)")
        parts = relative.replace("\\", "/").split("/")
        if not _plain_name(relative):
            raise refuse(f"the image path {shown!r} is not a plain relative name inside the zip (absolute names, "
                         "'..', drive letters and URLs are refused)")
        base = Path(os.path.realpath(self.base))
        path = self.base.joinpath(*[p for p in parts if p not in ("", ".")])
        current = self.base
        for part in [p for p in parts if p not in ("", ".")]:
            current = current / part
            if current.is_symlink():
                raise refuse(f"the image path {shown!r} leads outside the zip (a symbolic link)")
        if not Path(os.path.realpath(path)).is_relative_to(base):
            raise refuse(f"the image path {shown!r} leads outside the zip")
        if not path.is_file():
            raise refuse(f"the image file {shown!r} is not in the zip")
        size = path.stat().st_size
        if size > self.budget.max_file_bytes:
            raise refuse(f"the image file {shown!r} is {size / 2**20:,.1f} MB; the limit is "
                         f"{self.budget.max_file_bytes / 2**20:,.0f} MB an image")
        return path.read_bytes()

    def _stage(self, data: bytes, refuse: Callable[[str], DatasetError]) -> str:
        if len(data) > self.budget.max_file_bytes:
            raise refuse(f"the image is {len(data) / 2**20:,.1f} MB; the limit is "
                         f"{self.budget.max_file_bytes / 2**20:,.0f} MB an image")
        digest = hashlib.sha256(data).digest()
        if digest in self.by_digest:  # the same bytes again (another row, another name): decoded once
            return self.by_digest[digest]
        if len(self.by_digest) >= self.budget.max_images:
            raise refuse(f"the dataset has more than {self.budget.max_images:,} distinct images, the most one "
                         "dataset may; split it")
        png, pixels = decode_image(data, self.budget.max_pixels, refuse)
        # every decode counts, not only distinct pictures: the work of one upload is bounded too
        self.staged.total_pixels += pixels
        if self.staged.total_pixels > self.budget.max_total_pixels:
            raise refuse(f"the dataset's images hold over {self.budget.max_total_pixels:,} pixels together, "
                         "the most one dataset may; split it or make the images smaller")
        stored = hashlib.sha256(png).hexdigest() + ".png"
        self.staged.files.setdefault(stored, png)
        self.by_digest[digest] = stored
        return stored


def _plain_name(relative: str) -> bool:
    """Whether ``relative`` is a plain relative file name: not blank, no NUL, no URL scheme or drive letter, not
    absolute or ``~``, no ``..`` part."""
    parts = relative.replace("\\", "/").split("/")
    return not (not relative.strip() or "\x00" in relative or re.match(r"^[A-Za-z][A-Za-z0-9+.-]*:", relative)
                or relative.startswith(("/", "\\", "~")) or ".." in parts)


def decode_image(data: bytes, max_pixels: int, refuse: Callable[[str], Exception]) -> tuple[bytes, int]:
    """Decode one encoded image (its first frame) and re-encode it as PNG (RGB, or RGBA where it has alpha).

    The size is read from the header first: more than ``max_pixels`` pixels is refused before decoding.

    Returns:
        (the PNG's bytes, its pixels).

    Raises:
        the exception ``refuse(reason)`` makes: not an image, a format outside :data:`ALLOWED_FORMATS`, too many
        pixels, or a file that does not decode (truncated, corrupt).
    """
    from PIL import Image, UnidentifiedImageError

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)  # bounded below
            with Image.open(io.BytesIO(data), formats=list(ALLOWED_FORMATS)) as image:
                width, height = image.size
                if width < 1 or height < 1 or width * height > max_pixels:
                    raise refuse(f"the image is {width} x {height} pixels; the limit is {max_pixels:,} pixels "
                                 "(a decompression bomb, or a picture to make smaller)")
                image.seek(0)
                image.load()
                mode = "RGBA" if image.mode in ("RGBA", "LA", "PA") or "transparency" in image.info else "RGB"
                converted = image.convert(mode)
    except UnidentifiedImageError as exc:
        raise refuse(f"not an image of an accepted format ({', '.join(ALLOWED_FORMATS)})") from exc
    except Image.DecompressionBombError as exc:
        raise refuse(f"the image has too many pixels (a decompression bomb): {exc}") from exc
    except (OSError, SyntaxError, ValueError, EOFError) as exc:
        raise refuse(f"the image does not decode (corrupt or truncated): {str(exc)[:120]}") from exc
    out = io.BytesIO()
    converted.save(out, format="PNG")
    return out.getvalue(), width * height


def thumbnails(rows: list[dict[str, Any]], load: Callable[[str], bytes | None], limit: int = 8,
               size: int = 96) -> list[tuple[Any, str]]:
    """Thumbnails of the first rows' images for a preview: ``(PIL image, "row N")`` pairs, at most ``limit``;
    an image ``load`` cannot give (``None``) is left out."""
    from PIL import Image

    shown: list[tuple[Any, str]] = []
    for number, row in enumerate(rows, start=1):
        for stored in row_image_names(row):
            data = load(stored)
            if data is None:
                continue
            with Image.open(io.BytesIO(data), formats=["PNG"]) as image:
                image.thumbnail((size, size))
                shown.append((image.copy(), f"row {number}"))
            if len(shown) >= limit:
                return shown
    return shown
