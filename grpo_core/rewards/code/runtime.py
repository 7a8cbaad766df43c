"""``code_runtime``: how fast the completion's code passes its tests, relative to a reference solution's time."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from grpo_core.rewards.code.correctness import TIMEOUT_PARAM, check_timeout
from grpo_core.rewards.code.extract import extract_code, prompt_headers
from grpo_core.rewards.code.program import run_tests
from grpo_core.rewards.code.units import split_tests
from grpo_core.rewards.columns import column_values
from grpo_core.rewards.registry import RewardRule, RuleParam, completion_text, register

RUNTIME_SMOOTHING_S = 1e-4
"""Added to both times in ``code_runtime``'s ratio, so sub-millisecond timer noise does not dominate."""


class CodeRuntimeReward:
    """How fast the completion's code passes its tests, relative to a reference: ``clip(t_ref / t, 0, 1)``.

    ``t`` is the harness's ``time.perf_counter`` time of a round of the test units, run through the proxies
    (interpreter start-up and the completion's top-level code excluded, process round trips included), the slowest
    of ``repeats`` rounds, each of which must pass every test (so behaving differently in some rounds, caching
    across rounds or faking a clock gains nothing); both times get
    ``RUNTIME_SMOOTHING_S`` (0.1 ms) added. ``t_ref`` is the row's ``reference_runtime_s`` (seconds) when given,
    else the time of its ``reference_solution`` (or ``canonical_solution``) column run the same way, cached per
    (solution, tests) text for the life of this object.

    Noise: timings of a few milliseconds vary by tens of percent between runs, more when the machine is busy (the
    batch runs in parallel, and training shares the CPU); treat this as a coarse signal that separates
    asymptotically slow code (e.g. quadratic vs linear) from fast code, not as a micro-benchmark.

    Call: ``(completions, tests=[...], entry_point=..., reference_runtime_s=... | reference_solution=... |
    canonical_solution=..., **ignored) -> list[float | None]``. 0.0 where the code does not pass all its tests
    (timeouts included); ``None`` where the row has no tests, no reference, a reference that fails its tests, or
    the sandbox failed.

    Raises:
        ValueError: (on call) the ``tests`` column is missing or a column has the wrong length.
    """

    def __init__(
        self,
        timeout_s: float = 5.0,
        repeats: int = 3,
        max_workers: int | None = None,
        name: str = "code_runtime",
    ) -> None:
        self.timeout_s = float(timeout_s)
        self.repeats = int(repeats)
        self.max_workers = max_workers
        self.__name__ = name
        self._reference_cache: dict[tuple[str, str, str], float | None] = {}

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        tests = column_values(self.__name__, "tests", kwargs, n, required=True)
        entry_points = column_values(self.__name__, "entry_point", kwargs, n, required=False)
        given = column_values(self.__name__, "reference_runtime_s", kwargs, n, required=False)
        references = column_values(self.__name__, "reference_solution", kwargs, n, required=False)
        canonical = column_values(self.__name__, "canonical_solution", kwargs, n, required=False)

        headers = prompt_headers(kwargs, entry_points, n)
        rows: list[tuple[int, list[tuple[str, str]], float | None, tuple[str, str, str] | None]] = []
        for i in range(n):
            units = split_tests(tests[i], entry_points[i])
            if not units:
                continue
            ref_time = _positive_float(given[i])
            ref_key = None
            if ref_time is None:
                solution = references[i] if references[i] else canonical[i]
                if not solution:
                    continue
                ref_key = (str(solution), json.dumps(units), headers[i])
            rows.append((i, units, ref_time, ref_key))

        # Completions and not-yet-cached references run in one parallel batch.
        missing = sorted({key for *_, key in rows if key is not None and key not in self._reference_cache})
        codes = [extract_code(completion_text(completions[i])) for i, *_ in rows] + [key[0] for key in missing]
        units = [u for _, u, *_ in rows] + [json.loads(key[1]) for key in missing]
        outcomes = run_tests(
            codes,
            units,
            timeout_s=self.timeout_s,
            repeats=self.repeats,
            max_workers=self.max_workers,
            headers=[headers[i] for i, *_ in rows] + [key[2] for key in missing],
        )
        if len(self._reference_cache) > 4096:
            self._reference_cache.clear()
        for key, (outcome, passed, seconds) in zip(missing, outcomes[len(rows) :], strict=True):
            self._reference_cache[key] = seconds if outcome == "passed" and passed and all(passed) else None

        rewards: list[float | None] = [None] * n
        for (i, _, ref_time, ref_key), (outcome, passed, seconds) in zip(rows, outcomes[: len(rows)], strict=True):
            if ref_time is None:
                ref_time = self._reference_cache.get(ref_key)
            if ref_time is None or outcome == "setup_error":
                continue
            if outcome != "passed" or not passed or not all(passed) or seconds is None:
                rewards[i] = 0.0
                continue
            ratio = (ref_time + RUNTIME_SMOOTHING_S) / (seconds + RUNTIME_SMOOTHING_S)
            rewards[i] = min(max(ratio, 0.0), 1.0)
        return rewards

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reference_cache"] = {}
        return state


def _positive_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def make_code_runtime(timeout_s: float = 5.0, repeats: int = 3) -> CodeRuntimeReward:
    """Build ``code_runtime``.

    Raises:
        ValueError: ``timeout_s`` is not a positive finite number, or ``repeats`` is below 1.
    """
    check_timeout(timeout_s)
    if repeats < 1:
        raise ValueError(f"parameter 'repeats': must be at least 1, got {repeats!r}")
    return CodeRuntimeReward(timeout_s=timeout_s, repeats=repeats)


register(
    RewardRule(
        name="code_runtime",
        description="For code passing its tests: reference runtime / its runtime, clipped to [0, 1] (noisy)",
        factory=make_code_runtime,
        params=(TIMEOUT_PARAM, RuleParam("repeats", "int", 3, "timed rounds of the tests; the fastest counts")),
        columns=("tests",),
        category="code",
    )
)
