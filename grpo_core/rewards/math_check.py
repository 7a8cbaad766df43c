r"""math-verify, used where it is right: the gold and prediction parsing and checks behind ``math_equivalence``.

Where this differs from calling ``math_verify.parse`` / ``verify`` on the whole texts (as TRL's ``accuracy_reward``
does), and why (docs/rewards.md, "math_equivalence and math-verify"):

* The prediction is the completion's *final answer* (:func:`grpo_core.rewards.final_answer.final_answer`), after its
  reasoning (the last ``</think>``): its last ``\boxed{}`` only. math-verify reads every box of a text and may join two of them into one set, so a completion
  that corrects itself ("\boxed{841} ... Final Answer: \boxed{840}") or hedges ("\boxed{3} or \boxed{4}") was not
  scored by its final box. Two different boxes offered as alternatives, or "3 or 4" against a one-value gold, score 0.
* A gold answer that is prose ("see figure", "yes") gives ``None``: math-verify reads an unknown word inside
  ``$...$`` as a product of one-letter variables, which a completion echoing the letters in any order matched.
  A gold or a final answer that is one number with unit words ("18 dollars", "The answer is 18 dollars.") is compared
  as that number.
* E-notation (``6.02e23``, ``1e-30``) is rewritten as ``\\times 10^{...}`` first: math-verify reads the ``e`` as
  Euler's number (``1e-30`` parsed as ``E - 29``).
* A final answer that is an expression copied from the prompt ("6 + 9" for "What is 6 + 9?", ``\\sqrt{8}`` for
  "Simplify $\\sqrt{8}$") scores 0 unless it is the reference itself: math-verify evaluates it and would pay the
  question back (TRL passes the ``prompts``).
* An answer written as a plain expression (``2*pi``, ``exp(1)``, ``3*sqrt(2)``, ``2 + 3*I``), gold or prediction, is
  read whole by sympy's ``parse_expr`` as math-verify reads its own expressions, its tokens checked first
  (:mod:`grpo_core.rewards.plain_math`): math-verify's expression extraction reads digits and operators only
  (``2*pi`` as 2), and as LaTeX ``pi`` is a product ``p i``. ``i`` is the imaginary unit on both sides when one side
  writes it as ``I``.
* Equal-looking numbers are checked exactly: ``verify`` rounds to 6 decimal places, so ``\frac{1}{2^{98}}`` equalled
  ``\frac{1}{2^{99}}``. After ``verify`` says yes, two numeric answers must be exactly equal when both are exact
  (rationals, radicals) or within a relative 1e-6 when one is a decimal; math-verify's percent reading (28% and 28)
  is kept.

math-verify (and sympy) are imported on first use only: the web process must stay light.
"""

from __future__ import annotations

import logging
import re
import threading
from typing import Any

from grpo_core.rewards.final_answer import final_answer, gsm8k_final
from grpo_core.rewards.number_reading import (
    echoes_prompt,
    last_number,
    normalize_number_text,
    read_numbers,
    reference_value,
)
from grpo_core.rewards.plain_math import looks_plain, parse_plain_expression, same_imaginary_unit
from grpo_core.rewards.prose import has_words, is_prose_answer

# math_verify's parsing cost grows with the text; the final answer is at the end, so only the tail is parsed.
MATH_TAIL_CHARS = 10_000
_BARE_ANSWER_CHARS = 200
_LATEX_DELIMITER_RE = re.compile(r"\$|\\\(|\\\[|\\boxed")
_PARSE_TIMEOUT_S = 5
_VERIFY_TIMEOUT_S = 5


_E_NOTATION_RE = re.compile(r"(?<![\w.\\])(\d+\.\d+|\d+)[eE]([-+]?)(\d+)(?![\w.])")


_WHOLE_E_NUMBER_RE = re.compile(r"\s*\$?\s*[-+]?(?:\d+\.\d*|\.?\d+)[eE][-+]?\d+\s*\$?\s*\.?\s*")
_APPROX_RE = re.compile(r"\\approx|≈")
_MARKDOWN_BOLD_RE = re.compile(r"(\*\*|__)(?=\S)([^*\n]{1,200}?)(?<=\S)\1")


