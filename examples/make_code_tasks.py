"""Write the code examples: short function-writing tasks with ``assert`` tests, for the gated code recipe.

Each row is ``{"prompt": [system message, user message], "tests": ["assert ...", ...], "entry_point": name,
"reference_solution": "def ...", "family": family name}``, e.g. the user asks "Write a Python function
`count_vowels(s)` that returns how many vowels (a, e, i, o, u) the lowercase string s contains. For example,
`count_vowels('green sky')` returns `2`." and the system prompt asks for the function alone in one ```python block.
The tasks come from 36 families (``examples/code_task_families.py``): 30 trained on (sum of a list, count a letter,
clamp, FizzBuzz-like labels, running maximum...) and 6 held out (digit sum, word count, product, remove a letter,
starts-with, count above a threshold). Each instance draws its own parameters (the function's name, a constant, a
letter, a threshold, a separator) and inputs, so instances differ in what the function must do, not only in name;
SmolLM2-135M-Instruct writes a passing function for some prompts, not all: on 60 training rows (2 per family),
greedy pass@1 is about 50% and the mean ``code_tests`` reward of temperature-1.0 samples about 0.11, with 58% of
4-sample groups all scoring alike (``benchmarks/bench_code_tasks.py``). Of three system prompts tried, the one kept
gave the fewest such groups; asking for "the requested function, named exactly as asked" did worse (0.08, 72%).

Tests are built against policies that learn to game ``code_tests``: each row has 4 to 6 tests with expected values
from the reference solution, chosen so that a degenerate program (``pass``, ``return None``/``0``/``''``/``[]``/
``True``/``False``, any other constant the tests expect, echoing the first or last argument, printing the answer)
passes at most a third of them; families whose functions return few distinct values (booleans, one of two
arguments, a sign) compare two calls per test with different expected values. The example call in the prompt is
never one of the tests.

Files (``random.Random(seed)``, so the same bytes on every run):

* ``examples/code_train.jsonl``: ``--per-family`` (default 15) instances of each training family;
* ``examples/heldout/code_instances.jsonl``: ``--heldout`` (50) new instances of the training families, whose
  prompts and test lines never appear in the training file;
* ``examples/heldout/code_families.jsonl``: ``--heldout`` (50) instances of the held-out families.

``--check`` also runs every row through the product's sandbox (``code_tests``): the reference solution, in a
```python fence, must score 1.0, and each degenerate program at most 1/3; it prints the failures and exits 1.

Left out on purpose: classes, imports, stdin/stdout programs, floats (no tolerance in ``==``), and tasks longer
than a few lines, which a 135M model does not solve.

Usage: ``python examples/make_code_tasks.py [--per-family 15] [--heldout 50] [--seed 0] [--out-dir examples]
[--check]``
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

EXAMPLES_DIR = Path(__file__).resolve().parent
sys.path.insert(0, str(EXAMPLES_DIR))

from code_task_families import HELDOUT_FAMILIES, TRAIN_FAMILIES, Spec  # noqa: E402

SYSTEM_PROMPT = "Write only the function in one ```python code block. Do not add examples, tests or usage."
TRAIN_PATH = EXAMPLES_DIR / "code_train.jsonl"
HELDOUT_INSTANCES_PATH = EXAMPLES_DIR / "heldout" / "code_instances.jsonl"
HELDOUT_FAMILIES_PATH = EXAMPLES_DIR / "heldout" / "code_families.jsonl"
MAX_DEGENERATE_SHARE = 1 / 3
#: Degenerate programs (``{name}``: the entry point, ``{reference}``: the reference renamed ``_reference``).
DEGENERATE_PROGRAMS = {
    "pass": "def {name}(*args):\n    pass\n",
    "None": "def {name}(*args):\n    return None\n",
    "0": "def {name}(*args):\n    return 0\n",
    "''": "def {name}(*args):\n    return ''\n",
    "[]": "def {name}(*args):\n    return []\n",
    "True": "def {name}(*args):\n    return True\n",
    "False": "def {name}(*args):\n    return False\n",
    "first argument": "def {name}(*args):\n    return args[0]\n",
    "last argument": "def {name}(*args):\n    return args[-1]\n",
    "print the answer": "{reference}\ndef {name}(*args):\n    print(_reference(*args))\n",
}


def _function(spec: Spec):
    namespace: dict = {}
    exec(spec.reference, namespace)  # the families' own reference code, written in this repository
    return namespace[spec.name]


def _call(name: str, args: tuple) -> str:
    return f"{name}({', '.join(repr(a) for a in args)})"


def _degenerate_passes(tests: list[list[tuple[tuple, object]]], constants: list) -> int:
    """Most tests any degenerate program passes: a constant, echoing the first or last argument (``None`` covers
    ``pass`` and printing). ``tests``: per test, its calls as ``(args, expected)``."""
    outputs = [lambda args, c=c: c for c in constants] + [lambda args: args[0], lambda args: args[-1]]
    return max(sum(all(out(args) == want for args, want in test) for test in tests) for out in outputs)


def _choose_tests(spec: Spec, cases: list[tuple[tuple, object]], rng: random.Random,
                  count: int) -> list[list[tuple[tuple, object]]] | None:
    """``count`` tests (each a list of ``(args, expected)`` calls) that degenerate programs mostly fail, or ``None``."""
    constants = [None, 0, "", [], True, False, *(want for _, want in cases)]
    for _ in range(200):
        pool = cases[:]
        rng.shuffle(pool)
        if spec.pairs:
            tests = [[a, b] for a, b in zip(pool[::2], pool[1::2], strict=False) if a[1] != b[1]]
        else:
            tests = [[case] for case in pool]
        tests = tests[:count]
        if len(tests) == count and _degenerate_passes(tests, constants) <= count * MAX_DEGENERATE_SHARE:
            return tests
    return None


def _assert(name: str, test: list[tuple[tuple, object]]) -> str:
    if len(test) == 1:
        args, want = test[0]
        return f"assert {_call(name, args)} == {want!r}"
    calls = ", ".join(_call(name, args) for args, _ in test)
    return f"assert ({calls}) == ({', '.join(repr(want) for _, want in test)})"


def make_row(family: str, spec: Spec, rng: random.Random) -> dict | None:
    """One row from a drawn instance: an example call for the prompt and 4-6 tests (``None`` when the inputs
    do not allow tests that degenerate programs fail)."""
    function = _function(spec)
    cases, seen = [], set()
    for args in spec.inputs:
        if repr(args) not in seen:
            seen.add(repr(args))
            cases.append((args, function(*args)))
    example, rest = cases[0], cases[1:]
    tests = _choose_tests(spec, rest, rng, rng.choice((4, 5, 6)))
    if tests is None:
        return None
    user = (f"Write a Python function `{spec.name}({spec.signature})` that {spec.what}. "
            f"For example, `{_call(spec.name, example[0])}` returns `{example[1]!r}`.")
    return {
        "prompt": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        "tests": [_assert(spec.name, test) for test in tests],
        "entry_point": spec.name,
        "reference_solution": spec.reference,
        "family": family,
    }


def draw_rows(families: dict, per_family: int | None, total: int | None, rng: random.Random,
              taken_prompts: set[str], taken_tests: set[str] | None = None, tries: int = 50) -> list[dict]:
    """Rows drawn family by family in turn: ``per_family`` of each, or ``total`` in all. A row whose prompt is in
    ``taken_prompts`` (which grows), or that shares a test line with ``taken_tests`` when given, is drawn again; a
    family that gives no such row in ``tries`` draws is passed over for that turn (with ``total``: factorial's few
    inputs are soon all in the training file)."""
    names = list(families)
    wanted = total if total is not None else per_family * len(names)
    rows: list[dict] = []
    turn = 0
    while len(rows) < wanted:
        family = names[turn % len(names)]
        turn += 1
        for _ in range(tries if total is not None else 10**6):
            row = make_row(family, families[family](rng), rng)
            if row is None or row["prompt"][1]["content"] in taken_prompts:
                continue
            if taken_tests is not None and taken_tests & set(row["tests"]):
                continue
            taken_prompts.add(row["prompt"][1]["content"])
            rows.append(row)
            break
    return rows


def make_splits(seed: int, per_family: int = 15, num_heldout: int = 50) -> dict[str, list[dict]]:
    """``{"train", "heldout_instances", "heldout_families"}`` rows drawn with ``random.Random(seed)``."""
    rng = random.Random(seed)
    prompts: set[str] = set()
    train = draw_rows(TRAIN_FAMILIES, per_family, None, rng, prompts)
    train_tests = {test for row in train for test in row["tests"]}
    instances = draw_rows(TRAIN_FAMILIES, None, num_heldout, rng, prompts, train_tests)
    families = draw_rows(HELDOUT_FAMILIES, None, num_heldout, rng, prompts)
    return {"train": train, "heldout_instances": instances, "heldout_families": families}


def write_jsonl(rows: list[dict], path: Path) -> None:
    """Write ``rows`` one JSON object a line (UTF-8, ``\\n`` line ends)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as f:
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def degenerate_programs(row: dict) -> dict[str, str]:
    """The degenerate programs of :data:`DEGENERATE_PROGRAMS` for ``row``'s entry point, plus a module that only
    prints the prompt's example answer."""
    reference = row["reference_solution"].replace(f"def {row['entry_point']}(", "def _reference(", 1)
    programs = {label: text.format(name=row["entry_point"], reference=reference)
                for label, text in DEGENERATE_PROGRAMS.items()}
    example = row["prompt"][1]["content"].rsplit("returns `", 1)[1].rstrip("`.")
    programs["print at top level"] = f"print({example})\n"
    return programs


