"""HumanEval end to end: the 164 canonical solutions score 1.0 and degenerate completions 0 on every problem.

The rows are passed as TRL passes them (``prompts`` beside the dataset columns), so the prompts' helpers are in play.
"""

from __future__ import annotations

import pytest

from grpo_core.humaneval import humaneval_rows
from grpo_core.rewards.code import CodeTestsReward

DEGENERATE = ["", "pass", "```python\n```"]


@pytest.fixture(scope="module")
def rows():
    try:
        return humaneval_rows()
    except FileNotFoundError as exc:
        pytest.skip(str(exc))


def test_canonical_solutions_pass_and_degenerate_completions_score_zero(rows):
    completions = [row["canonical_solution"] for row in rows]
    for text in DEGENERATE:
        completions += [text] * len(rows)
    copies = 1 + len(DEGENERATE)
    rewards = CodeTestsReward(timeout_s=10.0)(
        completions,
        prompts=[row["prompt"] for row in rows] * copies,
        tests=[row["tests"] for row in rows] * copies,
        entry_point=[row["entry_point"] for row in rows] * copies,
    )
    n = len(rows)
    assert n == 164
    canonical = rewards[:n]
    assert [row["task_id"] for row, r in zip(rows, canonical, strict=True) if r != 1.0] == []
    for k, text in enumerate(DEGENERATE, start=1):
        scored = rewards[k * n : (k + 1) * n]
        assert [row["task_id"] for row, r in zip(rows, scored, strict=True) if r != 0.0] == [], repr(text)
