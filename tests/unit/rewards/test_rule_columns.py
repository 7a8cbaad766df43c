"""Tests of the one check of "a reward rule reads a column the data lacks" (grpo_core.rewards.registry's
first_missing_column). Its users' messages are tested with them: the launch's validation of the dataset and the eval
dataset in tests/unit/submit/test_submit.py, the try-the-model request's row in tests/unit/runs/test_export.py."""

from __future__ import annotations

import pytest

from grpo_core.rewards.registry import MissingColumn, first_missing_column


@pytest.mark.parametrize(
    ("rules", "columns", "expected"),
    [
        ([], [], None),
        (["length", "format_regex"], [], None),  # rules that read no column
        (["numeric_answer"], ["prompt", "answer"], None),
        (["numeric_answer"], ["prompt"], MissingColumn(1, "numeric_answer", "answer")),
        (["length", "code_tests"], ["prompt", "answer"], MissingColumn(2, "code_tests", "tests")),
        (["exact_match", "code_runtime"], ["prompt"], MissingColumn(1, "exact_match", "answer")),  # the first one
        (["numeric_answer"], ["Answer", "answers", " answer"], MissingColumn(1, "numeric_answer", "answer")),  # exact
        (["code_tests"], {"prompt": "P", "tests": None}, None),  # a row: its keys are its columns
    ],
)
def test_first_missing_column(rules, columns, expected) -> None:
    assert first_missing_column(rules, columns) == expected


def test_an_unknown_rule_is_named() -> None:
    with pytest.raises(ValueError, match="unknown reward rule 'no_such_rule'"):
        first_missing_column(["no_such_rule"], ["prompt"])
