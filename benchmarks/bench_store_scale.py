"""How the pages' store reads scale: a synthetic long run in SQLite or PostgreSQL, then what the pages call, timed.

Generates one run of ``--steps`` steps (default 20,000) × ``--metrics`` metric keys (default 40, TRL's names first)
and ``--groups`` groups (default 250,000) × ``--group-size`` completions (default 4, so 1,000,000 completions),
spread evenly over the steps, with ``--prompts`` distinct dataset rows (default 400). The metrics go through
``Store.record_metric_steps`` (the general path of the recorder's ``Store.record_step``), 1,000 steps a call, so
the downsampled history is filled as a training run fills it; groups and completions are inserted with the DB-API's
bulk path into the real tables (``executemany`` on SQLite, ``COPY`` on PostgreSQL; the completions cycle through a
pool of a few thousand drawn ones). Generation only turns durability off on its own connections (SQLite
``synchronous=OFF`` and a 1 GB page cache, PostgreSQL ``synchronous_commit=off``): the queries are timed through a
fresh :class:`storage.Store` with the defaults. The store is a fresh SQLite file in a temporary folder (``--keep``:
a folder kept), or ``--db URL`` (an empty PostgreSQL database, e.g.
``postgresql+psycopg://grpo:grpo@127.0.0.1:5432/bench``), created by :class:`storage.Store`, so with the real
tables and indexes. ``--part metrics`` / ``--part groups`` generate one half and stop (an interrupted one goes on
where it stopped), ``--part finish`` runs ``ANALYZE``; ``--reuse`` measures a run generated before.

Each page read is then run ``--reps`` times (default 30; fewer, at least 5, for one past ``--budget`` seconds) on
random steps/dataset rows (fixed seed), through the functions the pages call (``app.tabs.*``, with the store), and
its median and 95th percentile reported in milliseconds, against a goal of 100 ms:

* Runs tab: the run list (``runs_frame``: the runs and each one's latest reward), the first chart load
  (``refresh_series`` -> ``Store.metric_summary``: at most 1,000 buckets per key), a chart refresh
  (``metrics_since`` of the last 10 steps: what a page polling every 2 s asks for), the doctor panel's first read
  (``doctor_report``: the latest 1,000 steps of the keys its checks read, where the other keys were NaN, and the
  latest groups, then the diagnosis);
* Inspect tab: the step list (``step_choices``), a group page (``groups_at``), the reward histogram with pass@G of
  the latest 200 steps (``stats_figure``, the figure built), the dataset-row list (``prompt_row_choices``), one
  prompt across steps (``history_page``): the first page of 50 groups, a page from a step in the run's second half,
  the latest page; and the former full view (``groups_for_prompt``, 500 groups) for reference;
* with ``--references``, the full chart's former read (every point of 8 keys);
* with ``--trajectories``, every completion an 8-turn, ~4,096-token agentic rollout (assistant text, tool calls with
  their arguments, tool results, the tool mask; :mod:`store_scale_trajectories` beside this script), the tool keys
  among the metrics, and the pages that draw trajectories timed too: Inspect's step view with its turns and filters,
  one prompt across steps drawn, the diff's lists and a diff, the token view, the named API's ``run_groups``.

The write path: ``--write-steps`` (default 200) more steps of all keys recorded with ``Store.record_metric_steps``
(one step a call) at the end of the long run and on a fresh run, in ms per step, beside the same rows written as
before the history existed (delete + insert of the raw points only).

The startup objects are frozen out of the garbage collector's passes (``gc.freeze()``), as in the web process
(``app.server.serve``): without it a full pass, ~100 ms at the heap that the app's imports make, lands in some reads.

What it leaves out: a writer training at the same time (WAL lets readers proceed), Gradio's own serialisation of
the result, and the OS page cache being cold (the store was just written, so it is warm).

Usage: ``python benchmarks/bench_store_scale.py [--steps 20000] [--groups 250000] [--reps 30] [--db URL]
[--trajectories]``
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import delete, event, func, insert, select, text  # noqa: E402
from store_scale_trajectories import (  # noqa: E402  (beside this script)
    TOKEN_STATS_EVERY,
    TOOL_KEYS,
    token_stats_pool,
    trajectory_pool,
    trajectory_queries,
)

from app.tabs.inspect.tab import stats_figure, step_choices  # noqa: E402
from app.tabs.inspect.tools import history_page, prompt_row_choices  # noqa: E402
from app.tabs.runs.doctor import doctor_report  # noqa: E402
from app.tabs.runs.tab import refresh_series, runs_frame  # noqa: E402
from app.views.charts import CHART_KEYS as _CHART_KEYS  # noqa: E402
from storage import MetricSummary, RunStatus, Store, sqlite_url  # noqa: E402
from storage.tables import GroupRow, MetricRow, RunRow  # noqa: E402

CHART_KEYS = list(_CHART_KEYS)  # what the Runs tab draws
EXTRA_KEYS = ["rewards/numeric_answer/mean", "rewards/numeric_answer/std", "rewards/format_regex/mean",
              "rewards/format_regex/std", "grad_norm", "learning_rate", "num_tokens", "step_time", "epoch"]
RULES = ["numeric_answer", "format_regex", "length"]
WORDS = "the answer is 42 so we add seven and three then subtract one to get nine".split()
GOAL_MS = 100.0
CHUNK = 50_000
POOL = 4099  # completions drawn once and cycled (prime: no period shared with the group size)
STEPS_PER_CALL = 1000


def metric_keys(count: int, trajectories: bool = False) -> list[str]:
    """``count`` metric names: the chart's 8, (with ``trajectories`` an agentic run's tool keys,) then TRL's other
    names, then ``extra/<n>``."""
    keys = CHART_KEYS + (TOOL_KEYS if trajectories else []) + EXTRA_KEYS
    keys += [f"extra/{i}" for i in range(max(0, count - len(keys)))]
    return keys[:count]


def generation_store(url: str) -> Store:
    """The store the generation writes through: the real tables and write methods, with the durability a bulk
    load does not need turned off on its connections only (SQLite: ``synchronous=OFF``, a 1 GB page cache and
    temporary b-trees in memory; PostgreSQL: ``synchronous_commit=off``). The queries are timed through a fresh
    :class:`Store` with the defaults."""
    store = Store(url)

    @event.listens_for(store.engine, "connect")
    def _bulk_settings(dbapi_connection, _record):
        cursor = dbapi_connection.cursor()
        if store.engine.dialect.name == "sqlite":
            cursor.execute("PRAGMA synchronous=OFF")
            cursor.execute("PRAGMA cache_size=-1000000")
            cursor.execute("PRAGMA temp_store=MEMORY")
        else:
            cursor.execute("SET synchronous_commit = off")
        cursor.close()
        if store.engine.dialect.name != "sqlite":
            dbapi_connection.commit()

    store.engine.dispose()  # the connection create_schema used had none of that
    return store


def generate(store: Store, args: argparse.Namespace) -> int:
    """Create the run and fill it with :func:`generate_metrics` and :func:`generate_groups`; returns the run id."""
    run = store.create_run(name="scale", config={"max_steps": args.steps}, dataset_id=None, max_steps=args.steps)
    generate_metrics(store, run.id, args)
    generate_groups(store, run.id, args)
    finish(store, run.id, args)
    return run.id


def generate_metrics(store: Store, run_id: int, args: argparse.Namespace) -> None:
    """Record ``args.steps`` steps of ``args.metrics`` keys through ``Store.record_metric_steps`` (the recorder's
    path: raw points and the downsampled history), :data:`STEPS_PER_CALL` steps a transaction (after the steps
    already there: an interrupted generation goes on)."""
    rng = random.Random(0)
    keys = metric_keys(args.metrics, args.trajectories)
    with store.engine.connect() as conn:
        done = conn.execute(select(func.max(MetricRow.step)).where(MetricRow.run_id == run_id)).scalar() or 0
    steps: list[tuple[int, dict, float]] = []
    for step in range(done + 1, args.steps + 1):
        steps.append((step, {key: rng.random() for key in keys}, 1.7e9 + step))
        if len(steps) >= STEPS_PER_CALL:
            store.record_metric_steps(run_id, steps)
            steps = []
    if steps:
        store.record_metric_steps(run_id, steps)


def _completion_pool(size: int = POOL) -> list[tuple]:
    """``size`` distinct completions ``(text, rewards JSON, total reward, advantage, num_tokens, truncated)``, cycled
    through by :func:`generate_groups` (drawing 10M completions one by one costs more than inserting them)."""
    rng = random.Random(1)
    pool = []
    for _ in range(size):
        rewards = {name: rng.choice([0.0, 0.5, 1.0]) for name in RULES}
        pool.append((" ".join(rng.choices(WORDS, k=16)), json.dumps(rewards), sum(rewards.values()),
                     rng.gauss(0, 1), rng.randrange(4, 64), rng.random() < 0.1))
    return pool


def generate_groups(store: Store, run_id: int, args: argparse.Namespace) -> None:
    """Insert ``args.groups`` groups of ``args.group_size`` completions spread evenly over the steps (after those
    already there: an interrupted generation goes on), with the DB-API's bulk path on the store's real tables:
    ``executemany`` on SQLite, ``COPY`` on PostgreSQL, :data:`CHUNK` completions a transaction. The completions
    cycle through a pool of :data:`POOL` drawn ones (with ``args.trajectories``, long multi-turn trajectories:
    :mod:`store_scale_trajectories`, whose every :data:`TOKEN_STATS_EVERY`-th group's completions also get per-token
    values); each group's dataset row is drawn at random."""
    rng = random.Random(1)
    long = bool(args.trajectories)
    pool = trajectory_pool(RULES) if long else _completion_pool()
    token_pool = token_stats_pool() if long else []
    completion_columns = ["group_id", '"index"', "text", "rewards", "total_reward", "advantage", "num_tokens",
                          "truncated"] + (["id", "turns", "tool_mask"] if long else [])
    with store.engine.connect() as conn:
        done = conn.execute(select(func.max(GroupRow.id))).scalar() or 0
    sqlite = store.engine.dialect.name == "sqlite"
    group_columns = ("id", "run_id", "step", "row_index", "prompt", "extra")
    raw = store.engine.raw_connection()
    try:
        cursor = raw.cursor()
        groups: list[tuple] = []
        completions: list[tuple] = []
        token_stats: list[tuple] = []
        token_columns = "completion_id, num_tokens, pieces, logprobs, kl, entropy"

        def flush() -> None:
            if sqlite:
                cursor.execute("BEGIN")
                cursor.executemany(f"INSERT INTO groups ({', '.join(group_columns)}) VALUES (?, ?, ?, ?, ?, ?)",
                                   groups)
                cursor.executemany(f"INSERT INTO completions ({', '.join(completion_columns)}) VALUES "
                                   f"({', '.join('?' * len(completion_columns))})", completions)
                cursor.executemany(f"INSERT INTO completion_tokens ({token_columns}) VALUES (?, ?, ?, ?, ?, ?)",
                                   token_stats)
            else:
                with cursor.copy(f"COPY groups ({', '.join(group_columns)}) FROM STDIN") as copy:
                    for row in groups:
                        copy.write_row(row)
                with cursor.copy(f"COPY completions ({', '.join(completion_columns)}) FROM STDIN") as copy:
                    for row in completions:
                        copy.write_row(row)
                if token_stats:
                    with cursor.copy(f"COPY completion_tokens ({token_columns}) FROM STDIN") as copy:
                        for row in token_stats:
                            copy.write_row(row)
            raw.commit()
            groups.clear()
            completions.clear()
            token_stats.clear()

        for g in range(done, args.groups):
            group_id = g + 1
            step = g * args.steps // args.groups + 1
            row_index = rng.randrange(args.prompts)
            groups.append((group_id, run_id, step, row_index,
                           f"system: reply with a number\nuser: What is {row_index} + 7?",
                           json.dumps({"answer": str(row_index + 7)})))
            for index in range(args.group_size):
                drawn = pool[(group_id * args.group_size + index) % len(pool)]
                if not long:
                    completions.append((group_id, index, *drawn))
                    continue
                completion_id = g * args.group_size + index + 1  # given: the per-token values refer to it
                completions.append((group_id, index, *drawn[:6], completion_id, *drawn[6:]))
                if group_id % TOKEN_STATS_EVERY == 0:
                    token_stats.append((completion_id, *token_pool[completion_id % len(token_pool)]))
            if len(completions) >= CHUNK:
                flush()
        if groups:
            flush()
        if not sqlite:  # the ids were given: move the sequence past them
            cursor.execute("SELECT setval(pg_get_serial_sequence('groups', 'id'), (SELECT max(id) FROM groups))")
            if long:
                cursor.execute("SELECT setval(pg_get_serial_sequence('completions', 'id'), "
                               "(SELECT max(id) FROM completions))")
            raw.commit()
        cursor.close()
    finally:
        raw.close()


