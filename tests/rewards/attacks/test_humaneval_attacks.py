"""HumanEval end to end: the 164 canonical solutions score 1.0 and degenerate completions 0 on every problem.

The rows are passed as TRL passes them (``prompts`` beside the dataset columns), so the prompts' helpers are in play.
"""

from __future__ import annotations

import pytest

from grpo_core.datasets.humaneval import humaneval_rows
from grpo_core.rewards.code.correctness import CodeTestsReward

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


REDEFINED_HELPERS = {
    # task: a completion that redefines the prompt's helper so that a wrong entry point passes the tests
    "HumanEval/32": "def poly(xs, x):\n    return 0.0\n\ndef find_zero(xs):\n    return 12345.0\n",
    "HumanEval/38": "def encode_cyclic(s):\n    return s\n\ndef decode_cyclic(s):\n    return s\n",
    "HumanEval/50": "def encode_shift(s):\n    return s\n\ndef decode_shift(s):\n    return s\n",
}


def test_redefining_the_prompts_helpers_gains_nothing(rows):
    by_id = {row["task_id"]: row for row in rows}
    chosen = [by_id[task] for task in REDEFINED_HELPERS]
    rewards = CodeTestsReward(timeout_s=10.0)(
        [f"```python\n{REDEFINED_HELPERS[row['task_id']]}```" for row in chosen] + [row["canonical_solution"]
                                                                                   for row in chosen],
        prompts=[row["prompt"] for row in chosen] * 2,
        tests=[row["tests"] for row in chosen] * 2,
        entry_point=[row["entry_point"] for row in chosen] * 2,
    )
    assert rewards == [0.0] * len(chosen) + [1.0] * len(chosen)
