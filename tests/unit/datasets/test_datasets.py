"""Tests for reading prompt dataset files (grpo_core.datasets: formats, columnar, checks): every error names the file
and where; every format round-trips to plain rows."""

from __future__ import annotations

import json
import math
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from grpo_core.datasets.formats import SUPPORTED_EXTENSIONS, load_prompt_dataset, read_normalized, save_normalized
from grpo_core.datasets.prompt_dataset import PREVIEW_MAX_CHARS, DatasetError, PromptDataset

REPO = Path(__file__).resolve().parents[3]
EXAMPLE = REPO / "examples" / "arithmetic.jsonl"

CHAT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2 + 2?"}]


def write(tmp_path: Path, name: str, content: str | bytes) -> Path:
    path = tmp_path / name
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content, encoding="utf-8")
    return path


def jsonl(*rows: object) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def assert_plain(value: object) -> None:
    """Only JSON types, all the way down (no numpy, pandas or NaN)."""
    if isinstance(value, dict):
        assert all(type(k) is str for k in value)
        for v in value.values():
            assert_plain(v)
    elif isinstance(value, list):
        for v in value:
            assert_plain(v)
    else:
        assert value is None or type(value) in (str, int, float, bool), (value, type(value))
        assert not (type(value) is float and not math.isfinite(value))


# --- errors: (file name, content, expected fragments of the message, expected attributes) ------------------------

