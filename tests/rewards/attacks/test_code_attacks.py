"""The attack corpus (``cases.py``) against the code rules: every attack scores 0, every honest case passes.

All cases of a table run in one batch of the rule (the sandbox runs them in parallel).
"""

from __future__ import annotations

import pytest

from grpo_core.rewards.code.correctness import CodeTestsReward
from grpo_core.rewards.code.runtime import CodeRuntimeReward
from tests.rewards.attacks.cases import ATTACKS, HONEST_CASES, Case


def _score(cases: list[Case]) -> dict[str, float | None]:
    rule = CodeTestsReward(timeout_s=10.0)
    scores = {}
    # rows with the same extra columns go together (a column is passed for every completion of a call)
    groups: dict[tuple, list[Case]] = {}
    for case in cases:
        groups.setdefault(tuple(sorted(case.columns)), []).append(case)
    for keys, group in groups.items():
        columns = {key: [case.columns[key] for case in group] for key in keys}
        rewards = rule([f"```python\n{c.code}\n```" for c in group], tests=[c.tests for c in group], **columns)
        scores.update({c.id: r for c, r in zip(group, rewards, strict=True)})
    return scores


@pytest.fixture(scope="module")
def attack_scores():
    return _score(ATTACKS)


@pytest.fixture(scope="module")
def honest_scores():
    return _score(HONEST_CASES)


def test_the_corpus_is_large_and_described():
    assert len(ATTACKS) >= 40
    assert len({c.id for c in ATTACKS + HONEST_CASES}) == len(ATTACKS) + len(HONEST_CASES)
    assert all(c.attack and "\n" not in c.attack for c in ATTACKS + HONEST_CASES)


@pytest.mark.parametrize("case", ATTACKS, ids=[c.id for c in ATTACKS])
def test_attack_scores_nothing(case, attack_scores):
    assert attack_scores[case.id] is not None, f"{case.attack}: the tests were not read"
    assert attack_scores[case.id] <= 0.0, case.attack


@pytest.mark.parametrize("case", HONEST_CASES, ids=[c.id for c in HONEST_CASES])
def test_honest_code_passes(case, honest_scores):
    assert honest_scores[case.id] == 1.0, case.attack


SLOW = "def f(n):\n    total = 0\n    for i in range(n):\n        total += i\n    return total\n"
FAST = "def f(n):\n    return n * (n - 1) // 2\n"
RUNTIME_TESTS = [f"assert f({n}) == {n * (n - 1) // 2}" for n in (300_000, 400_000)]
RUNTIME_ATTACKS = [
    ("frame_aware", "runs fast (and wrong) when its caller is not the verdict round",
     "import sys\ncalls = 0\n" + SLOW.replace("def f(n):\n", "def f(n):\n    global calls\n    calls += 1\n"
     "    if calls > 2:\n        return 0\n", 1)),
    ("memoise_rounds", "caches results across timing rounds",
     "cache = {}\n" + SLOW.replace("def f(n):\n", "def f(n):\n    if n in cache:\n        return cache[n]\n", 1)
     .replace("    return total\n", "    cache[n] = total\n    return total\n")),
    ("patch_clock", "patches time.perf_counter in its own process",
     "import time\ntime.perf_counter = lambda: 0.0\ntime.monotonic = lambda: 0.0\n" + SLOW),
    ("forge_time_answer", "answers a timing request with its own number",
     "import os\n" + SLOW + "for fd in range(3, 64):\n    try:\n        os.write(fd, b'\\x00\\x00\\x00\\x0c{\"value\": 0}')\n"
     "    except OSError:\n        pass\n"),
    ("precompute_at_import", "does the slow work once at import, outside the timed rounds",
     "TABLE = [0]\nfor i in range(1, 500001):\n    TABLE.append(TABLE[-1] + i - 1)\ndef f(n):\n    return TABLE[n]\n"),
    ("precompute_in_thread", "does the slow work in a thread started at import",
     "import threading\nTABLE = {}\ndef work():\n    t = 0\n    for i in range(500001):\n        TABLE[i] = t\n        t += i\n"
     "th = threading.Thread(target=work)\nth.start()\ndef f(n):\n    th.join()\n    return TABLE[n]\n"),
]


@pytest.mark.parametrize(("name", "attack", "code"), RUNTIME_ATTACKS, ids=[a[0] for a in RUNTIME_ATTACKS])
def test_runtime_attacks_gain_nothing_over_honest_slow_code(name, attack, code):
    rule = CodeRuntimeReward(repeats=3, timeout_s=20.0)
    rewards = rule(
        [f"```python\n{code}```", f"```python\n{SLOW}```", f"```python\n{FAST}```"],
        tests=[RUNTIME_TESTS] * 3,
        reference_solution=[FAST] * 3,
    )
    attacked, slow, _fast = rewards
    # the slow code's loop takes tens of milliseconds against the reference's microseconds: its reward is near 0;
    # an attack that worked would come near the fast code's (no timing threshold on the fast code itself: noise)
    assert slow is not None and attacked is not None
    assert attacked <= max(3 * slow, 0.35), attack