def finish(store: Store, run_id: int, args: argparse.Namespace) -> None:
    """Set the run's step, mark it completed (a dashboard served on the store then starts no worker for it) and
    refresh the planner's statistics (``ANALYZE``)."""
    store.update_run(run_id, current_step=max(args.steps, store.get_run(run_id).current_step))
    if store.claim_run(run_id):
        store.finish_run(run_id, RunStatus.COMPLETED)
    with store.engine.begin() as conn:
        conn.execute(text("ANALYZE"))


def timed(func: Callable[[], object], reps: int, budget_s: float = 30.0) -> tuple[list[float], int, list[float]]:
    """Run ``func`` ``reps`` times after one warm-up (fewer, but at least 5, once ``budget_s`` seconds are spent);
    returns the wall times in ms, the size of the last result (points: a ``MetricSummary`` counts its buckets) and
    the CPU times in ms of this process and its children (:func:`_cpu_s`; on a busy machine, closer to what the query
    costs: the wall time also counts waiting for a core; PostgreSQL's own work is not in it)."""
    func()
    times, size, cpu = [], 0, []
    deadline = time.perf_counter() + budget_s
    for _ in range(reps):
        if len(times) >= 5 and time.perf_counter() > deadline:
            break
        start, start_cpu = time.perf_counter(), _cpu_s()
        result = func()
        times.append((time.perf_counter() - start) * 1000)
        cpu.append((_cpu_s() - start_cpu) * 1000)
        size = _size(result)
    return times, size, cpu


