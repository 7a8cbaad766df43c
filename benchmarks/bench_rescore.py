"""How long the reward workbench takes to re-score a run's recorded completions, end to end.

End to end means what a click on "Re-score" costs: reading the groups and the dataset rows from a SQLite store,
the child process (start-up, importing the rules, scoring), TRL's advantages and the comparison per step, and
storing the rescoring (:func:`grpo_core.rescore.job.rescore_run`). Two workloads:

* text rules (``numeric_answer``, ``format_regex`` gated on it, ``length``, ``repetition``) on ``--completions``
  recorded completions (groups of 8), in one process (text rules are not spread over processes);
* ``code_tests`` (each completion run against 3 asserts in the sandbox) on ``--code-completions`` completions, with
  one process allowed and with one per core (``os.cpu_count()``); either way a group's completions run in parallel
  sandboxes, one per core (:func:`grpo_core.sandbox.box.run_many`), and processes are added only for the cores a
  group leaves idle.

What it leaves out: a store on PostgreSQL, a dashboard busy serving pages, the browser's drawing of the result.

Usage: ``python benchmarks/bench_rescore.py [--completions 10000] [--code-completions 64] [--repeats 3]``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_core.rescore.job import rescore_run  # noqa: E402
from grpo_core.rescore.request import parse_request  # noqa: E402
from grpo_core.run_config import RunConfig  # noqa: E402
from storage import CompletionRecord, GroupRecord, RunStatus, Store, sqlite_url  # noqa: E402

G = 8
TEXT_RULES = [
    {"rule": "numeric_answer"},
    {"rule": "format_regex", "weight": 0.5, "params": {"pattern": r"<answer>.*</answer>"},
     "gate": {"rule": "numeric_answer", "min": 1.0}},
    {"rule": "length", "weight": 0.1, "params": {"max_tokens": 64}},
    {"rule": "repetition", "weight": 0.1},
]
CODE_RULES = [{"rule": "code_tests", "params": {"timeout_s": 5}}]


def _seed(store: Store, folder: Path, completions: int, code: bool) -> int:
    rows = []
    for i in range(64):
        row = {"prompt": f"What is {i} + {i}?", "answer": str(2 * i)}
        if code:
            row = {"prompt": f"Write add{i}(a, b).", "tests": [f"assert add{i}(1, 2) == 3", f"assert add{i}(0, 0) == 0",
                                                               f"assert add{i}(-1, 1) == 0"]}
        rows.append(row)
    path = folder / ("code.jsonl" if code else "text.jsonl")
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    config = RunConfig.model_validate({"name": "bench", "model": "/m", "dataset_path": str(path),
                                       "rewards": [{"rule": "numeric_answer"}]}).model_dump(mode="json")
    run = store.create_run(name="bench", config=config, dataset_id=None, max_steps=1)
    store.finish_run(run.id, RunStatus.COMPLETED)
    groups_per_step = 16
    num_groups = completions // G
    for step_start in range(0, num_groups, groups_per_step):
        groups = []
        for g in range(step_start, min(step_start + groups_per_step, num_groups)):
            i = g % 64
            if code:
                texts = [f"def add{i}(a, b):\n    return a + b" if k % 2 else f"def add{i}(a, b):\n    return a - b"
                         for k in range(G)]
            else:
                texts = [f"Let me think step by step about {i} plus {i}. " * (k % 4 + 1)
                         + (f"<answer>{2 * i + k % 3}</answer>" if k % 2 else f"The answer is {2 * i}.")
                         for k in range(G)]
            groups.append(GroupRecord(step=step_start // groups_per_step + 1, row_index=i, prompt=rows[i]["prompt"],
                                      completions=[CompletionRecord(index=k, text=t, rewards={"numeric_answer": 1.0},
                                                                    total_reward=1.0, advantage=0.0)
                                                   for k, t in enumerate(texts)]))
        store.record_groups(run.id, step_start // groups_per_step + 1, groups)
    return run.id


def _time(store: Store, run_id: int, rules, workers: int, repeats: int, workdir: Path) -> tuple[float, dict]:
    times, result = [], {}
    for _ in range(repeats):
        start = time.perf_counter()
        result = rescore_run(store, parse_request({"run_id": run_id, "rewards": rules}), workdir=workdir,
                             workers=workers)
        times.append(time.perf_counter() - start)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--completions", type=int, default=10_000)
    parser.add_argument("--code-completions", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    cores = os.cpu_count() or 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        store = Store(sqlite_url(folder / "bench.db"))
        text_run = _seed(store, folder, args.completions, code=False)
        seconds, result = _time(store, text_run, TEXT_RULES, 1, args.repeats, folder / "work")
        rows.append(("text rules (4, one gated)", result["num_completions"], 1, seconds))
        code_run = _seed(store, folder, args.code_completions, code=True)
        for workers in sorted({1, cores}):
            seconds, result = _time(store, code_run, CODE_RULES, workers, args.repeats, folder / "work")
            rows.append(("code_tests (sandbox)", result["num_completions"], workers, seconds))
        store.close()
    print(f"{cores} cores; median of {args.repeats}; end to end (store read, child, advantages, comparison, store "
          "write)")
    print(f"{'workload':<28} {'completions':>11} {'processes':>9} {'seconds':>8} {'completions/s':>13}")
    for name, n, workers, seconds in rows:
        print(f"{name:<28} {n:>11} {workers:>9} {seconds:>8.2f} {n / seconds:>13.0f}")


if __name__ == "__main__":
    main()
