"""Do five browser tabs watching one training run slow training? Step times with 0 and 5 Runs tabs open, alternated.

Builds the tiny random Llama (``tests/tiny_model.py``), starts the dashboard (``python -m app serve``) on a temporary
data directory and a free port, and queues ONE long run (``--max-steps``, default 400) of it on the arithmetic example
through :func:`grpo_core.submit.queue.submit_run`; the server's launcher trains it in its worker subprocess. Then it
alternates phases A (no page open) and B (one headless Chromium, ``/usr/bin/chromium`` via Playwright, with
``--tabs`` pages, default 5, each on the Runs tab with the run picked in ``#runs-select``, so every page's 2 s timer
redraws the run's charts), ABAB... for ``--rounds`` rounds (default 3). Each phase lasts ``--steps`` new training steps
(default 8), counted once the pages are loaded (or closed): the first step finishing in a phase overlapped the
switch and is dropped. The pages are closed after every B phase; the browser stays up between them. The step times
are TRL's ``step_time`` metric as the worker recorded it (``Store.metrics_since``). Prints, per phase: steps, median
and p90 step time, the server process's CPU seconds (psutil, the server alone: its children, the worker among them,
excluded) and the worker's; then median(B)/median(A) and the server's CPU per second of each kind of phase. Finally
cancels the run (``Store.request_cancel``), waits for its worker to exit and stops the server.
Nothing is asserted; the table says.

What it measures and leaves out: on a small machine (2 cores here) the Chromium processes themselves render the
charts on the same CPUs as training, so the B/A ratio is an upper bound that mixes in the browsers' own cost; a user
watching from another machine only adds the server's work. The number that transfers to remote browsers is
therefore the server's CPU seconds per phase (and per wall second), not the ratio. Also left out: the GPU,
PostgreSQL, a run with many groups per step, and tabs other than Runs. The tiny model's steps are short, which makes
the ratio pessimistic for real models. Other load on the machine (a CI run, say) adds noise to every phase alike;
alternating the phases is what keeps it from biasing one side.

Usage: ``python benchmarks/bench_watchers.py [--tabs 5] [--steps 8] [--rounds 3] [--max-steps 400]``
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from served import start_dashboard, stop_server  # noqa: E402  (benchmarks/served.py)

from grpo_core.run_config import RunConfig  # noqa: E402
from grpo_core.submit.queue import submit_run  # noqa: E402
from storage import RunStatus, Store, sqlite_url  # noqa: E402

EXAMPLE = ROOT / "examples" / "arithmetic.jsonl"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
RUN_NAME = "bench-watchers"
DONE = {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_server(data_dir: Path, port: int, log_path: Path, timeout_s: float = 120) -> subprocess.Popen:
    """Start the dashboard and wait for its first HTTP 200 on ``/``."""
    return start_dashboard(data_dir, port, log_path, timeout_s=timeout_s)[0]


def cpu_seconds(process: psutil.Process) -> float:
    """User + system CPU seconds of ``process`` itself (not its children)."""
    try:
        times = process.cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return times.user + times.system


def worker_of(server: psutil.Process) -> psutil.Process | None:
    """The child process training the run (the busiest child of the server), if any."""
    best, best_cpu = None, -1.0
    for child in server.children(recursive=True):
        used = cpu_seconds(child)
        if used > best_cpu:
            best, best_cpu = child, used
    return best


class Steps:
    """The run's ``step_time`` points, read incrementally from the store."""

    def __init__(self, store: Store, run_id: int) -> None:
        self.store, self.run_id = store, run_id
        self.times: dict[int, float] = {}

    def latest(self) -> int:
        after = max(self.times, default=-1)
        for point in self.store.metrics_since(self.run_id, after, keys=["step_time"]):
            if point.value is not None:
                self.times[point.step] = point.value
        return max(self.times, default=-1)

    def wait_for(self, step: int, timeout_s: float, pump=None) -> None:
        """Block until step ``step`` is recorded; ``pump(ms)`` sleeps while keeping Playwright serviced."""
        deadline = time.monotonic() + timeout_s
        while self.latest() < step:
            status = self.store.get_run(self.run_id).status
            if status in DONE:
                raise RuntimeError(f"the run ended ({status.value}) before step {step}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"step {step} not reached within {timeout_s:.0f} s")
            if pump is not None:
                pump(250)
            else:
                time.sleep(0.25)


def wait_ended(store: Store, run_id: int, server: psutil.Process, timeout_s: float = 120) -> None:
    """Wait for a cancelled run to end and its worker to exit, so nothing writes into the data dir once it is gone."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and store.get_run(run_id).status not in DONE:
        time.sleep(0.5)
    try:
        children = server.children(recursive=True)
    except psutil.NoSuchProcess:
        return
    psutil.wait_procs(children, timeout=max(1.0, deadline - time.monotonic()))


def open_tabs(browser, url: str, run_id: int, tabs: int) -> list:
    """``tabs`` pages, each on the Runs tab with the run picked and its chart drawn."""
    pages = []
    for _ in range(tabs):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(url)
        page.get_by_role("tab", name="Runs").click()
        page.locator("#runs-select input").click()
        page.get_by_role("option", name=f"#{run_id} {RUN_NAME}").first.click()
        pages.append(page)
    for page in pages:
        page.locator("#runs-plot .js-plotly-plot").wait_for()
    return pages


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tabs", type=int, default=5, help="pages open during a B phase")
    parser.add_argument("--steps", type=int, default=8, help="training steps measured per phase")
    parser.add_argument("--rounds", type=int, default=3, help="AB rounds")
    parser.add_argument("--max-steps", type=int, default=400, help="max_steps of the run (it is cancelled at the end)")
    parser.add_argument("--max-completion-length", type=int, default=16, help="tokens per completion")
    parser.add_argument("--warmup", type=int, default=3, help="steps trained before the first phase")
    args = parser.parse_args()
    needed = args.warmup + 2 * args.rounds * (args.steps + 1) + 2
    if needed > args.max_steps:
        parser.error(f"--max-steps {args.max_steps} is too small for the phases ({needed} steps)")

    from playwright.sync_api import sync_playwright

    from tests.tiny_model import build_tiny_model

    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="bench-watchers-") as tmp:
        tmp_path = Path(tmp)
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        model_dir = build_tiny_model(tmp_path / "tiny")
        port = _free_port()
        url = f"http://127.0.0.1:{port}/"
        log_path = tmp_path / "server.log"
        server_process = start_server(data_dir, port, log_path)
        server = psutil.Process(server_process.pid)
        store = Store(sqlite_url(data_dir / "grpo.db"))
        run = None
        rows: list[tuple[str, int, float, float, float, float, float]] = []
        pooled: dict[str, list[float]] = {"A": [], "B": []}
        try:
            config = RunConfig.model_validate({
                "name": RUN_NAME,
                "model": str(model_dir),
                "dataset_path": str(EXAMPLE),
                "max_steps": args.max_steps,
                "max_completion_length": args.max_completion_length,
                "device": "cpu",
            })
            run = submit_run(store, config).run
            steps = Steps(store, run.id)
            print(f"run #{run.id} queued; waiting for {args.warmup} warm-up steps", flush=True)
            steps.wait_for(args.warmup, timeout_s=300)
            worker = worker_of(server)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
                try:
                    for round_index in range(args.rounds):
                        for phase in ("A", "B"):
                            pages = open_tabs(browser, url, run.id, args.tabs) if phase == "B" else []
                            pump = pages[0].wait_for_timeout if pages else None
                            start_step = steps.latest()
                            steps.wait_for(start_step + 1, timeout_s=120, pump=pump)  # the step that overlapped
                            first = steps.latest()
                            server_cpu, worker_cpu = cpu_seconds(server), cpu_seconds(worker) if worker else 0.0
                            wall = time.monotonic()
                            steps.wait_for(first + args.steps, timeout_s=60 + 30 * args.steps, pump=pump)
                            last = steps.latest()
                            wall = time.monotonic() - wall
                            server_cpu = cpu_seconds(server) - server_cpu
                            worker_cpu = (cpu_seconds(worker) if worker else 0.0) - worker_cpu
                            for page in pages:
                                page.close()
                            values = [steps.times[s] for s in range(first + 1, last + 1) if s in steps.times]
                            pooled[phase].extend(values)
                            label = f"{phase}{round_index + 1} ({args.tabs if phase == 'B' else 0} tabs)"
                            rows.append((label, len(values), statistics.median(values) * 1000,
                                         pct(values, 0.9) * 1000, server_cpu, worker_cpu, wall))
                            print(f"{label}: steps {first + 1}-{last}, median {rows[-1][2]:.0f} ms, "
                                  f"server CPU {server_cpu:.1f} s in {wall:.0f} s", flush=True)
                finally:
                    browser.close()
        finally:
            if run is not None:
                store.request_cancel(run.id)
                wait_ended(store, run.id, server)
            stop_server(server_process)
            store.close()

    print(f"\nONE run of the tiny model (max_completion_length {args.max_completion_length}), "
          f"{os.cpu_count()} CPUs, {time.monotonic() - began:.0f} s in all")
    print(f"{'phase':<14} {'steps':>5} {'median ms':>10} {'p90 ms':>8} {'server CPU s':>13} {'worker CPU s':>13} "
          f"{'wall s':>7} {'server CPU %':>13}")
    for label, count, median, p90, server_cpu, worker_cpu, wall in rows:
        print(f"{label:<14} {count:>5} {median:>10.0f} {p90:>8.0f} {server_cpu:>13.2f} {worker_cpu:>13.2f} "
              f"{wall:>7.1f} {100 * server_cpu / wall:>12.1f}%")
    by_phase: dict[str, list[tuple]] = {"A": [], "B": []}
    for row in rows:
        by_phase[row[0][0]].append(row)
    for phase, tabs in (("A", 0), ("B", args.tabs)):
        chosen = by_phase[phase]
        print(f"all {phase} ({tabs} tabs): median step {statistics.median(pooled[phase]) * 1000:.0f} ms, "
              f"p90 {pct(pooled[phase], 0.9) * 1000:.0f} ms, "
              f"server CPU {sum(r[4] for r in chosen):.2f} s over {sum(r[6] for r in chosen):.0f} s "
              f"= {sum(r[4] for r in chosen) / sum(r[6] for r in chosen):.3f} CPU s per s")
    median_a = statistics.median(pooled["A"])
    median_b = statistics.median(pooled["B"])
    extra = (sum(r[4] for r in by_phase["B"]) / sum(r[6] for r in by_phase["B"])
             - sum(r[4] for r in by_phase["A"]) / sum(r[6] for r in by_phase["A"]))
    print(f"median step B/A (all steps of each kind pooled): {median_b / median_a:.3f}  "
          f"(browsers share these CPUs: an upper bound)")
    print(f"server CPU added by {args.tabs} watching tabs: {extra:.3f} CPU s per s "
          f"(~{extra / args.tabs:.3f} per tab): the cost for remote browsers")


if __name__ == "__main__":
    main()