ERROR_CASES = [
    pytest.param(
        "arith.jsonl",
        jsonl({"prompt": "a"}) + "\n" + '{"prompt": "b" "answer": 1}\n',
        ["arith.jsonl, line 3, column 16: not valid JSON (Expecting ',' delimiter)"],
        {"line": 3, "column": 16},
        id="jsonl-bad-json-names-file-line-column-blank-lines-counted",
    ),
    pytest.param(
        "arith.jsonl",
        jsonl({"prompt": "a"}, {"prompt": "b"}, [1, 2]),
        ["arith.jsonl, line 3: expected a JSON object, got a list"],
        {"line": 3, "column": None},
        id="jsonl-not-an-object",
    ),
    pytest.param(
        "q.jsonl",
        jsonl({"question": "2+2?", "answer": 4}),
        ["q.jsonl: no column named 'prompt'; columns are question, answer", "rename 'question' to 'prompt'"],
        {"line": None},
        id="jsonl-no-prompt-with-hint",
    ),
    pytest.param(
        "q.jsonl",
        jsonl({"x": "2+2?", "answer": 4}),
        ["no column named 'prompt'; columns are x, answer"],
        {},
        id="jsonl-no-prompt-no-hint",
    ),
    pytest.param(
        "q.csv",
        "Instruction,answer\nadd,4\n",
        ["q.csv: no column named 'prompt'; columns are Instruction, answer; rename 'Instruction' to 'prompt'"],
        {},
        id="csv-no-prompt-hint-case-insensitive",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": "ok"}, {"prompt": "   "}),
        ["d.jsonl, line 2, column 'prompt': prompt is empty"],
        {"line": 2, "field": "prompt"},
        id="jsonl-empty-prompt",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": "ok"}, {"answer": 1}),
        ["d.jsonl, line 2, column 'prompt': prompt is missing"],
        {"line": 2},
        id="jsonl-row-without-prompt",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": 42}),
        ["d.jsonl, line 1, column 'prompt': prompt must be text or a list of chat messages, got a number"],
        {},
        id="jsonl-prompt-number",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": CHAT}, {"prompt": [{"content": "hi"}]}),
        ["d.jsonl, line 2, column 'prompt', message 1: message has no 'role'"],
        {"line": 2, "message_index": 1},
        id="jsonl-message-without-role",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": [{"role": "system", "content": "x"}, {"role": "user"}]}),
        ["d.jsonl, line 1, column 'prompt', message 2: message has no 'content'"],
        {"message_index": 2},
        id="jsonl-message-without-content",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": [{"role": "robot", "content": "x"}]}),
        ["message 1: role 'robot' is not one of system, user, assistant, tool"],
        {},
        id="jsonl-unknown-role",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": []}),
        ["line 1, column 'prompt': prompt is an empty message list"],
        {},
        id="jsonl-empty-message-list",
    ),
    pytest.param(
        "d.jsonl",
        jsonl({"prompt": CHAT}, {"prompt": "text"}),
        ["line 2, column 'prompt': prompt is text but the first row's is a message list"],
        {},
        id="jsonl-mixed-prompt-kinds",
    ),
    pytest.param("empty.jsonl", "", ["empty.jsonl: the file is empty"], {}, id="jsonl-empty-file"),
    pytest.param("blank.jsonl", "\n  \n", ["blank.jsonl: the file is empty"], {}, id="jsonl-blank-lines-only"),
    pytest.param("empty.csv", "", ["empty.csv: the file is empty"], {}, id="csv-empty-file"),
    pytest.param("head.csv", "prompt,answer\n", ["head.csv: no data rows"], {}, id="csv-header-only"),
    pytest.param("e.json", "[]", ["e.json: no data rows"], {}, id="json-empty-array"),
    pytest.param(
        "bad.csv",
        "prompt,answer\na,1\nb,2\nc,3,4\n",
        ["bad.csv, line 4: not valid CSV (Error tokenizing data. C error: Expected 2 fields in line 4, saw 3)"],
        {"line": 4},
        id="csv-tokenizing-error-keeps-pandas-location",
    ),
    pytest.param(
        "broken.csv",
        'prompt,answer\n"a ""quoted"" one",1\nb,"2\nc,3\n',
        ["broken.csv, line 3, column 3: not valid CSV (a quoted field opened here is never closed"],
        {"line": 3, "column": 3},
        id="csv-unclosed-quote-line-and-column",
    ),
    pytest.param(
        "d.csv",
        "prompt,answer\n" + "".join(f"q{i},{i}\n" for i in range(11)) + ",12\n",
        ["d.csv, row 12, column 'prompt': prompt is missing"],
        {"row": 12, "line": None, "field": "prompt"},
        id="csv-empty-prompt-cell-row-number",
    ),
    pytest.param(
        "d.csv",
        'prompt,answer\n"[{""role"": ""user""}]",1\n',
        ["d.csv, row 1, column 'prompt', message 1: message has no 'content'"],
        {},
        id="csv-json-message-list-checked",
    ),
    pytest.param(
        "latin1.jsonl",
        b'{"prompt": "ok"}\n{"prompt": "caf\xe9"}\n',
        ["latin1.jsonl, line 2, byte 32: not valid UTF-8 (byte 0xe9)"],
        {"line": 2, "byte_offset": 32},
        id="jsonl-not-utf8",
    ),
    pytest.param(
        "latin1.csv",
        b"prompt,answer\nabc,1\ncaf\xe9,2\n",
        ["latin1.csv, line 3, byte 23: not valid UTF-8"],
        {"line": 3},
        id="csv-not-utf8",
    ),
    pytest.param(
        "data.txt",
        "prompt\nx\n",
        ["data.txt: unsupported file type; use one of .jsonl, .json, .csv, .parquet"],
        {},
        id="unknown-extension",
    ),
    pytest.param(
        "arr.json",
        '[{"prompt": "a"},\n 3]',
        ["arr.json, row 2: expected a JSON object, got a number"],
        {"row": 2},
        id="json-array-item-not-object",
    ),
    pytest.param(
        "arr.json",
        '[{"prompt": "a"},\n {"prompt": }]',
        ["arr.json, line 2, column 13: not valid JSON (Expecting value)"],
        {"line": 2, "column": 13},
        id="json-array-bad-json",
    ),
    pytest.param(
        "one.json",
        '{\n  "prompt": "a"\n}\n',
        ["one.json: expected JSON Lines (one object per line) or a JSON array of objects, got one JSON object"],
        {},
        id="json-single-pretty-object",
    ),
    pytest.param(
        "broken.parquet",
        b"PAR1 this is not parquet at all",
        ["broken.parquet: not a valid Parquet file: "],
        {},
        id="parquet-garbage",
    ),
]


@pytest.mark.parametrize(("name", "content", "fragments", "attributes"), ERROR_CASES)
def test_errors_name_the_file_and_the_place(tmp_path, name, content, fragments, attributes):
    path = write(tmp_path, name, content)
    with pytest.raises(DatasetError) as caught:
        load_prompt_dataset(path)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message
    assert caught.value.source_name == name
    for attribute, expected in attributes.items():
        assert getattr(caught.value, attribute) == expected, attribute


