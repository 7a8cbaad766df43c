"""Write ``examples/arithmetic.jsonl``: 400 integer addition and subtraction questions, the classic first GRPO task.

Each row is ``{"prompt": [system message, user message], "answer": int}``, e.g. the user asks "What is 37 + 45?"
and ``answer`` is 82. Operands are drawn from [-50, 99] with a fixed seed, so the file is the same on every run;
a negative second operand is written in parentheses ("What is 12 - (-7)?"). Questions are distinct. The task is
meant to be learnable by a ~135M-parameter model with a sparse 1/0 reward on the final number.

Left out on purpose: multiplication and division, multi-step expressions, reasoning or <answer> tags in the
requested reply (the system prompt asks for the number only), and a train/eval split.

Usage: ``python examples/make_arithmetic.py [--rows 400] [--seed 0] [--out examples/arithmetic.jsonl]``
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

SYSTEM_PROMPT = "You are a careful calculator. Reply with the result only, as a number."
LOW, HIGH = -50, 99


def make_rows(num_rows: int, seed: int) -> list[dict]:
    """``num_rows`` distinct questions drawn with ``random.Random(seed)``; each ``{"prompt": [...], "answer": int}``."""
    rng = random.Random(seed)
    seen: set[tuple[int, str, int]] = set()
    rows = []
    while len(rows) < num_rows:
        a, op, b = rng.randint(LOW, HIGH), rng.choice("+-"), rng.randint(LOW, HIGH)
        if (a, op, b) in seen:
            continue
        seen.add((a, op, b))
        right = f"({b})" if b < 0 else str(b)
        question = f"What is {a} {op} {right}?"
        rows.append(
            {
                "prompt": [
                    {"role": "system", "content": SYSTEM_PROMPT},
                    {"role": "user", "content": question},
                ],
                "answer": a + b if op == "+" else a - b,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=400, help="number of questions")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out", type=Path, default=Path(__file__).with_name("arithmetic.jsonl"), help="output file")
    args = parser.parse_args()
    with args.out.open("w", encoding="utf-8", newline="\n") as f:
        for row in make_rows(args.rows, args.seed):
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
    print(f"wrote {args.rows} rows to {args.out}")


if __name__ == "__main__":
    main()
