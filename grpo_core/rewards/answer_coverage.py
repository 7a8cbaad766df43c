"""How many rows of a dataset an answer rule cannot judge: their ``answer`` is missing, or no rule reading it can parse
it (prose such as "see figure", a list), so the rule returns ``None`` ("does not apply") on every completion of them.

Shown where a user can still fix the data: on dataset upload (Datasets tab), in the preflight report and on the
Launch tab's try-out bench. Pure and web-safe: ``math_equivalence`` is judged here without math-verify (a missing or
prose answer), in about 0.2 ms a row; ``thorough=True`` also tries math-verify's parse (about 10 ms a row, imports
sympy), which the tests use to check the fast count against the rule.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

ANSWER_RULES = ("numeric_answer", "math_equivalence", "exact_match")
_EXAMPLES = 3


@dataclass(frozen=True)
class AnswerCoverage:
    """Rows of a dataset one answer rule cannot judge.

    Attributes:
        rule: the rule (``numeric_answer``, ``math_equivalence`` or ``exact_match``).
        num_rows: rows looked at.
        not_judged: rows whose answer the rule cannot read (it returns ``None`` for them).
        examples: up to three ``(row index, answer)`` of those rows, row numbers from 0.
    """

    rule: str
    num_rows: int
    not_judged: int
    examples: tuple[tuple[int, str], ...] = ()

    def message(self) -> str:
        """One line, e.g. ``numeric_answer cannot judge 2 of 10 rows (answer not one number): row 3 'see figure'``."""
        why = {
            "numeric_answer": "answer missing or not one number",
            "math_equivalence": "answer missing, prose or not parseable",
            "exact_match": "answer missing",
        }[self.rule]
        shown = ", ".join(f"row {index} {answer[:40]!r}" for index, answer in self.examples)
        return (
            f"{self.rule} cannot judge {self.not_judged} of {self.num_rows} rows ({why}; it gives them None, "
            f"no learning signal): {shown}"
        )


def _judgeable(rule: str, answer: Any, checker: Any) -> bool:
    from grpo_core.rewards.answer import is_missing_answer, reference_number
    from grpo_core.rewards.final_answer import gsm8k_final
    from grpo_core.rewards.number_reading import reference_value
    from grpo_core.rewards.prose import is_prose_answer

    if is_missing_answer(answer):
        return False
    if rule == "numeric_answer":
        return reference_number(answer) is not None
    if rule == "math_equivalence":
        if checker is not None:
            return bool(checker.gold(answer))
        text = str(answer)
        text = gsm8k_final(text) or text
        return reference_value(text) is not None or not is_prose_answer(text)
    return True


def answer_coverage(rule: str, answers: Sequence[Any], *, thorough: bool = False) -> AnswerCoverage:
    """How many of ``answers`` (a dataset's ``answer`` column, in row order) ``rule`` cannot judge.

    Args:
        rule: one of :data:`ANSWER_RULES`.
        answers: the column's values.
        thorough: for ``math_equivalence``, also parse each answer with math-verify (imports sympy: worker side).

    Raises:
        ValueError: ``rule`` is not an answer rule.
    """
    if rule not in ANSWER_RULES:
        raise ValueError(f"{rule!r} is not an answer rule ({', '.join(ANSWER_RULES)})")
    checker = None
    if thorough and rule == "math_equivalence":
        from grpo_core.rewards.math_check import MathChecker

        checker = MathChecker()
    missed = [(index, str(answer)) for index, answer in enumerate(answers) if not _judgeable(rule, answer, checker)]
    return AnswerCoverage(rule, len(answers), len(missed), tuple(missed[:_EXAMPLES]))


def dataset_answer_coverage(
    rows: Sequence[Mapping[str, Any]],
    rules: Sequence[str] = ANSWER_RULES,
    *,
    thorough: bool = False,
) -> list[AnswerCoverage]:
    """:func:`answer_coverage` of each of ``rules`` (answer rules only, each once) over ``rows``' ``answer`` column;
    ``[]`` when no row has an ``answer`` column."""
    if not any("answer" in row for row in rows):
        return []
    answers = [row.get("answer") for row in rows]
    wanted = [rule for rule in dict.fromkeys(rules) if rule in ANSWER_RULES]
    return [answer_coverage(rule, answers, thorough=thorough) for rule in wanted]


def coverage_lines(coverages: Sequence[AnswerCoverage]) -> list[str]:
    """The messages of the coverages that miss rows (rules that judge every row say nothing)."""
    return [coverage.message() for coverage in coverages if coverage.not_judged]
