"""``code_tests``: the share of the row's tests the completion's code passes in the sandbox."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from grpo_core.rewards.code.extract import extract_code, prompt_headers
from grpo_core.rewards.code.program import run_tests
from grpo_core.rewards.code.units import split_tests
from grpo_core.rewards.columns import column_values
from grpo_core.rewards.registry import RewardRule, RuleParam, completion_text, register

TIMEOUT_REWARD = -0.1
"""``code_tests`` reward of a completion whose run hit the time limit: below wrong code, so loops are discouraged."""


class CodeTestsReward:
    """Share of the row's tests that the completion's code passes, run in the sandbox.

    Call: ``(completions, tests=[...] (or open-r1's verification_info=[...]), entry_point=[...] (optional), prompts=[...] (optional: TRL passes them; their
    header, :func:`~grpo_core.rewards.code.extract.prompt_header`, is kept for the tests), **ignored) -> list[float | None]``; see
    :func:`~grpo_core.rewards.code.units.split_tests` for the test shapes. Per completion: passed tests / credited tests in [0, 1] (a test that
    runs none of the completion's code earns no credit; none credited: 0.0); ``TIMEOUT_REWARD`` (-0.1) when the run
    hits ``timeout_s``; 0.0 for a syntax error, code that raises at top level, a crash or an early exit; ``None``
    where the row has no tests it can read (:func:`~grpo_core.rewards.code.units.why_tests_unreadable`) or the sandbox itself failed. All
    completions of a call run in parallel (:func:`~grpo_core.sandbox.box.run_many`).

    Raises:
        ValueError: (on call) the ``tests`` column is missing or a column has the wrong length.
    """

    def __init__(self, timeout_s: float = 5.0, max_workers: int | None = None, name: str = "code_tests") -> None:
        self.timeout_s = float(timeout_s)
        self.max_workers = max_workers
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        # open-r1's code sets carry their tests as ``verification_info``; a ``tests`` column wins where both exist
        column = "verification_info" if kwargs.get("tests") is None and kwargs.get("verification_info") is not None \
            else "tests"
        tests = column_values(self.__name__, column, kwargs, n, required=True)
        entry_points = column_values(self.__name__, "entry_point", kwargs, n, required=False)
        rewards: list[float | None] = [None] * n
        todo = [(i, split_tests(t, e)) for i, (t, e) in enumerate(zip(tests, entry_points, strict=True))]
        todo = [(i, u) for i, u in todo if u]
        codes = [extract_code(completion_text(completions[i])) for i, _ in todo]
        headers = prompt_headers(kwargs, entry_points, n)
        outcomes = run_tests(
            codes,
            [u for _, u in todo],
            timeout_s=self.timeout_s,
            repeats=0,
            max_workers=self.max_workers,
            headers=[headers[i] for i, _ in todo],
        )
        for (i, _), (outcome, passed, _seconds) in zip(todo, outcomes, strict=True):
            if outcome == "timeout":
                rewards[i] = TIMEOUT_REWARD
            elif outcome == "passed":
                rewards[i] = sum(passed) / len(passed) if passed else 0.0
            elif outcome != "setup_error":
                rewards[i] = 0.0
        return rewards


def make_code_tests(timeout_s: float = 5.0) -> CodeTestsReward:
    """Build ``code_tests``.

    Raises:
        ValueError: ``timeout_s`` is not a positive finite number.
    """
    check_timeout(timeout_s)
    return CodeTestsReward(timeout_s=timeout_s)


def check_timeout(timeout_s: float) -> None:
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ValueError(f"parameter 'timeout_s': must be a finite number > 0, got {timeout_s!r}")


TIMEOUT_PARAM = RuleParam("timeout_s", "float", 5.0, "wall-clock limit per completion, in seconds")

register(
    RewardRule(
        name="code_tests",
        description=("Share of the row's tests (asserts, HumanEval check, unittest, stdin/stdout, APPS) the completion's "
                     "Python passes in the sandbox (timeout: -0.1)"),
        factory=make_code_tests,
        params=(TIMEOUT_PARAM,),
        columns=("tests",),
        category="code",
    )
)
