"""Reading an upload into a prompt dataset with its images: one file, or a ``.zip`` holding a ``save_to_disk``
folder or one data file (JSON Lines, JSON, CSV, Parquet) beside the image files its rows name.

A zip is unpacked into a temporary folder after every member is checked (:func:`check_member`: no absolute name,
drive letter, ``..`` or symbolic link) and its unpacked size is bounded by the upload limit; the rows are read by
:func:`grpo_core.datasets.formats.load_prompt_dataset` and their images decoded and staged by
:func:`grpo_core.datasets.images.attach_images` before the folder is removed. Imports no torch.
"""

from __future__ import annotations

import re
import stat
import tempfile
import zipfile
from dataclasses import replace
from pathlib import Path

from grpo_core.access.logins import max_upload_bytes, upload_too_large_message
from grpo_core.datasets.columnar_budget import DECODED_PER_UPLOADED
from grpo_core.datasets.formats import SUPPORTED_EXTENSIONS, load_prompt_dataset
from grpo_core.datasets.images import ImageBudget, attach_images
from grpo_core.datasets.prompt_dataset import ColumnMapping, DatasetError, PromptDataset

#: Most members a zipped upload may hold (each is a file created on the server's disk when unpacked): the images of
#: one dataset (:attr:`grpo_core.datasets.images.ImageBudget.max_images`) and room for a ``save_to_disk`` folder.
MAX_ZIP_MEMBERS = 25_000


class UploadTooLargeError(DatasetError):
    """An upload over ``Settings.max_upload_mb``; ``str()`` reads ``"doubles.jsonl is 312 MB; the limit is 200 MB"``."""

    def __init__(self, source_name: str, message: str) -> None:
        super().__init__(source_name, message)
        self.args = (message,)  # the message names the file already


def decoded_limit(max_upload_mb: int) -> int:
    """What an upload may decode to: :data:`DECODED_PER_UPLOADED` times the upload limit."""
    return DECODED_PER_UPLOADED * max_upload_bytes(max_upload_mb)


