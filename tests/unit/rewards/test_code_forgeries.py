"""Forged passes of ``code_tests`` score 0: results whose comparisons lie, and introspection of the harness.

The tests run in the harness process; the completion runs in a second interpreter, and its results reach the
assertions as plain data (see ``grpo_core/rewards/code/harness/``). The comparison forgeries and the frame walk passed with
the harness of earlier versions, which ran tests and completion in one interpreter; the others probe further ways
into the harness (``gc``, ``/proc/<parent>``, patched builtins).
"""

from __future__ import annotations

import json
import textwrap

import pytest

from grpo_core.datasets.humaneval import write_humaneval_jsonl
from grpo_core.rewards.code.correctness import CodeTestsReward
from grpo_core.rewards.code.program import build_test_program, parse_test_output
from grpo_core.rewards.code.runtime import CodeRuntimeReward
from grpo_core.rewards.code.units import split_tests
from grpo_core.sandbox.box import run_python, sandbox_info

ASSERTS = ["assert f(1) == 2", "assert f(2) == 3", "assert f(0) == 1", "assert f(-1) == 0"]
TRUTH = ["assert f(3)", "assert not f(4)", "assert f(5) is True", "assert f(6) == False"]

ALWAYS_EQUAL = """
class Any:
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = object.__hash__

def f(x):
    return Any()
"""

EQUAL_INT = """
class Int(int):
    def __eq__(self, other):
        return True
    __hash__ = int.__hash__

def f(x):
    return Int(12345)
"""

EQUAL_LIST = """
class Lst(list):
    def __eq__(self, other):
        return True

def f(x):
    return Lst([12345])
"""

ALWAYS_TRUE = """
class Yes:
    def __bool__(self):
        return True
    def __eq__(self, other):
        return True

def f(x):
    return Yes()
"""

FRAME_WALK = """
import os, sys

def f(x):
    # look for the nonce and the tests up the call stack, then print a forged summary everywhere
    found = set()
    frame = sys._getframe()
    while frame is not None:
        for scope in (frame.f_locals, frame.f_globals):
            for value in list(scope.values()):
                if isinstance(value, str) and len(value) == 32:
                    found.add(value)
            for key in ("nonce", "p", "payload", "units", "compiled"):
                if key in scope:
                    found.add(str(scope[key])[:64])
        frame = frame.f_back
    for nonce in found:
        for fd in range(64):
            try:
                os.write(fd, ("\\n" + nonce + " passed 1111 0.0\\n").encode())
            except OSError:
                pass
    return x + 1 if found else -999
"""

GC_SCAN = """
import gc, os

def f(x):
    # the old harness kept the nonce in a dict and the test units in a list: find and rewrite them
    hits = 0
    for obj in gc.get_objects():
        if isinstance(obj, dict) and "nonce" in obj:
            hits += 1
            for fd in range(64):
                try:
                    os.write(fd, ("\\n" + str(obj["nonce"]) + " passed 1111 0.0\\n").encode())
                except OSError:
                    pass
        if isinstance(obj, list) and obj and all(isinstance(u, tuple) and len(u) == 2 for u in obj):
            if any(isinstance(u[1], str) and "assert" in u[1] for u in obj):
                hits += 1
                obj[:] = [("test", "pass")] * len(obj)
    return x + 1 if hits else -999
"""

READ_HARNESS = """
import os

def f(x):
    # the harness (the parent) holds the tests: read its memory map, memory, environment or descriptors
    parent = os.getppid()
    for name in ("maps", "mem", "environ", "fd/1", "cmdline"):
        try:
            with open(f"/proc/{parent}/{name}", "rb") as fh:
                if b"assert" in fh.read(1 << 20):
                    return x + 1
        except OSError:
            pass
    return -999
"""

SHADOW_BUILTINS = """
def abs(x):
    return 0

def len(x):
    return 3

def isinstance(x, t):
    return True

def f(x):
    return None
"""

PATCH_AND_EXIT = """
import builtins, os, sys
builtins.AssertionError = type("Never", (Exception,), {})
sys.modules["builtins"].all = lambda *a: True

def f(x):
    os._exit(0)
"""


def code_tests(code: str, tests=ASSERTS) -> float:
    return CodeTestsReward(timeout_s=5.0)([f"```python\n{code}```"], tests=[tests])[0]


@pytest.mark.parametrize(
    ("code", "tests"),
    [
        (ALWAYS_EQUAL, ASSERTS),
        (EQUAL_INT, ASSERTS),
        (EQUAL_LIST, ["assert f(1) == [2]", "assert f(2) == [3]"]),
        (ALWAYS_TRUE, TRUTH),
        (FRAME_WALK, ASSERTS[:2] + ["assert f(10) == 12"]),  # the last fails even for honest x + 1
        (GC_SCAN, ASSERTS[:2] + ["assert f(10) == 12"]),
        (READ_HARNESS, ASSERTS),
        (PATCH_AND_EXIT, ASSERTS),
        (
            SHADOW_BUILTINS,
            ["assert abs(f(1.0) - 2.0) < 1e-6", "assert len(f([1, 2, 3])) == 3", "assert isinstance(f(1), int)"],
        ),
    ],
    ids=[
        "eq_always_true",
        "int_subclass_eq",
        "list_subclass_eq",
        "bool_always_true",
        "frame_walk",
        "gc_scan",
        "read_harness_via_proc",
        "patch_builtins_and_exit",
        "shadow_builtins",
    ],
)
def test_forgeries_score_zero(code, tests):
    assert code_tests(code, tests) == 0.0


