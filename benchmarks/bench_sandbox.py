"""Cost of one sandboxed execution before and after the namespace sandbox, side by side in one run.

Two workloads, each run ``--n`` times per configuration (alternating, serially, median reported):

* ``print(1)``: interpreter start-up plus the sandbox's own set-up and clean-up;
* ``code_tests``: one completion against 4 assert tests, the way the reward rule runs it.

*Before* is the sandbox of earlier versions: no namespaces (the ``uid`` mode: a pool uid as root, else the host's
user); *after* is the host's mode (:func:`~grpo_core.sandbox.box.sandbox_info`: ``bwrap`` where bubblewrap works).
Both run the same test program, the real two-process harness (:mod:`grpo_core.rewards.code.harness`, built by
:func:`~grpo_core.rewards.code.program.build_test_program`), so the difference is the sandbox's own. Then the
throughput of a batch of ``code_tests`` with one worker and with the thread pool, in the host's mode.

What it leaves out: the cost of forking a large parent (a trainer holding GBs of memory forks more slowly than this
small script), and contention with a training process for the same CPU cores.

Usage: ``python benchmarks/bench_sandbox.py [--n 30] [--batch 16]``
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from grpo_core.rewards.code.correctness import CodeTestsReward  # noqa: E402
from grpo_core.rewards.code.program import build_test_program, parse_test_output  # noqa: E402
from grpo_core.rewards.code.runtime import CodeRuntimeReward  # noqa: E402
from grpo_core.rewards.code.units import split_tests  # noqa: E402
from grpo_core.sandbox.box import run_python, sandbox_info  # noqa: E402

TESTS = ["assert f(1) == 2", "assert f(2) == 3", "assert f(10) == 11", "assert f(-1) == 0"]
SOLUTIONS = [
    "def f(x):\n    return x + 1\n",
    "def f(x):\n    return x + 1 if x > 0 else 0\n",
    "def f(x):\n    return sum([1, x])\n",
    "def f(x):\n    return x\n",
]

def time_execution(program: str, isolation: str | None, nonce: str | None, stdin: bytes | None = None) -> float:
    """Seconds for one ``run_python`` call, as seen by the caller; checks the program really ran."""
    start = time.perf_counter()
    result = run_python(program, isolation=isolation, stdin=stdin)
    elapsed = time.perf_counter() - start
    if nonce is None:
        assert result.ok and result.stdout == "1\n", result
    else:
        assert parse_test_output(result, nonce)[0] == "passed", result
    return elapsed


def per_execution(n: int) -> list[tuple[str, float, float]]:
    """``(workload, before median s, after median s)`` rows."""
    plain = "uid" if sandbox_info().switches_user else "none"
    units = split_tests(TESTS, None)
    times: dict[tuple[str, str], list[float]] = {}
    for i in range(n):
        code = SOLUTIONS[i % len(SOLUTIONS)]
        nonce = secrets.token_hex(16)
        program = build_test_program(code, units, nonce, repeats=0)
        runs = [
            ("print(1)", "before", "print(1)", plain, None, None),
            ("print(1)", "after", "print(1)", None, None, None),
            ("code_tests", "before", program.script, plain, nonce, program.stdin),
            ("code_tests", "after", program.script, None, nonce, program.stdin),
        ]
        for workload, when, script, isolation, check, stdin in runs:
            times.setdefault((workload, when), []).append(time_execution(script, isolation, check, stdin))
    return [
        (w, statistics.median(times[(w, "before")]), statistics.median(times[(w, "after")]))
        for w in ("print(1)", "code_tests")
    ]


def throughput(batch_size: int, rounds: int = 3) -> dict[str, float]:
    """Median seconds per batch of ``code_tests`` with one worker (``serial``) and the thread pool (``pooled``)."""
    batch = [f"```python\n{SOLUTIONS[i % len(SOLUTIONS)]}```" for i in range(batch_size)]
    modes = {"serial": CodeTestsReward(max_workers=1), "pooled": CodeTestsReward(max_workers=None)}
    times: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(rounds):
        for name, rule in modes.items():
            start = time.perf_counter()
            rewards = rule(batch, tests=[TESTS] * len(batch))
            times[name].append(time.perf_counter() - start)
            assert all(r is not None for r in rewards), rewards
    return {name: statistics.median(values) for name, values in times.items()}


STDIO_TESTS = [{"input": f"{a} {b}\n", "output": f"{a + b}\n"} for a, b in ((1, 2), (5, -3), (10, 10), (0, 7))]
STDIO_SOLUTION = "a, b = map(int, input().split())\nprint(a + b)\n"


def rule_costs(batch_size: int, rounds: int = 3) -> list[tuple[str, float]]:
    """Median seconds per pooled batch of each code rule: ``code_tests`` on asserts and on stdin/stdout tests (one
    process per test), ``code_runtime`` (3 judged and timed rounds, a given reference time)."""
    asserts = [f"```python\n{SOLUTIONS[i % len(SOLUTIONS)]}```" for i in range(batch_size)]
    stdio = [f"```python\n{STDIO_SOLUTION}```"] * batch_size
    rows = [
        ("code_tests, 4 asserts", lambda: CodeTestsReward()(asserts, tests=[TESTS] * batch_size)),
        ("code_tests, 4 stdin/stdout tests", lambda: CodeTestsReward()(stdio, tests=[STDIO_TESTS] * batch_size)),
        ("code_runtime, 4 asserts, repeats 3", lambda: CodeRuntimeReward(repeats=3)(
            asserts, tests=[TESTS] * batch_size, reference_runtime_s=[0.001] * batch_size)),
    ]
    out = []
    for name, call in rows:
        times = []
        for _ in range(rounds):
            start = time.perf_counter()
            rewards = call()
            times.append(time.perf_counter() - start)
            assert all(r is not None for r in rewards), (name, rewards)
        out.append((name, statistics.median(times)))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=30, help="executions per workload and configuration (median)")
    parser.add_argument("--batch", type=int, default=16, help="completions per code_tests batch (throughput)")
    args = parser.parse_args()

    info = sandbox_info()  # resolves the set-up (probes) before anything is timed
    time_execution("print(1)", None, None)
    plain = "uid" if info.switches_user else "none"
    print(f"host: {os.cpu_count()} CPUs; child interpreter {info.interpreter}; own uid per child: {info.switches_user}")
    print(f"before: `{plain}` mode; after: `{info.mode.value}` mode; both with the two-process harness")
    print()
    print(f"| workload (median of {args.n}, serial) | before, ms | after, ms | after / before |")
    print("|---|---|---|---|")
    for workload, before, after in per_execution(args.n):
        print(f"| {workload} | {before * 1000:.1f} | {after * 1000:.1f} | {after / before:.2f}x |")
    print()
    medians = throughput(args.batch)
    workers = os.cpu_count() or 1
    print(f"code_tests throughput in the `{info.mode.value}` mode, {args.batch} completions x {len(TESTS)} tests:")
    print()
    print("| mode   | workers | seconds / batch | completions / s |")
    print("|--------|---------|-----------------|-----------------|")
    for name, seconds in medians.items():
        count = 1 if name == "serial" else workers
        print(f"| {name:<6} | {count:>7} | {seconds:>15.3f} | {args.batch / seconds:>15.1f} |")
    print()
    print(f"Each code rule on a pooled batch of {args.batch} completions (median of 3):")
    print()
    print("| rule | seconds / batch |")
    print("|---|---|")
    for name, seconds in rule_costs(args.batch):
        print(f"| {name} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