def image_budget(max_upload_mb: int) -> ImageBudget:
    """The image bounds of an upload: the defaults, the dataset's pixels at most its decoded limit / 4 (RGBA)."""
    default = ImageBudget()
    return replace(default, max_total_pixels=min(default.max_total_pixels, decoded_limit(max_upload_mb) // 4))


def load_file(path: Path, source_name: str, max_upload_mb: int, mapping: ColumnMapping | None) -> PromptDataset:
    """One uploaded file (its images embedded, if any), read, checked and its images staged."""
    dataset = load_prompt_dataset(path, source_name=source_name, mapping=mapping,
                                  max_decoded_bytes=decoded_limit(max_upload_mb))
    return with_images(dataset, None, max_upload_mb)


def with_images(dataset: PromptDataset, base: Path | None, max_upload_mb: int) -> PromptDataset:
    """``dataset`` with its images decoded (:func:`attach_images`) and staged on ``dataset.images``."""
    attached, staged = attach_images(dataset, base, image_budget(max_upload_mb))
    return replace(attached, images=staged) if staged.files else attached


def check_member(member: zipfile.ZipInfo, source_name: str) -> None:
    """Refuse a zip member that would not land inside the unpacked folder as a plain file or folder: an absolute
    name, a drive letter, a ``..`` part, or a symbolic link (Unix mode bits in ``external_attr``).

    Raises:
        DatasetError: naming the member.
    """
    name = member.filename
    parts = name.replace("\\", "/").split("/")
    mode = member.external_attr >> 16
    if name.startswith(("/", "\\")) or re.match(r"^[A-Za-z]:", name) or ".." in parts or "\x00" in name:
        raise DatasetError(source_name, f"the zip member {name[:100]!r} would land outside the unpacked folder "
                                        "(absolute or '..' names are refused)")
    if stat.S_ISLNK(mode):
        raise DatasetError(source_name, f"the zip member {name[:100]!r} is a symbolic link; zip the files themselves")


def load_zip(path: Path, source_name: str, max_upload_mb: int, mapping: ColumnMapping | None) -> PromptDataset:
    """A ``.zip`` holding one ``save_to_disk`` folder or one data file (at its top or one folder down) with the
    image files it names, unpacked to a temporary folder; its unpacked size is bounded by the upload limit too.

    Raises:
        UploadTooLargeError: the unpacked size is over the upload limit.
        DatasetError: not a zip, a member refused by :func:`check_member`, no dataset or several data files, or
            what reading the rows and their images refuses.
    """
    try:
        _check_member_count(path, source_name)
        with zipfile.ZipFile(path) as archive:
            if len(archive.infolist()) > MAX_ZIP_MEMBERS:
                raise DatasetError(source_name, f"the zip holds {len(archive.infolist()):,} files; the most a "
                                                f"dataset's zip may hold is {MAX_ZIP_MEMBERS:,}")
            unpacked = sum(member.file_size for member in archive.infolist())
            if unpacked > max_upload_bytes(max_upload_mb):
                message = upload_too_large_message(f"{source_name} unpacked", unpacked, max_upload_mb)
                raise UploadTooLargeError(source_name, message or "")
            for member in archive.infolist():
                check_member(member, source_name)
            with tempfile.TemporaryDirectory() as tmp:
                for member in archive.infolist():  # names checked above; zipfile writes no symbolic links
                    try:
                        archive.extract(member, tmp)
                    except OSError as exc:  # a name too long, a file where a folder goes: said without the server's path
                        raise DatasetError(source_name, f"the zip member {member.filename[:100]!r} cannot be unpacked "
                                                        f"({exc.strerror or type(exc).__name__})") from None
                root = Path(tmp)
                if not any(root.glob("*.arrow")) and not _data_files(root):
                    inner = [p for p in root.iterdir() if p.is_dir() and not p.name.startswith("__")]
                    if len(inner) == 1:
                        root = inner[0]
                if any(root.glob("*.arrow")):
                    dataset = load_prompt_dataset(root, source_name=source_name, mapping=mapping,
                                                  max_decoded_bytes=decoded_limit(max_upload_mb))
                    return with_images(dataset, root, max_upload_mb)
                files = _data_files(root)
                if len(files) != 1:
                    found = ", ".join(p.name for p in files[:5]) or "none"
                    raise DatasetError(source_name, "a zip holds a save_to_disk folder, or one data file ("
                                       f"{', '.join(SUPPORTED_EXTENSIONS)}) beside its images; found {found}")
                dataset = load_prompt_dataset(files[0], source_name=f"{source_name}/{files[0].name}",
                                              mapping=mapping, max_decoded_bytes=decoded_limit(max_upload_mb))
                return with_images(dataset, root, max_upload_mb)
    except zipfile.BadZipFile as exc:
        raise DatasetError(source_name, f"not a valid zip file ({exc})") from exc


def _check_member_count(path: Path, source_name: str) -> None:
    """Refuse a zip whose end record counts more than :data:`MAX_ZIP_MEMBERS` members, read before
    ``zipfile.ZipFile`` builds an entry for each (500,000 empty members in 41 MB took 3.5 s and hundreds of MB).

    Raises:
        DatasetError: too many members (the count of ``infolist()`` is checked again once open).
    """
    with open(path, "rb") as handle:
        end = zipfile._EndRecData(handle)  # the standard library's reader of the end record (zip64 too)
    count = end[zipfile._ECD_ENTRIES_TOTAL] if end else 0
    if count > MAX_ZIP_MEMBERS:
        raise DatasetError(source_name, f"the zip holds {count:,} files; the most a dataset's zip may hold is "
                                        f"{MAX_ZIP_MEMBERS:,}")
    if end and end[zipfile._ECD_SIZE] > MAX_ZIP_MEMBERS * 1024:  # the count may lie; the directory is read by size
        raise DatasetError(source_name, f"the zip's directory is {end[zipfile._ECD_SIZE] / 2**20:,.1f} MB, more "
                                        f"than {MAX_ZIP_MEMBERS:,} files of names up to 1 KB need")


def _data_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and not p.is_symlink() and p.suffix.lower() in SUPPORTED_EXTENSIONS)
