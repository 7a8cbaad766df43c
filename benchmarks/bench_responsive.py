"""The dashboard's answers while a run trains on the same machine: page actions timed with and without training.

Serves the dashboard (``python -m app serve``) on a fresh data directory holding a small local Llama (built like
``tests/tiny_model.py``'s, ``--hidden`` wide and ``--layers`` deep, so that a step is real torch work), the arithmetic
example dataset and one finished synthetic run with groups (for Inspect). Then, phase by phase, it times page
actions over HTTP, ``--rounds`` rounds each, one after the other:

* **page load**: ``GET /`` and Gradio's ``/config`` (what a browser fetches before drawing the page);
* **Runs refresh**: what a tick of the Runs tab reads, through the same Gradio queue as the page's events
  (``/list_runs``, then ``/run_metrics`` of the training run since its last step seen);
* **Launch click**: ``/launch_run`` of a valid config (the Launch button's path: the login's boundary, the
  validation of model, dataset and rules, the run queued, the launcher's pass), queued behind the run that holds the
  one training slot and cancelled at once, untimed;
* **Inspect a step**: ``/run_groups`` of one step of the finished run;
* **store write lock**: no page's action, how long SQLite's write lock on the store waits (``BEGIN IMMEDIATE``);

and with ``--browser``, in headless Chromium (``/usr/bin/chromium``): a fresh page opened until its tabs show, and a
Launch click on the Launch tab until its status names the run. ``--watch`` keeps a page on the watched run's Runs
tab open during each phase (its timers refresh every 2 s), as the person who launched the run does. The web
process's CPU time over each phase's rounds, in cores, is printed with the actions.

Phases: ``idle`` (nothing trains: a stand-in run whose worker pid is this benchmark's holds the training slot, so
launches queue as they do behind a training run), then for each worker mode of ``--modes`` a real CPU training run of
the small model (``--steps`` steps; cancelled at the end), measured while its worker starts (``starting``: imports
torch and TRL, loads the model) and from its ``--warm-steps``-th recorded step on (``training``). A mode is the
environment the dashboard gives its training workers: ``before`` (``GRPO_WORKER_NICE=0``,
``GRPO_WORKER_CPU_THREADS=all``: the worker at the web process's priority with one torch thread per core, as before
the change) and ``default`` (the product's defaults, :mod:`grpo_core.training.cpu_share`). Each phase serves from a fresh dashboard process on the same data.
The training run's seconds per step (median of the wall time between its recorded steps) are printed per mode.

Printed: per action, the median seconds of each phase and its ratio to ``idle``; the load average at each phase.
Absolute times depend on what else the machine runs; compare ratios and modes measured in one invocation.

Left out: many pages at once, GPU runs (their worker is left as it was), a quiet machine (the figures in
docs/configuration.md were taken on shared cores).

Usage: ``nice -n 10 python benchmarks/bench_responsive.py [--rounds 3] [--browser [--watch]] [--modes before default]
[--hidden 512]``
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from served import start_dashboard, stop_server  # noqa: E402  (benchmarks/served.py)

from grpo_core.processes import free_port  # noqa: E402
from storage import CompletionRecord, GroupRecord, RunStatus, Store, sqlite_url  # noqa: E402

EXAMPLE = ROOT / "examples" / "arithmetic.jsonl"
ACTIONS = ("page load", "Runs refresh", "Launch click", "Inspect a step", "store write lock")
BROWSER_ACTIONS = ("page load (Chromium)", "Launch click (Chromium)")
SERVER_CPU = "web process CPU (cores)"
CHROMIUM = "/usr/bin/chromium"
#: The worker environment of each mode (``default``: none set, the product's defaults).
MODES = {
    "before": {"GRPO_WORKER_NICE": "0", "GRPO_WORKER_CPU_THREADS": "all"},
    "default": {},
}
BUILD_MODEL = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.tiny_model import build_tiny_model
build_tiny_model(sys.argv[2], hidden_size=int(sys.argv[3]), layers=int(sys.argv[4]))
"""


