"""Tests of the HumanEval example dataset (Chen et al. 2021, arXiv 2107.03374) and code_tests on it."""

from __future__ import annotations

import json

import pytest

from grpo_core.datasets.humaneval import (
    HUMANEVAL_SIZE,
    INSTRUCTION,
    humaneval_data_path,
    humaneval_rows,
    write_humaneval_jsonl,
)
from grpo_core.rewards.code.correctness import CodeTestsReward
from grpo_core.rewards.code.units import split_tests

COLUMNS = {"prompt", "task_id", "entry_point", "tests", "canonical_solution"}


@pytest.fixture(scope="module")
def rows():
    return humaneval_rows()


def fenced(code: str) -> str:
    return f"```python\n{code}```"


def test_rows_have_the_expected_shape(rows):
    assert humaneval_data_path().name == "HumanEval.jsonl.gz"
    assert len(rows) == HUMANEVAL_SIZE == 164
    assert [row["task_id"] for row in rows] == [f"HumanEval/{i}" for i in range(164)]
    for row in rows:
        assert set(row) == COLUMNS
        assert row["prompt"].startswith(INSTRUCTION)
        problem_prompt = row["prompt"][len(INSTRUCTION) :]
        assert f"def {row['entry_point']}(" in problem_prompt
        assert row["canonical_solution"].startswith(problem_prompt)
        assert "def check(" in row["tests"]
        assert split_tests(row["tests"], row["entry_point"]), row["task_id"]


def test_first_row(rows):
    row = rows[0]
    assert row["entry_point"] == "has_close_elements"
    assert row["prompt"].endswith('    """\n')
    assert "assert candidate([1.0, 2.0, 3.9, 4.0, 5.0, 2.2], 0.3) == True" in row["tests"]


def test_write_jsonl_round_trips(rows, tmp_path):
    path = tmp_path / "nested" / "humaneval.jsonl"
    assert write_humaneval_jsonl(path) == 164
    lines = path.read_text(encoding="utf-8").splitlines()
    assert [json.loads(line) for line in lines] == rows
    assert not path.with_name("humaneval.jsonl.tmp").exists()


def test_every_canonical_solution_scores_one_and_garbage_scores_zero(rows):
    """All 164 canonical solutions pass their (split) tests: the splitting of check() loses nothing."""
    rule = CodeTestsReward(timeout_s=10.0)
    completions = [fenced(row["canonical_solution"]) for row in rows]
    completions += ["", "I don't know.", fenced("def unrelated():\n    return None\n")]
    extra = [rows[0], rows[1], rows[2]]
    rewards = rule(
        completions,
        tests=[row["tests"] for row in rows + extra],
        entry_point=[row["entry_point"] for row in rows + extra],
        task_id=[row["task_id"] for row in rows + extra],
    )
    failed = [row["task_id"] for row, reward in zip(rows, rewards, strict=False) if reward != 1.0]
    assert failed == []
    assert rewards[164:] == [0.0, 0.0, 0.0]


def test_a_partly_right_solution_gets_partial_credit(rows):
    row = rows[0]  # has_close_elements: 7 asserts, 3 of which expect False
    always_false = f"def {row['entry_point']}(numbers, threshold):\n    return False\n"
    reward = CodeTestsReward()([fenced(always_false)], tests=[row["tests"]], entry_point=[row["entry_point"]])
    assert reward == [pytest.approx(3 / 7)]
