"""Answer-checking reward rules: ``numeric_answer``, ``math_equivalence`` and ``exact_match``.

Each rule compares the final answer of a completion with the row's ``answer`` column and returns ``1.0`` (right),
``0.0`` (wrong, or no answer found in the completion) or ``None`` (the row has no usable reference answer, so the rule
does not apply; TRL turns ``None`` into NaN and leaves it out of the weighted sum).

The reward functions are picklable callable classes built by factories and registered in
:mod:`grpo_core.rewards.registry`. ``math_verify`` (which pulls in sympy) is imported on first call, not at import,
so the web process that lists the rules stays light.
"""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any

from grpo_core.rewards.columns import column_values
from grpo_core.rewards.final_answer import last_answer_tag
from grpo_core.rewards.number_reading import ReadNumber, final_number, numbers_equal, reference_value
from grpo_core.rewards.registry import RewardRule, RuleParam, completion_text, register

# --------------------------------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------------------------------


def is_missing_answer(value: Any) -> bool:
    """``None``, a float NaN (what pandas uses for an empty cell) or a blank string."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


def _prompt_texts(kwargs: dict[str, Any], count: int) -> list[str]:
    """The text of each completion's prompt from TRL's ``prompts`` keyword (``""`` when not given): the rules refuse
    a final answer copied from it (:func:`grpo_core.rewards.number_reading.echoes_prompt`)."""
    prompts = kwargs.get("prompts")
    if not isinstance(prompts, list | tuple) or len(prompts) != count:
        return [""] * count
    return [completion_text(prompt) for prompt in prompts]


def extract_final_number(text: str) -> Fraction | None:
    r"""The final answer of ``text`` read as an exact number, or ``None`` when there is none.

    See :mod:`grpo_core.rewards.final_answer` for what "final answer" means (last ``\boxed{}``, else ``####``, else
    ``<answer>``, else an answer cue, else the whole text; the last number expression there; hedges give ``None``)
    and for the notations read (scientific, fractions, mixed numbers, thousands separators, units, percent).
    """
    number = final_number(text)
    return None if number is None else number.value


def reference_number(value: Any) -> Fraction | None:
    """The reference answer of a row as an exact fraction; ``None`` when missing or not a single number.

    ``int`` and ``float`` values are taken as they are (a float through its shortest decimal form, so ``0.1`` is
    1/10); strings are read strictly by :func:`grpo_core.rewards.number_reading.reference_value` (``"#### 42"``,
    ``"\\boxed{42}"``, ``"$1,234"`` and ``"18 dollars"`` work; "see figure 3" does not).
    """
    reference = _reference(value)
    return None if reference is None else reference.value


def _reference(value: Any) -> ReadNumber | None:
    if is_missing_answer(value) or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return ReadNumber(Fraction(value), False, 0, 0)
    if isinstance(value, float):
        return None if math.isinf(value) else ReadNumber(Fraction(Decimal(repr(value))), False, 0, 0)
    return reference_value(str(value))


class NumericAnswerReward:
    """1.0 when the final number of a completion equals the row's ``answer`` within ``tolerance``, else 0.0.

    Call: ``(completions, answer=[...], prompts=[...], **ignored) -> list[float | None]``, one reward per completion;
    ``None`` where the row's answer is missing or holds no number. A final answer that is an expression copied from
    the prompt ("18 - 9" for "What is 18 - 9?", whose last number is the answer 9) scores 0. Numbers are compared exactly (as fractions) when
    ``tolerance`` is 0, else as ``abs(predicted - reference) <= tolerance``. See :func:`extract_final_number`.

    Raises:
        ValueError: (on call) the ``answer`` column is missing or has the wrong length.
    """

    def __init__(self, tolerance: float = 0.0, name: str = "numeric_answer") -> None:
        self.tolerance = tolerance
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        answers = column_values(self.__name__, "answer", kwargs, len(completions))
        tolerance = Fraction(Decimal(repr(float(self.tolerance))))
        prompts = _prompt_texts(kwargs, len(completions))
        rewards: list[float | None] = []
        for completion, answer, prompt in zip(completions, answers, prompts, strict=True):
            reference = _reference(answer)
            if reference is None:
                rewards.append(None)
                continue
            predicted = final_number(completion_text(completion), prompt, str(answer))
            rewards.append(1.0 if predicted is not None and numbers_equal(predicted, reference, tolerance) else 0.0)
        return rewards


def make_numeric_answer(tolerance: float = 0.0) -> NumericAnswerReward:
    """Build ``numeric_answer``.

    Raises:
        ValueError: ``tolerance`` is negative or not finite.
    """
    if not math.isfinite(tolerance) or tolerance < 0:
        raise ValueError(f"parameter 'tolerance': must be a finite number >= 0, got {tolerance!r}")
    return NumericAnswerReward(tolerance)


register(
    RewardRule(
        name="numeric_answer",
        description="1 if the final number (\\boxed{}, ####, <answer> or last number) equals the answer column",
        factory=make_numeric_answer,
        params=(RuleParam("tolerance", "float", 0.0, "absolute tolerance; 0 means exactly equal"),),
        columns=("answer",),
        category="answer",
    )
)


# --------------------------------------------------------------------------------------------------------------------
# math_equivalence
# --------------------------------------------------------------------------------------------------------------------


class MathEquivalenceReward:
    """1.0 when the completion's final answer is mathematically equivalent to the row's ``answer``, else 0.0.

    Uses Hugging Face's ``math-verify`` (``parse`` then ``verify(gold, prediction)``), as TRL's ``accuracy_reward``
    does: fractions, LaTeX, sets and intervals, units; see :mod:`grpo_core.rewards.math_check` for where and why it
    is used differently (the last ``\\boxed{}`` only, hedges and expressions copied from the prompt score 0, prose
    gold answers do not apply, exact numbers compare exactly).

    Call: ``(completions, answer=[...], **ignored) -> list[float | None]``; ``None`` where the reference is missing,
    prose or cannot be parsed; 0.0 where the completion has no final answer, hedges, or parsing or checking fails
    or times out.

    Raises:
        ValueError: (on call) the ``answer`` column is missing or has the wrong length.
    """

    def __init__(self, name: str = "math_equivalence") -> None:
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        from grpo_core.rewards.math_check import MathChecker  # imports math-verify and sympy

        answers = column_values(self.__name__, "answer", kwargs, len(completions))
        prompts = _prompt_texts(kwargs, len(completions))
        checker = MathChecker()
        rewards: list[float | None] = []
        for completion, answer, prompt in zip(completions, answers, prompts, strict=True):
            gold = [] if is_missing_answer(answer) else checker.gold(answer)
            if not gold:
                rewards.append(None)
                continue
            prediction = checker.prediction(completion_text(completion), gold, prompt, str(answer))
            rewards.append(1.0 if prediction and checker.equivalent(gold, prediction) else 0.0)
        return rewards


def make_math_equivalence() -> MathEquivalenceReward:
    """Build ``math_equivalence`` (no parameters)."""
    return MathEquivalenceReward()


register(
    RewardRule(
        name="math_equivalence",
        description="1 if the answer is mathematically equivalent to the answer column (math-verify)",
        factory=make_math_equivalence,
        columns=("answer",),
        category="answer",
    )
)


# --------------------------------------------------------------------------------------------------------------------
# exact_match
# --------------------------------------------------------------------------------------------------------------------

EXTRACT_MODES = ("answer_tag", "last_line", "full")


def extract_answer_text(text: str, extract: str) -> str:
    """The part of ``text`` compared by ``exact_match``, stripped.

    ``answer_tag``: the content of the last ``<answer>...</answer>`` if present, else the whole text.
    ``last_line``: the last non-blank line. ``full``: the whole text.
    """
    if extract == "answer_tag":
        tagged = last_answer_tag(text)
        return (tagged if tagged is not None else text).strip()
    if extract == "last_line":
        lines = [line for line in text.splitlines() if line.strip()]
        return lines[-1].strip() if lines else ""
    return text.strip()


_WHITESPACE_RE = re.compile(r"\s+")


def _is_punctuation(char: str) -> bool:
    return char in string.punctuation or unicodedata.category(char).startswith("P")


class ExactMatchReward:
    """1.0 when the completion's answer text equals the row's ``answer`` after normalisation, else 0.0.

    Both sides are NFKC-normalised; then, as configured, case-folded (``ignore_case``), stripped of ALL whitespace
    (``ignore_whitespace``; "New York" equals "NewYork"; when off, only the ends are stripped) and of unicode
    punctuation (``ignore_punctuation``). The completion side is first cut down by ``extract`` (see
    :func:`extract_answer_text`); the reference is used whole.

    Call: ``(completions, answer=[...], **ignored) -> list[float | None]``; ``None`` where the answer is missing.

    Raises:
        ValueError: (on call) the ``answer`` column is missing or has the wrong length.
    """

    def __init__(
        self,
        ignore_case: bool = True,
        ignore_whitespace: bool = True,
        ignore_punctuation: bool = False,
        extract: str = "answer_tag",
        name: str = "exact_match",
    ) -> None:
        self.ignore_case = ignore_case
        self.ignore_whitespace = ignore_whitespace
        self.ignore_punctuation = ignore_punctuation
        self.extract = extract
        self.__name__ = name

    def normalize(self, text: str) -> str:
        """``text`` as compared: NFKC, then the configured case, whitespace and punctuation folding."""
        text = unicodedata.normalize("NFKC", text).strip()
        if self.ignore_case:
            text = text.casefold()
        if self.ignore_punctuation:
            text = "".join(char for char in text if not _is_punctuation(char))
        if self.ignore_whitespace:
            text = _WHITESPACE_RE.sub("", text)
        return text.strip()

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        answers = column_values(self.__name__, "answer", kwargs, len(completions))
        rewards: list[float | None] = []
        for completion, answer in zip(completions, answers, strict=True):
            if is_missing_answer(answer):
                rewards.append(None)
                continue
            predicted = self.normalize(extract_answer_text(completion_text(completion), self.extract))
            rewards.append(1.0 if predicted == self.normalize(str(answer)) else 0.0)
        return rewards


def make_exact_match(
    ignore_case: bool = True,
    ignore_whitespace: bool = True,
    ignore_punctuation: bool = False,
    extract: str = "answer_tag",
) -> ExactMatchReward:
    """Build ``exact_match``.

    Raises:
        ValueError: ``extract`` is not one of ``answer_tag``, ``last_line``, ``full``.
    """
    if extract not in EXTRACT_MODES:
        raise ValueError(f"parameter 'extract': {extract!r} is not one of {list(EXTRACT_MODES)}")
    return ExactMatchReward(ignore_case, ignore_whitespace, ignore_punctuation, extract)


register(
    RewardRule(
        name="exact_match",
        description="1 if the answer text equals the answer column after normalisation",
        factory=make_exact_match,
        params=(
            RuleParam("ignore_case", "bool", True, "compare case-insensitively"),
            RuleParam("ignore_whitespace", "bool", True, "remove all whitespace before comparing"),
            RuleParam("ignore_punctuation", "bool", False, "remove punctuation before comparing"),
            RuleParam(
                "extract",
                "choice",
                "answer_tag",
                "answer_tag: <answer>...</answer> if present, else everything; last_line; full",
                choices=EXTRACT_MODES,
            ),
        ),
        columns=("answer",),
        category="answer",
    )
)