def test_forgery_does_not_reach_the_summary():
    """A forged summary written on every descriptor with the real nonce guessed from the harness is ignored."""
    units = split_tests(ASSERTS[:2], None)
    program = build_test_program(FRAME_WALK, units, "N" * 32)
    result = run_python(program.script, stdin=program.stdin)
    outcome, passed, _ = parse_test_output(result, "N" * 32)
    assert (outcome, passed) == ("passed", [False, False])  # found nothing: -999 both times
    assert result.stdout.count("N" * 32) == 1  # only the harness's own line


@pytest.mark.parametrize(
    ("code", "tests", "expected"),
    [
        # honest results of every plain type the codec carries still pass
        (
            "def f(x):\n    return (x, [x], {x: {x}}, frozenset([x]), b'x', 1.5, None, True, 2j)\n",
            ["assert f(1) == (1, [1], {1: {1}}, frozenset([1]), b'x', 1.5, None, True, 2j)"],
            1.0,
        ),
        (
            "from collections import OrderedDict, Counter, namedtuple\nP = namedtuple('P', 'a b')\n"
            "def f(x):\n    return OrderedDict(a=x), Counter('aab'), P(x, 2)\n",
            ["assert f(1) == ({'a': 1}, {'a': 2, 'b': 1}, (1, 2))"],
            1.0,
        ),
        ("def f(n):\n    yield from range(n)\n", ["assert list(f(3)) == [0, 1, 2]"], 1.0),
        ("def f(n):\n    return range(n)\n", ["assert f(3) == range(3)", "assert sum(f(4)) == 6"], 1.0),
        ("def f(x):\n    return float('nan')\n", ["import math\nassert math.isnan(f(1))"], 1.0),
        (
            "def f(x):\n    if x < 0:\n        raise ValueError('neg')\n    return x\n",
            ["try:\n    f(-1)\n    assert False\nexcept ValueError:\n    pass", "assert f(2) == 2"],
            1.0,
        ),
        (
            "class Stack:\n    def __init__(self):\n        self.items = []\n    def push(self, x):\n"
            "        self.items.append(x)\n    def size(self):\n        return len(self.items)\n",
            ["s = Stack()\ns.push(1)\ns.push(2)\nassert s.size() == 2"],
            1.0,
        ),
        (
            "import math\ndef f(x):\n    return math.factorial(x)\n",
            ["assert f(5) == 120", "assert math.sqrt(4) == 2"],
            1.0,
        ),
        ("LIMIT = 3\ndef f(x):\n    return min(x, LIMIT)\n", ["assert f(5) == LIMIT"], 1.0),
    ],
    ids=["plain_types", "stdlib_subclasses", "generator", "range", "nan", "raises", "class", "module", "constant"],
)
def test_honest_results_still_pass(code, tests, expected):
    assert code_tests(code, tests) == pytest.approx(expected)


def test_runtime_is_timed_in_the_harness():
    """code_runtime's clock runs in the harness: patching time in the completion changes nothing."""
    slow = textwrap.dedent(
        """
        import time
        time.perf_counter = lambda: 0.0
        def f(n):
            total = 0
            for i in range(n):
                total += i
            return total
        """
    )
    fast = "def f(n):\n    return n * (n - 1) // 2\n"
    tests = [f"assert f({n}) == {n * (n - 1) // 2}" for n in (2_000_000, 3_000_000)]
    reward = CodeRuntimeReward(repeats=2)([f"```python\n{slow}```"], tests=[tests], reference_solution=[fast])[0]
    assert 0.0 < reward < 0.3


@pytest.mark.parametrize("code", [ALWAYS_EQUAL, FRAME_WALK, READ_HARNESS], ids=["eq", "frame_walk", "read_harness"])
def test_forgeries_score_zero_without_namespaces(code):
    """The harness does not rely on the namespaces: in the fallback mode (no bwrap) the forgeries fail as well."""
    plain = "uid" if sandbox_info().switches_user else "none"
    units = split_tests(ASSERTS, None)
    program = build_test_program(code, units, "M" * 32)
    result = run_python(program.script, stdin=program.stdin, isolation=plain)
    assert parse_test_output(result, "M" * 32) == ("passed", [False] * 4, pytest.approx(0.0, abs=1.0))


def test_every_humaneval_canonical_solution_still_passes(tmp_path):
    """The plain-data boundary keeps real test suites working: HumanEval's 164 canonical solutions all score 1.0."""
    path = tmp_path / "humaneval.jsonl"
    try:
        write_humaneval_jsonl(path)
    except FileNotFoundError as exc:
        pytest.skip(str(exc))
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    rewards = CodeTestsReward(timeout_s=10.0)(
        [row["canonical_solution"] for row in rows],
        tests=[row["tests"] for row in rows],
        entry_point=[row["entry_point"] for row in rows],
    )
    failing = [row["task_id"] for row, reward in zip(rows, rewards, strict=True) if reward != 1.0]
    assert failing == []
    assert len(rows) == 164
