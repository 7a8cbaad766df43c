"""Two completions' diff computed in a bounded child process (``python -m app.views.completion_diff``).

``difflib``'s matching is quadratic in the text and ``HtmlDiff``'s line pairing (``Differ._fancy_replace``) cubic in
the lines of a changed block: two different completions of 4,000 characters held the web process for about 20 s, and
its interpreter lock with it, so every login waited (a script's completions over the ingest API are up to a million
characters). :func:`diff_table` therefore runs in a child that is killed after :data:`TIMEOUT_S`; each side is cut
at :data:`MAX_DIFF_CHARS` first. The child imports the standard library only (it runs this file as a script,
``python -I -S``).
"""

from __future__ import annotations

import difflib
import html
import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

#: Wall-clock seconds the child may take; then the diff is not drawn (the page says why).
TIMEOUT_S = 5.0
#: Characters of each side compared; the rest is left out (the page says so).
MAX_DIFF_CHARS = 20_000


class DiffTooCostly(RuntimeError):
    """The diff was not computed within :data:`TIMEOUT_S` (or its child failed); the message says so."""


def diff_lines(text: str, width: int) -> list[str]:
    """Lines of ``text``, long ones split at spaces near ``width`` so a one-line completion diffs word-wise."""
    lines: list[str] = []
    for line in text.splitlines() or [""]:
        while len(line) > width:
            cut = line.rfind(" ", 0, width)
            cut = width if cut <= 0 else cut + 1
            lines.append(line[:cut])
            line = line[cut:]
        lines.append(line)
    return lines


#: Above this many character pairs (``len(a) * len(b)``: two texts of about 2,000 characters) the similarity is
#: measured on lines: a character ``SequenceMatcher`` with ``autojunk=False`` grows with their product (two
#: trajectories of 22,000 characters: 9 s).
RATIO_CHAR_PAIRS = 4_000_000
#: Above this many line pairs (two texts of about 50 lines) the table aligns whole lines
#: (:func:`_aligned_table`): ``HtmlDiff`` pairs every changed line with every other one to find similar ones (two
#: trajectories of 390 lines: 3.6 s).
TABLE_LINE_PAIRS = 2_500


def _similarity(left: str, right: str, left_lines: list[str], right_lines: list[str]) -> float:
    """``SequenceMatcher``'s ratio of the two texts' characters, or of their lines past :data:`RATIO_CHAR_PAIRS`."""
    if len(left) * len(right) <= RATIO_CHAR_PAIRS:
        return difflib.SequenceMatcher(None, left, right, autojunk=False).ratio()
    return difflib.SequenceMatcher(None, left_lines, right_lines, autojunk=False).ratio()


def _aligned_table(left: list[str], right: list[str], left_label: str, right_label: str) -> str:
    """A side-by-side table of two long texts from ``SequenceMatcher``'s line opcodes, in ``HtmlDiff``'s classes:
    changed lines paired in order (``diff_chg``), the rest of a changed block added (``diff_add``) or removed
    (``diff_sub``); no highlighting within a line. Lines are escaped here, labels by the caller."""
    rows = []

    def cell(number: int | None, text: str | None, mark: str | None) -> str:
        if number is None:
            return '<td class="diff_header"></td><td nowrap="nowrap"></td>'
        shown = html.escape(text or "")
        if mark:
            shown = f'<span class="{mark}">{shown}</span>'
        return f'<td class="diff_header">{number}</td><td nowrap="nowrap">{shown}</td>'

    matcher = difflib.SequenceMatcher(None, left, right, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        for k in range(max(i2 - i1, j2 - j1)):
            i, j = i1 + k, j1 + k
            in_left, in_right = i < i2, j < j2
            mark = None if tag == "equal" else "diff_chg" if in_left and in_right else None
            rows.append("<tr>" + cell(i + 1 if in_left else None, left[i] if in_left else None,
                                      mark or (None if tag == "equal" else "diff_sub"))
                        + cell(j + 1 if in_right else None, right[j] if in_right else None,
                               mark or (None if tag == "equal" else "diff_add")) + "</tr>")
    return (f'<table class="diff" rules="groups"><thead><tr><th colspan="2" class="diff_header">'
            f'{left_label}</th><th colspan="2" class="diff_header">{right_label}</th>'
            f"</tr></thead><tbody>{''.join(rows)}</tbody></table>")


def diff_table(left: str, right: str, labels: Sequence[str], width: int) -> tuple[float, str]:
    """``(similarity ratio, HtmlDiff table)`` of two texts, in this process (unbounded: see :func:`bounded_diff`).
    ``labels`` are put in the table's head as given (escaped by the caller)."""
    left_lines, right_lines = diff_lines(left, width), diff_lines(right, width)
    ratio = _similarity(left, right, left_lines, right_lines)
    if len(left_lines) * len(right_lines) > TABLE_LINE_PAIRS:
        return ratio, _aligned_table(left_lines, right_lines, labels[0], labels[1])
    return ratio, difflib.HtmlDiff(tabsize=4).make_table(left_lines, right_lines, fromdesc=labels[0],
                                                         todesc=labels[1])


def bounded_diff(left: str, right: str, labels: Sequence[str], width: int) -> tuple[float, str]:
    """:func:`diff_table` of the first :data:`MAX_DIFF_CHARS` characters of each text, in a child process.

    Raises:
        DiffTooCostly: it took more than :data:`TIMEOUT_S`, or the child failed.
    """
    request = json.dumps({"left": left[:MAX_DIFF_CHARS], "right": right[:MAX_DIFF_CHARS], "labels": list(labels),
                          "width": width})
    try:
        # this file run as a script, isolated and without ``site`` (the child needs the standard library only):
        # ``-m`` with ``site`` took ~55 ms of the interpreter's start (site-packages' path hooks) a diff
        done = subprocess.run([sys.executable, "-I", "-S", str(Path(__file__).resolve())],
                              input=request.encode("utf-8"), capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        raise DiffTooCostly(f"the two texts differ too much to be compared within {TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        raise DiffTooCostly(f"the comparison failed: {done.stderr.decode('utf-8', 'replace')[-300:]}")
    answer = json.loads(done.stdout)
    return float(answer["ratio"]), str(answer["table"])


def _child() -> None:
    request = json.loads(sys.stdin.buffer.read())
    ratio, table = diff_table(request["left"], request["right"], request["labels"], int(request["width"]))
    sys.stdout.write(json.dumps({"ratio": ratio, "table": table}))


if __name__ == "__main__":
    _child()
