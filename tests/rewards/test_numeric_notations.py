"""numeric_answer over generated inputs: every notation of a random value reads back as that value, wrong answers built
from it (its exponent, its denominator, a list holding it, a hedge) never do, and the arithmetic quick start's datasets
(``examples/*.jsonl``) pay "<the question's expression> = <answer>" and never the question's expression echoed."""

from __future__ import annotations

import json
import random
import re
from fractions import Fraction
from pathlib import Path

import pytest

from grpo_core.rewards import get_rule
from grpo_core.rewards.answer import extract_final_number

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("arithmetic*.jsonl"))  # the answer datasets
REWARD = get_rule("numeric_answer").build()


def score(completion: str, answer: object, prompt: object = "q") -> float | None:
    return REWARD([completion], answer=[answer], prompts=[prompt])[0]


def thousands(n: int) -> str:
    return f"{n:,}"


def notations(rng: random.Random) -> list[tuple[str, Fraction]]:
    """Random values, each written in the notations people use, with the exact value."""
    cases = []
    n = rng.randint(1000, 10**9)
    cases += [(thousands(n), Fraction(n)), (f"${thousands(n)}", Fraction(n)), (f"\\boxed{{{thousands(n)}}}", Fraction(n)),
              (f"{thousands(n).replace(',', '{,}')}", Fraction(n)), (f"#### {thousands(n)}", Fraction(n)),
              (f"-{thousands(n)}", Fraction(-n)), (f"The answer is {n} dollars.", Fraction(n))]
    mantissa, exponent = Fraction(rng.randint(100, 999), 100), rng.randint(-30, 30)
    value = mantissa * Fraction(10) ** exponent
    m = f"{float(mantissa):.2f}"
    cases += [(f"{m} \\times 10^{{{exponent}}}", value), (f"{m} x 10^{exponent}", value), (f"{m}e{exponent}", value),
              (f"{m} \\cdot 10^{{{exponent}}}", value), (f"\\boxed{{{m} \\times 10^{{{exponent}}}}}", value)]
    num, den = rng.randint(1, 99), rng.randint(2, 99)
    cases += [(f"{num}/{den}", Fraction(num, den)), (f"\\frac{{{num}}}{{{den}}}", Fraction(num, den)),
              (f"x = \\dfrac{{{num}}}{{{den}}}", Fraction(num, den)), (f"-\\frac{{{num}}}{{{den}}}", Fraction(-num, den))]
    whole, small_num = rng.randint(1, 50), rng.randint(1, den - 1)
    cases += [(f"{whole} {small_num}/{den}", whole + Fraction(small_num, den)),
              (f"{whole}\\frac{{{small_num}}}{{{den}}}", whole + Fraction(small_num, den))]
    decimal = Fraction(rng.randint(-99999, 99999), 100)
    cases += [(f"{float(decimal):.2f}", decimal), (f"The answer is {float(decimal):.2f}.", decimal)]
    pct = rng.randint(1, 99)
    cases += [(f"{pct}%", Fraction(pct)), (f"{pct}\\%", Fraction(pct)), (f"{pct} percent", Fraction(pct))]
    return cases


@pytest.mark.parametrize("seed", range(40))
def test_every_notation_reads_its_value(seed: int) -> None:
    for text, value in notations(random.Random(seed)):
        assert extract_final_number(text) == value, text


@pytest.mark.parametrize("seed", range(40))
def test_wrong_answers_built_from_a_value_are_not_paid(seed: int) -> None:
    rng = random.Random(1000 + seed)
    mantissa, exponent = rng.randint(101, 999) / 100, rng.randint(5, 30)
    gold = f"{mantissa} \\times 10^{{{exponent}}}"
    other = round(mantissa + rng.choice([-1, 1]) * 0.5, 2)
    for wrong in (f"1.0 \\times 10^{{{exponent}}}", f"{other} \\times 10^{{{exponent}}}", f"10^{{{exponent}}}",
                  str(exponent), str(mantissa), f"{mantissa} \\times 10^{{{exponent + 1}}}"):
        assert score(wrong, gold) == 0.0, (wrong, gold)
    num, den = rng.randint(1, 9), rng.randint(11, 99)
    for gold_value, wrong in ((den, f"The answer is {num}/{den}"), (num, f"\\frac{{{num}}}{{{den}}}"),
                              (den, f"x = {num}/{den}")):
        assert score(wrong, gold_value) == 0.0, (wrong, gold_value)
    answer = rng.randint(2, 500)
    decoys = rng.sample([n for n in range(1, 600) if n != answer], 3)
    for hedge in (f"{decoys[0]} or {answer}", f"{answer} or {decoys[0]}", f"\\boxed{{{decoys[0]}}} or \\boxed{{{answer}}}",
                  ", ".join(map(str, [*decoys, answer])), f"The answer is {decoys[0]}, {decoys[1]} or {answer}",
                  f"<answer>{decoys[0]}; {answer}</answer>", f"#### {decoys[0]} or {answer}"):
        assert score(hedge, answer) == 0.0, (hedge, answer)


_EXPRESSION = re.compile(r"What is (.+)\?")


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_quick_start_datasets_pay_the_worked_result(path: Path) -> None:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert rows
    for row in rows:
        question = row["prompt"][-1]["content"]
        expression = _EXPRESSION.search(question).group(1)
        answer = row["answer"]
        prompt = row["prompt"]
        assert score(f"{expression} = {answer}", answer, prompt) == 1.0, (expression, answer)
        assert score(str(answer), answer, prompt) == 1.0
        assert score(f"{expression} = {answer + 1}", answer, prompt) == 0.0
        assert score(expression, answer, prompt) == 0.0  # the question's expression echoed
        assert score(question, answer, prompt) == 0.0
