"""open-r1's ``verification_info`` column (``open-r1/verifiable-coding-problems-python``; its ``code_reward`` reads
``info["test_cases"]``, each ``{"input", "output", "type": "stdin_stdout"}``, and ``info["language"]``) is read by
``code_tests`` as stdin/stdout tests, where a dataset has no ``tests`` column."""

from __future__ import annotations

import json

from grpo_core.rewards.code.correctness import CodeTestsReward
from grpo_core.rewards.code.units import split_tests, why_tests_unreadable
from grpo_core.rewards.registry import first_missing_column

INFO = {
    "language": "python",
    "test_cases": [
        {"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"},
        {"input": "5 7\n", "output": "12\n", "type": "stdin_stdout"},
        {"input": "-1 1\n", "output": "0\n", "type": "stdin_stdout"},
    ],
}
SUM = "```python\na, b = map(int, input().split())\nprint(a + b)\n```"
PRODUCT = "```python\na, b = map(int, input().split())\nprint(a * b)\n```"


def test_verification_info_is_read_as_stdin_stdout_tests_object_or_json():
    for value in (INFO, json.dumps(INFO)):
        units = split_tests(value)
        assert [kind for kind, _ in units] == ["stdio"] * 3
        assert json.loads(units[1][1]) == ["5 7\n", "12\n"]


def test_other_languages_and_types_say_why_they_are_not_run():
    assert "Python only" in why_tests_unreadable({**INFO, "language": "cpp"})
    function_call = {"language": "python", "test_cases": [{"input": "1", "output": "2", "type": "function_call"}]}
    assert "only 'stdin_stdout'" in why_tests_unreadable(function_call)
    assert "list of objects" in why_tests_unreadable({"language": "python", "test_cases": "1 2"})
    assert split_tests({**INFO, "language": "cpp"}) == []


def test_a_dataset_with_verification_info_and_no_tests_column_is_not_refused():
    assert first_missing_column(["code_tests"], {"prompt", "verification_info"}) is None
    assert first_missing_column(["code_tests"], {"prompt"}).column == "tests"


def test_code_tests_scores_against_verification_info():
    rule = CodeTestsReward(timeout_s=5.0)
    rewards = rule([SUM, PRODUCT], verification_info=[INFO, INFO])
    assert rewards[0] == 1.0
    assert rewards[1] == 0.0  # 1*2, 5*7 and -1*1 print 2, 35 and -1
