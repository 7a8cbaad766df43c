"""How the store's UI queries scale: a synthetic long run in SQLite, then the queries the pages make, timed.

Generates one run of ``--steps`` steps (default 20,000) × ``--metrics`` metric keys (default 40, TRL's names first)
and ``--groups`` groups (default 250,000) × ``--group-size`` completions (default 4, so 1,000,000 completions),
spread evenly over the steps, with ``--prompts`` distinct dataset rows (default 400). Rows are bulk-inserted with
SQLAlchemy core ``executemany`` into a fresh SQLite store in a temporary folder (created by :class:`storage.Store`,
so with the real tables and indexes). Then each query is run ``--reps`` times (default 30; fewer, at least 5, for a
query past ``--budget`` seconds) on random steps/prompts (fixed seed) and its median and 95th percentile reported
in milliseconds, against a goal of 100 ms:

* chart refresh: ``metrics_since(run, last_step - 10)`` (what a page polling every 2 s asks for),
* full chart: ``metrics_overview(run, <chart keys>, rewards/%/mean)`` (a page opening the run: at most ~1,000
  steps per key), beside the reference of every point of 8 keys (``metrics_since``),
* group page: ``groups_at(run, step)`` (the Inspect tab),
* prompt across steps: ``groups_for_prompt(run, row_index)``,
* candidates, not (yet) what the pages do: the prompt view limited to its first 50 groups (a page); for the full
  chart the same points as plain tuples ordered by key then step (a core select, no ORM objects or dataclasses,
  read from the covering index ``ix_metrics_run_key_step``), and that downsampled to at most
  ``--max-chart-points`` steps per key (every n-th step).

What it leaves out: PostgreSQL, a writer training at the same time (WAL lets readers proceed), Gradio's own
serialisation of the result, and the OS page cache being cold (the store was just written, so it is warm).

Usage: ``python benchmarks/bench_store_scale.py [--steps 20000] [--groups 250000] [--reps 30]``
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert, select, text  # noqa: E402

from app.charts import CHART_KEYS as _CHART_KEYS  # noqa: E402
from storage import Store, sqlite_url  # noqa: E402
from storage.models import CompletionRow, GroupRow, MetricRow  # noqa: E402

CHART_KEYS = list(_CHART_KEYS)  # what the Runs tab draws
EXTRA_KEYS = ["rewards/numeric_answer/mean", "rewards/numeric_answer/std", "rewards/format_regex/mean",
              "rewards/format_regex/std", "grad_norm", "learning_rate", "num_tokens", "step_time", "epoch"]
RULES = ["numeric_answer", "format_regex", "length"]
WORDS = "the answer is 42 so we add seven and three then subtract one to get nine".split()
GOAL_MS = 100.0
CHUNK = 50_000


def metric_keys(count: int) -> list[str]:
    """``count`` metric names: the chart's 8, then TRL's other names, then ``extra/<n>``."""
    keys = CHART_KEYS + EXTRA_KEYS
    keys += [f"extra/{i}" for i in range(max(0, count - len(keys)))]
    return keys[:count]


def _insert(store: Store, table, rows: list[dict]) -> None:
    with store.engine.begin() as conn:
        conn.execute(insert(table), rows)


def generate(store: Store, args: argparse.Namespace) -> int:
    """Create the run and bulk-insert its metrics, groups and completions; returns the run id."""
    rng = random.Random(0)
    run = store.create_run(name="scale", config={"max_steps": args.steps}, dataset_id=None, max_steps=args.steps)
    keys = metric_keys(args.metrics)
    batch: list[dict] = []
    for step in range(1, args.steps + 1):
        wall = 1.7e9 + step
        for key in keys:
            batch.append({"run_id": run.id, "step": step, "key": key, "value": rng.random(), "wall_time": wall})
        if len(batch) >= CHUNK:
            _insert(store, MetricRow.__table__, batch)
            batch = []
    if batch:
        _insert(store, MetricRow.__table__, batch)

    groups: list[dict] = []
    completions: list[dict] = []
    for g in range(args.groups):
        group_id = g + 1
        step = g * args.steps // args.groups + 1
        row_index = rng.randrange(args.prompts)
        groups.append({"id": group_id, "run_id": run.id, "step": step, "row_index": row_index,
                       "prompt": f"system: reply with a number\nuser: What is {row_index} + 7?",
                       "extra": {"answer": str(row_index + 7)}})
        for index in range(args.group_size):
            rewards = {name: rng.choice([0.0, 0.5, 1.0]) for name in RULES}
            completions.append({"group_id": group_id, "index": index,
                                "text": " ".join(rng.choices(WORDS, k=16)), "rewards": rewards,
                                "total_reward": sum(rewards.values()), "advantage": rng.gauss(0, 1),
                                "num_tokens": rng.randrange(4, 64), "truncated": rng.random() < 0.1})
        if len(completions) >= CHUNK:
            _insert(store, GroupRow.__table__, groups)
            _insert(store, CompletionRow.__table__, completions)
            groups, completions = [], []
    if groups:
        _insert(store, GroupRow.__table__, groups)
        _insert(store, CompletionRow.__table__, completions)
    store.update_run(run.id, current_step=args.steps)
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE"))
    return run.id


def chart_points_columns(store: Store, run_id: int, keys: list[str], stride: int = 1) -> list[tuple]:
    """Candidate: the full chart's points as plain tuples (no ORM objects), every ``stride``-th step only, ordered
    by key then step, the order of the covering index ``ix_metrics_run_key_step`` (no sort, no table lookups)."""
    query = select(MetricRow.step, MetricRow.key, MetricRow.value, MetricRow.wall_time).where(
        MetricRow.run_id == run_id, MetricRow.key.in_(keys)
    )
    if stride > 1:
        query = query.where(MetricRow.step % stride == 0)
    with store.engine.connect() as conn:
        return conn.execute(query.order_by(MetricRow.key, MetricRow.step)).all()


def timed(func: Callable[[], object], reps: int, budget_s: float = 30.0) -> tuple[list[float], int]:
    """Run ``func`` ``reps`` times after one warm-up (fewer, but at least 5, once ``budget_s`` seconds are spent);
    returns the times in ms and the size of the last result."""
    func()
    times, size = [], 0
    deadline = time.perf_counter() + budget_s
    for _ in range(reps):
        if len(times) >= 5 and time.perf_counter() > deadline:
            break
        start = time.perf_counter()
        result = func()
        times.append((time.perf_counter() - start) * 1000)
        size = len(result) if hasattr(result, "__len__") else 0
    return times, size


def p95(values: list[float]) -> float:
    """The 95th percentile (linear interpolation between the closest ranks)."""
    ordered = sorted(values)
    position = 0.95 * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=20_000, help="logged steps")
    parser.add_argument("--metrics", type=int, default=40, help="metric keys per step")
    parser.add_argument("--groups", type=int, default=250_000, help="recorded groups")
    parser.add_argument("--group-size", type=int, default=4, help="completions per group (G)")
    parser.add_argument("--prompts", type=int, default=400, help="distinct dataset rows")
    parser.add_argument("--reps", type=int, default=30, help="timed repetitions per query")
    parser.add_argument("--max-chart-points", type=int, default=1000,
                        help="steps per key of the downsampled full-chart candidate")
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds per query after which repetitions stop (at least 5 are run)")
    parser.add_argument("--keep", help="write the store here instead of a temporary folder (kept)")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        path = Path(args.keep or tmp) / "grpo.db"
        store = Store(sqlite_url(path))
        started = time.perf_counter()
        run_id = generate(store, args)
        seconds = time.perf_counter() - started
        size_mb = sum(p.stat().st_size for p in path.parent.glob("grpo.db*")) / 1e6
        print(f"generated {args.steps:,} steps x {args.metrics} metrics = {args.steps * args.metrics:,} points, "
              f"{args.groups:,} groups x {args.group_size} = {args.groups * args.group_size:,} completions "
              f"in {seconds:.0f} s; store {size_mb:,.0f} MB")

        stride = max(1, -(-args.steps // args.max_chart_points))
        rng = random.Random(1)
        prompt_query = store.groups_for_prompt
        prompt_label = "Store.groups_for_prompt"
        queries = [
            ("chart refresh: metrics_since(last 10 steps)",
             lambda: store.metrics_since(run_id, args.steps - 10)),
            ("full chart as the Runs tab opens it: metrics_overview",
             lambda: store.metrics_overview(run_id, keys=CHART_KEYS, key_patterns=["rewards/%/mean"])),
            ("reference: every point, metrics_since(8 keys)",
             lambda: store.metrics_since(run_id, keys=CHART_KEYS)),
            ("group page: groups_at(one step)",
             lambda: store.groups_at(run_id, rng.randrange(1, args.steps + 1))),
            (f"prompt across steps: {prompt_label}",
             lambda: prompt_query(run_id, rng.randrange(args.prompts))),
            ("candidate: prompt across steps, first 50 groups",
             lambda: prompt_query(run_id, rng.randrange(args.prompts), limit=50)),
            ("candidate: full chart as tuples by key, step",
             lambda: chart_points_columns(store, run_id, CHART_KEYS)),
            (f"candidate: full chart as tuples, step % {stride} == 0",
             lambda: chart_points_columns(store, run_id, CHART_KEYS, stride)),
        ]
        rows = []
        for label, func in queries:
            times, size = timed(func, args.reps, args.budget)
            rows.append((label, size, statistics.median(times), p95(times), len(times)))
        store.close()

    width = max(len(r[0]) for r in rows)
    print(f"\n{'query'.ljust(width)}  {'rows':>8}  {'reps':>4}  {'median ms':>9}  {'p95 ms':>8}  "
          f"goal < {GOAL_MS:.0f} ms")
    for label, size, median, high, reps in rows:
        verdict = "ok" if high < GOAL_MS else "OVER"
        print(f"{label.ljust(width)}  {size:>8,}  {reps:>4}  {median:>9.1f}  {high:>8.1f}  {verdict}")
    print(json.dumps({r[0]: {"rows": r[1], "reps": r[4], "median_ms": round(r[2], 2), "p95_ms": round(r[3], 2)}
                      for r in rows}))


if __name__ == "__main__":
    main()
