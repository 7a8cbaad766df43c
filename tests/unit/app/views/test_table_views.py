"""Tables read as text: an empty table names its columns (never Gradio's "1 2 3"), and a dataset preview shows a chat
prompt as ``role: content`` lines, other nested values as JSON, never a Python ``repr`` of a list of dicts."""

from __future__ import annotations

import pytest

from app.tabs.datasets import preview_frame
from app.views.tables import cell_text, chat_text, empty_frame, is_chat

CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "What is 2 + 2?"}]


def test_an_empty_table_names_its_columns():
    frame = empty_frame(["completion", "total"])
    assert frame.empty and list(frame.columns) == ["completion", "total"]
    assert list(preview_frame([]).columns) == ["prompt"]


def test_a_chat_prompt_reads_as_role_and_content():
    assert chat_text(CHAT) == "system: Answer briefly.\nuser: What is 2 + 2?"
    frame = preview_frame([{"prompt": CHAT, "answer": 4, "tests": ["assert f(1) == 2"], "meta": {"level": 1}}])
    row = frame.iloc[0]
    assert row["prompt"] == "system: Answer briefly.\nuser: What is 2 + 2?"
    assert row["answer"] == "4"
    assert row["tests"] == '["assert f(1) == 2"]' and row["meta"] == '{"level": 1}'
    assert not any("{'role'" in str(cell) or "[{" in str(cell) for cell in row)


@pytest.mark.parametrize(("value", "chat"), [
    (CHAT, True),
    ([{"role": "user", "content": [{"type": "text", "text": "hi"}]}], True),
    ([], False),
    ([{"content": "no role"}], False),
    ([{"role": 3, "content": "x"}], False),
    ("plain", False),
    ([1, 2], False),
])
def test_what_counts_as_a_chat_prompt(value, chat):
    assert is_chat(value) is chat


def test_cells_are_cut_and_odd_values_do_not_raise():
    long = [{"role": "user", "content": "x" * 500}]
    assert len(cell_text(long)) == 160 and cell_text(long).endswith("…")
    assert cell_text([{"role": "user", "content": [{"type": "text", "text": "hi"}]}]) == "user: hi"
    assert cell_text([{"role": "user", "content": None}]) == "user: null"
    assert cell_text(object()).startswith('"<object object')
    assert cell_text(float("nan")) == "NaN"