def sandbox_failures(rows: list[dict], max_workers: int | None = None) -> list[str]:
    """Run each row's reference and degenerate programs through ``code_tests`` (the product's sandbox path);
    one line per row where the reference scores below 1.0 or a degenerate program above 1/3."""
    sys.path.insert(0, str(EXAMPLES_DIR.parent))
    from grpo_core.rewards.code.correctness import CodeTestsReward

    reward = CodeTestsReward(timeout_s=10.0, max_workers=max_workers)
    completions, columns, labels = [], {"tests": [], "entry_point": []}, []
    for index, row in enumerate(rows):
        programs = {"reference": row["reference_solution"], **degenerate_programs(row)}
        for label, code in programs.items():
            completions.append(f"```python\n{code}```")
            columns["tests"].append(row["tests"])
            columns["entry_point"].append(row["entry_point"])
            labels.append((index, label))
    scores = reward(completions, **columns)
    failures = []
    for (index, label), score in zip(labels, scores, strict=True):
        bad = score is None or (score < 1.0 if label == "reference" else score > MAX_DEGENERATE_SHARE + 1e-9)
        if bad:
            failures.append(f"row {index} ({rows[index]['family']}): {label} scores {score}")
    return failures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--per-family", type=int, default=15, help="training instances per family")
    parser.add_argument("--heldout", type=int, default=50, help="rows in each held-out file")
    parser.add_argument("--seed", type=int, default=0, help="random seed")
    parser.add_argument("--out-dir", type=Path, default=EXAMPLES_DIR, help="folder for code_train.jsonl and heldout/")
    parser.add_argument("--check", action="store_true", help="also run every row through the sandbox")
    args = parser.parse_args()
    splits = make_splits(args.seed, args.per_family, args.heldout)
    paths = {
        "train": args.out_dir / TRAIN_PATH.name,
        "heldout_instances": args.out_dir / "heldout" / HELDOUT_INSTANCES_PATH.name,
        "heldout_families": args.out_dir / "heldout" / HELDOUT_FAMILIES_PATH.name,
    }
    for split, rows in splits.items():
        write_jsonl(rows, paths[split])
        print(f"wrote {paths[split]} ({len(rows)} rows)")
    if args.check:
        failures = [f"{split} {line}" for split, rows in splits.items() for line in sandbox_failures(rows)]
        print("\n".join(failures) or "check: every reference passes, no degenerate program scores above 1/3")
        sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
