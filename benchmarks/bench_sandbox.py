"""Throughput of the ``code_tests`` reward: serial (one sandbox child at a time) versus the thread pool.

Scores N completions (default 16), each against 4 assert tests, with ``max_workers=1`` and with the default pool
(``os.cpu_count()`` threads), alternating the two for a few rounds and reporting the median of each, side by side.
What it leaves out: the cost of forking a large parent (a trainer holding GBs of memory forks more slowly than
this small script), and contention with a training process for the same CPU cores.

Usage: ``python benchmarks/bench_sandbox.py [--n 16] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_core.rewards.code import CodeTestsReward  # noqa: E402
from grpo_core.rewards.sandbox import sandbox_info  # noqa: E402

TESTS = ["assert f(1) == 2", "assert f(2) == 3", "assert f(10) == 11", "assert f(-1) == 0"]
SOLUTIONS = [
    "def f(x):\n    return x + 1\n",
    "def f(x):\n    return x + 1 if x > 0 else 0\n",
    "def f(x):\n    return sum([1, x])\n",
    "def f(x):\n    return x\n",
]


def completions(n: int) -> list[str]:
    return [f"```python\n{SOLUTIONS[i % len(SOLUTIONS)]}```" for i in range(n)]


def time_once(rule: CodeTestsReward, batch: list[str]) -> float:
    start = time.perf_counter()
    rewards = rule(batch, tests=[TESTS] * len(batch))
    elapsed = time.perf_counter() - start
    assert all(r is not None for r in rewards), rewards
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=16, help="completions per batch")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per mode (median reported)")
    args = parser.parse_args()

    batch = completions(args.n)
    workers = os.cpu_count() or 1
    modes = {"serial": CodeTestsReward(max_workers=1), "pooled": CodeTestsReward(max_workers=None)}
    time_once(modes["pooled"], batch[:2])  # warm-up: resolves the sandbox set-up once
    times: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(args.rounds):
        for name, rule in modes.items():
            times[name].append(time_once(rule, batch))

    info = sandbox_info()
    print(f"code_tests throughput: {args.n} completions x {len(TESTS)} assert tests, {args.rounds} rounds (median)")
    print(f"host: {os.cpu_count()} CPUs; child interpreter {info.interpreter}; own uid per child: {info.switches_user}")
    print()
    print("| mode   | workers | seconds / batch | completions / s |")
    print("|--------|---------|-----------------|-----------------|")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, seconds in medians.items():
        print(f"| {name:<6} | {1 if name == 'serial' else workers:>7} | {seconds:>15.3f} | {args.n / seconds:>15.1f} |")
    print()
    print(f"pooled / serial throughput: {medians['serial'] / medians['pooled']:.2f}x")


if __name__ == "__main__":
    main()
