"""The answer-rule conformance corpus: every case of the ``*.jsonl`` files beside this module, one test each.

A case is ``{"id", "rule", "params"?, "prompt"?, "completion", "answer", "expected", "source", "note"?}``: the rule
built with ``params`` must give ``expected`` (1.0 right, 0.0 wrong, ``null`` for "does not apply") for the one
completion against the row's ``answer``, TRL passing the row's ``prompt`` (text or chat messages; "q" when absent). ``source`` names where the case comes from (math-verify's tests, the Qwen2.5-Math and
DeepSeekMath answer normalisers, GSM8K and MATH formats, TRL's reward tests, a public bug report, or an attack: what a
policy could write to be paid for a wrong answer). docs/rewards.md explains the rules the cases pin down.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from grpo_core.rewards import get_rule

CORPUS_DIR = Path(__file__).parent
REQUIRED_KEYS = {"id", "rule", "completion", "answer", "expected", "source"}


def load_cases() -> list[dict[str, Any]]:
    """Every case of every ``*.jsonl`` file here, in file order.

    Raises:
        ValueError: a line is not JSON, lacks a required key, has an unknown rule or a repeated id.
    """
    cases: list[dict[str, Any]] = []
    for path in sorted(CORPUS_DIR.glob("*.jsonl")):
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            case = json.loads(line)
            missing = REQUIRED_KEYS - set(case)
            if missing:
                raise ValueError(f"{path.name}:{number}: missing {sorted(missing)}")
            cases.append(case)
    ids = [case["id"] for case in cases]
    if len(ids) != len(set(ids)):
        raise ValueError("repeated case ids in the conformance corpus")
    return cases


CASES = load_cases()


def test_corpus_size_and_sources() -> None:
    assert len(CASES) >= 300
    assert all(case["source"].strip() for case in CASES)
    assert {case["rule"] for case in CASES} >= {"numeric_answer", "math_equivalence"}
    wrong = [case for case in CASES if case["expected"] == 0.0]
    assert len(wrong) >= 100  # the policy's view: wrong answers that must not be paid


@pytest.mark.parametrize("case", CASES, ids=[case["id"] for case in CASES])
def test_conformance(case: dict[str, Any]) -> None:
    reward = get_rule(case["rule"]).build(case.get("params") or {})
    got = reward([case["completion"]], answer=[case["answer"]], prompts=[case.get("prompt", "q")])
    assert got == [case["expected"]], f"{case['source']}: {case.get('note', '')}"
