"""Prompt dataset files: load an uploaded file in whichever format it comes, and the normalised JSON Lines kept of it.

Accepted files: JSON Lines (``.jsonl``, or ``.json`` holding JSON Lines or one JSON array of objects), CSV, Parquet,
and a folder written by ``datasets.Dataset.save_to_disk`` (its Arrow files, read with pyarrow). The text formats are
read here; Parquet and Arrow by :mod:`grpo_core.datasets.columnar`, within a decoded-size budget. Every row is then
checked and its columns mapped by :mod:`grpo_core.datasets.checks`, giving a
:class:`~grpo_core.datasets.prompt_dataset.PromptDataset` of plain Python rows
(:mod:`grpo_core.datasets.plain_values`). Every problem found is a
:class:`~grpo_core.datasets.prompt_dataset.DatasetError` that names the file and, where it can, the line, row and
column, so the message can be shown to the user as is.

This module is imported by the web process: it must never import gradio, torch or transformers.
"""

from __future__ import annotations

import io
import json
import os
import re
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from grpo_core.datasets.checks import checked_dataset
from grpo_core.datasets.columnar import read_parquet, read_saved_dataset
from grpo_core.datasets.columnar_budget import DEFAULT_MAX_DECODED_BYTES
from grpo_core.datasets.plain_values import frame_rows, json_type, plain
from grpo_core.datasets.prompt_dataset import PROMPT_COLUMN, ColumnMapping, DatasetError, PromptDataset

SUPPORTED_EXTENSIONS = (".jsonl", ".json", ".csv", ".parquet")


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
        columns, rows = read_saved_dataset(path, name, max_rows, max_decoded_bytes)
        return checked_dataset(rows, columns, None, "arrow", name, json_in_cells=False, mapping=mapping)
    suffix = _supported_suffix(path.name) or _supported_suffix(name)
    if suffix is None:
        raise DatasetError(name, f"unsupported file type; use one of {', '.join(SUPPORTED_EXTENSIONS)}")
    if suffix == ".parquet":
        columns, rows = read_parquet(path, name, max_rows, max_decoded_bytes)
        return checked_dataset(rows, columns, None, "parquet", name, json_in_cells=False, mapping=mapping)
    text = _read_utf8(path, name)
    if suffix == ".csv":
        columns, rows = _read_csv(text, name, max_rows)
        return checked_dataset(rows, columns, None, "csv", name, json_in_cells=True, mapping=mapping)
    if suffix == ".json" and text.lstrip().startswith("["):
        columns, rows = _read_json_array(text, name, max_rows)
        return checked_dataset(rows, columns, None, "json", name, json_in_cells=False, mapping=mapping)
    columns, rows, line_numbers = _read_json_lines(text, name, max_rows, whole_json_hint=suffix == ".json")
    return checked_dataset(rows, columns, line_numbers, "jsonl", name, json_in_cells=False, mapping=mapping)


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
                    raise DatasetError(path.name, f"expected a JSON object, got {json_type(value)}", line=line_number)
                return value
            count += 1
    raise IndexError(f"row {index} does not exist; the dataset has {count} rows (0 to {count - 1})")


# --- reading the text formats ------------------------------------------------------------------------------


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
            raise DatasetError(name, f"expected a JSON object, got {json_type(value)}", line=line_number)
        columns.update(dict.fromkeys(value))
        rows.append({key: plain(v) for key, v in value.items()})
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
        raise DatasetError(name, f"expected a JSON array of objects, got {json_type(items)}")
    if max_rows is not None:
        items = items[:max_rows]
    columns: dict[str, None] = {}
    rows = []
    for index, item in enumerate(items, start=1):
        if not isinstance(item, dict):
            raise DatasetError(name, f"expected a JSON object, got {json_type(item)}", row=index)
        columns.update(dict.fromkeys(item))
        rows.append({key: plain(v) for key, v in item.items()})
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
        line, column = (int(match.group(1)), None) if match else (None, None)
        opened = _unclosed_quote(text) if line is None else None
        if opened is not None:
            line, column = opened
            detail = f"a quoted field opened here is never closed; {detail}"
        raise DatasetError(name, f"not valid CSV ({detail})", line=line, column=column) from e
    columns = [str(c) for c in frame.columns]
    return columns, frame_rows(columns, [frame[c].tolist() for c in frame.columns])


def _unclosed_quote(text: str) -> tuple[int, int] | None:
    """``(line, column)`` (1-based, the header is line 1; the column counts characters) of the ``"`` that opens a
    quoted CSV field never closed before the end of ``text``, as RFC 4180 reads quotes (a quote opens a field only
    at its start, ``""`` inside is one quote); ``None`` when every quoted field is closed. pandas's message for this
    ("EOF inside string starting at row 2") counts rows of records, not lines of the file."""
    line, column = 1, 1
    in_quote, field_start, opened = False, True, None
    index, end = 0, len(text)
    while index < end:
        char = text[index]
        if in_quote:
            if char == '"':
                if index + 1 < end and text[index + 1] == '"':
                    index, column = index + 2, column + 2
                    continue
                in_quote, field_start = False, False
        elif char == '"' and field_start:
            in_quote, opened = True, (line, column)
        else:
            field_start = char in ",\r\n"
        if char == "\n" or (char == "\r" and text[index + 1:index + 2] != "\n"):
            line, column = line + 1, 1
        else:
            column += 1
        index += 1
    return opened if in_quote else None


def _unreadable_json(error: Exception) -> str:
    """Why valid-looking JSON could not be read: nested deeper than Python's recursion limit, or a number of more
    digits than Python converts (both raised by :func:`json.loads` as other errors than ``JSONDecodeError``)."""
    if isinstance(error, RecursionError):
        return "not readable JSON (nested too deeply)"
    return f"not readable JSON ({error})"
