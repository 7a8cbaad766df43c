"""The test formats ``code_tests`` reads, the prompt header it keeps, and the pre-launch check of the ``tests``
column."""

from __future__ import annotations

import json

import pytest

from grpo_core.rewards.code.extract import prompt_header
from grpo_core.rewards.code.units import split_tests
from grpo_core.rewards.code.units import why_tests_unreadable as problem_of
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.submit.validate import validate_run_config

APPS_STDIO = json.dumps({"inputs": ["1 2\n", ["3 4"]], "outputs": ["3\n", ["7"]]})
APPS_CALL = json.dumps({"fn_name": "add", "inputs": [[1, 2]], "outputs": [[3]]})


@pytest.mark.parametrize(
    ("tests", "kinds"),
    [
        ([{"input": "1 2\n", "output": "3\n"}], ["stdio"]),
        (json.dumps([{"input": "1", "output": "2"}, {"input": "2", "output": "3"}]), ["stdio", "stdio"]),
        (APPS_STDIO, ["stdio", "stdio"]),
        ({"inputs": ["1"], "outputs": ["2"]}, ["stdio"]),
        (APPS_CALL, ["test"]),
        ("import unittest\nclass T(unittest.TestCase):\n    def test_a(self):\n        self.assertEqual(f(1), 2)\n"
         "if __name__ == '__main__':\n    unittest.main()\n", ["setup", "setup", "test", "setup"]),
        ("def test_a():\n    assert f(1) == 2\n", ["setup", "test"]),
        (["assert f(1) == 2"], ["test"]),
    ],
)
def test_split_tests_reads_each_format(tests, kinds):
    assert [kind for kind, _ in split_tests(tests)] == kinds


def test_stdio_units_carry_input_and_expected_output():
    (unit,) = split_tests(APPS_STDIO)[1:]
    assert json.loads(unit[1]) == ["3 4\n", "7\n"]


@pytest.mark.parametrize(
    ("tests", "why"),
    [
        (None, "empty"),
        ("   ", "empty"),
        ({"inputs": ["1"], "outputs": []}, "same length"),
        ([{"input": "1"}], "'input' and 'output'"),
        ({"fn_name": "1bad", "inputs": [], "outputs": []}, "Python name"),
        ({"question": "x"}, "neither asserts nor stdin/stdout"),
        ("print('no assert here')", "no test found"),
    ],
)
def test_tests_problem_says_why(tests, why):
    assert split_tests(tests) == []
    assert why in problem_of(tests)


def test_readable_tests_have_no_problem():
    assert problem_of(APPS_STDIO) is None
    assert problem_of("def check(candidate):\n    assert candidate(1) == 2\n", "f") is None


def test_prompt_header_keeps_helpers_not_the_stub():
    prompt = ("Complete this.\n\nimport math\nfrom typing import List\n\nSCALE = 2\n\ndef poly(xs: list, x: float):\n"
              "    return sum(xs)\n\n\ndef helper():\n    pass\n\n\ndef find_zero(xs: list):\n    \"\"\"doc\"\"\"\n")
    header = prompt_header(prompt, "find_zero")
    assert "import math" in header and "SCALE = 2" in header and "def poly" in header
    assert "find_zero" not in header and "helper" not in header
    assert prompt_header("Write a function that adds one.", "f") == ""
    assert "def poly" in prompt_header("Use this:\n```python\ndef poly(x):\n    return x\n```\nNow write f.", "f")


def _write(tmp_path, rows):
    path = tmp_path / "code.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def test_the_pre_launch_check_names_a_tests_column_it_cannot_read(store, tmp_path, tiny_model_dir):
    rules = [{"rule": "code_tests"}]
    bad = _write(tmp_path, [{"prompt": "p", "tests": json.dumps({"question": "x"})}] * 2)
    with pytest.raises(ConfigError, match=r"code_tests cannot read the dataset column 'tests' \(row 0: "):
        validate_run_config(store, RunConfig(model=str(tiny_model_dir), dataset_path=bad, rewards=rules))
    good = _write(tmp_path, [{"prompt": "p", "tests": [{"input": "1", "output": "2"}]},
                             {"prompt": "q", "tests": "no asserts"}])
    warnings = validate_run_config(store, RunConfig(model=str(tiny_model_dir), dataset_path=good, rewards=rules))
    assert any("column 'tests' of 1 of 2 rows (row 1:" in w for w in warnings)
