r"""A final answer read as a number: the last number expression of its region, as an exact ``Fraction``.

The region is :func:`grpo_core.rewards.final_answer.final_answer`'s (docs/rewards.md, "What the final answer is").

Inside the region the LAST number expression is the answer, read as one value: ``6.02 \times 10^{23}``, ``6.02e23``,
``6.02 x 10^23`` (scientific notation), ``\frac{3}{4}``, ``3/4``, ``2 1/2`` and ``2\frac{1}{2}`` (fractions and mixed
numbers), ``2^{10}`` (an integer power), ``1,234,567`` / ``1{,}234`` / ``1\,234`` / ``1 234`` (thousands
separators: groups of exactly three digits after a first group without a leading zero, so "1,2,3" is a list),
``-5`` / ``\u22125`` / ``(-40)`` (negative), ``50%`` / ``50\%`` / ``50 percent`` (percent), ``0.1\overline{6}``
(repeating), ``1.5 million`` (scale words), ``¾`` / ``2½`` (vulgar fractions), with currency signs, TeX text and unit
words (``$1,234``, ``12 \text{ cm}^2``, ``90^\circ``, ``5 m²``, ``5 m/s``) ignored; ``1.234,5`` / ``1 234,56`` / ``1'250``
(other locales) and Markdown bold (``**5**``) too. Every value is an exact :class:`fractions.Fraction`.

A box holds its answer whole: its content must be one number (:func:`single_number`), so ``\boxed{\sqrt{2}}``,
``\boxed{5\pi}`` and ``\boxed{2 \cdot 3}`` give no number rather than 2, 5 or 3. Elsewhere a last number that is an
operand (after a binary operator or a function, before a factorial, a power or ``\pi``: ``5-6``, ``2 \times 3``,
``\sqrt{25}``, ``10!``) gives none either. Two ``<answer>`` tags or two cues with different answers joined by "or" or
list separators are a hedge, like two boxes.

Sources: GSM8K (Cobbe et al., 2021) ``####``; MATH (Hendrycks et al., 2021) ``\boxed{}``; the answer extraction of
DeepSeekMath (``evaluation/data_processing/answer_extraction.py``) and Qwen2.5-Math (``evaluation/parser.py``);
math-verify's number extraction tests (``tests/test_all.py``).
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from grpo_core.rewards.final_answer import LIST_GAP_RE, OR_RE, final_answer

# --------------------------------------------------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------------------------------------------------

_MINUS_SIGNS = dict.fromkeys(map(ord, "\u2212\ufe63\uff0d\u2012\u2013"), "-")
_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")
_SUPERSCRIPT_RUN_RE = re.compile(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+")
_VULGAR_FRACTION_RE = re.compile(r"[¼½¾⅐⅑⅒⅓⅔⅕⅖⅗⅘⅙⅚⅛⅜⅝⅞]")
_FRACTION_SLASHES = dict.fromkeys(map(ord, "\u2044\u2215"), "/")
# Python refuses to convert integers longer than this many digits from text (sys.get_int_max_str_digits()).
MAX_DIGITS = 4000


def normalize_number_text(text: str) -> str:
    """NFKC-normalise (full-width digits become ASCII), superscripts become ``^{...}`` (``10²³`` is ``10^{23}``), a
    vulgar fraction a spaced ``n/d`` (``2½`` is the mixed number ``2 1/2``, not 21/2), fraction and division slashes
    ``/``, and unicode minus and dash signs ``-``."""
    text = _SUPERSCRIPT_RUN_RE.sub(lambda m: "^{" + m.group().translate(_SUPERSCRIPTS) + "}", text)
    text = _VULGAR_FRACTION_RE.sub(lambda m: " " + unicodedata.normalize("NFKC", m.group()) + " ", text)
    return unicodedata.normalize("NFKC", text).translate(_MINUS_SIGNS).translate(_FRACTION_SLASHES)


_TEX_CLEANUPS = (
    (re.compile(r"(\*\*|__)(?=\S)([^*\n]{1,200}?)(?<=\S)\1"), r" \2 "),  # Markdown bold: **5**
    (re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}"), r" \1 "),
    (re.compile(r"\\(?:left|right|displaystyle|!)"), ""),
    (re.compile(r"\{,\}"), ","),
    (re.compile(r"(?<=\d)(?:\\,|\\ |~|\u202f|\u2009)(?=\d{3}(?!\d))"), ","),  # thin-space thousands separator
    (re.compile(r"\\[,;: ]|~"), " "),
    (re.compile(r"\\%|\bper\s?cent\b|\bpct\b"), "%"),
    (re.compile(r"\\\$|[$€£¥₹]|\\(?:euro|pounds)"), " "),
    (re.compile(r"\^\s*\{?\s*\\circ\s*\}?|°"), " "),  # degrees
    (re.compile(r"(?<=[A-Za-z])\s*\^\s*(?:\{\s*[-+]?\d+\s*\}|[-+]?\d)"), ""),  # a unit's power: cm^2, m^{3}
    (re.compile(r"\\(?:[dtc]frac)"), r"\\frac"),
    (re.compile(r"\\(?:cdot|times)(?![A-Za-z])|×|·"), " \\\\times "),
)


def _clean(region: str) -> str:
    for pattern, replacement in _TEX_CLEANUPS:
        region = pattern.sub(replacement, region)
    return region


_UINT = r"(?:[1-9]\d{0,2}(?:,\d{3})+(?!\d)|[1-9]\d{0,2}(?: \d{3})+(?![\d,.])|\d+)"
_DEC = rf"(?:{_UINT}(?:\.\d+)?|\.\d+)"
_EXP = r"(?:\{\s*[-+]?\d{1,3}\s*\}|\(\s*[-+]?\d{1,3}\s*\)|[-+]?\d{1,3})(?!\d)"
_POW = r"(?:\^|\*\*)\s*"
_ATOM = rf"(?:{_DEC}(?:\s*{_POW}{_EXP})?)"
_SIGNED_ATOM = rf"(?:[-+]?\s?{_ATOM})"
_FRAC_ARG = rf"(?:\{{\s*{_SIGNED_ATOM}\s*\}}|\d)"
_KINDS = {
    "repeat": r"\d*\.\d*\\overline\s*\{\d{1,20}\}",
    "mixed": rf"\d+(?:\s+\d+\s*/\s*\d+(?![\d.])|\s*\\frac\s*{_FRAC_ARG}\s*{_FRAC_ARG})",
    "frac": rf"\\frac\s*{_FRAC_ARG}\s*{_FRAC_ARG}",
    "sci": rf"{_DEC}\s*(?:\\times|x|X|\*)\s*(?:10|\{{\s*10\s*\}})\s*{_POW}{_EXP}",
    "enote": rf"{_DEC}[eE][-+]?\d{{1,3}}(?![\d])",
    "slash": rf"{_ATOM}\s*/\s*[-+]?{_ATOM}",
    "power": rf"{_DEC}\s*{_POW}{_EXP}",
    # other locales: 1.234,5 and 1 234,56 (decimal comma after grouped thousands), 1'250 and 1’250.5 (Swiss)
    "locale": r"[1-9]\d{0,2}(?:(?:\.\d{3})+|(?:[ \u202f\u00a0]\d{3})+),\d+(?!\d|[,.]\d)"
    r"|[1-9]\d{0,2}(?:['’]\d{3})+(?:\.\d+)?(?![\d'’])",
    "plain": _DEC,
}
_NUMBER_RE = re.compile(
    r"(?<![0-9A-Za-z_.)\]}^/])(?P<sign>[-+]\s?)?(?:"
    + "|".join(f"(?P<{name}>{pattern})" for name, pattern in _KINDS.items())
    + r")(?P<scale>\s+(?:thousand|million|billion|trillion)\b)?(?P<pct>\s*%)?",
    re.IGNORECASE,
)
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_REPEAT_PARTS_RE = re.compile(r"(\d*)\.(\d*)\\overline\s*\{(\d+)\}")
_FRAC_PARTS_RE = re.compile(rf"\\frac\s*({_FRAC_ARG})\s*({_FRAC_ARG})")
_MIXED_SLASH_RE = re.compile(r"(\d+)\s+(\d+)\s*/\s*(\d+)")
_SCI_PARTS_RE = re.compile(rf"({_DEC})\s*(?:\\times|x|X|\*)\s*(?:10|\{{\s*10\s*\}})\s*{_POW}({_EXP})")
_POWER_PARTS_RE = re.compile(rf"({_DEC})\s*{_POW}({_EXP})")


def _decimal(token: str) -> Fraction | None:
    token = token.replace(",", "").replace(" ", "")
    if len(token) > MAX_DIGITS:
        return None
    try:
        return Fraction(Decimal(token))
    except (InvalidOperation, ValueError, ZeroDivisionError):
        return None


def _power(base: Fraction | None, exponent_text: str) -> Fraction | None:
    """``base ** exponent``; ``None`` when the result would have more than MAX_DIGITS digits or divide by zero."""
    exponent = int(exponent_text.strip("{}() "))
    if base is None or (base == 0 and exponent < 0):
        return None
    size = max(len(str(abs(base.numerator))), len(str(base.denominator)))
    return None if size * abs(exponent) > MAX_DIGITS else base**exponent


def _atom(text: str) -> Fraction | None:
    """Value of ``[-+] DEC [^ EXP]`` (a fraction's numerator or denominator)."""
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1].strip()
    sign = -1 if text.startswith("-") else 1
    text = text.lstrip("-+ ")
    power = _POWER_PARTS_RE.fullmatch(text)
    value = _power(_decimal(power.group(1)), power.group(2)) if power else _decimal(text)
    return None if value is None else sign * value


