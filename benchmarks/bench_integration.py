"""Recording overhead of ``DashboardCallback`` on a user's own TRL script, by ``bench_recording.py``'s method.

The trainer is the one of ``tests/integration/scripts/trl_grpo_script.py`` (TRL's documented ``GRPOTrainer``: its
own model loading, dataset and two reward functions; a tiny random Llama from ``tests/tiny_model.py``, or
``--model``), trained ``--steps`` steps per repetition in each mode, ``--reps`` times, the order of the modes rotated
every repetition:

* ``bare``: no callback (the script as its author wrote it);
* ``local``: ``DashboardCallback(<data dir>)``, recording into a SQLite store as the dashboard's worker does;
* ``http``: ``DashboardCallback("http://...", token=...)`` to the dashboard's ingest API served by uvicorn in another
  process (the API alone, without the Gradio pages), on this machine: the spool and the sender thread;
* ``offline``: the same to an address where nothing answers: every step goes to the spool only (a dashboard down).

A step's time is the interval between consecutive ``on_step_begin`` calls (it includes the logging and recording of
the step before); the first of each repetition is warm-up and dropped. Printed: the median and p90 step of each mode,
its ratio to bare (pooled medians, and the median and min-max of the per-repetition ratios, with a 95% bootstrap
interval of their median), and the milliseconds per step the training thread spends inside the callback (its
``on_step_end`` and ``on_log``, and the reward tap's wait for the recorder before each scoring; measured directly, so
it holds on a busy machine where the ratios scatter). What it leaves out: several processes, a GPU, a remote network; the tiny model's short
steps make the ratio a pessimistic bound for real models.

Usage: ``python benchmarks/bench_integration.py [--steps 6] [--reps 4] [--model FOLDER]``
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("GRPO_DASHBOARD_FINAL_SEND_S", "1")

from bench_recording import StepClock, median_interval, rep_ratios  # noqa: E402

from grpo_core.integrations import DashboardCallback  # noqa: E402
from storage import Store, sqlite_url  # noqa: E402
from tests.integration.scripts.trl_grpo_script import make_trainer  # noqa: E402
from tests.servers import free_port  # noqa: E402

MODES = ("bare", "local", "http", "offline")


class TimedCallback(DashboardCallback):
    """``DashboardCallback`` that adds up the seconds the training thread spends in it: its callbacks (the run's
    creation at ``on_train_begin`` apart: once per run) and the reward tap's wait for the recorder before a scoring."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.inside_s = 0.0
        self.begin_s = 0.0

    def on_train_begin(self, args, state, control, **kwargs):
        started = time.perf_counter()
        result = super().on_train_begin(args, state, control, **kwargs)
        self.begin_s = time.perf_counter() - started
        tap = self.recorder.tap
        wait = tap.before_scoring

        def timed_wait() -> None:
            begun = time.perf_counter()
            try:
                wait()
            finally:
                self.inside_s += time.perf_counter() - begun

        tap.before_scoring = timed_wait
        return result

    def _timed(self, name, *args, **kwargs):
        begun = time.perf_counter()
        try:
            return getattr(super(), name)(*args, **kwargs)
        finally:
            self.inside_s += time.perf_counter() - begun

    def on_step_end(self, *args, **kwargs):
        return self._timed("on_step_end", *args, **kwargs)

    def on_log(self, *args, **kwargs):
        return self._timed("on_log", *args, **kwargs)


