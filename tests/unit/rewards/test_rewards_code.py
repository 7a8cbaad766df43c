"""Table-driven tests of the code rules: code_tests, code_runtime, code_style, and the pieces they are built from."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import psutil
import pytest

from grpo_core.rewards.code.correctness import TIMEOUT_REWARD, CodeTestsReward
from grpo_core.rewards.code.extract import extract_code
from grpo_core.rewards.code.program import build_test_program, parse_test_output
from grpo_core.rewards.code.runtime import RUNTIME_SMOOTHING_S, CodeRuntimeReward
from grpo_core.rewards.code.style import CodeStyleReward, style_score
from grpo_core.rewards.code.units import split_tests
from grpo_core.rewards.registry import get_rule
from grpo_core.sandbox.box import run_python, sandbox_info

ADD_ONE = "def f(x):\n    return x + 1\n"
ASSERTS = ["assert f(1) == 2", "assert f(2) == 3", "assert f(0) == 1", "assert f(-1) == 0"]
CHECK = textwrap.dedent(
    """
    METADATA = {'author': 'test'}


    def check(candidate):
        assert candidate(1) == 2
        assert candidate(2) == 3
        values = [candidate(i) for i in range(3)]
        assert values == [1, 2, 3]
        for i in range(5):
            assert candidate(i) == i + 1
    """
)


def fenced(code: str, tag: str = "python") -> str:
    return f"Here is my solution:\n\n```{tag}\n{code}```\n\nIt adds one."


def conversational(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


def code_tests(completions, **columns):
    return CodeTestsReward(timeout_s=2.0)(completions, **columns)


# --------------------------------------------------------------------------------------------------------------------
# extract_code
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x = 1", "x = 1"),
        ("```python\nx = 1\n```", "x = 1\n"),
        ("```py\nx = 1\n```", "x = 1\n"),
        ("```\nx = 1\n```", "x = 1\n"),
        ("```Python3\nx = 1\n```", "x = 1\n"),
        ("```python\nx = 1\n```\ntext\n```python\nx = 2\n```\nbye", "x = 2\n"),  # the last block
        ("```python\nx = 1\n```\n```bash\nls\n```", "x = 1\n"),  # other languages are skipped
        ("```bash\nls\n```", "```bash\nls\n```"),  # no Python block: the whole text
        ("intro\n```python\nx = 1\ny = 2", "x = 1\ny = 2"),  # unclosed (truncated) fence
        ("  ```python\n  x = 1\n  ```", "  x = 1\n"),
        ("", ""),
    ],
)
def test_extract_code(text, expected):
    assert extract_code(text) == expected


# --------------------------------------------------------------------------------------------------------------------
# split_tests
# --------------------------------------------------------------------------------------------------------------------


def kinds(units):
    return "".join("T" if kind == "test" else "s" for kind, _ in units)


@pytest.mark.parametrize(
    ("tests", "entry_point", "expected_kinds"),
    [
        (CHECK, "f", "ssTTsTT"),  # METADATA, candidate = f, 2 asserts, values = ..., assert, for-loop of asserts
        (ASSERTS, None, "TTTT"),
        ("\n".join(ASSERTS), None, "TTTT"),
        (json.dumps(ASSERTS), None, "TTTT"),
        (tuple(ASSERTS[:2]), None, "TT"),
        (np.array(ASSERTS, dtype=object), None, "TTTT"),  # a dataset column as a numpy array
        ("import math\nassert f(1) == 2\nassert (\n    f(2) == 3\n)", None, "sTT"),  # multi-line assert
        ("assert f(1) == 2\nassert f(2) ==\nx = 1", None, "TTs"),  # does not parse: one assert per line
        (["assert f(1) == 2", "assert f(2) =="], None, "TT"),  # an item that does not parse is a (failing) test
        ("def helper():\n    assert False\nassert f(1) == 2", None, "sT"),  # asserts inside a def do not count
        (CHECK, None, ""),  # no entry point: `check` is only defined, never called
        ("def check(c):\n    if c(1) != 2:\n        return\n    assert c(2) == 3", "f", "sT"),  # early return: whole
        ("def check(c):\n    x = c(1)\n", "f", "sT"),  # no top-level assert: check(f) runs whole
        (None, "f", ""),
        ("", "f", ""),
        ("   \n", None, ""),
        ([], None, ""),
        ("x = 1", None, ""),
        (42, None, ""),
    ],
)
def test_split_tests_table(tests, entry_point, expected_kinds):
    assert kinds(split_tests(tests, entry_point)) == expected_kinds


def test_humaneval_units_bind_the_candidate_and_keep_source():
    units = split_tests(CHECK, "f")
    assert units[1] == ("setup", "candidate = f")
    assert units[-1][1].startswith("for i in range(5):\n    assert candidate(i) == i + 1")
    whole = split_tests("def check(c):\n    if c(1) != 2:\n        return\n    assert c(2) == 3", "f")
    assert whole[-1] == ("test", "check(f)")


# --------------------------------------------------------------------------------------------------------------------
# The test program and its output
# --------------------------------------------------------------------------------------------------------------------


def test_test_program_reports_each_test_and_hides_completion_output():
    units = split_tests(ASSERTS, None)
    code = "import sys\nprint('noise')\nsys.stderr.write('more noise')\n" + ADD_ONE.replace(
        "x + 1", "x + 1 if x else 0"
    )
    program = build_test_program(code, units, "NONCE123")
    result = run_python(program.script, stdin=program.stdin)
    assert "noise" not in result.stdout and "noise" not in result.stderr
    outcome, passed, seconds = parse_test_output(result, "NONCE123")
    assert outcome == "passed"
    assert passed == [True, True, False, True]
    assert seconds is not None and 0 <= seconds < 1


def test_test_program_file_is_gone_before_the_completion_runs():
    code = "import os\nLISTING = os.listdir('.')\n\ndef f(x):\n    return len(LISTING) + 1\n"
    units = split_tests(["assert f(0) == 1"], None)  # f(0) == 1 only if the folder is empty
    program = build_test_program(code, units, "N")
    result = run_python(program.script, stdin=program.stdin)
    assert parse_test_output(result, "N")[:2] == ("passed", [True])


# --------------------------------------------------------------------------------------------------------------------
# code_tests
# --------------------------------------------------------------------------------------------------------------------

HALF_RIGHT = "def f(x):\n    return x + 1 if x > 0 else -5\n"  # right for 1, 2; wrong for 0, -1

CODE_TESTS_CASES = [
    # (completion, tests, entry_point, expected)
    (fenced(ADD_ONE), ASSERTS, None, 1.0),
    (ADD_ONE, ASSERTS, None, 1.0),  # no fence: the whole completion
    (conversational(fenced(ADD_ONE)), ASSERTS, None, 1.0),
    (fenced(HALF_RIGHT), ASSERTS, None, 0.5),
    (fenced(HALF_RIGHT), "\n".join(ASSERTS), None, 0.5),
    (fenced("def f(x):\n    return x\n"), ASSERTS, None, 0.0),
    (fenced(ADD_ONE), CHECK, "f", 1.0),
    (fenced("def g(x):\n    return x + 1\n"), CHECK, "g", 1.0),  # entry point names the function
    (fenced("def f(x):\n    return 2 if x == 1 else 0\n"), CHECK, "f", 1 / 4),  # only the first assert holds
    (fenced("def f(x):\n    return x + 1\n"), CHECK, "missing_name", 0.0),
    (fenced("def f(x)\n    return x + 1\n"), ASSERTS, None, 0.0),  # syntax error
    ("", ASSERTS, None, 0.0),
    ("I cannot solve this.", ASSERTS, None, 0.0),
    (fenced("raise RuntimeError('top level')\n" + ADD_ONE), ASSERTS, None, 0.0),
    (fenced(ADD_ONE + "if __name__ == '__main__':\n    print(f(int(input())))\n"), ASSERTS, None, 1.0),
    (fenced(ADD_ONE), None, None, None),  # no tests: the rule does not apply
    (fenced(ADD_ONE), [], None, None),
    (fenced(ADD_ONE), "", "f", None),
    (fenced(ADD_ONE), ["assert f(1) == 2", "assert f(2) =="], None, 0.5),  # a broken test fails for everyone
]


def test_code_tests_table():
    completions = [case[0] for case in CODE_TESTS_CASES]
    rewards = code_tests(
        completions,
        tests=[case[1] for case in CODE_TESTS_CASES],
        entry_point=[case[2] for case in CODE_TESTS_CASES],
        prompts=["p"] * len(completions),
        completion_ids=[[1]] * len(completions),
        trainer_state=None,
    )
    for case, reward in zip(CODE_TESTS_CASES, rewards, strict=True):
        expected = case[3]
        assert reward == (pytest.approx(expected) if expected is not None else None), case


@pytest.fixture
def open_dir():
    path = Path(tempfile.mkdtemp(prefix="grpo-test-victim-"))
    path.chmod(0o755)
    (path / "keep.txt").write_text("precious")
    (path / "keep.txt").chmod(0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_code_tests_hostile_completions(open_dir, monkeypatch):
    """Each hostile completion gets a reward (0.0, or the timeout penalty) and leaves the host unchanged."""
    monkeypatch.setenv("GRPO_TEST_SECRET", "s3cr3t-value")
    own_uid = sandbox_info().switches_user
    hostile = [
        ("while True:\n    pass\n", {TIMEOUT_REWARD}),
        ("import os\nwhile True:\n    os.fork()\n", {0.0, TIMEOUT_REWARD}),
        ("x = bytearray(10 * 1024 ** 3)\n" + ADD_ONE, {0.0}),
        ("import sys\nfor _ in range(3000):\n    sys.stdout.buffer.write(b'x' * 1_000_000)\n", {0.0}),
        ("import os\nfor _ in range(3000):\n    os.write(1, b'x' * 1_000_000)\n", {0.0}),
        ("import sys\nsys.exit(0)\n", {0.0}),
        ("import os\nos._exit(0)\n", {0.0}),
        ("import os\ndef f(x):\n    os._exit(0)\n", {0.0}),  # exits while the tests run
        ("def f(x):\n    raise SystemExit(0)\n", {0.0}),
        # passes, then leaves a thread running and an atexit handler that loops: the reward stands
        (
            "import atexit, threading, time\nthreading.Thread(target=time.sleep, args=(60,)).start()\n"
            "atexit.register(lambda: time.sleep(60))\n" + ADD_ONE,
            {1.0},
        ),
        # forging the summary line without the nonce
        ("import os\nos.write(3, b'\\nNONCE passed 1111 0.0\\n')\nprint('passed 1111 0.0')\n", {0.0}),
        ("import builtins\nbuiltins.exec = lambda *a, **k: None\nbuiltins.compile = lambda *a, **k: None\n", {0.0}),
        ("import json\njson.dumps = lambda *a, **k: 'passed 1111 0.0'\n", {0.0}),
        ("import os\nprint(os.environ.get('GRPO_TEST_SECRET'))\n", {0.0}),
    ]
    if own_uid:  # only a uid of its own protects the host from these
        victim = open_dir / "keep.txt"
        hostile += [
            ("import os\nos.kill(os.getppid(), 9)\n" + ADD_ONE, {0.0}),
            (f"open({str(open_dir / 'pwned.txt')!r}, 'w').write('x')\n" + ADD_ONE, {0.0}),
            (f"open({str(victim)!r}, 'w').write('x')\n" + ADD_ONE, {0.0}),
            (f"import shutil\nshutil.rmtree({str(open_dir)!r})\n" + ADD_ONE, {0.0}),
        ]
    children_before = {proc.pid for proc in psutil.Process().children(recursive=True)}  # e.g. a resource tracker
    rewards = CodeTestsReward(timeout_s=1.5)([fenced(code) for code, _ in hostile], tests=[ASSERTS] * len(hostile))
    for (code, allowed), reward in zip(hostile, rewards, strict=True):
        assert reward in allowed, code
    assert psutil.Process().is_running()
    assert [p for p in psutil.Process().children(recursive=True)
            if p.pid not in children_before and p.status() != psutil.STATUS_ZOMBIE] == []
    assert (open_dir / "keep.txt").read_text() == "precious"
    assert sorted(os.listdir(open_dir)) == ["keep.txt"]


def test_code_tests_errors_and_names():
    rule = CodeTestsReward()
    assert rule.__name__ == "code_tests"
    with pytest.raises(ValueError, match="tests"):
        rule(["x"])
    with pytest.raises(ValueError, match="2 values for 1"):
        rule(["x"], tests=[ASSERTS, ASSERTS])
    assert rule([], tests=[]) == []


# --------------------------------------------------------------------------------------------------------------------
# code_runtime
# --------------------------------------------------------------------------------------------------------------------

FAST_SUM = "def f(n):\n    return n * (n - 1) // 2\n"
# Code whose run time has a floor whatever the machine: each call sleeps. Timing assertions below only compare a
# floor against code that does next to nothing, never two measured times of similar size (those belong in
# benchmarks/bench_sandbox.py), so they hold on a fast machine and on a loaded one.
SLEEPY_SUM = "import time\ndef f(n):\n    time.sleep(0.2)\n    return n * (n - 1) // 2\n"  # >= 0.4 s for SUM_TESTS
DOZY_SUM = "import time\ndef f(n):\n    time.sleep(0.05)\n    return n * (n - 1) // 2\n"  # >= 0.1 s
SUM_TESTS = [f"assert f({n}) == {n * (n - 1) // 2}" for n in (100_000, 200_000)]


def test_code_runtime_ranks_fast_above_slow():
    rule = CodeRuntimeReward(timeout_s=5.0, repeats=1)
    completions = [fenced(FAST_SUM), fenced(SLEEPY_SUM), fenced("def f(n):\n    return 0\n"), fenced("while True: pass")]
    rewards = rule(completions, tests=[SUM_TESTS] * 4, reference_solution=[DOZY_SUM] * 4)
    fast, slow, wrong, looping = rewards
    assert fast == 1.0  # faster than the reference: clipped to 1
    assert 0.0 < slow < 0.5  # about 0.1 s / 0.4 s
    assert wrong == 0.0 and looping == 0.0
    assert len(rule._reference_cache) == 1  # one reference run for the four rows
    again = rule([fenced(FAST_SUM)], tests=[SUM_TESTS], reference_solution=[DOZY_SUM])
    assert len(rule._reference_cache) == 1 and again == [1.0]


@pytest.mark.parametrize(
    ("code", "columns", "expected"),
    [
        (FAST_SUM, {"reference_runtime_s": [1000.0]}, 1.0),  # reference far slower: clipped to 1
        (SLEEPY_SUM, {"reference_runtime_s": [1e-9]}, "small"),  # reference instantaneous: ratio far below 1
        (SLEEPY_SUM, {"canonical_solution": [FAST_SUM]}, "small"),  # the sleeping code against the closed form
        (SLEEPY_SUM, {"reference_solution": [None], "canonical_solution": [FAST_SUM]}, "small"),
        (FAST_SUM, {"canonical_solution": [SLEEPY_SUM]}, 1.0),  # faster than the reference
        (FAST_SUM, {}, None),  # no reference at all
        (FAST_SUM, {"reference_solution": ["def f(n):\n    return -1\n"]}, None),  # the reference fails its tests
        (FAST_SUM, {"reference_runtime_s": ["nan"]}, None),
    ],
)
def test_code_runtime_references(code, columns, expected):
    reward = CodeRuntimeReward(repeats=1)([fenced(code)], tests=[SUM_TESTS], **columns)[0]
    if expected == "small":
        assert 0.0 < reward < 0.3
    else:
        assert reward == expected


def test_code_runtime_reward_is_the_clipped_time_ratio():
    """``clip((t_ref + 0.1 ms) / (t + 0.1 ms), 0, 1)`` with ``t_ref`` given: a 0.4 s floor against 0.1 s."""
    reward = CodeRuntimeReward(repeats=1)([fenced(SLEEPY_SUM)], tests=[SUM_TESTS], reference_runtime_s=[0.1])[0]
    assert 0.0 < reward <= (0.1 + RUNTIME_SMOOTHING_S) / (0.4 + RUNTIME_SMOOTHING_S)


def test_code_runtime_cannot_be_faked_by_patching_builtins():
    hack = "import builtins, time\nbuiltins.min = lambda *a: 1e-9\nbuiltins.repr = lambda x: '1e-9'\n"
    hack += "time.perf_counter = lambda: 0.0\n" + SLEEPY_SUM
    rewards = CodeRuntimeReward(repeats=2)([fenced(hack)], tests=[SUM_TESTS], reference_solution=[FAST_SUM])
    assert 0.0 < rewards[0] < 0.3


def test_code_runtime_without_tests_is_none():
    assert CodeRuntimeReward()([fenced(FAST_SUM)], tests=[None], reference_runtime_s=[1.0]) == [None]


# --------------------------------------------------------------------------------------------------------------------
# code_style
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "params", "expected"),
    [
        ("def f(x):\n    return x + 1\n", {}, 1.0),
        ("x=1\ny = 2\n", {}, 0.5),  # E225 on line 1
        ("def f( x ):\n  return x\n", {}, 0.0),  # E201/E202, E111
        ("import os\n\n\n\ndef f():\n    pass\n", {}, 2 / 3),  # E303 on the def
        ("x = 1\n\n\n\n\n", {}, 1.0),  # trailing blank lines do not count
        ("x = 1", {}, 1.0),  # no final newline does not count
        ("x = '" + "a" * 110 + "'\n", {}, 0.0),  # E501 at the default 100
        ("x = '" + "a" * 110 + "'\n", {"max_line_length": 120}, 1.0),
        ("# comment\nx = 1  # ok\ny = 2 # bad\n", {}, 2 / 3),  # E261
        ("def f(:\n    pass\n", {}, 0.5),  # syntax errors are scored too
        ("", {}, 0.0),
        ("\n\n   \n", {}, 0.0),
    ],
)
def test_code_style_table(code, params, expected):
    rule = CodeStyleReward(**params)
    assert rule([fenced(code)])[0] == pytest.approx(expected)
    assert style_score(code, **params) == pytest.approx(expected)


def test_code_style_ignores_unknown_columns_and_conversational():
    rule = CodeStyleReward()
    assert rule([conversational("x = 1\n"), "x=1"], tests=[None, None], prompts=["a", "b"]) == [1.0, 0.0]


# --------------------------------------------------------------------------------------------------------------------
# Registry: build, parameters, pickling
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "params", "attribute", "value"),
    [
        ("code_tests", {}, "timeout_s", 5.0),
        ("code_tests", {"timeout_s": "2.5"}, "timeout_s", 2.5),
        ("code_runtime", {"repeats": "1"}, "repeats", 1),
        ("code_style", {"max_line_length": 79}, "max_line_length", 79),
    ],
)
def test_rules_build_from_the_registry(name, params, attribute, value):
    rule = get_rule(name)
    assert rule.category == "code"
    built = rule.build(params)
    assert getattr(built, attribute) == value
    assert built.__name__ == name


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("code_tests", {"timeout_s": 0}),
        ("code_tests", {"timeout_s": "inf"}),
        ("code_runtime", {"repeats": 0}),
        ("code_style", {"max_line_length": 5}),
        ("code_tests", {"nope": 1}),
    ],
)
def test_rules_reject_bad_parameters(name, params):
    with pytest.raises(ValueError):
        get_rule(name).build(params)


@pytest.mark.parametrize("name", ["code_tests", "code_runtime", "code_style"])
def test_rules_survive_pickling(name):
    built = get_rule(name).build({})
    clone = pickle.loads(pickle.dumps(built))
    assert clone.__name__ == name
    assert type(clone) is type(built)
    completions = [fenced(ADD_ONE), fenced("def f(x):\n    return x\n")]
    columns = {"tests": [ASSERTS, ASSERTS], "reference_runtime_s": [1.0, 1.0]}
    assert clone(completions, **columns) == built(completions, **columns)