def _ratio(numerator: Fraction | None, denominator: Fraction | None) -> Fraction | None:
    if numerator is None or denominator is None or denominator == 0:
        return None
    return numerator / denominator


def _value(kind: str, text: str) -> Fraction | None:
    """Value of one matched number expression of ``kind`` (see ``_KINDS``), without its sign."""
    if kind in ("plain", "enote"):
        return _decimal(text)
    if kind == "locale":
        if "," in text:  # decimal comma: the dots and spaces group thousands
            text = re.sub(r"[.\s]", "", text).replace(",", ".")
        return _decimal(re.sub(r"['’]", "", text))
    if kind == "repeat":  # 0.1\overline{6} = 0.1666... = 1/6
        whole, fixed, period = _REPEAT_PARTS_RE.fullmatch(text).groups()  # type: ignore[union-attr]
        repeating = Fraction(int(period), 10 ** len(period) - 1)
        return int(whole or 0) + (int(fixed or 0) + repeating) / 10 ** len(fixed)
    if kind == "frac":
        parts = _FRAC_PARTS_RE.fullmatch(text)
        return _ratio(_atom(parts.group(1)), _atom(parts.group(2))) if parts else None
    if kind == "slash":
        numerator, denominator = text.split("/", 1)
        return _ratio(_atom(numerator), _atom(denominator))
    if kind == "sci":
        parts = _SCI_PARTS_RE.fullmatch(text)
        mantissa = _decimal(parts.group(1)) if parts else None
        scale = _power(Fraction(10), parts.group(2)) if parts else None
        return None if mantissa is None or scale is None else mantissa * scale
    if kind == "power":
        parts = _POWER_PARTS_RE.fullmatch(text)
        return _power(_decimal(parts.group(1)), parts.group(2)) if parts else None
    slash = _MIXED_SLASH_RE.fullmatch(text)  # mixed
    if slash:
        fraction = _ratio(_decimal(slash.group(2)), _decimal(slash.group(3)))
        whole = _decimal(slash.group(1))
    else:
        whole_text = re.match(r"\d+", text).group()  # type: ignore[union-attr]
        whole, fraction = _decimal(whole_text), _value("frac", text[len(whole_text) :].strip())
    if whole is None or fraction is None or not 0 < fraction < 1:
        return None  # "3\frac{5}{4}" is not a mixed number
    return whole + fraction


