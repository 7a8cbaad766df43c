r"""Answers written as plain expressions (``2*pi``, ``exp(1)``, ``3*sqrt(2)``, ``2 + 3*I``, ``x**2 + 1``), read into
sympy the way math-verify reads its own plain expressions.

math-verify's ``ExprExtractionConfig`` finds plain expressions of digits and operators only (its ``lazy_expr_regex``:
``-?\(?-?\d[\d.\s+\-*×/^()÷]*``), then parses them with sympy's ``parse_expr(expr, evaluate=False)``
(``math_verify.parser.parse_expr_cached``). So ``2*pi`` is extracted as ``2``, and inside ``$...$`` as LaTeX it is
``2 i p`` (a product of symbols); ``exp(1)`` is ``E x p(1)``. Small models and many datasets write answers this
way. :func:`parse_plain_expression` lets sympy's ``parse_expr`` (the parser math-verify uses for its expressions) read
the whole answer, after checking every token against a short list of names (constants, functions, one-letter
variables), so no other Python name reaches ``parse_expr``'s ``eval``: a completion is hostile input.

Imports sympy on first use only (never in the web process).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

#: Longest plain expression read (characters): an answer, not a program.
MAX_PLAIN_CHARS = 120
#: Deepest parenthesis nesting read.
MAX_DEPTH = 8
_TOKEN_RE = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)|([A-Za-zπ]+)|(\*\*|[-+*/^(),]))")
#: Functions a plain answer may call, by the names people write.
_FUNCTIONS = ("sqrt", "exp", "log", "ln", "sin", "cos", "tan", "asin", "acos", "atan", "sinh", "cosh", "tanh",
              "abs", "cbrt")
#: Constants: pi (also π), e and E (Euler's number), I, i and j (the imaginary unit), oo/inf (infinity).
_CONSTANTS = ("pi", "π", "e", "E", "I", "i", "j", "oo", "inf", "infinity")


def _names() -> dict[str, Any]:
    import sympy

    functions = {"sqrt": sympy.sqrt, "exp": sympy.exp, "log": sympy.log, "ln": sympy.log, "sin": sympy.sin,
                 "cos": sympy.cos, "tan": sympy.tan, "asin": sympy.asin, "acos": sympy.acos, "atan": sympy.atan,
                 "sinh": sympy.sinh, "cosh": sympy.cosh, "tanh": sympy.tanh, "abs": sympy.Abs,
                 "cbrt": sympy.cbrt}
    constants = {"pi": sympy.pi, "π": sympy.pi, "e": sympy.E, "E": sympy.E, "I": sympy.I, "i": sympy.I,
                 "j": sympy.I, "oo": sympy.oo, "inf": sympy.oo, "infinity": sympy.oo}
    return {**functions, **constants}


def looks_plain(region: str) -> bool:
    """Whether ``region`` is written as a plain expression with a name in it (``2*pi``, ``exp(1)``, ``x**2``) rather
    than LaTeX or prose: no backslash or ``$``, only the tokens :func:`parse_plain_expression` reads, and a constant,
    a function call or ``**``."""
    region = region.strip().rstrip(".")
    if not region or len(region) > MAX_PLAIN_CHARS or "\\" in region or "$" in region:
        return False
    tokens = _tokens(region)
    if tokens is None:
        return False
    names = [value for kind, value in tokens if kind == "name"]
    return "**" in region or any(n in _CONSTANTS or n in _FUNCTIONS for n in names)


def _tokens(region: str) -> list[tuple[str, str]] | None:
    """``(kind, text)`` tokens (``number``, ``name``, ``op``), or ``None`` when a character is not one of them, a name
    is no known function or constant nor a single letter, or parentheses nest deeper than :data:`MAX_DEPTH`."""
    out: list[tuple[str, str]] = []
    position, depth = 0, 0
    region = region.rstrip()
    while position < len(region):
        match = _TOKEN_RE.match(region, position)
        if match is None or match.end() == position:
            return None
        number, name, op = match.groups()
        if name is not None:
            if name not in _FUNCTIONS and name not in _CONSTANTS and len(name) != 1:
                return None
            out.append(("name", name))
        elif number is not None:
            out.append(("number", number))
        else:
            depth += op == "("
            depth -= op == ")"
            if depth < 0 or depth > MAX_DEPTH:
                return None
            out.append(("op", op))
        position = match.end()
    return out if depth == 0 and out else None


@lru_cache(maxsize=4096)
def parse_plain_expression(region: str) -> Any | None:
    """The sympy expression a plain answer writes (``evaluate=False``, as math-verify parses its expressions), or
    ``None`` when it is not one (:func:`looks_plain`) or sympy cannot read it. ``^`` is a power; a one-letter name
    other than ``e``, ``i`` and ``j`` is a variable; juxtaposition multiplies (``2pi``, ``3 sqrt(2)``)."""
    if not looks_plain(region):
        return None
    tokens = _tokens(region.strip().rstrip("."))
    if tokens is None:
        return None
    import sympy
    from sympy.parsing.sympy_parser import (
        implicit_multiplication_application,
        parse_expr,
        standard_transformations,
    )

    names = _names()
    # a variable is real, as math-verify reads LaTeX variables when no imaginary unit is written
    local = {value: names.get(value, sympy.Symbol(value, real=True)) for kind, value in tokens if kind == "name"}
    # rebuilt from the checked tokens only (names renamed to safe identifiers), so nothing else reaches eval
    safe = {name: f"_n{index}" for index, name in enumerate(sorted(local))}
    text = " ".join(safe.get(value, value) if kind == "name" else ("**" if value == "^" else value)
                    for kind, value in tokens)
    try:
        return parse_expr(text, local_dict={safe[name]: value for name, value in local.items()},
                          transformations=(*standard_transformations, implicit_multiplication_application),
                          evaluate=False)
    except Exception:  # noqa: BLE001 - sympy raises many kinds on malformed input: not a plain expression
        return None


def same_imaginary_unit(gold: list[Any], prediction: list[Any]) -> tuple[list[Any], list[Any]]:
    """``gold`` and ``prediction`` with the symbol ``i`` read as the imaginary unit on both sides when one side has
    sympy's ``I``: math-verify reads LaTeX ``2+3i`` with ``i`` a symbol (``should_treat_as_complex`` needs a standalone
    ``i``), a plain ``2 + 3*I`` has the unit itself."""
    import sympy

    def has(values: list[Any], what: Any) -> bool:
        return any(isinstance(v, sympy.Basic) and v.has(what) for v in values)

    symbol = sympy.Symbol("i")
    if not ((has(gold, sympy.I) and has(prediction, symbol)) or (has(prediction, sympy.I) and has(gold, symbol))):
        return gold, prediction

    def swap(values: list[Any]) -> list[Any]:
        return [v.subs(symbol, sympy.I) if isinstance(v, sympy.Basic) else v for v in values]

    return swap(gold), swap(prediction)
