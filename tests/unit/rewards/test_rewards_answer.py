"""Table-driven tests of the answer rules: numeric_answer, math_equivalence, exact_match."""

from __future__ import annotations

import threading
from fractions import Fraction

import pytest

from grpo_core.rewards import get_rule
from grpo_core.rewards.answer import extract_final_number, reference_number

HUGE = ("lorem ipsum 7 " * 80_000)[:1_000_000]  # about 1 MB of text with many numbers


def conversational(text: str) -> list[dict[str, str]]:
    return [{"role": "assistant", "content": text}]


# --------------------------------------------------------------------------------------------------------------------
# numeric_answer
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The answer is 42", Fraction(42)),
        ("3 apples and 5 pears make 8", Fraction(8)),
        ("so \\boxed{42} and later 17", Fraction(42)),  # boxed beats the last number
        ("\\boxed{\\frac{3}{4}}", Fraction(3, 4)),
        ("\\boxed{\\dfrac{-1}{2}}", Fraction(-1, 2)),
        ("\\boxed{{12}}", Fraction(12)),  # nested braces
        ("first \\boxed{1} then \\boxed{2}", Fraction(2)),  # last boxed
        ("Natalia sold 48 clips.\n#### 72", Fraction(72)),
        ("#### 72\nextra text 5", Fraction(72)),  # #### beats a later number on the next line
        ("<answer>12</answer> checked with 13", Fraction(12)),
        ("<answer>12</answer> so \\boxed{5}", Fraction(5)),  # boxed beats <answer>
        ("<answer>1</answer>\n#### 2", Fraction(2)),  # #### beats <answer>
        ("\\boxed{3}\n#### 4", Fraction(3)),  # boxed beats ####
        ("<think>maybe 5</think><answer> The total is 9 </answer>", Fraction(9)),
        ("x = -5", Fraction(-5)),
        ("x = \u22125", Fraction(-5)),  # unicode minus
        ("it is \uff14\uff12", Fraction(42)),  # full-width digits
        ("\uff0d\uff13", Fraction(-3)),  # full-width minus
        ("It costs $1,234.", Fraction(1234)),
        ("1,234,567", Fraction(1234567)),
        ("The answer is 42.", Fraction(42)),
        ("3.0", Fraction(3)),
        ("0.50", Fraction(1, 2)),
        (".5", Fraction(1, 2)),
        ("growth of 50%", Fraction(50)),
        ("5-3", None),  # a hyphen between numbers: an expression (5 - 3) or a range, neither of which is 3
        ("5-3 = 2", Fraction(2)),
        ("1.5e3", Fraction(1500)),
        ("3/4", Fraction(3, 4)),
        ("答案是42。", Fraction(42)),
        ("答案是 \\boxed{７}", Fraction(7)),
        ("no number here", None),
        ("", None),
        ("\\boxed{x}", None),  # the boxed region decides; no fallback to other numbers
        ("9" * 5000, None),  # too many digits for int(); no crash
        (HUGE, Fraction(7)),
    ],
)
def test_extract_final_number(text: str, expected: Fraction | None) -> None:
    assert extract_final_number(text) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (42, Fraction(42)),
        (-3, Fraction(-3)),
        (0.1, Fraction(1, 10)),
        (3.0, Fraction(3)),
        (1e20, Fraction(10**20)),
        ("42", Fraction(42)),
        ("#### 1,234", Fraction(1234)),
        ("He has 3 then #### 18", Fraction(18)),
        (None, None),
        (float("nan"), None),
        (float("inf"), None),
        ("", None),
        ("   ", None),
        ("forty-two", None),
        (True, None),
    ],
)
def test_reference_number(value: object, expected: Fraction | None) -> None:
    assert reference_number(value) == expected


@pytest.mark.parametrize(
    ("completion", "answer", "params", "expected"),
    [
        ("\\boxed{42}", "42", {}, 1.0),
        ("\\boxed{42}", 42, {}, 1.0),
        ("\\boxed{42}", 42.0, {}, 1.0),
        ("\\boxed{42}", "#### 42", {}, 1.0),
        ("\\boxed{41}", "42", {}, 0.0),
        ("the result is 3.0", 3, {}, 1.0),
        ("42.4", 42, {}, 0.0),
        ("42.4", 42, {"tolerance": 0.5}, 1.0),
        ("42.6", 42, {"tolerance": "0.5"}, 0.0),
        ("0.1", 0.1, {}, 1.0),
        ("The answer is \u22125", -5, {}, 1.0),
        ("\uff14\uff12", 42, {}, 1.0),
        ("$1,234", "1234", {}, 1.0),
        ("no number", 3, {}, 0.0),
        ("", 3, {}, 0.0),
        ("42", None, {}, None),
        ("42", float("nan"), {}, None),
        ("42", "no number in the reference", {}, None),
        (conversational("#### 42"), 42, {}, 1.0),
        ([{"role": "assistant", "content": [{"type": "text", "text": "\\boxed{5}"}]}], 5, {}, 1.0),
        (HUGE, 7, {}, 1.0),
    ],
)
def test_numeric_answer(completion: object, answer: object, params: dict, expected: float | None) -> None:
    reward = get_rule("numeric_answer").build(params)
    assert reward([completion], answer=[answer], prompts=["q"], completion_ids=[[1, 2]], trainer_state=None) == [
        expected
    ]