@dataclass(frozen=True)
class ReadNumber:
    """A number read from text: its exact ``value``, whether a percent sign followed it, and its span."""

    value: Fraction
    percent: bool
    start: int
    end: int


def _matches(region: str) -> list[tuple[re.Match[str], Fraction | None]]:
    found = []
    for match in _NUMBER_RE.finditer(region):
        kind = next(k for k in _KINDS if match.group(k) is not None)
        value = _value(kind, match.group(kind))
        if value is not None and match.group("scale"):
            value *= _SCALES[match.group("scale").strip().lower()]
        if value is not None and match.group("sign") and match.group("sign").startswith("-"):
            value = -value
        found.append((match, value))
    return found


_LIST_MARK_RE = re.compile(r"[,;&|]|\\q?quad|\band\b|或|和|、|，|；", re.IGNORECASE)


def _is_list_gap(gap: str) -> bool:
    """Whether ``gap`` (the text between two different numbers) makes them alternatives or a list rather than one
    answer: an "or" within 40 characters, or only list separators with a list mark (comma, semicolon, "and", \\quad)
    or only spaces on one line ("3 4"). A newline or a sentence's end alone does not: "6 + 9 = 15.\\n15" is one answer
    written twice, "Step 3.\\n4" is a step number then the answer."""
    if len(gap) <= 40 and OR_RE.search(gap):
        return True
    if LIST_GAP_RE.fullmatch(gap) is None:
        return False
    return _LIST_MARK_RE.search(gap) is not None or (gap.strip(" \t$") == "" and "\n" not in gap and "." not in gap)


