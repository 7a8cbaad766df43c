"""Answer-checking reward rules: ``numeric_answer``, ``math_equivalence`` and ``exact_match``.

Each rule compares the final answer of a completion with the row's ``answer`` column and returns ``1.0`` (right),
``0.0`` (wrong, or no answer found in the completion) or ``None`` (the row has no usable reference answer, so the rule
does not apply; TRL turns ``None`` into NaN and leaves it out of the weighted sum).

The reward functions are picklable callable classes built by factories and registered in
:mod:`grpo_core.rewards.registry`. ``math_verify`` (which pulls in sympy) is imported on first call, not at import,
so the web process that lists the rules stays light.
"""

from __future__ import annotations

import logging
import math
import re
import string
import threading
import unicodedata
from collections import deque
from collections.abc import Sequence
from decimal import Decimal, InvalidOperation
from fractions import Fraction
from typing import Any

from grpo_core.rewards.columns import column_values
from grpo_core.rewards.registry import RewardRule, RuleParam, completion_text, register

# --------------------------------------------------------------------------------------------------------------------
# Shared helpers
# --------------------------------------------------------------------------------------------------------------------


def _is_missing(value: Any) -> bool:
    """``None``, a float NaN (what pandas uses for an empty cell) or a blank string."""
    if value is None:
        return True
    if isinstance(value, float) and math.isnan(value):
        return True
    return isinstance(value, str) and not value.strip()