def prepare(data_dir: Path) -> tuple[int, int]:
    """The store: one finished synthetic run of 20 steps with 2 groups of 4 completions a step (Inspect reads it)
    and a stand-in ``running`` run whose worker is this process (it holds the one training slot, so launches
    queue). Returns (finished run id, stand-in run id)."""
    rng = random.Random(0)
    store = Store(sqlite_url(data_dir / "grpo.db"))
    run = store.create_run(name="finished", config={"max_steps": 20}, dataset_id=None, max_steps=20)
    store.claim_run(run.id)
    store.record_metric_steps(run.id, [(s, {"reward": rng.random(), "kl": rng.random()}, time.time())
                                       for s in range(1, 21)])
    for step in range(1, 21):
        store.record_groups(run.id, step, [
            GroupRecord(step=step, row_index=g, prompt=f"What is {step} + {g}?", completions=[
                CompletionRecord(index=i, text=f"{step + g + i}", rewards={"numeric_answer": float(i == 0)},
                                 total_reward=float(i == 0), advantage=1.5 if i == 0 else -0.5, num_tokens=3)
                for i in range(4)])
            for g in range(2)])
    store.finish_run(run.id, RunStatus.COMPLETED)
    holder = store.create_run(name="slot holder", config={"max_steps": 1}, dataset_id=None, max_steps=1)
    store.claim_run(holder.id, worker_pid=os.getpid())
    store.close()
    return run.id, holder.id


def run_config(model: Path, dataset: Path, *, name: str, steps: int) -> str:
    """A launch config (JSON text) of the small model on the arithmetic example."""
    return json.dumps({
        "name": name, "model": str(model), "dataset_path": str(dataset), "max_steps": steps,
        "rewards": [{"rule": "numeric_answer", "weight": 1.0}], "num_generations": 4,
        "per_device_train_batch_size": 8, "max_completion_length": 24, "learning_rate": 1e-4, "device": "cpu",
        "save_steps": 100_000,
    })


