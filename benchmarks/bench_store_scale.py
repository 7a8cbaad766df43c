"""How the store's UI queries scale: a synthetic long run in SQLite or PostgreSQL, then the queries the pages make,
timed.

Generates one run of ``--steps`` steps (default 20,000) × ``--metrics`` metric keys (default 40, TRL's names first)
and ``--groups`` groups (default 250,000) × ``--group-size`` completions (default 4, so 1,000,000 completions),
spread evenly over the steps, with ``--prompts`` distinct dataset rows (default 400). The metrics go through
``Store.record_metric_steps`` (the function the recorder's ``Store.record_metrics`` calls), 1,000 steps a call, so
the downsampled history is filled as a training run fills it; groups and completions are bulk-inserted with
SQLAlchemy core ``executemany``. The store is a fresh SQLite file in a temporary folder, or ``--db URL`` (an empty
PostgreSQL database, e.g. ``postgresql+psycopg://grpo:grpo@127.0.0.1:5432/bench``), created by
:class:`storage.Store`, so with the real tables and indexes; ``--reuse`` measures a run generated before. Then each
query is run ``--reps`` times (default 30; fewer, at least 5, for a query past ``--budget`` seconds) on random
steps/prompts (fixed seed) and its median and 95th percentile reported in milliseconds, against a goal of 100 ms:

* chart refresh: ``metrics_since(run, last_step - 10)`` (what a page polling every 2 s asks for),
* first chart load as the Runs tab makes it: ``metric_summary(run, <chart keys>, rewards/%/mean)`` (the
  downsampled history: at most 1,000 buckets per key whatever the run's length),
* the previous first load, ``metrics_overview`` (every n-th step: it still scans every step of each key), and the
  reference of every point of 8 keys (``metrics_since``),
* group page: ``groups_at(run, step)`` (the Inspect tab),
* prompt across steps: ``groups_for_prompt(run, row_index)``,
* candidates, not (yet) what the pages do: the prompt view limited to its first 50 groups (a page); for the full
  chart the same points as plain tuples ordered by key then step (a core select, no ORM objects or dataclasses,
  read from the covering index ``ix_metrics_run_key_step``), and that downsampled to at most
  ``--max-chart-points`` steps per key (every n-th step).

The write path: ``--write-steps`` (default 200) more steps of all keys recorded with ``Store.record_metrics`` at the
end of the long run and on a fresh run, in ms per step, beside the same rows written as before the history existed
(delete + insert of the raw points only).

What it leaves out: a writer training at the same time (WAL lets readers proceed), Gradio's own serialisation of
the result, and the OS page cache being cold (the store was just written, so it is warm).

Usage: ``python benchmarks/bench_store_scale.py [--steps 20000] [--groups 250000] [--reps 30] [--db URL]``
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

from sqlalchemy import delete, func, insert, select, text  # noqa: E402

from app.charts import CHART_KEYS as _CHART_KEYS  # noqa: E402
from storage import MetricSummary, Store, sqlite_url  # noqa: E402
from storage.models import CompletionRow, GroupRow, MetricRow, RunRow  # noqa: E402

CHART_KEYS = list(_CHART_KEYS)  # what the Runs tab draws
EXTRA_KEYS = ["rewards/numeric_answer/mean", "rewards/numeric_answer/std", "rewards/format_regex/mean",
              "rewards/format_regex/std", "grad_norm", "learning_rate", "num_tokens", "step_time", "epoch"]
RULES = ["numeric_answer", "format_regex", "length"]
WORDS = "the answer is 42 so we add seven and three then subtract one to get nine".split()
GOAL_MS = 100.0
CHUNK = 50_000
STEPS_PER_CALL = 1000


def metric_keys(count: int) -> list[str]:
    """``count`` metric names: the chart's 8, then TRL's other names, then ``extra/<n>``."""
    keys = CHART_KEYS + EXTRA_KEYS
    keys += [f"extra/{i}" for i in range(max(0, count - len(keys)))]
    return keys[:count]


def _insert(store: Store, table, rows: list[dict]) -> None:
    with store.engine.begin() as conn:
        conn.execute(insert(table), rows)


def generate(store: Store, args: argparse.Namespace) -> int:
    """Create the run and fill it with :func:`generate_metrics` and :func:`generate_groups`; returns the run id."""
    run = store.create_run(name="scale", config={"max_steps": args.steps}, dataset_id=None, max_steps=args.steps)
    generate_metrics(store, run.id, args)
    generate_groups(store, run.id, args)
    finish(store, run.id, args)
    return run.id


def generate_metrics(store: Store, run_id: int, args: argparse.Namespace) -> None:
    """Record ``args.steps`` steps of ``args.metrics`` keys through ``Store.record_metric_steps`` (the recorder's
    path: raw points and the downsampled history), :data:`STEPS_PER_CALL` steps a transaction."""
    rng = random.Random(0)
    keys = metric_keys(args.metrics)
    steps: list[tuple[int, dict, float]] = []
    for step in range(1, args.steps + 1):
        steps.append((step, {key: rng.random() for key in keys}, 1.7e9 + step))
        if len(steps) >= STEPS_PER_CALL:
            store.record_metric_steps(run_id, steps)
            steps = []
    if steps:
        store.record_metric_steps(run_id, steps)


def generate_groups(store: Store, run_id: int, args: argparse.Namespace) -> None:
    """Bulk-insert ``args.groups`` groups of ``args.group_size`` completions spread evenly over the steps (after
    those already there: an interrupted generation goes on)."""
    rng = random.Random(1)
    groups: list[dict] = []
    completions: list[dict] = []
    with store.engine.connect() as conn:
        done = conn.execute(select(func.max(GroupRow.id))).scalar() or 0
    for g in range(done, args.groups):
        group_id = g + 1
        step = g * args.steps // args.groups + 1
        row_index = rng.randrange(args.prompts)
        groups.append({"id": group_id, "run_id": run_id, "step": step, "row_index": row_index,
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


def finish(store: Store, run_id: int, args: argparse.Namespace) -> None:
    """Set the run's step and refresh the planner's statistics (``ANALYZE``)."""
    store.update_run(run_id, current_step=max(args.steps, store.get_run(run_id).current_step))
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE"))


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


def timed(func: Callable[[], object], reps: int, budget_s: float = 30.0) -> tuple[list[float], int, list[float]]:
    """Run ``func`` ``reps`` times after one warm-up (fewer, but at least 5, once ``budget_s`` seconds are spent);
    returns the wall times in ms, the size of the last result (points: a ``MetricSummary`` counts its buckets) and
    this process's CPU times in ms (on a busy machine, closer to what the query costs: the wall time also counts
    waiting for a core; PostgreSQL's own work is not in it)."""
    func()
    times, size, cpu = [], 0, []
    deadline = time.perf_counter() + budget_s
    for _ in range(reps):
        if len(times) >= 5 and time.perf_counter() > deadline:
            break
        start, start_cpu = time.perf_counter(), time.process_time()
        result = func()
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((time.process_time() - start_cpu) * 1000)
        size = sum(len(r) for r in result) if isinstance(result, list) and result and isinstance(
            result[0], MetricSummary) else len(result) if hasattr(result, "__len__") else 0
    return times, size, cpu


