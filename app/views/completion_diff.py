"""Two completions' diff computed in a bounded child process (``python -m app.views.completion_diff``).

``difflib``'s matching is quadratic in the text and ``HtmlDiff``'s line pairing (``Differ._fancy_replace``) cubic in
the lines of a changed block: two different completions of 4,000 characters held the web process for about 20 s, and
its interpreter lock with it, so every login waited (a script's completions over the ingest API are up to a million
characters). :func:`diff_table` therefore runs in a child that is killed after :data:`TIMEOUT_S`; each side is cut
at :data:`MAX_DIFF_CHARS` first. The child imports the standard library only.
"""

from __future__ import annotations

import difflib
import json
import subprocess
import sys
from collections.abc import Sequence

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


def diff_table(left: str, right: str, labels: Sequence[str], width: int) -> tuple[float, str]:
    """``(similarity ratio, HtmlDiff table)`` of two texts, in this process (unbounded: see :func:`bounded_diff`).
    ``labels`` are put in the table's head as given (escaped by the caller)."""
    ratio = difflib.SequenceMatcher(None, left, right, autojunk=False).ratio()
    table = difflib.HtmlDiff(tabsize=4).make_table(diff_lines(left, width), diff_lines(right, width),
                                                   fromdesc=labels[0], todesc=labels[1])
    return ratio, table


def bounded_diff(left: str, right: str, labels: Sequence[str], width: int) -> tuple[float, str]:
    """:func:`diff_table` of the first :data:`MAX_DIFF_CHARS` characters of each text, in a child process.

    Raises:
        DiffTooCostly: it took more than :data:`TIMEOUT_S`, or the child failed.
    """
    request = json.dumps({"left": left[:MAX_DIFF_CHARS], "right": right[:MAX_DIFF_CHARS], "labels": list(labels),
                          "width": width})
    try:
        done = subprocess.run([sys.executable, "-m", __name__], input=request.encode("utf-8"), capture_output=True,
                              timeout=TIMEOUT_S, check=False)
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