def _tex_e_notation(text: str) -> str:
    """``6.02e23`` and ``1e-30`` as ``6.02 \\times 10^{23}`` (math-verify reads the ``e`` as Euler's number): when the
    mantissa has a decimal point or the exponent two or more digits, or when the text is that one number alone (a
    gold ``1e-3``, a box ``\\boxed{2e3}``), so ``3e-1`` (3e - 1) and ``2e`` inside an expression keep their e."""
    whole = _WHOLE_E_NUMBER_RE.fullmatch(text) is not None

    def tex(match: re.Match[str]) -> str:
        mantissa, sign, exponent = match.groups()
        if "." not in mantissa and len(exponent) < 2 and not whole:
            return match.group()
        return f"{mantissa} \\times 10^{{{'-' if sign == '-' else ''}{exponent}}}"

    return _E_NOTATION_RE.sub(tex, text)


#: The largest exponent, factorial argument or sum/product length of a parsed answer that is evaluated; beyond it
#: the answer is not judged. sympy computes ``2^{2^{40}}`` as an exact integer of 2^40 bits, inside one C call that
#: holds the interpreter lock and that math-verify's ``signal.alarm`` timeout cannot interrupt (and that is disabled
#: outside the main thread): a completion or a dataset answer could stop the web process or a run's worker.
MAX_EVALUATED_MAGNITUDE = 10_000
_COSTLY_FUNCTIONS = ("factorial", "factorial2", "subfactorial", "binomial", "gamma", "RisingFactorial",
                     "FallingFactorial", "fibonacci", "lucas", "bell", "catalan", "harmonic", "primorial", "prime")


def too_costly(value: Any) -> bool:
    """Whether sympy could take unbounded time or memory to evaluate ``value`` (a parsed answer): a power whose
    exponent (estimated with floating point, never computed exactly) exceeds :data:`MAX_EVALUATED_MAGNITUDE` in size
    on a base other than 0 and ±1, a factorial-like function of a larger argument, a sum or product over more terms,
    or an integral or limit. Values that are not sympy expressions (the strings math-verify returns) are cheap."""
    import sympy

    if not isinstance(value, sympy.Basic):
        return False
    for node in sympy.postorder_traversal(value):  # inner powers first: each estimate is of checked parts
        if isinstance(node, (sympy.Integral, sympy.Limit)):
            return True
        if isinstance(node, (sympy.Sum, sympy.Product)):
            if any(_magnitude(bound) > MAX_EVALUATED_MAGNITUDE for limits in node.limits for bound in limits[1:]):
                return True
        elif isinstance(node, sympy.Pow):
            base = _magnitude(node.base)
            if _magnitude(node.exp) > MAX_EVALUATED_MAGNITUDE and base not in (0.0, 1.0):
                return True
        elif isinstance(node, sympy.exp):  # exp(x) is e^x: a power whose exponent is its argument
            if _magnitude(node.args[0]) > MAX_EVALUATED_MAGNITUDE:
                return True
        elif isinstance(node, sympy.Function) and type(node).__name__ in _COSTLY_FUNCTIONS:
            if any(_magnitude(arg) > MAX_EVALUATED_MAGNITUDE for arg in node.args):
                return True
    return False


def _magnitude(expr: Any) -> float:
    """``|expr|`` estimated in floating point with a bounded number of digits (``inf`` when too large for a float);
    0 for an expression with symbols (``2^n``: sympy keeps it symbolic, nothing large is computed)."""
    import sympy

    if not isinstance(expr, sympy.Basic) or expr.free_symbols:
        return 0.0
    try:
        number = expr.evalf(15, maxn=60)
        return abs(float(number)) if number.is_number and number.is_finite is not False else float("inf")
    except (TypeError, ValueError, OverflowError, ArithmeticError):
        return float("inf")