def test_truncated_parquet_is_a_dataset_error(tmp_path):
    good = tmp_path / "good.parquet"
    pq.write_table(pa.table({"prompt": ["a"] * 100, "answer": list(range(100))}), good)
    data = good.read_bytes()
    truncated = write(tmp_path, "cut.parquet", data[: len(data) // 2])
    with pytest.raises(DatasetError, match=r"^cut\.parquet: not a valid Parquet file: "):
        load_prompt_dataset(truncated)


def test_parquet_prompt_of_wrong_type_is_located_by_row(tmp_path):
    path = tmp_path / "n.parquet"
    pq.write_table(pa.table({"prompt": ["a", "b", None]}), path)
    with pytest.raises(DatasetError, match=r"^n\.parquet, row 3, column 'prompt': prompt is missing$"):
        load_prompt_dataset(path)


def test_source_name_is_used_in_messages_and_for_the_format(tmp_path):
    path = write(tmp_path, "upload_1234", jsonl({"question": "x"}))  # upload temp file without extension
    with pytest.raises(DatasetError, match=r"^my data\.jsonl: no column named 'prompt'"):
        load_prompt_dataset(path, source_name="my data.jsonl")


def test_supported_extensions_are_case_insensitive(tmp_path):
    assert SUPPORTED_EXTENSIONS == (".jsonl", ".json", ".csv", ".parquet")
    dataset = load_prompt_dataset(write(tmp_path, "UP.JSONL", jsonl({"prompt": "a"})))
    assert dataset.format == "jsonl"


# --- round trips -------------------------------------------------------------------------------------------------

TEXT_ROWS = [
    {"prompt": "What is 2 + 2?", "answer": 4, "note": "ünïcödé ✓"},
    {"prompt": "NA", "answer": -3, "note": None},  # "NA" is a real prompt, not a missing value
    {"prompt": "Line one\nline two, with a comma", "answer": 10, "note": "x"},
]
CHAT_ROWS = [
    {"prompt": CHAT, "answer": 4},
    {"prompt": [{"role": "user", "content": "Say hi"}], "answer": 0},
]


def write_rows(tmp_path: Path, fmt: str, rows: list[dict]) -> Path:
    path = tmp_path / f"data.{fmt}"
    if fmt == "jsonl":
        path.write_text(jsonl(*rows), encoding="utf-8")
    elif fmt == "json":
        path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    elif fmt == "csv":
        frame = pd.DataFrame(rows)
        if isinstance(rows[0]["prompt"], list):
            frame["prompt"] = [json.dumps(r["prompt"]) for r in rows]
        frame.to_csv(path, index=False)
    else:
        pq.write_table(pa.Table.from_pylist(rows), path)
    return path


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet"])
@pytest.mark.parametrize(("rows", "kind"), [(TEXT_ROWS, "text"), (CHAT_ROWS, "chat")], ids=["text", "chat"])
def test_round_trip(tmp_path, fmt, rows, kind):
    dataset = load_prompt_dataset(write_rows(tmp_path, fmt, rows))
    assert dataset.format == fmt
    assert dataset.prompt_kind == kind
    assert dataset.num_rows == len(rows)
    assert dataset.columns == list(rows[0])
    assert dataset.rows == rows
    assert_plain(dataset.rows)

    out = tmp_path / "store" / "normalized.jsonl"
    save_normalized(dataset, out)
    assert read_normalized(out) == rows
    assert [p.name for p in out.parent.iterdir()] == ["normalized.jsonl"]  # no temp file left behind
    assert load_prompt_dataset(out).rows == rows


def test_csv_keeps_types_and_only_empty_cells_are_missing(tmp_path):
    path = write(tmp_path, "t.csv", "prompt,answer,score,ok,label\n42,1,0.5,true,null\nb,,,false,\n")
    dataset = load_prompt_dataset(path)
    assert dataset.rows == [
        {"prompt": "42", "answer": 1, "score": 0.5, "ok": True, "label": "null"},
        {"prompt": "b", "answer": None, "score": None, "ok": False, "label": None},
    ]
    assert type(dataset.rows[0]["answer"]) is int
    assert_plain(dataset.rows)


def test_csv_prompt_that_merely_starts_with_a_bracket_stays_text(tmp_path):
    path = write(tmp_path, "t.csv", 'prompt\n"[1, 2, 3] sum these"\n"[1, 2]"\n')
    assert load_prompt_dataset(path).rows == [{"prompt": "[1, 2, 3] sum these"}, {"prompt": "[1, 2]"}]


def test_csv_with_utf8_byte_order_mark(tmp_path):
    path = write(tmp_path, "bom.csv", "\ufeffprompt,answer\nhi,1\n".encode())
    assert load_prompt_dataset(path).rows == [{"prompt": "hi", "answer": 1}]


def test_jsonl_inconsistent_columns_are_filled_with_none_and_kept_in_file_order(tmp_path):
    path = write(tmp_path, "d.jsonl", jsonl({"answer": 1, "prompt": "a"}, {"prompt": "b", "tests": ["t"]}))
    dataset = load_prompt_dataset(path)
    assert dataset.columns == ["prompt", "answer", "tests"]
    assert dataset.rows == [
        {"prompt": "a", "answer": 1, "tests": None},
        {"prompt": "b", "answer": None, "tests": ["t"]},
    ]
    assert list(dataset.rows[0]) == dataset.columns


def test_jsonl_nan_becomes_none(tmp_path):
    path = write(tmp_path, "d.jsonl", '{"prompt": "a", "x": NaN, "y": [Infinity, 1.5]}\n')
    assert load_prompt_dataset(path).rows == [{"prompt": "a", "x": None, "y": [None, 1.5]}]


def test_parquet_nested_and_odd_types_become_plain_python(tmp_path):
    frame = pd.DataFrame(
        {
            "prompt": [CHAT, [{"role": "user", "content": "hi", "name": "bob"}]],
            "answer": np.array([4, 5], dtype=np.int64),
            "score": [1.5, np.nan],
            "when": pd.to_datetime(["2024-01-02 03:04:05", None]),
            "tags": [["a", "b"], []],
            "flag": np.array([True, False]),
        },
        index=pd.Index([10, 11], name="custom_index"),
    )
    path = tmp_path / "n.parquet"
    frame.to_parquet(path)
    dataset = load_prompt_dataset(path)
    assert dataset.prompt_kind == "chat"
    assert dataset.rows[0]["prompt"] == CHAT  # the struct's "name": None is dropped from messages without one
    assert dataset.rows[1]["prompt"] == [{"role": "user", "content": "hi", "name": "bob"}]
    assert [r["answer"] for r in dataset.rows] == [4, 5]
    assert [r["score"] for r in dataset.rows] == [1.5, None]
    assert dataset.rows[0]["when"] == datetime(2024, 1, 2, 3, 4, 5).isoformat()
    assert dataset.rows[1]["when"] is None
    assert [r["tags"] for r in dataset.rows] == [["a", "b"], []]
    assert [r["flag"] for r in dataset.rows] == [True, False]
    assert_plain(dataset.rows)
    json.dumps(dataset.rows, allow_nan=False)


def test_max_rows_caps_every_format(tmp_path):
    rows = [{"prompt": f"q{i}", "answer": i} for i in range(10)]
    for fmt in ("jsonl", "json", "csv", "parquet"):
        assert load_prompt_dataset(write_rows(tmp_path, fmt, rows), max_rows=3).rows == rows[:3], fmt


def test_max_rows_stops_before_a_bad_line(tmp_path):
    path = write(tmp_path, "d.jsonl", jsonl({"prompt": "a"}, {"prompt": "b"}) + "not json\n")
    assert load_prompt_dataset(path, max_rows=2).num_rows == 2


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_max_rows_must_be_positive(tmp_path, bad):
    with pytest.raises(ValueError, match="max_rows"):
        load_prompt_dataset(write(tmp_path, "d.jsonl", jsonl({"prompt": "a"})), max_rows=bad)


def test_preview_shortens_long_strings_and_does_not_change_rows(tmp_path):
    long = "x" * 1000
    rows = [{"prompt": [{"role": "user", "content": long}], "answer": long}] + [
        {"prompt": [{"role": "user", "content": str(i)}], "answer": ""} for i in range(9)
    ]
    dataset = load_prompt_dataset(write(tmp_path, "d.jsonl", jsonl(*rows)))
    preview = dataset.preview(3)
    assert len(preview) == 3
    assert len(preview[0]["answer"]) == PREVIEW_MAX_CHARS and preview[0]["answer"].endswith("…")
    assert len(preview[0]["prompt"][0]["content"]) == PREVIEW_MAX_CHARS
    assert dataset.rows[0]["answer"] == long
    assert len(dataset.preview()) == 5


def test_save_normalized_replaces_the_file_atomically(tmp_path):
    out = tmp_path / "n.jsonl"
    out.write_text("old\n")
    dataset = PromptDataset(rows=[{"prompt": "é", "a": 1}], columns=["prompt", "a"], format="jsonl", source_name="x")
    save_normalized(dataset, out)
    assert out.read_text(encoding="utf-8") == '{"prompt": "é", "a": 1}\n'  # ensure_ascii=False


def test_read_normalized_reports_bad_lines(tmp_path):
    path = write(tmp_path, "n.jsonl", '{"prompt": "a"}\n{oops\n')
    with pytest.raises(DatasetError, match=r"^n\.jsonl, line 2, column 2: not valid JSON"):
        read_normalized(path)


@pytest.mark.parametrize("fmt", ["jsonl", "csv", "parquet"])
def test_100k_rows_load_completely(tmp_path, fmt):
    rows = [{"prompt": f"What is {i} + {i}?", "answer": 2 * i, "id": f"r{i}"} for i in range(100_000)]
    path = write_rows(tmp_path, fmt, rows)
    dataset = load_prompt_dataset(path)
    assert dataset.num_rows == 100_000 and dataset.rows[-1] == rows[-1]


def test_module_does_not_import_heavy_or_ui_libraries():
    code = (
        "import sys, grpo_core.datasets.formats; "
        "print(sorted(m for m in ('torch', 'transformers', 'gradio') if m in sys.modules))"
    )
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"


# --- the example dataset -----------------------------------------------------------------------------------------

QUESTION = re.compile(r"What is (-?\d+) ([+-]) (\d+|\(-\d+\))\?")


def test_example_arithmetic_dataset_loads_with_correct_answers():
    dataset = load_prompt_dataset(EXAMPLE)
    assert dataset.num_rows == 400
    assert dataset.columns == ["prompt", "answer"]
    assert dataset.prompt_kind == "chat"
    negatives = operators = 0
    for row in dataset.rows:
        system, user = row["prompt"]
        assert system["role"] == "system" and "number" in system["content"]
        assert user["role"] == "user"
        a, op, b = QUESTION.fullmatch(user["content"]).groups()
        a, b = int(a), int(b.strip("()"))
        assert -50 <= a <= 99 and -50 <= b <= 99
        assert type(row["answer"]) is int
        assert row["answer"] == (a + b if op == "+" else a - b), user["content"]
        negatives += row["answer"] < 0
        operators += op == "+"
    assert negatives > 20 and 100 < operators < 300
    assert len({row["prompt"][1]["content"] for row in dataset.rows}) == 400


def test_example_generator_is_deterministic(tmp_path):
    out = tmp_path / "a.jsonl"
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_arithmetic.py"), "--out", str(out)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == EXAMPLE.read_bytes()


# --- the arithmetic levels ---------------------------------------------------------------------------------------

LEVEL_QUESTION = re.compile(r"What is ([-+x() 0-9]+)\?")


def _level_rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(
    ("level", "operators", "train_rows"),
    [("sums1", {"+"}, 50), ("sums2", {"+"}, 400), ("mixed", {"+", "-", "x"}, 400), ("multistep", {"+", "-", "x"}, 400)],
)
def test_arithmetic_levels_have_right_answers_and_a_disjoint_heldout_split(level, operators, train_rows):
    train = _level_rows(REPO / "examples" / f"arithmetic_{level}.jsonl")
    heldout = _level_rows(REPO / "examples" / "heldout" / f"arithmetic_{level}.jsonl")
    assert (len(train), len(heldout)) == (train_rows, 50)
    seen_operators = set()
    for row in train + heldout:
        system, user = row["prompt"]
        assert system == {"role": "system", "content": "You are a careful calculator. Reply with the result only, as a number."}
        expression = LEVEL_QUESTION.fullmatch(user["content"]).group(1)
        seen_operators |= set(expression) & {"+", "-", "x"}
        assert type(row["answer"]) is int
        assert row["answer"] == eval(expression.replace("x", "*")), user["content"]  # digits, + - * ( ) only
    assert seen_operators == operators
    train_questions = {row["prompt"][1]["content"] for row in train}
    heldout_questions = {row["prompt"][1]["content"] for row in heldout}
    assert len(train_questions) == len(train) and len(heldout_questions) == len(heldout)
    assert not train_questions & heldout_questions


def test_single_digit_sums_are_all_one_hundred_pairs():
    rows = _level_rows(REPO / "examples" / "arithmetic_sums1.jsonl")
    rows += _level_rows(REPO / "examples" / "heldout" / "arithmetic_sums1.jsonl")
    assert {row["prompt"][1]["content"] for row in rows} == {f"What is {a} + {b}?" for a in range(10) for b in range(10)}


def test_level_generator_is_deterministic(tmp_path):
    out = tmp_path / "arithmetic_mixed.jsonl"
    subprocess.run(
        [sys.executable, str(REPO / "examples" / "make_arithmetic.py"), "--level", "mixed", "--out", str(out)],
        check=True,
        capture_output=True,
    )
    assert out.read_bytes() == (REPO / "examples" / "arithmetic_mixed.jsonl").read_bytes()
    assert (tmp_path / "heldout" / out.name).read_bytes() == (REPO / "examples" / "heldout" / out.name).read_bytes()