def serve_ingest_api(data_dir: Path) -> tuple[subprocess.Popen, str, str]:
    """The ingest API on a free port in a child process; returns it, its URL and a fresh token."""
    url_db = sqlite_url(data_dir / "grpo.db")
    store = Store(url_db)
    token = store.create_api_token("bench", "bench")[1]
    store.close()
    port = free_port()
    code = ("import uvicorn\nfrom fastapi import FastAPI\nfrom app.api.ingest import ingest_routes\n"
            "from storage import Store\n"
            f"uvicorn.run(FastAPI(routes=ingest_routes(Store({url_db!r}))), host='127.0.0.1', port={port}, "
            "log_level='warning')\n")
    process = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    url = f"http://127.0.0.1:{port}"
    for _ in range(120):
        try:
            urllib.request.urlopen(url + "/api/v1/runs/1/control", timeout=1)
        except urllib.error.HTTPError:
            break  # it answers (401: no token)
        except OSError:
            time.sleep(0.5)
    return process, url, token


def train_once(mode: str, model: str, folder: Path, steps: int, http: tuple[str, str]) -> tuple[list[float], float]:
    """Train ``steps`` steps in ``mode``; the step intervals (warm-up dropped) and the callback's seconds per step on
    the training thread (0 for bare)."""
    trainer = make_trainer(model, str(folder / "out"), steps=steps)
    clock = StepClock()
    trainer.add_callback(clock)
    callback = None
    if mode == "local":
        callback = TimedCallback(str(folder / "data"), name="bench")
    elif mode == "http":
        callback = TimedCallback(http[0], token=http[1], name="bench", spool_dir=folder / "spool")
    elif mode == "offline":
        callback = TimedCallback(f"http://127.0.0.1:{free_port()}", token="grpo_x", name="bench",
                                 spool_dir=folder / "spool-offline")
    if callback is not None:
        trainer.add_callback(callback)
    trainer.train()
    return clock.intervals(), (callback.inside_s / steps if callback is not None else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--reps", type=int, default=4)
    parser.add_argument("--model", help="a local model folder (default: the tiny random Llama)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(min(4, os.cpu_count() or 1))
    with tempfile.TemporaryDirectory() as temporary:
        root = Path(temporary)
        model = args.model
        if model is None:
            from tests.tiny_model import build_tiny_model

            model = str(build_tiny_model(root / "tiny"))
        (root / "server").mkdir()
        server, url, token = serve_ingest_api(root / "server")
        times: dict[str, list[float]] = {mode: [] for mode in MODES}
        rep_medians: dict[str, list[float]] = {mode: [] for mode in MODES}
        inside: dict[str, list[float]] = {mode: [] for mode in MODES}
        try:
            for rep in range(args.reps):
                order = MODES[rep % len(MODES):] + MODES[:rep % len(MODES)]
                for mode in order:
                    intervals, seconds = train_once(mode, model, root / f"{mode}-{rep}", args.steps, (url, token))
                    inside[mode].append(seconds)
                    times[mode].extend(intervals)
                    rep_medians[mode].append(statistics.median(intervals))
        finally:
            server.terminate()
            server.wait(timeout=30)
    bare = statistics.median(times["bare"])
    print(f"{args.reps} repetitions x {args.steps} steps (first dropped), torch threads {torch.get_num_threads()}")
    print(f"{'mode':<8} {'steps':>6} {'median step ms':>15} {'p90 step ms':>12} {'ratio':>7} "
          f"{'rep ratios: median (min-max)':>29} {'95% interval of the median ratio':>33} "
          f"{'callback ms/step':>17}")
    for mode in MODES:
        values = sorted(times[mode])
        p90 = values[min(len(values) - 1, int(0.9 * (len(values) - 1) + 0.5))]
        ratios = rep_ratios(rep_medians, mode)
        low, high = median_interval(ratios)
        print(f"{mode:<8} {len(values):>6} {statistics.median(values) * 1000:>15.1f} {p90 * 1000:>12.1f} "
              f"{statistics.median(values) / bare:>7.3f} "
              f"{statistics.median(ratios):>10.3f} ({min(ratios):.3f}-{max(ratios):.3f}){'':>3} "
              f"{low:>22.3f}-{high:.3f} {statistics.median(inside[mode]) * 1000:>17.2f}")


if __name__ == "__main__":
    main()