class MathChecker:
    """Parses gold answers (cached) and predictions, and decides equivalence; timeouts only in the main thread.

    math-verify enforces its timeouts with ``signal.alarm``, which works only in the main thread; elsewhere (a web
    server's worker threads) the timeouts are disabled, as TRL does, and math-verify's warning about it silenced.
    """

    def __init__(self) -> None:
        from math_verify import parse, verify  # sympy is heavy: import on first use, never in the web process

        self._parse, self._verify = parse, verify
        in_main_thread = threading.current_thread() is threading.main_thread()
        self.parse_timeout = _PARSE_TIMEOUT_S if in_main_thread else None
        self.verify_timeout = _VERIFY_TIMEOUT_S if in_main_thread else None
        if not in_main_thread:
            logging.getLogger("math_verify.parser").setLevel(logging.ERROR)
            logging.getLogger("math_verify.grader").setLevel(logging.ERROR)
        self._gold_cache: dict[str, list[Any]] = {}

    def safe_parse(self, text: str) -> list[Any]:
        """``math_verify.parse(text)``, ``[]`` on any failure or when a parsed value would be too costly to evaluate
        (:func:`too_costly`: ``2^{2^{40}}``, ``(10^{10})!``, a sum of 10^12 terms)."""
        try:
            parsed = self._parse(text, parsing_timeout=self.parse_timeout)
        except Exception:  # noqa: BLE001 - math-verify raises on odd input despite raise_on_error=False
            return []
        return [] if any(too_costly(value) for value in parsed) else parsed

    def gold(self, answer: Any) -> list[Any]:
        """The parsed gold answer of a row, ``[]`` when it is prose or no parse gives anything (rule does not apply).

        A GSM8K ``#### 42`` reference is reduced to ``42``; a reference of one number with unit words to the number;
        a reference without LaTeX delimiters is parsed inside ``$...$`` first (a bare ``(1,2]`` is an interval and
        ``1+x^2`` not just 1), else as it is, each falling back to the other.
        """
        reference = str(answer)
        reference = _tex_e_notation(gsm8k_final(reference) or reference)
        if reference not in self._gold_cache:
            self._gold_cache[reference] = self._parse_gold(reference)
        return self._gold_cache[reference]

    def _parse_gold(self, reference: str) -> list[Any]:
        plain = self._plain(reference)
        if plain:
            return plain
        if has_words(reference):
            number = _number_with_words(reference)
            if number is not None:  # "18 dollars": math-verify would read dollars as d*o*l*l*a*r*s
                reference = number
            elif is_prose_answer(reference):
                return []
        if _LATEX_DELIMITER_RE.search(reference):
            return self.safe_parse(reference) or self.safe_parse(f"${reference.strip()}$")
        return self.safe_parse(f"${reference.strip()}$") or self.safe_parse(reference)

    def prediction(self, text: str, gold: list[Any], prompt: str = "", reference: str = "") -> list[Any]:
        """The parsed final answer of a completion, ``[]`` when it has none, hedges, or echoes an expression of the
        ``prompt`` that is not the ``reference`` itself (see the module docstring)."""
        text = _tex_e_notation(text[-MATH_TAIL_CHARS:])
        answer = final_answer(text)
        if answer.hedged or (prompt and echoes_prompt(answer.region, prompt, reference)):
            return []
        if answer.source != "text" and _is_number_hedge(answer.region, gold):
            return []
        plain = self._plain(_tex_e_notation(_MARKDOWN_BOLD_RE.sub(r"\2", answer.region)))
        if plain:  # "2*pi", "exp(1)", "2 + 3*I": math-verify's own extraction reads 2, or a product of letters
            return plain
        number = _number_with_words(answer.region) if answer.source != "text" else None
        if number is not None:  # "The answer is 18 dollars."
            return self.safe_parse(f"${number}$")
        if answer.source == "boxed":
            # "x \approx 6" is 6; math-verify would read "6 \approx 7" as 6 (its left side)
            region = _tex_e_notation(_APPROX_RE.split(answer.region)[-1] or answer.region)
            return self.safe_parse(f"\\boxed{{{region}}}") or self.safe_parse(f"${region}$")
        if answer.source in ("gsm8k", "cue"):
            region = _tex_e_notation(_MARKDOWN_BOLD_RE.sub(r"\2", answer.region).strip().rstrip("."))
            parsed = self.safe_parse(region) if _LATEX_DELIMITER_RE.search(region) else []
            return parsed or self.safe_parse(f"${region.strip('$ ')}$")
        text = answer.region  # the text after the reasoning
        lines = [line for line in text.splitlines() if line.strip()]
        if not lines or _is_number_hedge(lines[-1], gold):
            return []
        region = text.strip()
        if region and len(region) <= _BARE_ANSWER_CHARS and not has_words(region) and "$" not in region:
            # a bare formula ("6.02 \cdot 10^{23}", "(1,2]", "x^2+1") is only read whole as LaTeX inside $...$
            return self.safe_parse(f"${_plain_to_tex(region)}$") or self.safe_parse(text)
        prediction = self.safe_parse(text)
        if not prediction:
            prediction = self.safe_parse(f"${region}$") if region and len(region) <= _BARE_ANSWER_CHARS else []
        return prediction

    def _plain(self, region: str) -> list[Any]:
        """``[expression, text]`` (math-verify's parse result shape) of a plain-expression answer
        (:func:`grpo_core.rewards.plain_math.parse_plain_expression`), ``[]`` for anything else or one too costly to
        evaluate."""
        region = region.strip().strip("*").strip()
        if not looks_plain(region):
            return []
        expression = parse_plain_expression(region)
        if expression is None or too_costly(expression):
            return []
        return [expression, region]

    def equivalent(self, gold: list[Any], prediction: list[Any]) -> bool:
        """``math_verify.verify(gold, prediction)``, then the exact check of numbers; ``False`` on any failure. The
        symbol ``i`` is the imaginary unit on both sides when one side has it as sympy's ``I``
        (:func:`~grpo_core.rewards.plain_math.same_imaginary_unit`)."""
        try:
            gold, prediction = same_imaginary_unit(gold, prediction)
            if not self._verify(gold, prediction, timeout_seconds=self.verify_timeout):
                return False
            return not _numbers_differ(gold, prediction)
        except Exception:  # noqa: BLE001 - any failure inside sympy means "not shown equivalent"
            return False


