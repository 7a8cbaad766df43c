"""How large a Parquet or Arrow upload becomes once decoded, found before it is decoded.

A columnar file stores values encoded: a dictionary page holds a string once and run-length-encoded indices repeat
it, so a 1 KB Parquet file can decode to hundreds of megabytes (a 100 MB string repeated a million times would be
100 TB). The web process reads uploads itself, so a login could stop it for everyone with such a "decompression
bomb". The checks here bound what the readers in :mod:`grpo_core.datasets.columnar` may decode:

* :func:`parquet_stored_bytes`: from the file's footer alone (nothing decoded), what reading it with byte-array
  columns kept as dictionaries costs: fixed-width values at their width, byte arrays at their uncompressed page
  size plus a 4-byte index a value;
* :func:`decoded_bytes`: what a table read that way (dictionaries kept) becomes as Python rows: every text's bytes,
  each dictionary entry counted once per use, plus :data:`BYTES_PER_VALUE` for each value's Python object.

Encodings a prompt dataset never needs and whose decoded size cannot be bounded cheaply (run-end encoded arrays,
list views that may point at the same values many times) are refused by :func:`unsupported_type`.
Sources: the Parquet format (dictionary encoding, ``ColumnChunk.total_uncompressed_size``), Arrow's columnar
layouts (https://arrow.apache.org/docs/format/Columnar.html).
"""

from __future__ import annotations

from typing import Any

#: Bytes counted for each decoded value besides its data: a Python list slot and object header.
BYTES_PER_VALUE = 8
#: What a Parquet or Arrow dataset may decode to (its values as Python, counted as here) when the caller gives no
#: limit; uploads are allowed :data:`DECODED_PER_UPLOADED` times the upload limit.
DEFAULT_MAX_DECODED_BYTES = 1 << 30
DECODED_PER_UPLOADED = 5

_FIXED_WIDTH_BYTES = {"BOOLEAN": 1, "INT32": 4, "INT64": 8, "INT96": 12, "FLOAT": 4, "DOUBLE": 8}


def parquet_byte_array_columns(parquet_file: Any) -> list[str]:
    """The leaf paths (``"prompt"``, ``"tags.list.element"``) of ``parquet_file``'s byte-array columns, to read as
    dictionaries (``pyarrow.parquet.ParquetFile(read_dictionary=...)``) so that repeated values stay stored once."""
    schema = parquet_file.schema
    return [schema.column(i).path for i in range(len(schema)) if schema.column(i).physical_type == "BYTE_ARRAY"]


def parquet_stored_bytes(parquet_file: Any, max_rows: int | None = None) -> int:
    """Bytes a read of ``parquet_file`` (a ``pyarrow.parquet.ParquetFile``) with its byte-array columns as
    dictionaries allocates, from the footer only, plus :data:`BYTES_PER_VALUE` a value; the row groups past
    ``max_rows`` rows are not counted.

    A fixed-width value counts its width (a run-length-encoded run of a billion equal integers is small on disk,
    not in memory), a byte array its uncompressed pages and a 4-byte dictionary index.
    """
    meta = parquet_file.metadata
    schema = parquet_file.schema
    total = rows = 0
    for group_index in range(meta.num_row_groups):
        if max_rows is not None and rows >= max_rows:
            break
        group = meta.row_group(group_index)
        rows += group.num_rows
        for column_index in range(group.num_columns):
            chunk = group.column(column_index)
            kind = chunk.physical_type
            if kind == "BYTE_ARRAY":
                width = 4
                total += chunk.total_uncompressed_size
            elif kind == "FIXED_LEN_BYTE_ARRAY":
                width = max(int(schema.column(column_index).length or 0), 1)
            else:
                width = _FIXED_WIDTH_BYTES.get(kind, 8)
            total += chunk.num_values * (width + BYTES_PER_VALUE)
    return total


def unsupported_type(data_type: Any) -> str | None:
    """The name of an Arrow type in ``data_type`` (at any depth) whose decoded size is not bounded by its stored
    size in a way :func:`decoded_bytes` can count (run-end encoded, list views), else None."""
    import pyarrow as pa

    types = pa.types
    if types.is_run_end_encoded(data_type):
        return "run-end encoded"
    if types.is_list_view(data_type) or types.is_large_list_view(data_type):
        return "list view"
    if types.is_dictionary(data_type):
        return unsupported_type(data_type.value_type)
    return next((found for i in range(data_type.num_fields)
                 if (found := unsupported_type(data_type.field(i).type)) is not None), None)


