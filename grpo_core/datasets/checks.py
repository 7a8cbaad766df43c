"""Checking a prompt dataset's rows and applying its column mapping: every prompt non-empty text or a well-formed
message list, one kind (text or chat) for the whole file, columns in order with ``prompt`` first.

The readers (:mod:`grpo_core.datasets.formats`, :mod:`grpo_core.datasets.columnar`) give rows of plain values;
:func:`checked_dataset` maps their columns (:class:`~grpo_core.datasets.prompt_dataset.ColumnMapping`), checks every
prompt and returns the :class:`~grpo_core.datasets.prompt_dataset.PromptDataset`. Each problem is a
:class:`~grpo_core.datasets.prompt_dataset.DatasetError` naming the file, the row (or line) and the message.
"""

from __future__ import annotations

import json
from typing import Any

from grpo_core.datasets.plain_values import json_type
from grpo_core.datasets.prompt_dataset import PROMPT_COLUMN, ColumnMapping, DatasetError, PromptDataset

MESSAGE_ROLES = ("system", "user", "assistant", "tool")
# Columns that people often use for the prompt; named in the hint when ``prompt`` is missing.
LIKELY_PROMPT_COLUMNS = ("question", "instruction", "input", "problem", "query", "text")
#: Most columns a dataset keeps, longest column name in characters: every dataset list (the page's, ``list_datasets``)
#: names each dataset's columns.
MAX_COLUMNS = 1_000
MAX_COLUMN_NAME_CHARS = 256
#: Most cells (rows x columns) a dataset is made of: every row is given every column (missing values ``None``), so
#: JSON Lines whose rows each bring a new key grow as rows x columns; 3,000 lines of ``{"prompt": "p", "k<i>": 1}``
#: (83 KB) took 2.6 s and 280 MB, a 1 MB file would have taken every gigabyte of the web process.
MAX_CELLS = 10_000_000
#: Longest system prompt an upload's mapping adds, in characters, and most characters it may add to a dataset, all
#: rows together: it is written into every row, so 100 KB of system prompt on 1,000 rows (a 19 KB file) wrote 95 MB.
MAX_SYSTEM_PROMPT_CHARS = 20_000
MAX_SYSTEM_PROMPT_TOTAL = 256 * 2**20


