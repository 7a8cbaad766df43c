"""Column types that hold the same values on every backend (SQLite, PostgreSQL, ...).

SQLite stores whatever it is given; PostgreSQL refuses three kinds of values the store meets in practice:

* text with a NUL character (``\\x00``, which a sampled completion or a worker's error can contain):
  :class:`SafeText` and :class:`BoundedString` write it as U+FFFD;
* ``NaN`` and infinities inside a JSON document (a dataset column, a config value): :class:`SafeJSON` writes
  them as ``null``, as the store already does for scalar metrics;
* strings longer than a ``VARCHAR(n)`` (a long run name or progress message): :class:`BoundedString` keeps the
  first ``n`` characters. The same processing applies to values compared with such a column, so a query with
  the long value still finds the stored row.
"""

from __future__ import annotations

import json
import math
from typing import Any

from sqlalchemy import JSON, String, Text
from sqlalchemy.types import TypeDecorator

NUL_REPLACEMENT = "\ufffd"


def without_nul(value: str) -> str:
    """``value`` with every NUL character replaced by U+FFFD (PostgreSQL text cannot hold NUL)."""
    return value.replace("\x00", NUL_REPLACEMENT) if "\x00" in value else value


def json_safe(value: Any) -> Any:
    """``value`` with every non-finite float (``NaN``, ``inf``), at any depth, replaced by ``None``."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


class SafeText(TypeDecorator):
    """``TEXT`` whose NUL characters are stored as U+FFFD."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return without_nul(value) if isinstance(value, str) else value


class BoundedString(TypeDecorator):
    """``VARCHAR(length)`` that keeps the first ``length`` characters of a longer value, NULs as U+FFFD."""

    impl = String
    cache_ok = True

    def process_bind_param(self, value, dialect):
        if not isinstance(value, str):
            return value
        value = without_nul(value)
        length = self.impl.length
        return value[:length] if length is not None and len(value) > length else value


#: Deepest nesting a stored JSON value is read back with (the bound of config text, grpo_core.bounded_parse).
MAX_READ_DEPTH = 32
#: What stands for a part of a stored value nested deeper than :data:`MAX_READ_DEPTH`, or a document that cannot be
#: decoded at all.
TOO_DEEP = "(nested too deep to read)"
UNREADABLE = "(stored JSON that cannot be read)"


def _nested_too_deep(value: dict | list, depth: int) -> bool:
    """Whether the container ``value`` at ``depth``, or one inside it, lies at :data:`MAX_READ_DEPTH` or deeper
    (visits containers only, without recursion: a scalar costs one ``isinstance``)."""
    stack = [(value, depth)]
    while stack:
        container, level = stack.pop()
        if level >= MAX_READ_DEPTH:
            return True
        for item in container.values() if isinstance(container, dict) else container:
            if isinstance(item, (dict, list)):
                stack.append((item, level + 1))
    return False


def within_depth(value: Any, depth: int = 0) -> Any:
    """``value`` with every part nested deeper than :data:`MAX_READ_DEPTH` replaced by :data:`TOO_DEEP`: a value
    stored before the writers bounded it must not break a listing (Gradio's walk, the JSON encoders recurse).

    A value within the bound (every value the writers store) is returned as it is, checked without a copy: a
    multi-turn completion's turns are read on every page that shows them."""
    if isinstance(value, dict | list):
        if not _nested_too_deep(value, depth):
            return value
        if depth >= MAX_READ_DEPTH:
            return TOO_DEEP
        if isinstance(value, dict):
            return {key: within_depth(item, depth + 1) for key, item in value.items()}
        return [within_depth(item, depth + 1) for item in value]
    return value


def read_json(text: str | bytes) -> Any:
    """The engine's JSON decoder: ``json.loads``, but a document it cannot decode (nested past the interpreter's
    recursion limit, a number too long to convert) reads as :data:`UNREADABLE` instead of failing the whole query."""
    try:
        return json.loads(text)
    except (RecursionError, ValueError):
        return UNREADABLE


def as_mapping(value: Any) -> dict[str, Any]:
    """A stored JSON value that should be a mapping, as a new ``dict``: ``{}`` for ``None``, and anything else (a
    document that could not be read, or of another type) kept under ``"value"`` instead of failing the read."""
    if value is None:
        return {}
    return dict(value) if isinstance(value, dict) else {"value": value}


def as_list(value: Any) -> list[Any]:
    """A stored JSON value that should be a list, as a new ``list``: ``[]`` for ``None``, anything else as one item."""
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


class SafeJSON(TypeDecorator):
    """``JSON`` whose ``NaN`` and infinite floats are stored as ``null`` (PostgreSQL's JSON has no NaN), read back
    at most :data:`MAX_READ_DEPTH` levels deep."""

    impl = JSON
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return json_safe(value)

    def process_result_value(self, value, dialect):
        return within_depth(value)
