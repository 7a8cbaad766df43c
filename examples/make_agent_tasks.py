"""Write the agent quick start's questions: arithmetic a ~135M-parameter model cannot do in its head, to be answered
with the shipped ``calculator`` tool (``grpo_core.tools.library.calculator``).

Each row is ``{"prompt": [system message, three worked exchanges, user message], "answer": int}``. Questions,
drawn with ``random.Random(seed)`` (the files are the same on every run), are distinct, half of each kind:

* a three-digit number times a two-digit number: "What is 347 * 29?";
* a product then a sum or a difference: "What is 123 * 45 - 678?".

The operators are written as the calculator reads them (``*``, ``+``, ``-``), so the question itself is a
well-formed ``expression``. Before the question, :data:`WORKED_EXCHANGES` are earlier turns of the conversation
(a question, a call to the calculator, the tool's result, the answer; three times): the pilot in
docs/agent-quick-start.md measured the base model's call rate under them well above that under an instruction alone
or an example call in the system prompt (none of which ever drew a call). They are in-context help, not a supervised
warm start: no weights are trained on them. Their expressions are never drawn as questions.

Writes ``examples/agent_train.jsonl`` (``--rows``, default 200) and ``examples/heldout/agent_tasks.jsonl``
(``--heldout``, default 50, never in the training file) for ``benchmarks/bench_learning.py --task agent``.

Usage: ``python examples/make_agent_tasks.py [--rows 200] [--heldout 50] [--seed 0]``.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent
TRAIN_PATH = EXAMPLES_DIR / "agent_train.jsonl"
HELDOUT_PATH = EXAMPLES_DIR / "heldout" / "agent_tasks.jsonl"

SYSTEM_PROMPT = "You are a helpful assistant. Use the calculator tool for arithmetic, then reply with the result as a number."


def exchange(question: str, expression: str, result: str) -> list[dict]:
    """One worked exchange as earlier turns (TRL's message shapes): the question, an assistant turn with one
    ``tool_calls`` entry to ``calculator``, the tool's result, the answer."""
    return [{"role": "user", "content": question},
            {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {
                "name": "calculator", "arguments": {"expression": expression}}}]},
            {"role": "tool", "name": "calculator", "content": result},
            {"role": "assistant", "content": result}]


#: The worked exchanges before every question (the pilot's "instruction + three worked exchanges").
WORKED = (("12 * 34", 408), ("56 * 78 - 90", 4278), ("231 * 19", 4389))
WORKED_EXCHANGES = [m for expression, value in WORKED for m in exchange(f"What is {expression}?", expression, str(value))]


def question(rng: random.Random) -> tuple[str, int]:
    """One question and its answer: ``a * b`` (a 100-999, b 11-99), or ``a * b + c`` / ``a * b - c`` (c 100-999)."""
    a, b = rng.randint(100, 999), rng.randint(11, 99)
    if rng.random() < 0.5:
        return f"{a} * {b}", a * b
    c = rng.randint(100, 999)
    if rng.random() < 0.5:
        return f"{a} * {b} + {c}", a * b + c
    return f"{a} * {b} - {c}", a * b - c


def rows(count: int, rng: random.Random, seen: set[str], system_prompt: str = SYSTEM_PROMPT) -> list[dict]:
    """``count`` rows whose expressions are not in ``seen`` (which they are added to)."""
    out = []
    while len(out) < count:
        expression, answer = question(rng)
        if expression in seen:
            continue
        seen.add(expression)
        out.append({"prompt": [{"role": "system", "content": system_prompt}, *WORKED_EXCHANGES,
                               {"role": "user", "content": f"What is {expression}?"}], "answer": answer})
    return out


def write(path: Path, data: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(row) + "\n" for row in data), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200)
    parser.add_argument("--heldout", type=int, default=50)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng, seen = random.Random(args.seed), {expression for expression, _ in WORKED}
    held = rows(args.heldout, rng, seen)  # drawn first: the held-out set does not change with --rows
    write(HELDOUT_PATH, held)
    write(TRAIN_PATH, rows(args.rows, rng, seen))
    print(f"wrote {args.rows} rows to {TRAIN_PATH} and {args.heldout} to {HELDOUT_PATH}")


if __name__ == "__main__":
    main()
