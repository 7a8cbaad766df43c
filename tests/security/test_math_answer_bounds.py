"""Answers that sympy would take for ever to evaluate: ``2^{2^{40}}`` is an exact integer of 2^40 bits, computed in
one C call that holds the interpreter lock and that math-verify's alarm cannot interrupt. Written by a login on the
try-out bench (scored in the web process), in a dataset's answer column, or by the policy itself, such an answer is
not judged (0, or ``None`` for a gold answer) instead of stopping the server (grpo_core/rewards/math_check.py)."""

from __future__ import annotations

import json
import threading

import pytest

from grpo_core.rewards.compose import RewardSpec, score_group
from grpo_core.rewards.math_check import too_costly

COSTLY = [r"2^{2^{40}}", r"2^{2^{2^{2^{40}}}}", r"9^{99999999}", r"(10^{10})!", r"\binom{10^{12}}{10^{6}}",
          r"\sum_{i=1}^{10^{12}} i", r"\prod_{i=1}^{10^{9}} i"]


def _math(completions: list[str], answer: str) -> list[float | None]:
    return score_group([RewardSpec(rule="math_equivalence")], completions, {"prompt": "p", "answer": answer}).rewards[0]


@pytest.mark.parametrize("answer", COSTLY)
def test_a_costly_final_answer_is_not_judged_in_a_worker_thread(answer):
    """In a thread (as in a web server's handler), where math-verify's timeouts are off."""
    result: list = []
    worker = threading.Thread(target=lambda: result.append(_math([rf"so \boxed{{{answer}}}", r"\boxed{4}"], "4")),
                              daemon=True)
    worker.start()
    worker.join(timeout=120)
    assert not worker.is_alive(), "the check never returned"
    assert result == [[0.0, 1.0]]


def test_cheap_powers_and_symbols_are_still_judged():
    assert _math([r"\boxed{1024}", r"\boxed{2^{10}}", r"\boxed{10!}"], r"2^{10}")[:2] == [1.0, 1.0]
    assert _math([r"\boxed{2^n}", r"\boxed{n^2}"], r"2^{n}") == [1.0, 0.0]
    from math_verify import parse

    assert not any(too_costly(v) for v in parse(r"$\frac{10^{100}}{3} + x^{50}$"))


def test_a_costly_answer_on_the_bench_does_not_stop_the_server(shared_dashboard):
    bench, lag = shared_dashboard.while_pinging(lambda: shared_dashboard.ui("alice", "bench-button", {
        "rule-1": "math_equivalence", "params-1": "{}",
        "bench-row": json.dumps({"prompt": "p", "answer": r"2^{2^{40}}"}),
        "bench-completions": "\n---\n".join([r"\boxed{2^{2^{40}}}", r"\boxed{(10^{10})!}", r"\boxed{4}"])}))
    assert "3 completions scored" in bench[1], bench
    assert lag < 2.0, lag