_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE_RE = re.compile(r"[{}]")


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, nested braces allowed; ``None`` if none.

    "Last" is the closed one that starts last. One pass over the braces, so unclosed ``\boxed{`` repeated a
    hundred thousand times (a looping model) costs linear time.
    """
    openers = {match.end() - 1: match.end() for match in _BOXED_RE.finditer(text)}  # "{" index -> content start
    if not openers:
        return None
    stack: list[int] = []
    best: tuple[int, int] | None = None
    for brace in _BRACE_RE.finditer(text, min(openers)):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            start = stack.pop()
            if start in openers and (best is None or start > best[0]):
                best = (start, brace.start())
    return text[openers[best[0]] : best[1]] if best else None


_ANSWER_OPEN_RE = re.compile(r"<answer>", re.IGNORECASE)
_ANSWER_CLOSE_RE = re.compile(r"</answer>", re.IGNORECASE)


def last_answer_tag(text: str) -> str | None:
    """Content of the last ``<answer>...</answer>`` in ``text`` (tags in any case); ``None`` if there is none.

    Found from the last closing tag backwards, in linear time (a lazy ``<answer>(.*?)</answer>`` regex is
    quadratic on a completion that repeats ``<answer>`` without closing it).
    """
    closing = deque(_ANSWER_CLOSE_RE.finditer(text), maxlen=1)
    if not closing:
        return None
    end = closing[0].start()
    opening = deque(_ANSWER_OPEN_RE.finditer(text, 0, end), maxlen=1)
    return text[opening[0].end() : end] if opening else None


def gsm8k_final(text: str) -> str | None:
    """The text after the last GSM8K marker ``####`` up to the end of its line; ``None`` if there is no marker."""
    index = text.rfind("####")
    if index < 0:
        return None
    return text[index + 4 :].split("\n", 1)[0]


# --------------------------------------------------------------------------------------------------------------------
# numeric_answer
# --------------------------------------------------------------------------------------------------------------------

# A number: optional sign (not when glued to a word or a closing bracket, so "5-3" is 5 and 3, not 5 and -3),
# digits with optional comma thousands separators, optional decimals, optional short exponent; or ".5". The
# exponent is capped at 3 digits so "1e999999999" cannot make Fraction build a gigantic integer.
_NUMBER = r"(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?:[eE][-+]?\d{1,3})?|\.\d+)"
_NUMBER_RE = re.compile(rf"(?<![0-9A-Za-z)\].])(-)?({_NUMBER})")
_LATEX_FRACTION = rf"\\[dt]?frac\s*\{{\s*(-?{_NUMBER})\s*\}}\s*\{{\s*(-?{_NUMBER})\s*\}}"
_SLASH_FRACTION = rf"(-?{_NUMBER})\s*/\s*(-?{_NUMBER})"
_FRACTION_RE = re.compile(rf"^\s*(-)?\s*(?:{_LATEX_FRACTION}|{_SLASH_FRACTION})\s*$")
_MINUS_SIGNS = dict.fromkeys(map(ord, "\u2212\ufe63\uff0d"), "-")
# Python refuses to convert integers longer than this many digits from text (sys.get_int_max_str_digits()).
_MAX_DIGITS = 4000


def normalize_number_text(text: str) -> str:
    """NFKC-normalise (full-width digits become ASCII) and turn unicode minus and dash signs into ``-``."""
    return unicodedata.normalize("NFKC", text).translate(_MINUS_SIGNS)


def _to_fraction(token: str) -> Fraction | None:
    """Exact value of a number token such as ``-1,234.50`` or ``2e3``; ``None`` if it is too long to convert."""
    token = token.replace(",", "").replace(" ", "")
    if len(token) > _MAX_DIGITS:
        return None
    try:
        return Fraction(Decimal(token))
    except (InvalidOperation, ValueError, ZeroDivisionError):
        return None


def _fraction_value(region: str) -> Fraction | None:
    r"""Value of a region that is exactly one fraction, ``3/4`` or ``\frac{3}{4}``; ``None`` otherwise."""
    match = _FRACTION_RE.match(region)
    if match is None:
        return None
    sign, latex_num, latex_den, num, den = match.groups()
    numerator = _to_fraction(latex_num or num)
    denominator = _to_fraction(latex_den or den)
    if numerator is None or denominator is None or denominator == 0:
        return None
    value = numerator / denominator
    return -value if sign else value


def last_number(region: str) -> Fraction | None:
    """The last number in ``region`` (already normalised), or the value of the region if it is a lone fraction."""
    value = _fraction_value(region)
    if value is not None:
        return value
    for match in reversed(list(_NUMBER_RE.finditer(region))):
        value = _to_fraction(match.group(2))
        if value is not None:
            return -value if match.group(1) else value
    return None


def extract_final_number(text: str) -> Fraction | None:
    r"""The final numeric answer of ``text`` as an exact fraction, or ``None`` if it has no number.

    The region searched is, by priority: the last ``\boxed{...}``, else the text after the last GSM8K ``####``,
    else the last ``<answer>...</answer>``, else the whole text. Only the first region present is searched (a
    ``\boxed{x}`` without a number gives ``None``; it does not fall back to a number elsewhere). In the region the
    last number wins, so "3 apples, 5 pears, total 8" gives 8. The text is NFKC-normalised first (full-width
    "４２" reads 42), unicode minus signs read as "-", comma thousands separators are dropped ("$1,234" is 1234),
    a trailing period or percent sign is ignored ("42." and "42%" read 42), "3.0" equals "3", and a region that
    is exactly one fraction ("3/4", ``\frac{3}{4}``) gives its value.
    """
    text = normalize_number_text(text)
    for extract in (last_boxed, gsm8k_final, last_answer_tag):
        region = extract(text)
        if region is not None:
            return last_number(region)
    return last_number(text)


def reference_number(value: Any) -> Fraction | None:
    """The reference answer of a row as an exact fraction; ``None`` when missing or not a number.

    ``int`` and ``float`` values are taken as they are (a float through its shortest decimal form, so ``0.1`` is
    1/10); strings go through :func:`extract_final_number`, so ``"#### 42"`` (GSM8K) and ``"\\boxed{42}"`` work.
    """
    if _is_missing(value) or isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return None if math.isinf(value) else Fraction(Decimal(repr(value)))
    return extract_final_number(str(value))


class NumericAnswerReward:
    """1.0 when the final number of a completion equals the row's ``answer`` within ``tolerance``, else 0.0.

    Call: ``(completions, answer=[...], **ignored) -> list[float | None]``, one reward per completion; ``None``
    where the row's answer is missing or holds no number. Numbers are compared exactly (as fractions) when
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
        rewards: list[float | None] = []
        for completion, answer in zip(completions, answers, strict=True):
            reference = reference_number(answer)
            if reference is None:
                rewards.append(None)
                continue
            predicted = extract_final_number(completion_text(completion))
            rewards.append(1.0 if predicted is not None and abs(predicted - reference) <= tolerance else 0.0)
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

# math_verify's parsing cost grows with the text; the final answer is at the end, so only the tail is parsed.
_MATH_TAIL_CHARS = 10_000
_BARE_ANSWER_CHARS = 200
_LATEX_DELIMITER_RE = re.compile(r"\$|\\\(|\\\[|\\boxed")
_PARSE_TIMEOUT_S = 5
_VERIFY_TIMEOUT_S = 5


class MathEquivalenceReward:
    """1.0 when the completion's answer is mathematically equivalent to the row's ``answer``, else 0.0.

    Uses Hugging Face's ``math-verify`` (``parse`` then ``verify(gold, prediction)``), as TRL's ``accuracy_reward``
    does: fractions, LaTeX, sets and intervals, units. A reference without LaTeX delimiters (``$``, ``\\(``, ``\\[``,
    ``\\boxed``) is parsed inside ``$...$`` (so a bare ``(1,2]`` is an interval and ``1+x^2`` is not just 1),
    else as it is, each falling back to the other; a GSM8K ``#### 42`` reference is reduced to
    ``42``. Only the last 10,000 characters of a completion are parsed; when nothing is found there, the content
    of its last ``<answer>`` tag (or the whole completion, if at most 200 characters) is tried inside ``$...$``.

    math-verify enforces its timeouts with ``signal.alarm``, which works only in the main thread; elsewhere (a web
    server's worker threads) the timeouts are disabled, as TRL does, and math-verify's warning about it silenced.

    Call: ``(completions, answer=[...], **ignored) -> list[float | None]``; ``None`` where the reference is missing or
    cannot be parsed; 0.0 where the completion cannot be parsed, or parsing or checking fails or times out.

    Raises:
        ValueError: (on call) the ``answer`` column is missing or has the wrong length.
    """

    def __init__(self, name: str = "math_equivalence") -> None:
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        from math_verify import parse, verify  # sympy is heavy: import on first use, never in the web process

        answers = column_values(self.__name__, "answer", kwargs, len(completions))
        in_main_thread = threading.current_thread() is threading.main_thread()
        parse_timeout = _PARSE_TIMEOUT_S if in_main_thread else None
        verify_timeout = _VERIFY_TIMEOUT_S if in_main_thread else None
        if not in_main_thread:
            logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
            logging.getLogger("math_verify.grader").setLevel(logging.ERROR)

        def safe_parse(text: str) -> list[Any]:
            try:
                return parse(text, parsing_timeout=parse_timeout)
            except Exception:  # noqa: BLE001 - math-verify raises on odd input despite raise_on_error=False
                return []

        rewards: list[float | None] = []
        gold_cache: dict[str, list[Any]] = {}
        for completion, answer in zip(completions, answers, strict=True):
            if _is_missing(answer):
                rewards.append(None)
                continue
            reference = str(answer)
            reference = gsm8k_final(reference) or reference
            if reference not in gold_cache:
                if _LATEX_DELIMITER_RE.search(reference):
                    gold = safe_parse(reference) or safe_parse(f"${reference.strip()}$")
                else:  # a bare "1+x^2" parsed as plain text gives just the number 1; as LaTeX, the expression
                    gold = safe_parse(f"${reference.strip()}$") or safe_parse(reference)
                gold_cache[reference] = gold
            gold = gold_cache[reference]
            if not gold:
                rewards.append(None)
                continue
            text = completion_text(completion)[-_MATH_TAIL_CHARS:]
            prediction = safe_parse(text)
            if not prediction:  # a bare "(1,2]" or "x^2+1" is only read as LaTeX inside $...$
                region = (last_answer_tag(text) or text).strip()
                prediction = safe_parse(f"${region}$") if region and len(region) <= _BARE_ANSWER_CHARS else []
            if not prediction:
                rewards.append(0.0)
                continue
            try:
                rewards.append(1.0 if verify(gold, prediction, timeout_seconds=verify_timeout) else 0.0)
            except Exception:  # noqa: BLE001 - any failure inside sympy means "not shown equivalent"
                rewards.append(0.0)
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
            if _is_missing(answer):
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
