"""``code_style``: the share of the completion's non-blank code lines without a PEP 8 violation (``pycodestyle``)."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import pycodestyle

from grpo_core.rewards.code.extract import extract_code
from grpo_core.rewards.registry import RewardRule, RuleParam, completion_text, register


class _ViolatedLines(pycodestyle.BaseReport):
    """A pycodestyle report that records the line numbers with a (not ignored) violation."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.violated: set[int] = set()

    def error(self, line_number: int, offset: int, text: str, check: Any) -> str | None:
        code = super().error(line_number, offset, text, check)
        if code:
            self.violated.add(line_number)
        return code


@functools.lru_cache(maxsize=16)
def _style_guide(max_line_length: int) -> pycodestyle.StyleGuide:
    # config_file=False and parse_argv=False: no user or project configuration changes the score.
    return pycodestyle.StyleGuide(max_line_length=max_line_length, quiet=True, config_file=False, parse_argv=False)


def style_violations(code: str, max_line_length: int = 100) -> set[int]:
    """1-based numbers of the lines of ``code`` with a PEP 8 violation (pycodestyle's default ignore list applies).

    Code that does not tokenize is still checked; pycodestyle reports the tokenizer error (E902) on one line.
    """
    guide = _style_guide(int(max_line_length))
    report = _ViolatedLines(guide.options)
    lines = code.splitlines(keepends=True)
    checker = pycodestyle.Checker(lines=lines, options=guide.options, report=report)
    checker.check_all()
    return report.violated


def style_score(code: str, max_line_length: int = 100) -> float:
    """Share of the non-blank lines of ``code`` without a PEP 8 violation, in [0, 1]; 0.0 for empty code.

    Trailing blank lines are dropped and one final newline added first, so how the code block was cut out of the
    completion does not cost a W391/W292.
    """
    code = code.rstrip() + "\n"
    numbered = [n for n, line in enumerate(code.splitlines(), start=1) if line.strip()]
    if not numbered:
        return 0.0
    bad = style_violations(code, max_line_length)
    return sum(1 for n in numbered if n not in bad) / len(numbered)


class CodeStyleReward:
    """PEP 8 style of the completion's code: share of non-blank lines without a ``pycodestyle`` violation.

    Call: ``(completions, **ignored) -> list[float]``, each in [0, 1]; 0.0 for a completion without code. See
    :func:`style_score`. Code with syntax errors is scored too (pycodestyle works on tokens).
    """

    def __init__(self, max_line_length: int = 100, name: str = "code_style") -> None:
        self.max_line_length = int(max_line_length)
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return [style_score(extract_code(completion_text(c)), self.max_line_length) for c in completions]


def make_code_style(max_line_length: int = 100) -> CodeStyleReward:
    """Build ``code_style``.

    Raises:
        ValueError: ``max_line_length`` is below 20.
    """
    if max_line_length < 20:
        raise ValueError(f"parameter 'max_line_length': must be at least 20, got {max_line_length!r}")
    return CodeStyleReward(max_line_length=max_line_length)



register(
    RewardRule(
        name="code_style",
        description="Share of non-blank code lines without a PEP 8 (pycodestyle) violation",
        factory=make_code_style,
        params=(RuleParam("max_line_length", "int", 100, "longest line allowed (E501)"),),
        category="code",
    )
)
