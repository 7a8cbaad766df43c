"""Whether a reference answer is prose rather than mathematics ("see figure", "yes", "Answer is forty two.").

A LaTeX parser reads an unknown word inside ``$...$`` as a product of one-letter variables (math-verify parses "see
figure" as ``E*E*E*f*g*i*r*s*u``), which a completion echoing the letters in any order then matches; such a reference
makes ``math_equivalence`` return ``None`` ("does not apply"). Web-safe (no sympy).
"""

from __future__ import annotations

import re

# Words that are mathematics, not prose, when they stand in a LaTeX answer outside \text{...}: function and
# operator names, constants, and common units (math-verify strips units; a LaTeX parser reads any other word as a
# product of single-letter variables).
_MATH_WORDS = frozenset(
    """sin cos tan cot sec csc arcsin arccos arctan sinh cosh tanh log ln lg exp lim max min sup inf gcd lcm deg det
    mod bmod pmod pi infty infinity inf sqrt frac dfrac tfrac cfrac cdot times div pm mp le ge leq geq lt gt neq ne
    approx circ emptyset varnothing cup cap in notin subset subseteq mid dots ldots cdots vdots ddots qquad quad
    alpha beta gamma delta epsilon varepsilon zeta eta theta vartheta iota kappa lambda mu nu xi omicron rho sigma
    tau upsilon phi varphi chi psi omega
    cm mm km kg mg ml hz kb mb gb sec hr hrs min mins inch inches ft feet yd yard yards mile miles meter meters metre
    metres gram grams liter liters litre litres second seconds minute minutes hour hours day days week weeks month
    months year years dollar dollars cent cents units unit degree degrees radian radians mph kmh sq cu am pm""".split()
)
_STOP_WORDS = frozenset("no yes or is an if to of at it on by be as so we do go up he me my us am".split())
_PROSE_REMOVALS = (
    re.compile(r"\\(?:text|textbf|textit|textrm|mathrm|mathbf|mathit|mbox|operatorname)\s*\{[^{}]*\}"),
    re.compile(r"\\(?:begin|end)\s*\{[A-Za-z*]*\}"),
    re.compile(r"\\[A-Za-z]+"),
)
_WORD_RE = re.compile(r"[A-Za-z]{2,}")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af]")


def _outside_commands(text: str) -> str:
    for pattern in _PROSE_REMOVALS:
        text = pattern.sub(" ", text)
    return text


def has_words(text: str) -> bool:
    """Whether ``text`` has a run of two or more letters outside LaTeX commands and ``\\text{}`` groups."""
    return _WORD_RE.search(_outside_commands(text)) is not None


def is_prose_answer(text: str) -> bool:
    r"""Whether a reference answer is prose rather than mathematics ("see figure", "Answer is forty two.", "yes").

    Outside LaTeX commands and ``\text{...}`` groups (math-verify reads those as one symbol), a word of three or
    more letters that is no function name, constant, Greek letter or common unit, a common two-letter English word
    ("no", "or", "is"), or CJK text makes it prose. ``xy`` or ``2ab`` stay mathematics.
    """
    text = _outside_commands(text)
    if _CJK_RE.search(text):
        return True
    for word in _WORD_RE.findall(text):
        lowered = word.lower()
        if lowered in _MATH_WORDS:
            continue
        if len(word) >= 3 or lowered in _STOP_WORDS:
            return True
    return False