def start_server(data_dir: Path, log_path: Path, env: dict[str, str], timeout_s: float = 180):
    """Start the dashboard; returns (process, url)."""
    port = free_port()
    process, _ = start_dashboard(data_dir, port, log_path, timeout_s=timeout_s, env={
        "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "GRPO_MAX_CONCURRENT_RUNS": "1", **env})
    return process, f"http://127.0.0.1:{port}/"


def _timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def browser_actions(browser, url: str, model: Path, launched: list[int], store: Store) -> dict[str, float]:
    """One round in Chromium: a fresh page opened until its tabs show, then the Launch tab's form (the small model,
    a fresh run name) launched by a click, timed until the Launch status names the run (the e2e tests' wait; the
    click also moves the page to the Runs tab). The run it queued is added to ``launched``."""
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(300_000)
    try:
        started = time.perf_counter()
        page.goto(url)
        page.get_by_role("tab", name="Launch").wait_for(state="visible")
        loaded = time.perf_counter() - started
        page.get_by_role("tab", name="Launch").click()
        page.locator("#launch-button").wait_for(state="visible")
        name = f"clicked-{random.randrange(10**9)}"
        for elem_id, value in (("launch-model", str(model)), ("launch-name", name)):
            box = page.locator(f"#{elem_id} textarea, #{elem_id} input").first
            box.wait_for(state="visible")
            page.wait_for_timeout(300)
            box.fill(value)
            box.press("Tab")
        page.wait_for_timeout(1000)  # the form's own change events answered: what follows is the click's
        started = time.perf_counter()
        page.locator("#launch-button").click()
        page.locator("#launch-status").get_by_text(name).wait_for(state="attached")  # the page is on Runs then
        clicked = time.perf_counter() - started
        launched.extend(run.id for run in store.list_runs([RunStatus.QUEUED]) if run.name == name)
    finally:
        page.close()
    return {"page load (Chromium)": loaded, "Launch click (Chromium)": clicked}


def measure(url: str, rounds: int, *, finished_id: int, watched_id: int, launch_config: str,
            store_file: Path, server_pid: int, browser=None, model: Path | None = None, store: Store | None = None,
            watch: bool = False) -> dict[str, list[float]]:
    """``rounds`` rounds of the actions, one after the other; returns ``action -> seconds of each round``. The last
    action is no page's: how long this process waits for SQLite's write lock on the store (``BEGIN IMMEDIATE``), which
    every launch, cancel and recorded step takes. Also returned: the web process's CPU time over the rounds, in
    cores (CPU seconds per wall second). ``watch``: meanwhile a Chromium page shows the watched run's Runs tab (its
    timers refresh table, chart, doctor and log every 2 s), as the page of the person who launched it does."""
    import sqlite3

    from gradio_client import Client

    client = Client(url, verbose=False)
    times: dict[str, list[float]] = {name: [] for name in ACTIONS + (BROWSER_ACTIONS if browser else ())}
    seen = {"step": -1}

    def page_load() -> None:
        for path in ("", "config"):
            with urllib.request.urlopen(url + path, timeout=600) as response:
                response.read()

    def runs_refresh() -> None:
        client.predict(api_name="/list_runs")
        points = client.predict(run_id=watched_id, after_step=seen["step"], api_name="/run_metrics")
        if points:
            seen["step"] = max(int(p.get("step", -1)) for p in points)

    def launch() -> None:
        answer = client.predict(config=launch_config, api_name="/launch_run")
        launched.append(answer["run"]["id"])

    def inspect() -> None:
        client.predict(run_id=finished_id, step=1 + len(times["Inspect a step"]) % 20, api_name="/run_groups")

    def write_lock() -> None:
        connection = sqlite3.connect(store_file, timeout=600)
        try:
            connection.execute("BEGIN IMMEDIATE")
            connection.execute("ROLLBACK")
        finally:
            connection.close()

    watcher = None
    if watch and browser is not None:
        watcher = browser.new_page(viewport={"width": 1400, "height": 1000})
        watcher.set_default_timeout(300_000)
        watcher.goto(f"{url}?run={watched_id}&tab=runs")
        watcher.locator("#runs-plot").wait_for(state="attached")
        watcher.wait_for_timeout(3000)
    server = psutil.Process(server_pid)
    cpu_before, wall_before = sum(server.cpu_times()[:2]), time.perf_counter()
    launched: list[int] = []
    for _ in range(rounds):
        for name, action in zip(ACTIONS, (page_load, runs_refresh, launch, inspect, write_lock), strict=True):
            times[name].append(_timed(action))
            time.sleep(0.5)  # a person's pace
        if browser is not None:
            for name, seconds in browser_actions(browser, url, model, launched, store).items():
                times[name].append(seconds)
        for run_id in launched:
            client.predict(run_id=run_id, api_name="/cancel_run")
        launched.clear()
    times[SERVER_CPU] = [(sum(server.cpu_times()[:2]) - cpu_before) / (time.perf_counter() - wall_before)]
    if watcher is not None:
        watcher.close()
    return times


def wait_for_steps(store: Store, run_id: int, steps: int, timeout_s: float) -> None:
    """Wait until run ``run_id`` recorded ``steps`` steps (or ended: RuntimeError with its error)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = store.get_run(run_id)
        if run.status.is_final:
            raise RuntimeError(f"the training run ended {run.status.value}: {run.error}")
        if len(store.metrics_since(run_id, -1, keys=["reward"])) >= steps:
            return
        time.sleep(1.0)
    raise RuntimeError(f"the training run did not record {steps} steps within {timeout_s:.0f} s")


def seconds_per_step(store: Store, run_id: int, after_step: int) -> tuple[float, int]:
    """Median wall seconds between the run's steps recorded after ``after_step`` (the steps of the phase), and how
    many steps that is."""
    walls = sorted((p.step, p.wall_time) for p in store.metrics_since(run_id, after_step - 1, keys=["reward"]))
    gaps = [b - a for (_, a), (_, b) in zip(walls, walls[1:], strict=False)]
    return (statistics.median(gaps) if gaps else float("nan")), len(gaps)


def worker_process(store: Store, run_id: int) -> str:
    """The training worker's niceness and threads, as the OS sees them."""
    pid = store.get_run(run_id).worker_pid
    try:
        process = psutil.Process(pid)
        return f"pid {pid}: nice {process.nice()}, {process.num_threads()} threads"
    except (psutil.NoSuchProcess, psutil.AccessDenied, ValueError, TypeError):
        return f"pid {pid}: gone"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--modes", nargs="+", default=["before", "default"], choices=sorted(MODES))
    parser.add_argument("--hidden", type=int, default=512, help="hidden size of the small Llama")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--steps", type=int, default=400, help="max_steps of the training run (cancelled anyway)")
    parser.add_argument("--warm-steps", type=int, default=2, help="steps recorded before a training phase starts")
    parser.add_argument("--speed-steps", type=int, default=6,
                        help="steps after the warm ones whose wall times give the seconds per step")
    parser.add_argument("--browser", action="store_true",
                        help="also time a page load and a Launch click in headless Chromium (/usr/bin/chromium)")
    parser.add_argument("--watch", action="store_true",
                        help="with --browser: keep a page on the watched run's Runs tab open during each phase")
    parser.add_argument("--keep", action="store_true", help="keep the data directory")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="bench-responsive-"))
    data_dir = tmp / "data"
    data_dir.mkdir()
    model = data_dir / "bench-model"
    subprocess.run([sys.executable, "-c", BUILD_MODEL, str(ROOT), str(model), str(args.hidden), str(args.layers)],
                   check=True, timeout=600)
    dataset = data_dir / "arithmetic.jsonl"
    shutil.copy(EXAMPLE, dataset)
    finished_id, holder_id = prepare(data_dir)
    store = Store(sqlite_url(data_dir / "grpo.db"))
    launch_config = run_config(model, dataset, name="clicked", steps=2)
    results: dict[str, dict[str, list[float]]] = {}
    loads: dict[str, float] = {}
    speeds: dict[str, tuple[float, int, str]] = {}
    stack = contextlib.ExitStack()
    extra = {}
    if args.browser:
        from playwright.sync_api import sync_playwright

        playwright = stack.enter_context(sync_playwright())
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        stack.callback(browser.close)
        extra = {"browser": browser, "model": model, "store": store, "watch": args.watch}
    try:
        process, url = start_server(data_dir, tmp / "server-idle.log", {})
        try:
            loads["idle"] = os.getloadavg()[0]
            results["idle"] = measure(url, args.rounds, finished_id=finished_id, watched_id=finished_id,
                                      launch_config=launch_config, store_file=data_dir / "grpo.db",
                                         server_pid=process.pid, **extra)
            print("idle", json.dumps(results["idle"]), flush=True)
        finally:
            stop_server(process)
        store.finish_run(holder_id, RunStatus.COMPLETED)
        for mode in args.modes:
            process, url = start_server(data_dir, tmp / f"server-{mode}.log", MODES[mode])
            try:
                from gradio_client import Client

                answer = Client(url, verbose=False).predict(
                    config=run_config(model, dataset, name=f"training {mode}", steps=args.steps),
                    api_name="/launch_run")
                run_id = answer["run"]["id"]
                phase = f"starting ({mode})"  # the worker imports torch and TRL, loads the model, builds the trainer
                loads[phase] = os.getloadavg()[0]
                results[phase] = measure(url, args.rounds, finished_id=finished_id, watched_id=run_id,
                                         launch_config=launch_config, store_file=data_dir / "grpo.db",
                                         server_pid=process.pid, **extra)
                print(phase, json.dumps(results[phase]), "worker phase now:", store.get_run(run_id).phase, flush=True)
                wait_for_steps(store, run_id, args.warm_steps, timeout_s=900)
                phase = f"training ({mode})"
                loads[phase] = os.getloadavg()[0]
                worker = worker_process(store, run_id)
                results[phase] = measure(url, args.rounds, finished_id=finished_id, watched_id=run_id,
                                         launch_config=launch_config, store_file=data_dir / "grpo.db",
                                         server_pid=process.pid, **extra)
                wait_for_steps(store, run_id, args.warm_steps + args.speed_steps, timeout_s=1800)
                per_step, steps = seconds_per_step(store, run_id, args.warm_steps)
                speeds[phase] = (per_step, steps, worker)
                print(phase, json.dumps(results[phase]), speeds[phase], flush=True)
                store.request_cancel(run_id)
                store.finish_run(run_id, RunStatus.CANCELLED)
                pid = store.get_run(run_id).worker_pid
                if pid:
                    try:
                        os.killpg(pid, 9)
                    except OSError:
                        pass
            finally:
                stop_server(process)
    finally:
        stack.close()
        store.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print(f"data kept in {tmp}")

    phases = list(results)
    print(f"\nmedian seconds over {args.rounds} rounds (ratio to idle); load average at the phase's start: "
          + ", ".join(f"{p} {loads[p]:.1f}" for p in phases))
    print(f"{'action':<16}" + "".join(f"{p:>30}" for p in phases))
    for name in [n for n in ACTIONS + BROWSER_ACTIONS + (SERVER_CPU,) if n in results["idle"]]:
        base = statistics.median(results["idle"][name])
        unit = "" if name == SERVER_CPU else " s"
        cells = []
        for phase in phases:
            median = statistics.median(results[phase][name])
            cells.append(f"{median:.3f}{unit} ({median / base:.1f}x)" if phase != "idle" else f"{median:.3f}{unit}")
        print(f"{name:<16}" + "".join(f"{c:>30}" for c in cells))
    for phase, (per_step, steps, worker) in speeds.items():
        print(f"{phase}: {per_step:.2f} s/step (median over {steps} recorded steps); worker {worker}")


if __name__ == "__main__":
    main()