def decoded_bytes(values: Any, limit: int) -> int:
    """Bytes ``values`` (a pyarrow ``Table``, ``ChunkedArray`` or ``Array``) becomes as Python values, counted
    without decoding it; counting stops early once over ``limit`` (the result is then above ``limit``).

    Texts and binaries count their bytes, fixed-width values their width, dictionary-encoded values their entry
    once per use (indices into a dictionary of texts are summed exactly), every value :data:`BYTES_PER_VALUE`
    more. Call :func:`unsupported_type` first: run-end encoded arrays and list views are not counted.
    """
    import pyarrow as pa

    if isinstance(values, pa.Table | pa.ChunkedArray):
        total = 0
        for part in values.columns if isinstance(values, pa.Table) else values.chunks:
            total += decoded_bytes(part, limit - total)
            if total > limit:
                break
        return total
    return _array_bytes(values, limit)


def _array_bytes(array: Any, limit: int) -> int:
    import pyarrow as pa
    import pyarrow.compute as pc

    types = pa.types
    kind = array.type
    count = len(array) * BYTES_PER_VALUE
    if types.is_dictionary(kind):
        dictionary = array.dictionary
        per_entry = _entry_bytes(dictionary, limit)
        if per_entry is None:  # a dictionary of nested values: each use counts as much as the largest entry might
            return count + len(array) * decoded_bytes(dictionary, limit)
        used = pc.take(per_entry, array.indices)
        return count + int(pc.sum(used).as_py() or 0)
    if types.is_binary(kind) or types.is_string(kind) or types.is_large_binary(kind) or types.is_large_string(kind) \
            or types.is_binary_view(kind) or types.is_string_view(kind):
        return count + int(pc.sum(pc.binary_length(array)).as_py() or 0)
    if types.is_list(kind) or types.is_large_list(kind) or types.is_fixed_size_list(kind) or types.is_map(kind):
        return count + decoded_bytes(array.flatten(), limit - count)
    if types.is_struct(kind):
        total = count
        for child in array.flatten():
            total += decoded_bytes(child, limit - total)
            if total > limit:
                break
        return total
    if types.is_null(kind):  # a column of nulls only (pandas' all-None column): no values but the count
        return count
    width = getattr(kind, "bit_width", 64) or 64
    return count + len(array) * max(width // 8, 1)


def _entry_bytes(dictionary: Any, limit: int) -> Any:
    """Bytes of each entry of a dictionary of texts, binaries or fixed-width values (an Int64 array), or None for
    nested entries."""
    import pyarrow as pa
    import pyarrow.compute as pc

    types = pa.types
    kind = dictionary.type
    if types.is_binary(kind) or types.is_string(kind) or types.is_large_binary(kind) or types.is_large_string(kind) \
            or types.is_binary_view(kind) or types.is_string_view(kind):
        return pc.cast(pc.binary_length(dictionary), pa.int64())
    if types.is_nested(kind) or types.is_dictionary(kind):
        return None
    width = max((getattr(kind, "bit_width", 64) or 64) // 8, 1)
    return pa.array([width] * len(dictionary), pa.int64())


def ipc_body_compressed(path: Any) -> bool:
    """Whether an Arrow IPC file (stream or file format) has a record batch or dictionary batch with compressed
    buffers (``lz4`` / ``zstd`` body compression), read from the messages' headers without decoding any batch:
    pyarrow decompresses such buffers while reading, before :func:`decoded_bytes` could count them.

    Raises:
        OSError, pyarrow.ArrowException: the file cannot be read as Arrow IPC messages.
    """
    import pyarrow as pa

    with pa.memory_map(str(path)) as source:
        if source.read(6) == b"ARROW1":
            source.seek(8)  # the file format: magic and padding, then the stream's messages
        else:
            source.seek(0)
        reader = pa.ipc.MessageReader.open_stream(source)
        while True:
            try:
                message = reader.read_next_message()
            except StopIteration:
                return False
            if message is None:
                return False
            if message.type in ("record batch", "dictionary") and _batch_header_compressed(
                    message.metadata.to_pybytes(), dictionary=message.type == "dictionary"):
                return True


def _batch_header_compressed(metadata: bytes, *, dictionary: bool) -> bool:
    """Whether a ``Message`` flatbuffer (Arrow's ``Message.fbs``) holding a ``RecordBatch`` (or a
    ``DictionaryBatch``, whose field 1 is its ``RecordBatch``) sets the batch's ``compression`` (field 3)."""
    import struct

    def field(table: int, index: int) -> int | None:
        vtable = table - struct.unpack_from("<i", metadata, table)[0]
        size = struct.unpack_from("<H", metadata, vtable)[0]
        if 4 + 2 * index >= size:
            return None
        offset = struct.unpack_from("<H", metadata, vtable + 4 + 2 * index)[0]
        return table + offset if offset else None

    def table_at(position: int) -> int:
        return position + struct.unpack_from("<I", metadata, position)[0]

    message = table_at(0)
    header = field(message, 2)  # Message: version, header_type, header, bodyLength, custom_metadata
    if header is None:
        return False
    batch = table_at(header)
    if dictionary:  # DictionaryBatch: id, data, isDelta
        data = field(batch, 1)
        if data is None:
            return False
        batch = table_at(data)
    return field(batch, 3) is not None  # RecordBatch: length, nodes, buffers, compression, variadicBufferCounts