def read_numbers(region: str) -> list[ReadNumber | None]:
    """Every number expression of ``region`` (normalised first) in order; ``None`` for one too large to read."""
    region = _clean(normalize_number_text(region))
    return [
        None if value is None else ReadNumber(value, bool(match.group("pct")), match.start(), match.end())
        for match, value in _matches(region)
    ]


# The last number is an operand, not the answer: after a binary operator or a function (``2 \cdot 3``, ``5 - 6``,
# ``\sqrt{2}``, ``\log_2 8``, ``a_5``), or before a factorial, a power, a constant or a product (``10!``, ``5\pi``).
_OPERAND_BEFORE_RE = re.compile(
    r"(?:[\w)\]}.]\s*(?:[-+*/×÷]|\\(?:times|cdot|div|pm|mp)\b)|\\(?:sqrt|log|ln|lg|exp|sin|cos|tan|cot|sec|csc"
    r"|arcsin|arccos|arctan|sinh|cosh|tanh|binom|pm|mp|max|min|gcd)\b[^\d]{0,4}|[_!]\{?|\^\{?|±"
    r"|\d\s*(?:plus|minus|times|over|divided\s+by|multiplied\s+by))\s*$"
)
_OPERAND_AFTER_RE = re.compile(r"^\s*(?:!(?=[\w(])|\^|\*\*|\\(?:pi|sqrt|times|cdot|pm)\b|π|±|[*/×÷]\s*[\d(\\])")


def _is_operand(region: str, match: re.Match[str]) -> bool:
    """Whether the number ``match`` of the cleaned ``region`` is an operand of an expression (see the regexes)."""
    before = region[max(0, match.start() - 40) : match.start()]
    return bool(_OPERAND_BEFORE_RE.search(before) or _OPERAND_AFTER_RE.match(region[match.end() : match.end() + 20]))


def last_number(region: str, operand_is_none: bool = False) -> ReadNumber | None:
    """The last number expression of ``region``; ``None`` when there is none, it cannot be read, it is the last
    item of a list or of alternatives ("3, 4", "3 or 4"), or (``operand_is_none``) an operand of an expression
    ("2 \\cdot 3", "5-6", "\\sqrt{2}", "10!", "5\\pi": its value is not the expression's)."""
    region = _clean(normalize_number_text(region))
    found = _matches(region)
    if not found:
        return None
    match, value = found[-1]
    if value is None or (operand_is_none and _is_operand(region, match)):
        return None
    previous, previous_value = found[-2] if len(found) > 1 else (None, None)
    if previous is not None and previous_value != value and _is_list_gap(region[previous.end() : match.start()]):
        return None
    return ReadNumber(value, bool(match.group("pct")), match.start(), match.end())


_SQUEEZE_RE = re.compile(r"\s+|\$|\\[,;:! ]|\\left|\\right|\\[()\[\]]")
# an operator with an operand before it (a leading minus is a sign: "-9" is a value), or a TeX operation
_OPERATOR_RE = re.compile(r"(?<=[\w)\]}])[-+*/^×÷·]|\\(?:[dtc]?frac|sqrt|times|cdot|div|binom|pm)")


def echoes_prompt(region: str, prompt: str, reference: str) -> bool:
    """Whether the final answer ``region`` is an expression copied from the ``prompt`` ("6 + 9" for "What is 6 + 9?",
    ``\\sqrt{8}`` for "Simplify $\\sqrt{8}$") rather than the ``reference`` itself: math-verify would evaluate it and
    pay the question back. Only an expression with an operator counts; a plain value that the prompt happens to
    contain ("3" in "Is 3 or 5 bigger?", "-9" in "What is 0 - 9?") does not."""
    answer = _SQUEEZE_RE.sub("", region)
    if not answer or _OPERATOR_RE.search(answer) is None:
        return False
    return answer in _SQUEEZE_RE.sub("", prompt) and answer != _SQUEEZE_RE.sub("", reference)


