"""Prompt datasets: load an uploaded file, check it, and normalise it to plain Python rows.

A prompt dataset is a table with a required ``prompt`` column and any number of other columns. ``prompt`` holds
either text or a chat message list (``[{"role": "system" | "user" | "assistant" | "tool", "content": str}, ...]``);
every other column (``answer``, ``tests``, ...) is kept as is and reaches the reward rules through TRL's
``**columns``. Accepted files: JSON Lines (``.jsonl``, or ``.json`` holding JSON Lines or one JSON array of objects),
CSV, Parquet, and a folder written by ``datasets.Dataset.save_to_disk`` (its Arrow files, read with pyarrow).
A :class:`ColumnMapping` adapts a file as people have it (GSM8K's ``question``/``answer``): it names the prompt
column, renames others, and may add a system prompt that turns text prompts into chat prompts. Every problem found is a :class:`DatasetError` that names the file and, where it can, the line,
row and column, so the message can be shown to the user as is.

Rows come out as plain JSON-serialisable Python (``str``, ``int``, ``float``, ``bool``, ``None``, ``list``,
``dict``): no numpy scalars, no pandas timestamps (they become ISO-8601 strings), no NaN (it becomes ``None``).

This module is imported by the web process: it must never import gradio, torch or transformers.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import struct
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from grpo_core.datasets.columnar_budget import (
    decoded_bytes,
    ipc_body_compressed,
    parquet_byte_array_columns,
    parquet_stored_bytes,
    unsupported_type,
)

SUPPORTED_EXTENSIONS = (".jsonl", ".json", ".csv", ".parquet")
PROMPT_COLUMN = "prompt"
MESSAGE_ROLES = ("system", "user", "assistant", "tool")
# Columns that people often use for the prompt; named in the hint when ``prompt`` is missing.
LIKELY_PROMPT_COLUMNS = ("question", "instruction", "input", "problem", "query", "text")
PREVIEW_MAX_CHARS = 200
#: What a Parquet or Arrow dataset may decode to (its values as Python, see :mod:`grpo_core.datasets.columnar_budget`) when
#: the caller gives no limit; uploads are allowed :data:`DECODED_PER_UPLOADED` times the upload limit.
DEFAULT_MAX_DECODED_BYTES = 1 << 30
DECODED_PER_UPLOADED = 5

DatasetFormat = Literal["jsonl", "json", "csv", "parquet", "arrow"]
PromptKind = Literal["text", "chat"]


class DatasetError(ValueError):
    """A dataset file that cannot be used; ``str(error)`` says what is wrong and where.

    The message reads ``"<file>, line 17, column 5: <reason>"`` with only the known parts of the location.

    Attributes:
        source_name: the file name as the user knows it (the upload's original name).
        reason: what is wrong, without the location.
        line: 1-based line of the file (JSON Lines rows, JSON and CSV syntax errors, bad UTF-8), or ``None``.
        column: 1-based character column within ``line`` (JSON syntax errors), or ``None``.
        row: 1-based data row, header not counted (CSV, Parquet, JSON arrays), or ``None``.
        field: the dataset column the problem is in (e.g. ``"prompt"``), or ``None``.
        byte_offset: 0-based byte offset in the file (bad UTF-8), or ``None``.
    """

    def __init__(
        self,
        source_name: str,
        reason: str,
        *,
        line: int | None = None,
        column: int | None = None,
        row: int | None = None,
        field: str | None = None,
        message_index: int | None = None,
        byte_offset: int | None = None,
    ) -> None:
        self.source_name = source_name
        self.reason = reason
        self.line = line
        self.column = column
        self.row = row
        self.field = field
        self.message_index = message_index
        self.byte_offset = byte_offset
        where = [source_name]
        if line is not None:
            where.append(f"line {line}")
        if column is not None:
            where.append(f"column {column}")
        if byte_offset is not None:
            where.append(f"byte {byte_offset}")
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"column '{field}'")
        if message_index is not None:
            where.append(f"message {message_index}")
        super().__init__(f"{', '.join(where)}: {reason}")


@dataclass(frozen=True)
class ColumnMapping:
    """How a file's columns become a prompt dataset's, applied before the rows are checked.

    Attributes:
        prompt_column: the column holding the prompt (e.g. ``"question"``, ``"problem"``, ``"instruction"``); it
            is renamed to ``prompt``. ``None`` or ``"prompt"``: the file has a ``prompt`` column.
        system_prompt: when not blank, every text prompt becomes the chat prompt
            ``[{"role": "system", "content": system_prompt}, {"role": "user", "content": text}]``; a chat prompt
            gets it as a first message unless it starts with a system message of its own (kept as is).
        renames: other columns to rename, ``{"old name": "new name"}`` (e.g. ``{"solution": "answer"}``).
    """

    prompt_column: str | None = None
    system_prompt: str = ""
    renames: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_identity(self) -> bool:
        """True when the mapping changes nothing."""
        return self.prompt_column in (None, "", PROMPT_COLUMN) and not self.system_prompt.strip() and not self.renames


@dataclass(frozen=True)
class PromptDataset:
    """A loaded, checked prompt dataset.

    Attributes:
        rows: one dict per data row, each with every name in ``columns`` (``None`` where a row lacks it);
            ``row["prompt"]`` is a non-empty ``str`` or a list of ``{"role", "content", ...}`` dicts.
        columns: ``"prompt"`` first, then the other columns in the order they first appear in the file.
        format: ``"jsonl"``, ``"json"`` (a JSON array), ``"csv"``, ``"parquet"`` or ``"arrow"`` (a
            ``save_to_disk`` folder).
        source_name: the original file name; for display only, never used as a path.
    """

    rows: list[dict[str, Any]]
    columns: list[str]
    format: str
    source_name: str

    @property
    def num_rows(self) -> int:
        """Number of data rows."""
        return len(self.rows)

    @property
    def prompt_kind(self) -> PromptKind:
        """``"chat"`` when prompts are message lists, ``"text"`` when they are strings (one kind per dataset)."""
        return "chat" if isinstance(self.rows[0][PROMPT_COLUMN], list) else "text"

    def preview(self, n: int = 5) -> list[dict[str, Any]]:
        """The first ``n`` rows, copied, with strings longer than ``PREVIEW_MAX_CHARS`` cut short with "…"."""
        return [_shorten(row) for row in self.rows[:n]]


def load_prompt_dataset(
    path: str | Path,
    *,
    source_name: str | None = None,
    max_rows: int | None = None,
    mapping: ColumnMapping | None = None,
    max_decoded_bytes: int = DEFAULT_MAX_DECODED_BYTES,
) -> PromptDataset:
    """Load a JSON Lines, JSON, CSV, Parquet or ``save_to_disk`` prompt dataset, map its columns, check every row.

    Args:
        path: the file on disk (e.g. the upload's temporary copy), or a folder written by
            ``datasets.Dataset.save_to_disk``.
        source_name: the name shown in messages and kept on the dataset; defaults to the file name of ``path``.
            Its extension is used for format detection when ``path`` has no supported one.
        max_rows: keep at most this many rows (the first ones); ``None`` keeps all.
        mapping: the prompt column, renames and system prompt to apply (:class:`ColumnMapping`); ``None``: none.
        max_decoded_bytes: the most a Parquet file or Arrow folder may decode to (texts' bytes plus 8 bytes a
            value, :mod:`grpo_core.datasets.columnar_budget`), checked before it is decoded: a small file of repeated
            dictionary entries or runs would otherwise fill the memory.

    Returns:
        a :class:`PromptDataset` of plain Python rows.

    Raises:
        DatasetError: unsupported extension, unreadable or malformed file, bad UTF-8, no ``prompt`` column, a
            mapping that names a column the file lacks or renames onto an existing column, no rows, or a row whose prompt is missing, empty, of the wrong type, a malformed message list, or of a
            different kind (text / chat) than the first row's, or a Parquet / Arrow file that would decode to more than
            ``max_decoded_bytes`` or uses an encoding a dataset does not need (run-end encoded, list views).
        ValueError: ``max_rows`` is not a positive integer.
    """
    path = Path(path)
    name = source_name or path.name
    if max_rows is not None and (isinstance(max_rows, bool) or not isinstance(max_rows, int) or max_rows < 1):
        raise ValueError(f"max_rows must be a positive integer or None, got {max_rows!r}")
    if path.is_dir():
        columns, rows = _read_saved_dataset(path, name, max_rows, max_decoded_bytes)
        return _checked_dataset(rows, columns, None, "arrow", name, json_in_cells=False, mapping=mapping)
    suffix = _supported_suffix(path.name) or _supported_suffix(name)
    if suffix is None:
        raise DatasetError(name, f"unsupported file type; use one of {', '.join(SUPPORTED_EXTENSIONS)}")
    if suffix == ".parquet":
        columns, rows = _read_parquet(path, name, max_rows, max_decoded_bytes)
        return _checked_dataset(rows, columns, None, "parquet", name, json_in_cells=False, mapping=mapping)
    text = _read_utf8(path, name)
    if suffix == ".csv":
        columns, rows = _read_csv(text, name, max_rows)
        return _checked_dataset(rows, columns, None, "csv", name, json_in_cells=True, mapping=mapping)
    if suffix == ".json" and text.lstrip().startswith("["):
        columns, rows = _read_json_array(text, name, max_rows)
        return _checked_dataset(rows, columns, None, "json", name, json_in_cells=False, mapping=mapping)
    columns, rows, line_numbers = _read_json_lines(text, name, max_rows, whole_json_hint=suffix == ".json")
    return _checked_dataset(rows, columns, line_numbers, "jsonl", name, json_in_cells=False, mapping=mapping)


def save_normalized(dataset: PromptDataset, path: Path) -> None:
    """Write the dataset's rows to ``path`` as JSON Lines (UTF-8, one object per line, columns in order).

    The file is written to a temporary file beside ``path`` and moved into place with ``os.replace``, so readers
    never see a half-written file. The parent folder is created if needed.

    Raises:
        OSError: the file cannot be written.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            for row in dataset.rows:
                f.write(json.dumps({c: row.get(c) for c in dataset.columns}, ensure_ascii=False, allow_nan=False))
                f.write("\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp_name, path)
    except BaseException:
        Path(tmp_name).unlink(missing_ok=True)
        raise


def read_normalized(path: Path) -> list[dict[str, Any]]:
    """Read rows written by :func:`save_normalized`: one dict per non-blank line, in file order.

    Raises:
        DatasetError: a line is not valid JSON or not a JSON object, or the file is not UTF-8.
        OSError: the file cannot be read.
    """
    path = Path(path)
    text = _read_utf8(path, path.name)
    _, rows, _ = _read_json_lines(text, path.name, None, whole_json_hint=False)
    return rows


def read_normalized_row(path: Path, index: int) -> dict[str, Any]:
    """Row ``index`` (0-based, blank lines skipped) of a file written by :func:`save_normalized`, reading only up to
    that line.

    Raises:
        IndexError: ``index`` is negative or past the last row (the message gives the row count).
        DatasetError: that line is not a JSON object.
        OSError: the file cannot be read.
    """
    path = Path(path)
    if index < 0:
        raise IndexError(f"row {index} does not exist; rows are numbered from 0")
    count = 0
    with open(path, encoding="utf-8", newline="\n") as handle:
        for line_number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            if count == index:
                try:
                    value = json.loads(line)
                except json.JSONDecodeError as e:
                    raise DatasetError(path.name, f"not valid JSON ({e.msg})", line=line_number, column=e.colno) from e
                except (RecursionError, ValueError) as e:
                    raise DatasetError(path.name, _unreadable_json(e), line=line_number) from None
                if not isinstance(value, dict):
                    raise DatasetError(path.name, f"expected a JSON object, got {_json_type(value)}", line=line_number)
                return value
            count += 1
    raise IndexError(f"row {index} does not exist; the dataset has {count} rows (0 to {count - 1})")


# --- reading each format ---------------------------------------------------------------------------------------


def _supported_suffix(name: str) -> str | None:
    suffix = Path(name).suffix.lower()
    return suffix if suffix in SUPPORTED_EXTENSIONS else None


def _read_utf8(path: Path, name: str) -> str:
    """The file's text; a leading UTF-8 byte-order mark is dropped (Excel writes one)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        raise DatasetError(name, f"cannot read the file ({e.strerror or e})") from e
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    try:
        return data[start:].decode("utf-8")
    except UnicodeDecodeError as e:
        offset = start + e.start
        line = data.count(b"\n", 0, offset) + 1
        raise DatasetError(
            name,
            f"not valid UTF-8 (byte 0x{data[offset]:02x}); save the file with UTF-8 encoding",
            line=line,
            byte_offset=offset,
        ) from e


def _read_json_lines(
    text: str, name: str, max_rows: int | None, *, whole_json_hint: bool
) -> tuple[list[str], list[dict[str, Any]], list[int]]:
    """Parse JSON Lines: returns (columns in first-seen order, rows, the file line of each row)."""
    rows: list[dict[str, Any]] = []
    line_numbers: list[int] = []
    columns: dict[str, None] = {}
    # Split on "\n" only: str.splitlines would also split on U+2028 and friends, which JSON strings may contain.
    for line_number, line in enumerate(text.split("\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as e:
            reason = f"not valid JSON ({e.msg})"
            if whole_json_hint and not rows and _is_single_json_object(text):
                reason = "expected JSON Lines (one object per line) or a JSON array of objects, got one JSON object"
                raise DatasetError(name, reason) from e
            raise DatasetError(name, reason, line=line_number, column=e.colno) from e
        except (RecursionError, ValueError) as e:
            raise DatasetError(name, _unreadable_json(e), line=line_number) from None
        if not isinstance(value, dict):
            raise DatasetError(name, f"expected a JSON object, got {_json_type(value)}", line=line_number)
        columns.update(dict.fromkeys(value))
        rows.append({key: _plain(v) for key, v in value.items()})
        line_numbers.append(line_number)
        if max_rows is not None and len(rows) >= max_rows:
            break
    if not rows:
        raise DatasetError(name, "the file is empty")
    return list(columns), rows, line_numbers


def _is_single_json_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except (RecursionError, ValueError):  # JSONDecodeError is a ValueError
        return False


def _read_json_array(text: str, name: str, max_rows: int | None) -> tuple[list[str], list[dict[str, Any]]]:
    """Parse a JSON document holding one array of objects."""
    try:
        items = json.loads(text)
    except json.JSONDecodeError as e:
        raise DatasetError(name, f"not valid JSON ({e.msg})", line=e.lineno, column=e.colno) from e
    except (RecursionError, ValueError) as e:
        raise DatasetError(name, _unreadable_json(e)) from None
    if not isinstance(items, list):
        raise DatasetError(name, f"expected a JSON array of objects, got {_json_type(items)}")
    if max_rows is not None:
        items = items[:max_rows]
    columns: dict[str, None] = {}
    rows = []
    for index, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise DatasetError(name, f"expected a JSON object, got {_json_type(item)}", row=index)
        columns.update(dict.fromkeys(item))
        rows.append({key: _plain(v) for key, v in item.items()})
    return list(columns), rows


def _read_csv(text: str, name: str, max_rows: int | None) -> tuple[list[str], list[dict[str, Any]]]:
    """Parse CSV with pandas. Only empty cells are missing values ("NA" or "null" stay text); the prompt column is
    always read as text; other columns get pandas's type inference with nullable dtypes (ints stay ints)."""
    if not text.strip():
        raise DatasetError(name, "the file is empty")
    try:
        frame = pd.read_csv(
            io.StringIO(text),
            dtype={PROMPT_COLUMN: "string"},
            keep_default_na=False,
            na_values=[""],
            dtype_backend="numpy_nullable",
            nrows=max_rows,
        )
    except pd.errors.EmptyDataError as e:
        raise DatasetError(name, "the file is empty") from e
    except (pd.errors.ParserError, ValueError) as e:
        detail = str(e).strip()
        match = re.search(r"\bline (\d+)", detail)
        line = int(match.group(1)) if match else None
        raise DatasetError(name, f"not valid CSV ({detail})", line=line) from e
    columns = [str(c) for c in frame.columns]
    return columns, _frame_rows(columns, [frame[c].tolist() for c in frame.columns])


def _read_parquet(
    path: Path, name: str, max_rows: int | None, max_decoded_bytes: int
) -> tuple[list[str], list[dict[str, Any]]]:
    """Read Parquet with pyarrow; nested values (lists, structs) become lists and dicts. Texts are read as
    dictionaries and the footer is checked first, so nothing larger than ``max_decoded_bytes`` is ever decoded."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        probe = pq.ParquetFile(path)
        stored = parquet_stored_bytes(probe, max_rows)
        if stored > max_decoded_bytes:
            raise DatasetError(name, _too_large_decoded(stored, max_decoded_bytes))
        parquet_file = pq.ParquetFile(path, read_dictionary=parquet_byte_array_columns(probe))
        if max_rows is None:
            table = parquet_file.read()
        else:
            batches = []
            for batch in parquet_file.iter_batches(batch_size=min(max_rows, 65536)):
                batches.append(batch)
                if sum(len(b) for b in batches) >= max_rows:
                    break
            table = pa.Table.from_batches(batches, schema=parquet_file.schema_arrow) if batches else \
                parquet_file.schema_arrow.empty_table()
    except (pa.ArrowException, OSError) as e:
        raise DatasetError(name, f"not a valid Parquet file: {e}") from e
    if max_rows is not None:
        table = table.slice(0, max_rows)
    _check_decoded_size(table, name, max_decoded_bytes)
    # pandas stores a non-default index as "__index_level_N__" columns; they are not data.
    columns = [c for c in table.column_names if not re.fullmatch(r"__index_level_\d+__", c)]
    return columns, _frame_rows(columns, [table.column(c).to_pylist() for c in columns])


def _too_large_decoded(size: int, limit: int) -> str:
    return (f"decodes to about {size / 2**20:,.0f} MB of values, more than the {limit / 2**20:,.0f} MB this "
            "dashboard reads from one dataset file (repeated values are stored once in the file but take their full "
            "size in memory); split the file or ask an admin to raise the upload limit (--max-upload-mb)")


def _check_decoded_size(table: Any, name: str, max_decoded_bytes: int) -> None:
    """Refuse a table (read with its encodings kept) whose values would decode to more than ``max_decoded_bytes``,
    or that uses an encoding whose decoded size cannot be counted."""
    for field_ in table.schema:
        unsupported = unsupported_type(field_.type)
        if unsupported:
            raise DatasetError(name, f"the column {field_.name!r} is {unsupported}; write it as plain values")
    size = decoded_bytes(table, max_decoded_bytes)
    if size > max_decoded_bytes:
        raise DatasetError(name, _too_large_decoded(size, max_decoded_bytes))


def _read_saved_dataset(
    folder: Path, name: str, max_rows: int | None, max_decoded_bytes: int
) -> tuple[list[str], list[dict[str, Any]]]:
    """Read a folder written by ``datasets.Dataset.save_to_disk``: the Arrow stream files ``state.json`` lists
    (``*.arrow`` in name order without it), concatenated. A ``DatasetDict`` folder is refused with its splits."""
    import pyarrow as pa

    if (folder / "dataset_dict.json").is_file():
        try:
            splits = json.loads((folder / "dataset_dict.json").read_text(encoding="utf-8")).get("splits") or []
        except (OSError, ValueError, AttributeError):
            splits = []
        listed = ", ".join(str(s) for s in splits) or "(none listed)"
        raise DatasetError(name, f"a dataset with several splits ({listed}); choose one: its split's folder")
    files: list[Path] = []
    try:
        state = json.loads((folder / "state.json").read_text(encoding="utf-8"))
        names = [str(entry["filename"]) for entry in state.get("_data_files", [])]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        names = []
    files = [_data_file_inside(folder, file_name, name) for file_name in names]
    if not files:
        files = [path for path in sorted(folder.glob("*.arrow")) if not path.is_symlink()]
    if not files:
        raise DatasetError(name, "a folder without Arrow files; expected one written by datasets' save_to_disk")
    tables = []
    for file in files:
        try:
            compressed = ipc_body_compressed(file)
        except (pa.ArrowException, OSError, struct.error) as e:
            raise DatasetError(name, f"cannot read {file.name} as Arrow data: {e}") from e
        if compressed:  # pyarrow would decompress every buffer while reading, before its size is counted
            raise DatasetError(name, f"{file.name} holds compressed Arrow buffers (lz4/zstd); write it uncompressed, "
                                     "as datasets' save_to_disk does")
        try:
            with pa.memory_map(str(file)) as source:
                try:
                    tables.append(pa.ipc.open_stream(source).read_all())
                except pa.ArrowInvalid:
                    source.seek(0)
                    tables.append(pa.ipc.open_file(source).read_all())
        except (pa.ArrowException, OSError) as e:
            raise DatasetError(name, f"cannot read {file.name} as Arrow data: {e}") from e
    try:
        table = pa.concat_tables(tables)
    except pa.ArrowException as e:
        raise DatasetError(name, f"the Arrow files do not share one schema: {e}") from e
    if max_rows is not None:
        table = table.slice(0, max_rows)
    _check_decoded_size(table, name, max_decoded_bytes)
    columns = list(table.column_names)
    return columns, _frame_rows(columns, [table.column(c).to_pylist() for c in columns])


def _data_file_inside(folder: Path, file_name: str, name: str) -> Path:
    """A data file ``state.json`` lists, as a path in ``folder``: a plain relative name, no ``..``, not a symbolic
    link, and still inside ``folder`` once resolved.

    Raises:
        DatasetError: any other name; the message never says whether the named file exists.
    """
    parts = file_name.replace("\\", "/").split("/")
    if (not file_name or "\x00" in file_name or file_name.startswith(("/", "\\")) or ".." in parts
            or re.match(r"^[A-Za-z]:", file_name)):
        raise DatasetError(name, f"state.json lists the data file {file_name[:100]!r}, which is not a plain name "
                                 "inside the dataset folder")
    path = folder / file_name
    real_folder = Path(os.path.realpath(folder))
    if path.is_symlink() or not Path(os.path.realpath(path)).is_relative_to(real_folder):
        raise DatasetError(name, f"state.json lists the data file {file_name[:100]!r}, which leads outside the "
                                 "dataset folder")
    return path


def _frame_rows(columns: list[str], values_by_column: list[list[Any]]) -> list[dict[str, Any]]:
    """Rows from column-wise lists, every value made plain."""
    plain_columns = [[_plain(v) for v in values] for values in values_by_column]
    return [dict(zip(columns, values, strict=True)) for values in zip(*plain_columns, strict=True)]


def _plain(value: Any) -> Any:
    """``value`` as plain JSON-serialisable Python; NaN, infinities, ``pd.NA`` and ``NaT`` become ``None``."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_plain(v) for v in value.tolist()]
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.datetime64):
        return _plain(pd.Timestamp(value))
    if isinstance(value, np.timedelta64):
        return _plain(pd.Timedelta(value))
    if isinstance(value, np.generic):
        return _plain(value.item())
    # Subclasses of the plain types (np.float64 is a float, np.str_ a str, IntEnum an int) become the base type.
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return _plain(float(value))
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return _plain(float(value))
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    as_py = getattr(value, "as_py", None)  # a pyarrow scalar
    if callable(as_py):
        return _plain(as_py())
    return str(value)


def _json_type(value: Any) -> str:
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)


# --- checking ----------------------------------------------------------------------------------------------------


def _checked_dataset(
    rows: list[dict[str, Any]],
    columns: list[str],
    line_numbers: list[int] | None,
    fmt: str,
    name: str,
    *,
    json_in_cells: bool,
    mapping: ColumnMapping | None = None,
) -> PromptDataset:
    """Map the columns (``mapping``), check the prompt of every row and put the columns in order (``prompt``
    first, missing values ``None``); a system prompt, if any, is added last.

    ``line_numbers`` locates rows by file line (JSON Lines); without it rows are located by 1-based row number.
    ``json_in_cells`` parses prompt cells that hold a JSON message list (CSV cannot hold lists).
    """
    if not rows:
        raise DatasetError(name, "no data rows")
    if mapping is not None and not mapping.is_identity:
        columns, rows = map_columns(rows, columns, mapping, name)
    if PROMPT_COLUMN not in columns:
        raise DatasetError(name, _missing_prompt_reason(columns))
    ordered = [PROMPT_COLUMN, *(c for c in columns if c != PROMPT_COLUMN)]
    first_kind: str | None = None
    checked = []
    for index, row in enumerate(rows):
        where = {"line": line_numbers[index]} if line_numbers is not None else {"row": index + 1}
        prompt = _checked_prompt(row.get(PROMPT_COLUMN), name, where, json_in_cells=json_in_cells)
        kind = "chat" if isinstance(prompt, list) else "text"
        if first_kind is None:
            first_kind = kind
        elif kind != first_kind:
            raise DatasetError(
                name,
                f"prompt is {_kind_words(kind)} but the first row's is {_kind_words(first_kind)}; "
                "use one kind for the whole file",
                field=PROMPT_COLUMN,
                **where,
            )
        if mapping is not None and mapping.system_prompt.strip():
            prompt = with_system_prompt(prompt, mapping.system_prompt)
        checked.append({PROMPT_COLUMN: prompt, **{c: row.get(c) for c in ordered[1:]}})
    return PromptDataset(rows=checked, columns=ordered, format=fmt, source_name=name)


def map_columns(
    rows: list[dict[str, Any]], columns: list[str], mapping: ColumnMapping, name: str
) -> tuple[list[str], list[dict[str, Any]]]:
    """Rename the columns as ``mapping`` says (its prompt column becomes ``prompt``); returns (columns, rows).

    Raises:
        DatasetError: the mapping names a column the file lacks, two columns would get one name, or a rename
            lands on a column that is kept (e.g. ``prompt_column: question`` while the file has ``prompt`` too).
    """
    renames = {str(old): str(new).strip() for old, new in mapping.renames.items()}
    if mapping.prompt_column not in (None, "", PROMPT_COLUMN):
        renames[mapping.prompt_column] = PROMPT_COLUMN
    for old, new in renames.items():
        if old not in columns:
            setting = "prompt_column" if new == PROMPT_COLUMN and old == mapping.prompt_column else "column_renames"
            raise DatasetError(
                name,
                f"the column mapping ({setting}) names column '{old}', which the file lacks; "
                f"columns are {', '.join(columns) if columns else '(none)'}",
            )
        if not new:
            raise DatasetError(name, f"the column mapping renames '{old}' to an empty name")
    targets = [renames.get(c, c) for c in columns]
    for target in set(targets):
        sources = [c for c in columns if renames.get(c, c) == target]
        if len(sources) > 1:
            raise DatasetError(
                name,
                f"the column mapping gives {len(sources)} columns the name '{target}' "
                f"({', '.join(sources)}); rename the others too (column_renames)",
            )
    mapped = [{renames.get(k, k): v for k, v in row.items()} for row in rows]
    return targets, mapped


def with_system_prompt(prompt: str | list[dict[str, Any]], system_prompt: str) -> list[dict[str, Any]]:
    """``prompt`` as a chat prompt that starts with ``system_prompt``: text becomes a user message after it; a
    message list gets it first unless its first message is a system message already (then it is returned as is)."""
    system = {"role": "system", "content": system_prompt}
    if isinstance(prompt, str):
        return [system, {"role": "user", "content": prompt}]
    if prompt and prompt[0].get("role") == "system":
        return prompt
    return [system, *prompt]


def remap_rows(rows: list[dict[str, Any]], mapping: ColumnMapping | None, name: str) -> list[dict[str, Any]]:
    """Apply ``mapping`` to rows already read (a stored dataset's normalised rows) and check them again.

    Raises:
        DatasetError: as :func:`map_columns`, or a prompt that is missing or malformed after the mapping.
    """
    if mapping is None or mapping.is_identity or not rows:
        return rows
    columns = list(dict.fromkeys(key for row in rows for key in row))
    return _checked_dataset(rows, columns, None, "jsonl", name, json_in_cells=False, mapping=mapping).rows


def _missing_prompt_reason(columns: list[str]) -> str:
    reason = f"no column named '{PROMPT_COLUMN}'; columns are {', '.join(columns) if columns else '(none)'}"
    by_folded = {c.strip().lower(): c for c in reversed(columns)}  # reversed: the first of equal names wins
    for candidate in (PROMPT_COLUMN, *LIKELY_PROMPT_COLUMNS):
        if candidate in by_folded:
            return (
                f"{reason}; rename '{by_folded[candidate]}' to '{PROMPT_COLUMN}' "
                f"(or map it: prompt column '{by_folded[candidate]}')"
            )
    return reason


def _kind_words(kind: str) -> str:
    return "a message list" if kind == "chat" else "text"


def _checked_prompt(value: Any, name: str, where: dict[str, int], *, json_in_cells: bool) -> str | list[dict]:
    """The prompt if valid: non-blank text, or a message list with known roles and text content."""
    if json_in_cells and isinstance(value, str) and value.lstrip().startswith("["):
        value = _json_message_list_or_text(value)
    if value is None:
        raise DatasetError(name, "prompt is missing", field=PROMPT_COLUMN, **where)
    if isinstance(value, str):
        if not value.strip():
            raise DatasetError(name, "prompt is empty", field=PROMPT_COLUMN, **where)
        return value
    if not isinstance(value, list):
        raise DatasetError(
            name,
            f"prompt must be text or a list of chat messages, got {_json_type(value)}",
            field=PROMPT_COLUMN,
            **where,
        )
    if not value:
        raise DatasetError(name, "prompt is an empty message list", field=PROMPT_COLUMN, **where)
    messages = []
    for number, message in enumerate(value, start=1):
        at = {"field": PROMPT_COLUMN, "message_index": number, **where}
        if not isinstance(message, dict):
            raise DatasetError(name, f"expected a message object, got {_json_type(message)}", **at)
        role, content = message.get("role"), message.get("content")
        if role is None:
            raise DatasetError(name, "message has no 'role'", **at)
        if role not in MESSAGE_ROLES:
            raise DatasetError(name, f"role {role!r} is not one of {', '.join(MESSAGE_ROLES)}", **at)
        if content is None:
            raise DatasetError(name, "message has no 'content'", **at)
        if not isinstance(content, str):
            raise DatasetError(name, f"message 'content' must be text, got {_json_type(content)}", **at)
        # Parquet structs give every message every field of the column (None where unset); drop those.
        messages.append({k: v for k, v in message.items() if v is not None})
    if not any(m["content"].strip() for m in messages):
        raise DatasetError(name, "prompt is empty (every message's content is blank)", field=PROMPT_COLUMN, **where)
    return messages


def _unreadable_json(error: Exception) -> str:
    """Why valid-looking JSON could not be read: nested deeper than Python's recursion limit, or a number of more
    digits than Python converts (both raised by :func:`json.loads` as other errors than ``JSONDecodeError``)."""
    if isinstance(error, RecursionError):
        return "not readable JSON (nested too deeply)"
    return f"not readable JSON ({error})"


def _json_message_list_or_text(cell: str) -> str | list[Any]:
    """A CSV cell that is a JSON list of objects (a message list) parsed; any other text unchanged."""
    try:
        value = json.loads(cell)
    except (RecursionError, ValueError):  # JSONDecodeError is a ValueError
        return cell
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        return value
    return cell


def _shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > PREVIEW_MAX_CHARS:
        return value[: PREVIEW_MAX_CHARS - 1] + "…"
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value
