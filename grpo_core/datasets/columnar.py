"""Reading the columnar datasets, Parquet files and ``datasets.Dataset.save_to_disk`` folders, with pyarrow, without
ever decoding more than a budget.

A small Parquet or Arrow file of repeated dictionary entries or runs can decode to far more than its size (a
"decompression bomb"): both readers check what a file would decode to first (:mod:`grpo_core.datasets.columnar_budget`)
and refuse it, with a :class:`~grpo_core.datasets.prompt_dataset.DatasetError`, before it fills the memory. A
``save_to_disk`` folder's data files must lie inside it. Values come out plain
(:mod:`grpo_core.datasets.plain_values`); the rows are checked by :mod:`grpo_core.datasets.checks`.
"""

from __future__ import annotations

import json
import os
import re
import struct
from pathlib import Path
from typing import Any

from grpo_core.datasets.checks import check_table_size
from grpo_core.datasets.columnar_budget import (
    decoded_bytes,
    ipc_body_compressed,
    parquet_byte_array_columns,
    parquet_stored_bytes,
    unsupported_type,
)
from grpo_core.datasets.plain_values import frame_rows
from grpo_core.datasets.prompt_dataset import DatasetError


def read_parquet(
    path: Path, name: str, max_rows: int | None, max_decoded_bytes: int
) -> tuple[list[str], list[dict[str, Any]]]:
    """Read Parquet with pyarrow; nested values (lists, structs) become lists and dicts. Texts are read as
    dictionaries and the footer is checked first, so nothing larger than ``max_decoded_bytes`` is ever decoded.

    Returns:
        (columns, rows): the file's columns (pandas's ``__index_level_N__`` columns left out) and its first
        ``max_rows`` rows (all when ``None``) as plain Python.

    Raises:
        DatasetError: not a readable Parquet file, a column of an encoding a dataset does not need (run-end encoded,
            list views), or more than ``max_decoded_bytes`` once decoded (``name`` starts the message).
    """
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
    check_table_size(table.num_rows, columns, name)  # before a row is built: rows x columns values
    return columns, frame_rows(columns, [table.column(c).to_pylist() for c in columns], image_columns(table))


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


def read_saved_dataset(
    folder: Path, name: str, max_rows: int | None, max_decoded_bytes: int
) -> tuple[list[str], list[dict[str, Any]]]:
    """Read a folder written by ``datasets.Dataset.save_to_disk``: the Arrow stream files ``state.json`` lists
    (``*.arrow`` in name order without it), concatenated. A ``DatasetDict`` folder is refused with its splits.

    Returns:
        (columns, rows), as :func:`read_parquet`.

    Raises:
        DatasetError: a ``DatasetDict`` folder, no Arrow files, a data file named outside the folder, compressed or
            unreadable Arrow data, files of different schemas, or more than ``max_decoded_bytes`` once decoded.
    """
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
        if not file.is_file():  # pyarrow's error would show the server's (temporary) folder
            raise DatasetError(name, f"{file.name}, a data file state.json names, is not a file in the folder")
        try:
            compressed = ipc_body_compressed(file)
        except (pa.ArrowException, OSError, struct.error) as e:
            raise DatasetError(name, f"cannot read {file.name} as Arrow data: {_inside_text(e, folder)}") from e
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
            raise DatasetError(name, f"cannot read {file.name} as Arrow data: {_inside_text(e, folder)}") from e
    try:
        table = pa.concat_tables(tables)
    except pa.ArrowException as e:
        raise DatasetError(name, f"the Arrow files do not share one schema: {e}") from e
    if max_rows is not None:
        table = table.slice(0, max_rows)
    _check_decoded_size(table, name, max_decoded_bytes)
    columns = list(table.column_names)
    check_table_size(table.num_rows, columns, name)  # before a row is built: rows x columns values
    return columns, frame_rows(columns, [table.column(c).to_pylist() for c in columns], image_columns(table))


def image_columns(table: Any) -> set[str]:
    """The columns of ``table`` holding ``datasets.Image`` values (a struct with a binary ``bytes`` field, or a list
    of them): their bytes stay bytes, for :mod:`grpo_core.datasets.images` to decode."""
    import pyarrow as pa

    def is_image(kind: Any) -> bool:
        if pa.types.is_struct(kind):
            names = {kind.field(i).name: kind.field(i).type for i in range(kind.num_fields)}
            data = names.get("bytes")
            if data is not None and pa.types.is_dictionary(data):  # read as a dictionary (columnar_budget)
                data = data.value_type
            return data is not None and (pa.types.is_binary(data) or pa.types.is_large_binary(data))
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return is_image(kind.value_type)
        return False

    return {f.name for f in table.schema if is_image(f.type)}


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


def _inside_text(error: Exception, folder: Path) -> str:
    """``error``'s message with the folder's path taken out (the upload's temporary folder is the server's)."""
    return str(error).replace(str(folder) + "/", "").replace(str(folder), "the folder")