#: Without a box, marker, tag or cue, the answer is at the end: only this many last characters are read.
TEXT_TAIL_CHARS = 10_000


def final_number(text: str, prompt: str = "", reference: str = "") -> ReadNumber | None:
    """The final answer of ``text`` (see the module docstring) read as a number; ``None`` when there is none, or when
    it is an expression copied from ``prompt`` that is not ``reference`` (:func:`echoes_prompt`: "18 - 9" for "What
    is 18 - 9?" is not the answer 9)."""
    answer = final_answer(normalize_number_text(text))
    if answer.hedged or (prompt and echoes_prompt(answer.region[-TEXT_TAIL_CHARS:], prompt, reference)):
        return None
    if answer.source == "boxed":  # a box holds the answer whole: one number, or it is an expression we cannot read
        return single_number(answer.region)
    return last_number(answer.region[-TEXT_TAIL_CHARS:] if answer.source == "text" else answer.region, True)


_VARIABLE_SUFFIX_RE = re.compile(r"[xyzijkn]\b")
# before the number: brackets, or a multiple-choice letter ("(B) 5", AMC's \textbf{(B)} 5); after it: up to three
# unit words, a compound unit with "/" ("m/s", "km/h") or a unit in brackets ("5 (apples)")
_UNIT_WORD = r"\(?[A-Za-z]+(?:/[A-Za-z]+)?\.?\)?"
_GOLD_PREFIX_RE = re.compile(r"[\s(\[{]*(?:\(\s*[A-E]\s*\)\s*)?")
_GOLD_SUFFIX_RE = re.compile(rf"\s*(?:{_UNIT_WORD}(?:\s+{_UNIT_WORD}){{0,2}})?[\s.)\]}}]*")


def reference_value(text: str) -> ReadNumber | None:
    """A reference answer written as text, read strictly: its final-answer region (the text after a last ``=``) must
    be one number, optionally in brackets, with currency signs and at most two unit words after it ("18 dollars").
    Prose holding a number ("see figure 3", "3 or 4") gives ``None``: the numeric rule does not apply to it."""
    answer = final_answer(normalize_number_text(text))
    return None if answer.hedged else single_number(answer.region)


_EQUALS_RE = re.compile(r"=|\\approx|≈")


def single_number(region: str) -> ReadNumber | None:
    """``region`` read as one number (after a last ``=`` or ``\\approx``), optionally in brackets, with currency
    signs and at most two unit words after it; ``None`` when it holds anything else (an expression, a list)."""
    *equations, region = _EQUALS_RE.split(_clean(normalize_number_text(region)))
    if equations and _LIST_MARK_RE.search("=".join(equations)):
        return None  # "x=3, y=4": several values
    found = _matches(region)
    if len(found) != 1 or found[0][1] is None:
        return None
    match, value = found[0]
    if not (_GOLD_PREFIX_RE.fullmatch(region[: match.start()]) and _GOLD_SUFFIX_RE.fullmatch(region[match.end() :])):
        return None
    if _VARIABLE_SUFFIX_RE.match(region[match.end() :]):
        return None  # "3x", "5i": a multiple of a variable, not a number with a unit
    return ReadNumber(value, bool(match.group("pct")), match.start(), match.end())


def numbers_equal(predicted: ReadNumber, reference: ReadNumber, tolerance: Fraction = Fraction(0)) -> bool:
    """Whether two read numbers are the same answer within ``tolerance`` (absolute).

    A percent on one side only may be read either way: "50%" equals a reference of 50 and of 0.5 (as Qwen2.5-Math's
    ``math_equal`` does with ``include_percentage``); with a percent on both sides, or neither, values compare as
    written."""
    if predicted.percent == reference.percent:
        candidates = [(predicted.value, reference.value)]
    elif predicted.percent:
        candidates = [(predicted.value, reference.value), (predicted.value / 100, reference.value)]
    else:
        candidates = [(predicted.value, reference.value), (predicted.value, reference.value / 100)]
    return any(abs(a - b) <= tolerance for a, b in candidates)