_PLAIN_TIMES_10_RE = re.compile(r"(?<=\d)\s*(?:[xX×·*]|\\cdot)\s*(?=10\s*(?:\^|\*\*))")


def _plain_to_tex(region: str) -> str:
    """A formula as written in plain text, in TeX: ``6.02x10^23``, ``6.02 * 10**23`` and ``6.02×10²³`` as
    ``6.02 \\times 10^{23}`` (``**`` is a power, superscripts ``^{...}``)."""
    region = _PLAIN_TIMES_10_RE.sub(r" \\times ", normalize_number_text(region))
    return region.replace("**", "^").replace("×", "\\times ").replace("·", "\\cdot ")


def _number_with_words(text: str) -> str | None:
    """``text`` as a plain number (``"18"``, ``"3/4"``, ``"50\\%"``) when it is one number with unit words after it
    ("18 dollars"), else ``None`` (text without words is left to math-verify)."""
    if not has_words(text):
        return None
    number = reference_value(text)
    if number is None:
        return None
    value = number.value
    written = f"{value.numerator}/{value.denominator}" if value.denominator != 1 else str(value)
    return written + ("\\%" if number.percent else "")


def _is_number_hedge(region: str, gold: list[Any]) -> bool:
    """Whether ``region`` offers several numbers as alternatives ("3 or 4", "3, 4") while the gold is one scalar
    expression (not a set, interval, tuple, matrix or equation, whose parts a list may rightly give)."""
    import sympy

    if not (gold and isinstance(gold[0], sympy.Expr)):
        return False
    numbers = read_numbers(region)
    return len(numbers) >= 2 and numbers[-1] is not None and last_number(region) is None


def _numbers_differ(gold_parsed: list[Any], prediction_parsed: list[Any]) -> bool:
    """True when the numbers of two parses that ``verify`` called equal differ (see the module docstring); False when
    either is no number or sympy cannot decide (then ``verify``'s answer stands)."""
    import sympy

    try:
        gold, prediction = sympy.sympify(gold_parsed[0]).doit(), sympy.sympify(prediction_parsed[0]).doit()
        if not (isinstance(gold, sympy.Expr) and isinstance(prediction, sympy.Expr)):
            return False
        if not (gold.is_number and prediction.is_number) or gold == prediction:
            return False
        notes = (*gold_parsed[1:], *prediction_parsed[1:])
        percent = any("%" in str(item) or "percent" in str(item) for item in notes)
        if percent and _percent_reading(gold, prediction):
            return False
        if not (gold.has(sympy.Float) or prediction.has(sympy.Float)):
            equal = sympy.simplify(gold - prediction).equals(0)
            if equal is not None:
                return not equal
        g, p = complex(gold.evalf(50)), complex(prediction.evalf(50))
        return abs(g - p) > 1e-6 * max(abs(g), abs(p))
    except Exception:  # noqa: BLE001 - sympy could not decide: keep verify's answer
        return False


def _percent_reading(gold: Any, prediction: Any) -> bool:
    """math-verify accepts 28 for 28% (one value 100 times the other, a percent sign on a side): keep that."""
    import sympy

    try:
        return any(sympy.simplify(a - 100 * b) == 0 for a, b in ((gold, prediction), (prediction, gold)))
    except Exception:  # noqa: BLE001
        return False
