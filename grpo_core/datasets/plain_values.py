"""Values read from a dataset file as plain JSON-serialisable Python, and the JSON type names messages use.

Rows come out as plain Python (``str``, ``int``, ``float``, ``bool``, ``None``, ``list``, ``dict``): no numpy
scalars, no pandas timestamps (they become ISO-8601 strings), no NaN (it becomes ``None``), whichever reader
(:mod:`grpo_core.datasets.formats`, :mod:`grpo_core.datasets.columnar`) produced them.
"""

from __future__ import annotations

import math
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pandas as pd


def frame_rows(columns: list[str], values_by_column: list[list[Any]],
               raw: set[str] | frozenset[str] = frozenset()) -> list[dict[str, Any]]:
    """Rows from column-wise lists, every value made plain except those of the ``raw`` columns (image structs,
    whose bytes must stay bytes), which are kept as the reader gave them."""
    plain_columns = [values if column in raw else [plain(v) for v in values]
                     for column, values in zip(columns, values_by_column, strict=True)]
    return [dict(zip(columns, values, strict=True)) for values in zip(*plain_columns, strict=True)]


def plain(value: Any) -> Any:
    """``value`` as plain JSON-serialisable Python; NaN, infinities, ``pd.NA`` and ``NaT`` become ``None``."""
    kind = type(value)
    if value is None or kind is str or kind is bool or kind is int:
        return value
    if kind is float:
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return [plain(v) for v in value.tolist()]
    if value is pd.NA or value is pd.NaT:
        return None
    if isinstance(value, np.datetime64):
        return plain(pd.Timestamp(value))
    if isinstance(value, np.timedelta64):
        return plain(pd.Timedelta(value))
    if isinstance(value, np.generic):
        return plain(value.item())
    # Subclasses of the plain types (np.float64 is a float, np.str_ a str, IntEnum an int) become the base type.
    if isinstance(value, str):
        return str(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return plain(float(value))
    if isinstance(value, (datetime, date, time)):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    if isinstance(value, Decimal):
        return plain(float(value))
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    as_py = getattr(value, "as_py", None)  # a pyarrow scalar
    if callable(as_py):
        return plain(as_py())
    return str(value)


def json_type(value: Any) -> str:
    """The JSON type of ``value`` as messages name it: ``"an object"``, ``"a list"``, ``"a number"``, ``"null"``..."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "a boolean", int: "a number", float: "a number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
