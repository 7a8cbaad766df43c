"""What a prompt dataset is: its rows, its column mapping, and the error that says what is wrong with a file.

A prompt dataset is a table with a required ``prompt`` column and any number of other columns. ``prompt`` holds
either text or a chat message list (``[{"role": "system" | "user" | "assistant" | "tool", "content": str}, ...]``);
every other column (``answer``, ``tests``, ...) is kept as is and reaches the reward rules through TRL's
``**columns``. A :class:`ColumnMapping` adapts a file as people have it (GSM8K's ``question``/``answer``): it names the
prompt column, renames others, and may add a system prompt that turns text prompts into chat prompts. Every problem
found is a :class:`DatasetError` that names the file and, where it can, the line, row and column, so the message can
be shown to the user as is.

Files are read by :mod:`grpo_core.datasets.formats` (JSON Lines, JSON, CSV) and :mod:`grpo_core.datasets.columnar`
(Parquet, ``save_to_disk`` folders), their values made plain by :mod:`grpo_core.datasets.plain_values`, and their rows
checked by :mod:`grpo_core.datasets.checks`. Imports no gradio, torch or transformers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal

PROMPT_COLUMN = "prompt"
PREVIEW_MAX_CHARS = 200

DatasetFormat = Literal["jsonl", "json", "csv", "parquet", "arrow"]
PromptKind = Literal["text", "chat"]


#: The parts of a :class:`DatasetError`'s location, in the order its message gives them, and how each reads.
_LOCATION_WORDS = (
    ("line", "line {}"),
    ("column", "column {}"),
    ("byte_offset", "byte {}"),
    ("row", "row {}"),
    ("field", "column '{}'"),
    ("message_index", "message {}"),
)


@dataclass(eq=False, repr=False)
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
        message_index: 1-based message of a chat prompt, or ``None``.
        byte_offset: 0-based byte offset in the file (bad UTF-8), or ``None``.
    """

    source_name: str
    reason: str
    _: KW_ONLY
    line: int | None = None
    column: int | None = None
    row: int | None = None
    field: str | None = None
    message_index: int | None = None
    byte_offset: int | None = None

    def __post_init__(self) -> None:
        where = [self.source_name]
        where += [words.format(value) for part, words in _LOCATION_WORDS if (value := getattr(self, part)) is not None]
        super().__init__(f"{', '.join(where)}: {self.reason}")


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
        images: the decoded images of an image dataset not stored yet (a
            :class:`grpo_core.datasets.images.StagedImages`), else ``None``.
    """

    rows: list[dict[str, Any]]
    columns: list[str]
    format: str
    source_name: str
    images: Any = field(default=None, compare=False)

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


def _shorten(value: Any) -> Any:
    if isinstance(value, str) and len(value) > PREVIEW_MAX_CHARS:
        return value[: PREVIEW_MAX_CHARS - 1] + "…"
    if isinstance(value, dict):
        return {k: _shorten(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shorten(v) for v in value]
    return value