def test_numeric_answer_batch_keeps_order() -> None:
    reward = get_rule("numeric_answer").build()
    completions = ["1", "\\boxed{2}", "#### 3", "none", "5"]
    assert reward(completions, answer=[1, 2, 4, 4, None]) == [1.0, 1.0, 0.0, 0.0, None]


@pytest.mark.parametrize("tolerance", [-1.0, float("nan"), float("inf")])
def test_numeric_answer_rejects_bad_tolerance(tolerance: float) -> None:
    with pytest.raises(ValueError, match="tolerance"):
        get_rule("numeric_answer").build({"tolerance": tolerance})


def test_numeric_answer_missing_column_names_it() -> None:
    reward = get_rule("numeric_answer").build()
    with pytest.raises(ValueError, match="'answer'.*columns given are \\['solution'\\]"):
        reward(["42"], solution=["42"], prompts=["q"])


def test_numeric_answer_column_length_mismatch() -> None:
    with pytest.raises(ValueError, match="2 values for 1 completions"):
        get_rule("numeric_answer").build()(["42"], answer=["42", "43"])


# --------------------------------------------------------------------------------------------------------------------
# math_equivalence
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "answer", "expected"),
    [
        ("The answer is $\\boxed{\\frac{1}{2}}$", "1/2", 1.0),
        ("$0.5$", "\\frac{1}{2}", 1.0),
        ("\\boxed{\\frac{1}{\\sqrt{2}}}", "\\frac{\\sqrt{2}}{2}", 1.0),
        ("\\boxed{\\frac{1}{3}}", "1/2", 0.0),
        ("The set is $(1, 2]$", "(1,2]", 1.0),
        ("The set is $[1, 2]$", "(1,2]", 0.0),
        ("<answer>x^2+1</answer>", "1+x^2", 1.0),
        ("so 10%", "10\\%", 1.0),
        ("The answer is 1,234", "#### 1,234", 1.0),
        ("\\boxed{42}", 42, 1.0),
        ("答案是 \\boxed{3}", "3", 1.0),
        (conversational("\\boxed{7}"), "7", 1.0),
        ("no math at all", "3", 0.0),
        ("", "3", 0.0),
        ("\\boxed{\\frac{1}{", "1/2", 0.0),  # malformed LaTeX: 0, no exception
        ("\\boxed{3}", None, None),
        ("\\boxed{3}", "", None),
        ("\\boxed{3}", float("nan"), None),
        ("x" * 1_000_000 + " \\boxed{5}", "5", 1.0),  # only the tail is parsed
    ],
)
def test_math_equivalence(completion: object, answer: object, expected: float | None) -> None:
    reward = get_rule("math_equivalence").build()
    assert reward([completion], answer=[answer], prompts=["q"]) == [expected]


def test_math_equivalence_works_in_a_worker_thread() -> None:
    reward = get_rule("math_equivalence").build()
    results: list[object] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(reward(["\\boxed{\\frac{2}{4}}", "\\boxed{3}"], answer=["1/2", "1/2"]))
        except BaseException as exc:  # noqa: BLE001 - the test reports any failure of the thread
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(timeout=60)
    assert not errors
    assert results == [[1.0, 0.0]]


# --------------------------------------------------------------------------------------------------------------------
# exact_match
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("completion", "answer", "params", "expected"),
    [
        ("Paris", "Paris", {}, 1.0),
        ("  paris \n", "PARIS", {}, 1.0),
        ("paris", "PARIS", {"ignore_case": False}, 0.0),
        ("New York", "NewYork", {}, 1.0),
        ("New  York", "New York", {"ignore_whitespace": False}, 0.0),
        ("  New York  ", "New York", {"ignore_whitespace": False}, 1.0),
        ("Paris.", "Paris", {}, 0.0),
        ("Paris.", "Paris", {"ignore_punctuation": True}, 1.0),
        ("«Paris»!", "Paris", {"ignore_punctuation": True}, 1.0),
        ("<think>hmm, Rome?</think><answer> Paris </answer>", "paris", {}, 1.0),
        ("<think>x</think><answer>Rome</answer>", "paris", {}, 0.0),
        ("I think it is\nParis", "Paris", {"extract": "last_line"}, 1.0),
        ("I think it is\nParis\n\n", "Paris", {"extract": "last_line"}, 1.0),
        ("<answer>Paris</answer>", "Paris", {"extract": "full"}, 0.0),
        ("北京", "北京", {}, 1.0),
        ("\uff30\uff41\uff52\uff49\uff53", "Paris", {}, 1.0),  # full-width letters, NFKC
        ("STRASSE", "straße", {}, 1.0),  # casefold, not lower
        ("", "", {}, None),  # a blank reference is missing
        ("", "Paris", {}, 0.0),
        ("Paris", None, {}, None),
        ("42", 42, {}, 1.0),
        (conversational("<answer>Paris</answer>"), "Paris", {}, 1.0),
        ("x" * 1_000_000, "Paris", {}, 0.0),
    ],
)
def test_exact_match(completion: object, answer: object, params: dict, expected: float | None) -> None:
    reward = get_rule("exact_match").build(params)
    assert reward([completion], answer=[answer]) == [expected]


def test_exact_match_rejects_unknown_extract() -> None:
    with pytest.raises(ValueError, match="extract"):
        get_rule("exact_match").build({"extract": "first_line"})
