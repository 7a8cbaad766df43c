"""Tests of grpo_core.rewards.answer_coverage: rows whose answer an answer rule cannot judge, as the dataset upload,
the preflight and the bench report them."""

from __future__ import annotations

import pytest

from grpo_core.rewards import get_rule
from grpo_core.rewards.answer_coverage import answer_coverage, coverage_lines, dataset_answer_coverage

ANSWERS = [42, "#### 1,234", "\\frac{1}{2}", "see figure", None, "", "yes", "3 or 4", "x^2+1", "18 dollars"]


def test_counts_agree_with_the_rules_none() -> None:
    """A row is counted exactly when the rule gives None for a completion of it (math_equivalence with math-verify)."""
    for rule, thorough in (("numeric_answer", False), ("math_equivalence", True), ("exact_match", False)):
        reward = get_rule(rule).build()
        rewards = reward(["\\boxed{1}"] * len(ANSWERS), answer=ANSWERS)
        coverage = answer_coverage(rule, ANSWERS, thorough=thorough)
        assert coverage.not_judged == sum(r is None for r in rewards), rule
        assert coverage.num_rows == len(ANSWERS)


def test_web_side_math_check_finds_prose_and_missing_answers() -> None:
    coverage = answer_coverage("math_equivalence", ANSWERS)
    assert coverage.not_judged == 5  # "see figure", None, "", "yes", "3 or 4" (a bare "or" is prose)
    assert coverage.examples[0] == (3, "see figure")
    numeric = answer_coverage("numeric_answer", ANSWERS)
    assert {index for index, _ in numeric.examples} == {3, 4, 5}
    assert numeric.not_judged == 6  # also "yes", "3 or 4", "x^2+1"


def test_dataset_answer_coverage_and_lines() -> None:
    rows = [{"prompt": "q", "answer": a} for a in ANSWERS]
    coverages = dataset_answer_coverage(rows, ["numeric_answer", "think_answer_format", "numeric_answer"])
    assert [c.rule for c in coverages] == ["numeric_answer"]
    (line,) = coverage_lines(coverages)
    assert line.startswith("numeric_answer cannot judge 6 of 10 rows") and "row 3 'see figure'" in line
    assert dataset_answer_coverage([{"prompt": "q"}]) == []
    assert coverage_lines(dataset_answer_coverage([{"prompt": "q", "answer": 1}])) == []


def test_unknown_rule_is_refused() -> None:
    with pytest.raises(ValueError, match="not an answer rule"):
        answer_coverage("length", [1])
