"""Write the arithmetic examples: integer questions with a numeric ``answer``, at several difficulty levels.

Each row is ``{"prompt": [system message, user message], "answer": int}``, e.g. the user asks "What is 3 + 4?" and
``answer`` is 7. The system prompt asks for the number only, so a ~135M-parameter model can be rewarded on the
final number (``numeric_answer``) and on replying with a number alone (``format_regex``). Levels, easiest first:

* ``sums1``: single-digit sums (0-9 + 0-9). The quick start: SmolLM2-135M-Instruct solves some, not all, so
  groups differ in reward from the first step. All 100 pairs exist; 50 train, 50 held out.
* ``sums2``: two-digit sums (10-99 + 10-99).
* ``mixed``: one of ``+``, ``-`` (0-99, results may be negative) or ``x`` (2-12 times 2-12).
* ``multistep``: three operands and two operators, with ``x`` binding tighter (``4 + 3 x 5``) or parentheses
  (``(12 - 5) x 3``).
* ``addsub``: the original example, ``examples/arithmetic.jsonl``: 400 additions and subtractions of operands in
  [-50, 99] (a negative second operand in parentheses: "What is 12 - (-7)?"); no held-out file.

For every level but ``addsub`` the script writes ``examples/arithmetic_<level>.jsonl`` (training rows) and
``examples/heldout/arithmetic_<level>.jsonl`` (``--heldout`` rows, default 50, whose questions never appear in
the training file) for ``benchmarks/bench_learning.py`` to measure accuracy on prompts the run never saw.
Questions are distinct and drawn with ``random.Random(seed)``, so the files are the same on every run.

Left out on purpose: division, reasoning or ``<answer>`` tags in the requested reply, and word problems.

Usage: ``python examples/make_arithmetic.py [--level addsub|sums1|sums2|mixed|multistep|all] [--rows N]
[--heldout 50] [--seed 0] [--out FILE]``. Without ``--level`` it writes the ``addsub`` file, as it always has.
"""

from __future__ import annotations

import argparse
import json
import random
from collections.abc import Callable
from pathlib import Path

SYSTEM_PROMPT = "You are a careful calculator. Reply with the result only, as a number."
LOW, HIGH = -50, 99
EXAMPLES_DIR = Path(__file__).resolve().parent
HELDOUT_DIR = EXAMPLES_DIR / "heldout"
#: Training rows per level (``sums1`` has only 100 distinct questions: 50 train + 50 held out).
DEFAULT_ROWS = {"sums1": 50, "sums2": 400, "mixed": 400, "multistep": 400, "addsub": 400}
LEVELS = ("sums1", "sums2", "mixed", "multistep")


def _row(question: str, answer: int) -> dict:
    return {
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}],
        "answer": answer,
    }


def _addsub(rng: random.Random) -> tuple[str, int]:
    a, op, b = rng.randint(LOW, HIGH), rng.choice("+-"), rng.randint(LOW, HIGH)
    right = f"({b})" if b < 0 else str(b)
    return f"What is {a} {op} {right}?", a + b if op == "+" else a - b


def _sums(low: int, high: int) -> Callable[[random.Random], tuple[str, int]]:
    def draw(rng: random.Random) -> tuple[str, int]:
        a, b = rng.randint(low, high), rng.randint(low, high)
        return f"What is {a} + {b}?", a + b

    return draw


def _mixed(rng: random.Random) -> tuple[str, int]:
    op = rng.choice("+-x")
    if op == "x":
        a, b = rng.randint(2, 12), rng.randint(2, 12)
        return f"What is {a} x {b}?", a * b
    a, b = rng.randint(0, 99), rng.randint(0, 99)
    return f"What is {a} {op} {b}?", a + b if op == "+" else a - b


def _multistep(rng: random.Random) -> tuple[str, int]:
    a, b, c = rng.randint(1, 20), rng.randint(1, 20), rng.randint(2, 9)
    shape = rng.randrange(4)
    if shape == 0:
        return f"What is {a} + {b} x {c}?", a + b * c
    if shape == 1:
        return f"What is {a} - {b} + {c}?", a - b + c
    if shape == 2:
        return f"What is ({a} + {b}) x {c}?", (a + b) * c
    return f"What is ({a} - {b}) x {c}?", (a - b) * c


DRAWS: dict[str, Callable[[random.Random], tuple[str, int]]] = {
    "addsub": _addsub,
    "sums1": _sums(0, 9),
    "sums2": _sums(10, 99),
    "mixed": _mixed,
    "multistep": _multistep,
}


def make_rows(num_rows: int, seed: int, level: str = "addsub") -> list[dict]:
    """``num_rows`` distinct questions of ``level`` drawn with ``random.Random(seed)``; each
    ``{"prompt": [system, user], "answer": int}``.

    Raises:
        KeyError: ``level`` is not one of :data:`DRAWS`.
        ValueError: the level has fewer than ``num_rows`` distinct questions (``sums1`` has 100).
    """
    draw = DRAWS[level]
    if level == "sums1" and num_rows > 100:
        raise ValueError(f"sums1 has 100 distinct questions, {num_rows} asked")
    rng = random.Random(seed)
    seen: set[str] = set()
    rows = []
    while len(rows) < num_rows:
        question, answer = draw(rng)
        if question in seen:
            continue
        seen.add(question)
        rows.append(_row(question, answer))
    return rows


def split_rows(rows: list[dict], num_heldout: int) -> tuple[list[dict], list[dict]]:
    """``(train, heldout)``: the last ``num_heldout`` rows are held out (questions are distinct, so no held-out
    question is in ``train``)."""
    cut = len(rows) - num_heldout
    return rows[:cut], rows[cut:]


def write_jsonl(rows: list[dict], path: Path) -> None:
    """Write ``rows`` one JSON object a line (UTF-8, ``\\n`` line ends)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def write_level(level: str, num_rows: int, num_heldout: int, seed: int, out: Path | None = None) -> list[Path]:
    """Write a level's training file (``out``, default ``examples/arithmetic_<level>.jsonl``) and its held-out
    file (``examples/heldout/<same name>``); ``addsub`` writes ``examples/arithmetic.jsonl`` only. Returns the paths."""
    if level == "addsub":
        path = out or EXAMPLES_DIR / "arithmetic.jsonl"
        write_jsonl(make_rows(num_rows, seed, level), path)
        return [path]
    train, heldout = split_rows(make_rows(num_rows + num_heldout, seed, level), num_heldout)
    path = out or EXAMPLES_DIR / f"arithmetic_{level}.jsonl"
    heldout_path = (HELDOUT_DIR if out is None else out.parent / "heldout") / path.name
    write_jsonl(train, path)
    write_jsonl(heldout, heldout_path)
    return [path, heldout_path]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--level", default="addsub", choices=[*DRAWS, "all"], help="difficulty level, or all")
    parser.add_argument("--rows", type=int, help="training rows (default: 50 for sums1, else 400)")
    parser.add_argument("--heldout", type=int, default=50, help="held-out rows (not for addsub)")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", type=Path, help="training file (default examples/arithmetic[_<level>].jsonl)")
    args = parser.parse_args()
    if args.level == "all" and args.out is not None:
        parser.error("--out names one file; leave it out with --level all")
    for level in (*LEVELS, "addsub") if args.level == "all" else (args.level,):
        rows = args.rows or DEFAULT_ROWS[level]
        for path in write_level(level, rows, args.heldout, args.seed, args.out):
            print(f"wrote {path}")


if __name__ == "__main__":
    main()
