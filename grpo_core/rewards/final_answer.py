r"""The final answer of a completion: the region of its text that holds the answer (used by the answer rules).

What "final answer" means here (docs/rewards.md, "What the final answer is"): in the text after the last
``</think>`` (all of it when there is none; an answer inside the reasoning does not count), by priority, first
present wins:

1. the last closed ``\boxed{...}`` / ``\fbox{...}`` (MATH's format; a self-correcting completion is scored by its
   final box);
2. the rest of the line after the last GSM8K marker ``####``;
3. the content of the last ``<answer>...</answer>``;
4. the rest of the sentence after the last answer cue: "the answer is", "final answer", "answer:", "答案是"
   (Qwen2.5-Math's and DeepSeekMath's evaluations read "he answer is" and Minerva's "final answer is" the same way);
5. else the whole completion (its last ``TEXT_TAIL_CHARS`` characters for a number).

A *hedge* is no answer: two boxes with different content separated only by list separators (``\boxed{3} or
\boxed{4}``), or, in the region, a last number joined to the one before it by "or" or by list separators only
("3 or 4", "3, 4, 5", "between 12 and 13"). A policy that lists candidates must not be paid when one of them is right.
An *echo* is no answer either: an expression copied from the prompt ("18 - 9" for "What is 18 - 9?",
:func:`echoes_prompt`).

How the region is read as a number: :mod:`grpo_core.rewards.number_reading`.

Sources: GSM8K (Cobbe et al., 2021) ``####``; MATH (Hendrycks et al., 2021) ``\boxed{}``; the answer extraction of
DeepSeekMath (``evaluation/data_processing/answer_extraction.py``) and Qwen2.5-Math (``evaluation/parser.py``);
math-verify's number extraction tests (``tests/test_all.py``).
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass

# --------------------------------------------------------------------------------------------------------------------
# Regions
# --------------------------------------------------------------------------------------------------------------------

_BOXED_RE = re.compile(r"\\(?:boxed|fbox)\s*\{")
_BRACE_RE = re.compile(r"[{}]")


def boxed_spans(text: str) -> list[tuple[int, int, int]]:
    r"""Every closed ``\boxed{...}`` / ``\fbox{...}`` of ``text`` as ``(start of \boxed, content start, content end)``,
    ordered by start. One pass over the braces (linear even for a looping model's thousands of unclosed boxes)."""
    openers = {m.end() - 1: m for m in _BOXED_RE.finditer(text)}  # "{" index -> the \boxed match
    if not openers:
        return []
    stack: list[int] = []
    spans = []
    for brace in _BRACE_RE.finditer(text, min(openers)):
        if brace.group() == "{":
            stack.append(brace.start())
        elif stack:
            start = stack.pop()
            if start in openers:
                spans.append((openers[start].start(), start + 1, brace.start()))
    return sorted(spans)


def last_boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (or ``\fbox{...}``) in ``text``, nested braces allowed; ``None`` if none.

    "Last" is the closed one that starts last."""
    spans = boxed_spans(text)
    return text[spans[-1][1] : spans[-1][2]] if spans else None


# Text that only separates items of a list: whitespace, commas, semicolons, "and"/"or", dollar and TeX math
# delimiters, \quad, \text{ or } and the like. Between two boxes it makes a hedge; between two numbers too
# (grpo_core.rewards.number_reading reads a hedged last number with these).
_LIST_GAP = r"(?:\s|[,;&/|$.]|\\[()\[\]]|\\q?quad|\\[,;:! ]|\\text\s*\{[^{}]{0,12}\}|\bor\b|\band\b|或|和|、|，|；)*"
LIST_GAP_RE = re.compile(_LIST_GAP, re.IGNORECASE)
OR_RE = re.compile(r"\bor\b|或|\\vee|\\lor\b|∨", re.IGNORECASE)


def _hedged_boxes(text: str, spans: list[tuple[int, int, int]]) -> bool:
    """True when the last box and the box before it (not nested in it) differ and only list separators lie between."""
    last_start, content_start, content_end = spans[-1]
    before = [s for s in spans[:-1] if s[2] < last_start]
    if not before:
        return False
    previous = max(before, key=lambda s: s[2])
    gap = text[previous[2] + 1 : last_start]
    if LIST_GAP_RE.fullmatch(gap) is None:
        return False
    squeeze = str.maketrans("", "", " \t\n")
    return text[previous[1] : previous[2]].translate(squeeze) != text[content_start:content_end].translate(squeeze)


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


_CUE_RE = re.compile(
    r"(?:\b(?:the\s+)?final\s+answer(?:\s+is)?|\bthe\s+answer\s+is|\banswer\s*[:：]|答案(?:是|为|：|:))\s*[:：]?",
    re.IGNORECASE,
)


_SENTENCE_END_RE = re.compile(r"(?<=[^\s.])\.(?=\s)|。")


def _line_after(text: str, start: int) -> str:
    """The rest of the line of ``text`` from ``start`` (without copying the rest of the text: linear over many cues)."""
    end = text.find("\n", start)
    return text[start : end if end >= 0 else len(text)]


def cued_answer(text: str) -> str | None:
    """The rest of the sentence after the last answer cue ("the answer is", "Final Answer:", "答案是"), up to ". " or
    the line's end (not "?": a hedge may follow it); ``None`` if there is no cue.

    A cue followed by nothing on its line (Minerva's "Final Answer: The final answer is $x$") is skipped for the next.
    """
    for cue in reversed(list(_CUE_RE.finditer(text))):
        rest = _SENTENCE_END_RE.split(_line_after(text, cue.end()), maxsplit=1)[0]
        if rest.strip() and not _CUE_RE.match(rest.strip()):
            return rest
    return None


@dataclass(frozen=True)
class FinalAnswer:
    """Where the final answer of a text is: ``region`` (the text to read), ``source`` (``boxed``, ``gsm8k``,
    ``answer_tag``, ``cue`` or ``text``) and ``hedged`` (two different boxes offered as alternatives)."""

    region: str
    source: str
    hedged: bool = False


_THINK_CLOSE_RE = re.compile(r"</think>", re.IGNORECASE)


def after_reasoning(text: str) -> str:
    """The text after the last ``</think>`` (the whole text when there is none): an answer given inside the reasoning
    is not the final answer (TRL's ``reasoning_accuracy_reward`` reads the same part)."""
    closing = deque(_THINK_CLOSE_RE.finditer(text), maxlen=1)
    return text[closing[0].end() :] if closing else text


def _answer_tag_spans(text: str) -> list[tuple[int, int, int, int]]:
    """The last two ``<answer>...</answer>`` as ``(open start, content start, content end, close end)``."""
    spans: list[tuple[int, int, int, int]] = []
    end = len(text)
    while len(spans) < 2:
        closing = deque(_ANSWER_CLOSE_RE.finditer(text, 0, end), maxlen=1)
        if not closing:
            break
        opening = deque(_ANSWER_OPEN_RE.finditer(text, 0, closing[0].start()), maxlen=1)
        if not opening:
            break
        spans.append((opening[0].start(), opening[0].end(), closing[0].start(), closing[0].end()))
        end = opening[0].start()
    return spans


def _cue_spans(text: str) -> list[tuple[int, int, int, int]]:
    """The last two answers after a cue (as :func:`cued_answer` reads them; the earlier one ends where the last cue
    starts) as ``(cue start, region start, region end, region end)``."""
    spans: list[tuple[int, int, int, int]] = []
    for cue in reversed(list(_CUE_RE.finditer(text))):
        rest = _SENTENCE_END_RE.split(_line_after(text, cue.end()), maxsplit=1)[0]
        end = cue.end() + len(rest) if not spans else min(cue.end() + len(rest), spans[-1][0])
        if text[cue.end() : end].strip() and not _CUE_RE.match(text[cue.end() : end].strip()):
            spans.append((cue.start(), cue.end(), end, end))
            if len(spans) == 2:
                break
    return spans


def _hedged_repeat(text: str, spans: list[tuple[int, int, int, int]]) -> bool:
    """True when the answer before the last one (an ``<answer>`` tag, a cue) differs from it and is offered as an
    alternative: "<answer>3</answer> or <answer>4</answer>", "The answer is 3 or the answer is 4". An "or" or only
    list separators between them make a hedge; a self-correction on a later line or sentence does not."""
    if len(spans) < 2:
        return False
    last, previous = spans
    squeeze = str.maketrans("", "", " \t\n.$")
    if text[previous[1] : previous[2]].translate(squeeze) == text[last[1] : last[2]].translate(squeeze):
        return False
    gap = text[previous[3] : last[0]]
    return (len(gap) <= 40 and OR_RE.search(gap) is not None) or (
        LIST_GAP_RE.fullmatch(gap) is not None and "\n" not in gap and "." not in gap
    )


def final_answer(text: str) -> FinalAnswer:
    """The final-answer region of ``text`` by the priority in this module's docstring."""
    text = after_reasoning(text)
    spans = boxed_spans(text)
    if spans:
        return FinalAnswer(text[spans[-1][1] : spans[-1][2]], "boxed", _hedged_boxes(text, spans))
    for source, extract in (("gsm8k", gsm8k_final), ("answer_tag", last_answer_tag), ("cue", cued_answer)):
        region = extract(text)
        if region is not None:
            spans_of = {"answer_tag": _answer_tag_spans, "cue": _cue_spans}.get(source)
            hedged = spans_of is not None and _hedged_repeat(text, spans_of(text))
            return FinalAnswer(region, source, hedged)
    return FinalAnswer(text, "text")
