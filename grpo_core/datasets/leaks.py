"""Prompts that show the model its answer: a conversational prompt whose last message is the assistant's (SFT data
taken as prompts: the model reads the reference reply and only has to continue it), or a prompt that holds the row's
``answer`` value. GRPO then pays for copying, not for solving.

Checked where a user can still fix the data: on upload (Datasets tab), at launch (:mod:`grpo_core.submit.validate`'s
warnings) and in the preflight report. Pure and web-safe, about a microsecond a row.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

#: A text answer shorter than this (characters) is looked for only in assistant messages: a letter or a short word
#: appears in many prompts without giving anything away. A number is looked for where it is stated as a result.
MIN_ANSWER_CHARS = 3
_EXAMPLES = 3


def _answer_text(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        text = f"{value:g}" if isinstance(value, float) else str(value)
    elif isinstance(value, str):
        text = value
    else:
        return None
    text = " ".join(text.split())
    return text or None


_NUMBER_RE = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")
#: What states a number as a result in a prompt ("= 42", "#### 42", "answer is 42", "Answer: 42").
_STATED_RE = r"(?:=|####|\b(?:answer|result|solution)\b\s*(?:is|:)?)\s*\$?\s*"


def _contains(haystack: str, needle: str, *, reply: bool = False) -> bool:
    """``needle`` in ``haystack`` as a whole token (not inside a longer number or word), spaces normalised. A number
    counts only where it is stated as a result (after ``=``, ``####``, "answer is"): an operand equal to the answer
    ("What is -34 + 0?") gives nothing away; in an assistant's ``reply`` anywhere."""
    haystack = " ".join(haystack.split())
    token = r"(?<![\w.])" + re.escape(needle) + r"(?![\w]|\.\d)"
    if _NUMBER_RE.fullmatch(needle) and not reply:
        token = _STATED_RE + re.escape(needle) + r"(?![\w]|\.\d)"
        return re.search(token, haystack, flags=re.IGNORECASE) is not None
    return re.search(token, haystack) is not None


def _messages(prompt: Any) -> list[dict[str, Any]] | None:
    if isinstance(prompt, list) and all(isinstance(m, Mapping) for m in prompt):
        return list(prompt)
    return None


def row_leak(row: Mapping[str, Any], answer_column: str = "answer") -> str | None:
    """Why the row's prompt gives its answer away, or ``None``: ``"ends with an assistant message"`` or
    ``"contains the answer"``."""
    prompt = row.get("prompt")
    messages = _messages(prompt)
    if messages and str(messages[-1].get("role", "")).lower() == "assistant":
        return "ends with an assistant message"
    answer = _answer_text(row.get(answer_column))
    if answer is None:
        return None
    if messages is not None:
        assistant = " ".join(str(m.get("content", "")) for m in messages
                             if str(m.get("role", "")).lower() == "assistant")
        if assistant and _contains(assistant, answer, reply=True):
            return "contains the answer"
        text = " ".join(str(m.get("content", "")) for m in messages)
    else:
        text = str(prompt or "")
    if (len(answer) >= MIN_ANSWER_CHARS or _NUMBER_RE.fullmatch(answer)) and _contains(text, answer):
        return "contains the answer"
    return None


def leak_lines(rows: Sequence[Mapping[str, Any]], answer_column: str = "answer") -> list[str]:
    """One warning line per kind of leak found, with its count and example rows (numbered from 0), e.g. ``"2 of 50
    rows have a prompt that ends with an assistant message (SFT data? the model is shown the reply it should write;
    drop that message): rows 3, 7"``; empty when no prompt leaks."""
    found: dict[str, list[int]] = {}
    for index, row in enumerate(rows):
        why = row_leak(row, answer_column)
        if why is not None:
            found.setdefault(why, []).append(index)
    advice = {
        "ends with an assistant message": (
            "SFT data? the model is shown the reply it should write and only continues it; drop the final "
            "assistant message"),
        "contains the answer": (
            f"the model can copy the {answer_column!r} column's value from its prompt; remove it from the prompt"),
    }
    lines = []
    for why, indices in found.items():
        shown = ", ".join(str(i) for i in indices[:_EXAMPLES]) + (", …" if len(indices) > _EXAMPLES else "")
        lines.append(f"{len(indices)} of {len(rows)} rows have a prompt that {why} ({advice[why]}): rows {shown}")
    return lines