def checked_dataset(
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
    ``json_in_cells`` parses prompt cells that hold a JSON message list (CSV cannot hold lists). ``fmt`` and
    ``name`` are kept on the dataset (``name`` also starts every message).

    Raises:
        DatasetError: no rows; more than :data:`MAX_COLUMNS` columns, a column name longer than
            :data:`MAX_COLUMN_NAME_CHARS`, or more than :data:`MAX_CELLS` cells (rows x columns); a system prompt
            over :data:`MAX_SYSTEM_PROMPT_CHARS`, or adding more than :data:`MAX_SYSTEM_PROMPT_TOTAL` characters
            to the rows; a mapping :func:`map_columns` refuses, no ``prompt`` column, or a row whose prompt is
            missing, empty, of the wrong type, a malformed message list, or of another kind than the first row's.
    """
    if not rows:
        raise DatasetError(name, "no data rows")
    check_table_size(len(rows), columns, name)
    _check_system_prompt(mapping.system_prompt if mapping is not None else "", len(rows), name)
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


def check_table_size(num_rows: int, columns: list[str], name: str) -> None:
    """Refuse a table too wide or too large to pad every row to every column (before any row is padded)."""
    if len(columns) > MAX_COLUMNS:
        raise DatasetError(name, f"{len(columns):,} columns: at most {MAX_COLUMNS:,} (do the rows each bring keys of "
                                 "their own?)")
    long_name = next((str(c) for c in columns if len(str(c)) > MAX_COLUMN_NAME_CHARS), None)
    if long_name is not None:
        raise DatasetError(name, f"a column name of {len(long_name):,} characters ({long_name[:40]!r}...): at most "
                                 f"{MAX_COLUMN_NAME_CHARS}")
    if num_rows * len(columns) > MAX_CELLS:
        raise DatasetError(name, f"{num_rows:,} rows x {len(columns):,} columns is over the limit of {MAX_CELLS:,} "
                                 "cells (every row holds every column)")


def _check_system_prompt(system_prompt: str, num_rows: int, name: str) -> None:
    """Refuse a system prompt too long, or too long for this many rows (it is written into each)."""
    size = len(system_prompt.strip())
    if size > MAX_SYSTEM_PROMPT_CHARS:
        raise DatasetError(name, f"the system prompt is {size:,} characters long: at most {MAX_SYSTEM_PROMPT_CHARS:,}")
    if size * num_rows > MAX_SYSTEM_PROMPT_TOTAL:
        raise DatasetError(name, f"a system prompt of {size:,} characters on {num_rows:,} rows adds "
                                 f"{size * num_rows:,} characters, over the limit of {MAX_SYSTEM_PROMPT_TOTAL:,}; "
                                 "set it in the run config instead (system_prompt)")


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
    return checked_dataset(rows, columns, None, "jsonl", name, json_in_cells=False, mapping=mapping).rows


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
            f"prompt must be text or a list of chat messages, got {json_type(value)}",
            field=PROMPT_COLUMN,
            **where,
        )
    if not value:
        raise DatasetError(name, "prompt is an empty message list", field=PROMPT_COLUMN, **where)
    messages = []
    for number, message in enumerate(value, start=1):
        at = {"field": PROMPT_COLUMN, "message_index": number, **where}
        if not isinstance(message, dict):
            raise DatasetError(name, f"expected a message object, got {json_type(message)}", **at)
        role, content = message.get("role"), message.get("content")
        if role is None:
            raise DatasetError(name, "message has no 'role'", **at)
        if role not in MESSAGE_ROLES:
            raise DatasetError(name, f"role {role!r} is not one of {', '.join(MESSAGE_ROLES)}", **at)
        if content is None:
            raise DatasetError(name, "message has no 'content'", **at)
        if isinstance(content, list):
            content = _checked_blocks(content, name, at)
        elif not isinstance(content, str):
            raise DatasetError(name, f"message 'content' must be text or a list of content blocks, got "
                                     f"{json_type(content)}", **at)
        # Parquet structs give every message every field of the column (None where unset); drop those.
        messages.append({**{k: v for k, v in message.items() if v is not None}, "content": content})
    if not any(_has_content(m["content"]) for m in messages):
        raise DatasetError(name, "prompt is empty (every message's content is blank)", field=PROMPT_COLUMN, **where)
    return messages


def _checked_blocks(blocks: list[Any], name: str, at: dict[str, Any]) -> list[dict[str, Any]]:
    """A message's content blocks (``{"type": "text", "text": str}``, ``{"type": "image", ...}``: TRL's
    multimodal messages), with the unset fields a Parquet struct adds left out.

    Raises:
        DatasetError: a block that is not an object, of another type, or a text block without text.
    """
    checked = []
    for number, block in enumerate(blocks, start=1):
        if not isinstance(block, dict):
            raise DatasetError(name, f"content block {number}: expected an object, got {json_type(block)}", **at)
        block = {k: v for k, v in block.items() if v is not None}
        kind = block.get("type")
        if kind == "text" and not isinstance(block.get("text"), str):
            raise DatasetError(name, f"content block {number}: a text block needs 'text' as text", **at)
        if kind not in ("text", "image"):
            raise DatasetError(name, f"content block {number}: type {kind!r} is not 'text' or 'image'", **at)
        checked.append(block)
    return checked


def _has_content(content: str | list[dict[str, Any]]) -> bool:
    if isinstance(content, str):
        return bool(content.strip())
    return any(b["type"] == "image" or b["text"].strip() for b in content)


def _json_message_list_or_text(cell: str) -> str | list[Any]:
    """A CSV cell that is a JSON list of objects (a message list) parsed; any other text unchanged."""
    try:
        value = json.loads(cell)
    except (RecursionError, ValueError):  # JSONDecodeError is a ValueError
        return cell
    if isinstance(value, list) and value and all(isinstance(m, dict) for m in value):
        return value
    return cell