def p95(values: list[float]) -> float:
    """The 95th percentile (linear interpolation between the closest ranks)."""
    ordered = sorted(values)
    position = 0.95 * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def record_raw_only(store: Store, run_id: int, step: int, values: dict[str, float], wall_time: float) -> None:
    """Reference for the write path: ``record_metrics`` as it was before the downsampled history (delete the step's
    keys, insert the raw points, move the run's step), in one transaction."""
    with store.engine.begin() as conn:
        conn.execute(delete(MetricRow).where(MetricRow.run_id == run_id, MetricRow.step == step,
                                             MetricRow.key.in_(list(values))))
        conn.execute(insert(MetricRow), [{"run_id": run_id, "step": step, "key": k, "value": v,
                                          "wall_time": wall_time} for k, v in values.items()])
        conn.execute(RunRow.__table__.update().where(RunRow.id == run_id, RunRow.current_step < step)
                     .values(current_step=step))


def write_costs(store: Store, run_id: int, first_step: int, args: argparse.Namespace) -> list[tuple]:
    """ms per step of ``record_metrics`` (all keys) at the end of the long run and on a fresh run, and of the raw
    points only; rows as the query table's. The long run's new steps are left in the store (they come after the
    ones the queries read)."""
    keys = metric_keys(args.metrics)
    rng = random.Random(2)
    fresh = store.create_run(name="scale-write", config={}, dataset_id=None, max_steps=args.write_steps).id
    raw = store.create_run(name="scale-raw", config={}, dataset_id=None, max_steps=args.write_steps).id
    out = []
    for label, run, start, write in (
        (f"write: record_metrics, steps after {first_step - 1:,}", run_id, first_step, store.record_metrics),
        ("write: record_metrics, fresh run", fresh, 1, store.record_metrics),
        ("write: raw points only (before the history), fresh run", raw, 1,
         lambda r, step, values, wall: record_raw_only(store, r, step, values, wall)),
    ):
        times, cpu = [], []
        for step in range(start, start + args.write_steps):
            values = {key: rng.random() for key in keys}
            began, began_cpu = time.perf_counter(), time.process_time()
            write(run, step, values, 1.7e9 + step)
            times.append((time.perf_counter() - began) * 1000)
            cpu.append((time.process_time() - began_cpu) * 1000)
        out.append((label, args.metrics, statistics.median(times), p95(times), len(times), statistics.median(cpu)))
    store.delete_run(fresh)
    store.delete_run(raw)
    return out


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
    parser.add_argument("--keep", help="write the SQLite store here instead of a temporary folder (kept)")
    parser.add_argument("--db", help="a store URL instead of a SQLite file (an empty database: PostgreSQL)")
    parser.add_argument("--reuse", action="store_true",
                        help="measure the run named 'scale' already in --db / --keep instead of generating one")
    parser.add_argument("--write-steps", type=int, default=200, help="steps recorded to time the write path")
    parser.add_argument("--part", choices=["metrics", "groups"],
                        help="generate only this part into the run named 'scale' of --db / --keep (created if "
                             "missing), then stop: two processes can fill one store in parallel; measure with --reuse")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        path = Path(args.keep or tmp) / "grpo.db"
        store = Store(args.db or sqlite_url(path))
        backend = store.engine.dialect.name
        if args.part:
            run = next((r for r in store.list_runs() if r.name == "scale"), None)
            if run is None:
                run = store.create_run(name="scale", config={"max_steps": args.steps}, dataset_id=None,
                                       max_steps=args.steps)
            started = time.perf_counter()
            (generate_metrics if args.part == "metrics" else generate_groups)(store, run.id, args)
            print(f"generated the {args.part} of run {run.id} on {backend} in {time.perf_counter() - started:.0f} s")
            store.close()
            return
        if args.reuse:
            run = next(r for r in store.list_runs() if r.name == "scale")
            run_id, args.steps = run.id, run.max_steps
            finish(store, run_id, args)
            with store.engine.connect() as conn:
                groups, group_steps = conn.execute(select(func.count(GroupRow.id), func.max(GroupRow.step)).where(
                    GroupRow.run_id == run_id)).one()
            print(f"reusing run {run_id} on {backend}: {args.steps:,} steps, {groups:,} groups up to step "
                  f"{group_steps or 0:,}", flush=True)
        else:
            started = time.perf_counter()
            run_id = generate(store, args)
            seconds = time.perf_counter() - started
            if backend == "sqlite":
                size_mb = sum(p.stat().st_size for p in path.parent.glob("grpo.db*")) / 1e6
            else:
                with store.engine.connect() as conn:
                    size_mb = conn.execute(text("SELECT pg_database_size(current_database())")).scalar_one() / 1e6
            print(f"generated on {backend} {args.steps:,} steps x {args.metrics} metrics = "
                  f"{args.steps * args.metrics:,} points, {args.groups:,} groups x {args.group_size} = "
                  f"{args.groups * args.group_size:,} completions in {seconds:.0f} s; store {size_mb:,.0f} MB",
                  flush=True)

        if not args.reuse:
            group_steps = args.steps
        # The group page asks for steps that have groups (a generation cut short has them up to group_steps only).
        stride = max(1, -(-args.steps // args.max_chart_points))
        rng = random.Random(1)
        prompt_query = store.groups_for_prompt
        prompt_label = "Store.groups_for_prompt"
        queries = [
            ("chart refresh: metrics_since(last 10 steps)",
             lambda: store.metrics_since(run_id, args.steps - 10)),
            ("first chart load (Runs tab): metric_summary",
             lambda: store.metric_summary(run_id, keys=CHART_KEYS, key_patterns=["rewards/%/mean"])),
            ("previous first load: metrics_overview (strided)",
             lambda: store.metrics_overview(run_id, keys=CHART_KEYS, key_patterns=["rewards/%/mean"])),
            ("reference: every point, metrics_since(8 keys)",
             lambda: store.metrics_since(run_id, keys=CHART_KEYS)),
            ("group page: groups_at(one step)",
             lambda: store.groups_at(run_id, rng.randrange(1, max(1, group_steps or 0) + 1))),
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
        for label, query in queries:
            times, size, cpu = timed(query, args.reps, args.budget)
            rows.append((label, size, statistics.median(times), p95(times), len(times), statistics.median(cpu)))
            print(f"  {label}: median {rows[-1][2]:.1f} ms, p95 {rows[-1][3]:.1f} ms", flush=True)
        if args.write_steps > 0:
            last = max(args.steps, store.get_run(run_id).current_step)
            rows.extend(write_costs(store, run_id, last + 1, args))
        store.close()

    width = max(len(r[0]) for r in rows)
    print(f"\n{backend}: {'query'.ljust(width - len(backend) - 2)}  {'rows':>8}  {'reps':>4}  {'median ms':>9}  "
          f"{'p95 ms':>8}  {'cpu ms':>7}  goal < {GOAL_MS:.0f} ms")
    for label, size, median, high, reps, cpu in rows:
        verdict = "ok" if high < GOAL_MS else "OVER"
        print(f"{label.ljust(width)}  {size:>8,}  {reps:>4}  {median:>9.1f}  {high:>8.1f}  {cpu:>7.1f}  {verdict}")
    print(json.dumps({"backend": backend, **{r[0]: {"rows": r[1], "reps": r[4], "median_ms": round(r[2], 2),
                                                      "p95_ms": round(r[3], 2), "cpu_median_ms": round(r[5], 2)}
                                             for r in rows}}))


if __name__ == "__main__":
    main()