def _cpu_s() -> float:
    """CPU seconds of this process and of its children waited for (the diff of two completions runs in one)."""
    now = os.times()
    return time.process_time() + now.children_user + now.children_system


def _size(result: object) -> int:
    """How many rows a page query returned: points of a chart's series (``key -> (steps, values)``), buckets of
    summaries, else the length."""
    if isinstance(result, dict):
        return sum(len(v[0]) if isinstance(v, tuple) else 1 for v in result.values())
    if isinstance(result, list) and result and isinstance(result[0], MetricSummary):
        return sum(len(r) for r in result)
    return len(result) if hasattr(result, "__len__") else 0


def p95(values: list[float]) -> float:
    """The 95th percentile (linear interpolation between the closest ranks)."""
    ordered = sorted(values)
    position = 0.95 * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def record_raw_only(store: Store, run_id: int, step: int, values: dict[str, float], wall_time: float) -> None:
    """Reference for the write path: one step's ``record_metric_steps`` as it was before the downsampled history
    (delete the step's keys, insert the raw points, move the run's step), in one transaction."""
    with store.engine.begin() as conn:
        conn.execute(delete(MetricRow).where(MetricRow.run_id == run_id, MetricRow.step == step,
                                             MetricRow.key.in_(list(values))))
        conn.execute(insert(MetricRow), [{"run_id": run_id, "step": step, "key": k, "value": v,
                                          "wall_time": wall_time} for k, v in values.items()])
        conn.execute(RunRow.__table__.update().where(RunRow.id == run_id, RunRow.current_step < step)
                     .values(current_step=step))


