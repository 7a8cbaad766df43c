"""Gradio-free helpers for the dashboard's tables: an empty table that names its columns (Gradio's Dataframe shows
``1 2 3`` over an empty value), and cells that read as text (a chat prompt as ``role: content`` lines, other nested
values as JSON, never a Python ``repr``)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pandas as pd

#: How long a table cell may grow before it is cut (with an ellipsis).
CELL_CHARS = 160


def empty_frame(headers: Sequence[str]) -> pd.DataFrame:
    """A table with no rows and the columns ``headers``: what a table shows before it has anything to show."""
    return pd.DataFrame(columns=list(headers))


def is_chat(value: Any) -> bool:
    """Whether ``value`` is a chat-format prompt: a non-empty list of ``{"role": str, "content": ...}`` messages."""
    return (isinstance(value, list) and bool(value)
            and all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in value))


def chat_text(messages: list[dict[str, Any]]) -> str:
    """A chat prompt as readable text, one ``role: content`` line per message (content that is not text, e.g. a list
    of parts, is shown as JSON)."""
    lines = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):  # multimodal parts: keep their text parts readable
            texts = [p.get("text") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
            content = " ".join(texts) if len(texts) == len(content) else json.dumps(content, ensure_ascii=False)
        elif not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False, default=str)
        lines.append(f"{message['role']}: {content}")
    return "\n".join(lines)


def cell_text(value: Any, limit: int = CELL_CHARS) -> str:
    """``value`` as a table cell: text as is, a chat prompt as :func:`chat_text`, numbers and other values as JSON
    (``str`` for what JSON cannot write), cut to ``limit`` characters with an ellipsis."""
    if isinstance(value, str):
        text = value
    elif is_chat(value):
        text = chat_text(value)
    else:
        try:
            text = json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