def write_costs(store: Store, run_id: int, first_step: int, args: argparse.Namespace) -> list[tuple]:
    """ms per step of ``record_metric_steps``, one step a call (all keys), at the end of the long run and on a
    fresh run, and of the raw points only; rows as the query table's. The long run's new steps are left in the store
    (they come after the ones the queries read)."""
    keys = metric_keys(args.metrics, args.trajectories)
    rng = random.Random(2)
    fresh = store.create_run(name="scale-write", config={}, dataset_id=None, max_steps=args.write_steps).id
    raw = store.create_run(name="scale-raw", config={}, dataset_id=None, max_steps=args.write_steps).id
    out = []

    def one_step(run: int, step: int, values: dict[str, float], wall_time: float) -> None:
        store.record_metric_steps(run, [(step, values, wall_time)])

    for label, run, start, write in (
        (f"write: record_metric_steps, steps after {first_step - 1:,}", run_id, first_step, one_step),
        ("write: record_metric_steps, fresh run", fresh, 1, one_step),
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
    parser.add_argument("--references", action="store_true",
                        help="also time the full chart's former reads (every n-th step, every point: slow)")
    parser.add_argument("--budget", type=float, default=30.0,
                        help="seconds per query after which repetitions stop (at least 5 are run)")
    parser.add_argument("--keep", help="write the SQLite store here instead of a temporary folder (kept)")
    parser.add_argument("--db", help="a store URL instead of a SQLite file (an empty database: PostgreSQL)")
    parser.add_argument("--reuse", action="store_true",
                        help="measure the run named 'scale' already in --db / --keep instead of generating one")
    parser.add_argument("--write-steps", type=int, default=200, help="steps recorded to time the write path")
    parser.add_argument("--trajectories", action="store_true",
                        help="every completion an 8-turn, ~4,096-token rollout with tool calls, tool results and "
                             "its tool mask, and the page reads that draw them timed too (store_scale_trajectories)")
    parser.add_argument("--part", choices=["metrics", "groups", "finish"],
                        help="generate only this part into the run named 'scale' of --db / --keep (created if "
                             "missing), then stop: two processes can fill one store in parallel; 'finish' sets the "
                             "run's step and refreshes the planner's statistics (ANALYZE); measure with --reuse")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        path = Path(args.keep or tmp) / "grpo.db"
        path.parent.mkdir(parents=True, exist_ok=True)
        url = args.db or sqlite_url(path)
        store = generation_store(url) if not args.reuse else Store(url)
        backend = store.engine.dialect.name
        if args.part:
            run = next((r for r in store.list_runs() if r.name == "scale"), None)
            if run is None:
                run = store.create_run(name="scale", config={"max_steps": args.steps}, dataset_id=None,
                                       max_steps=args.steps)
            started = time.perf_counter()
            {"metrics": generate_metrics, "groups": generate_groups, "finish": finish}[args.part](store, run.id, args)
            print(f"generated the {args.part} of run {run.id} on {backend} in {time.perf_counter() - started:.0f} s")
            store.close()
            return
        if args.reuse:
            run = next(r for r in store.list_runs() if r.name == "scale")
            run_id, args.steps = run.id, run.max_steps  # finished by --part finish (or by the generation)
            with store.engine.connect() as conn:
                groups, group_steps = conn.execute(select(func.count(GroupRow.id), func.max(GroupRow.step)).where(
                    GroupRow.run_id == run_id)).one()
            print(f"reusing run {run_id} on {backend}: {args.steps:,} steps, {groups:,} groups up to step "
                  f"{group_steps or 0:,}", flush=True)
        else:
            started = time.perf_counter()
            run_id = generate(store, args)
            seconds = time.perf_counter() - started
            store.close()
            store = Store(url)  # the queries go through a store with the default settings
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
        rng = random.Random(1)
        ctx = SimpleNamespace(store=store)
        last_group_step = max(1, group_steps or 0)

        def a_step() -> int:
            return rng.randrange(1, last_group_step + 1)

        def late_history_page():
            row = rng.randrange(args.prompts)
            return history_page(ctx, run_id, row, from_step=rng.randrange(last_group_step // 2, last_group_step + 1))

        gc.collect()
        gc.freeze()  # as the web process does once its UI is built (app/server.py)
        queries = [
            ("run list (Runs tab): runs_frame", lambda: runs_frame(ctx)),
            ("first chart load (Runs tab): refresh_series -> metric_summary",
             lambda: refresh_series(ctx, run_id, None)[0].data),
            ("chart refresh: metrics_since(last 10 steps)",
             lambda: store.metrics_since(run_id, args.steps - 10)),
            ("doctor panel, first read: doctor_report (latest 1,000 steps)",
             lambda: doctor_report(ctx, run_id, None)[1].series.data),
            ("Inspect step list: step_choices (latest 1,000 steps)", lambda: step_choices(ctx, run_id)),
            ("group page: groups_at(one step)", lambda: store.groups_at(run_id, a_step())),
            ("reward histogram + pass@G (200 steps): stats_figure",
             lambda: stats_figure(ctx, run_id, a_step(), 0.5).data),
            ("dataset-row list: prompt_row_choices", lambda: prompt_row_choices(ctx, run_id)),
            ("prompt across steps, first page of 50: history_page",
             lambda: history_page(ctx, run_id, rng.randrange(args.prompts)).groups),
            ("prompt across steps, a page in the 2nd half (from a step)", lambda: late_history_page().groups),
            ("prompt across steps, latest page",
             lambda: history_page(ctx, run_id, rng.randrange(args.prompts), "latest").groups),
            ("reference: the former full view, groups_for_prompt(500)",
             lambda: store.groups_for_prompt(run_id, rng.randrange(args.prompts))),
        ]
        if args.trajectories:
            queries += trajectory_queries(ctx, run_id, a_step, lambda: rng.randrange(args.prompts), rng)
        if args.references:
            queries += [
                ("reference: every point, metrics_since(8 keys)",
                 lambda: store.metrics_since(run_id, keys=CHART_KEYS)),
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
