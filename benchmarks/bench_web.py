"""The web process: time from ``python -m app serve`` to the first HTTP 200, and its resident memory with a run open.

Prepares a data directory holding one finished synthetic run (``--steps`` steps of ``--keys`` metrics: TRL 1.16's
GRPO keys, then the user's own up to that count; 2 groups of 4 completions per step; ``--scale 10`` multiplies the
steps, the issue's 10x case is ``--steps 500 --scale 10 --keys 200``), then starts the dashboard ``--starts`` times (default 3) and reports the median time from
process start to the first ``200`` on ``/``. On the last start it opens the run in headless Chromium
(``/usr/bin/chromium`` via Playwright; ``--no-browser`` uses plain HTTP only): the Runs tab with its charts for a few
refresh ticks, then the Inspect tab, and reports the time from a click on the Runs tab to its first chart drawn, from
opening the dashboard's link to the run to its chart and from opening the run's own page (``run?run=1``,
``app/run_page.py``) to its chart (goal: under 1 s each; plotly's own trace list is polled every 20 ms), the
server's resident memory (psutil RSS of the server process; its children separately) and whether ``libtorch`` is mapped into it (``/proc/<pid>/maps``): the web process must
never load torch. Goals: start < 5 s, RSS < 400 MB. Nothing is asserted; the table says.

What it leaves out: a cold disk cache (the first start after boot also reads the Python packages from disk), a
run still training, and many pages at once.

With a browser it also times opening a metric section (the accordion of ``grad_norm``, ``learning_rate``, ... and
the one of the user's own keys, at most 48 charts): its keys' histories are read only then.

``--trackio``: the same metrics (same keys, steps and values) are also written into a trackio project (its own
``SQLiteStorage.bulk_log``, in a temporary ``TRACKIO_DIR``), ``trackio show`` serves it, and its link
(``?project=bench-web``) is timed in the same Chromium to its first chart drawn (a ``.plot canvas`` of its vega
line plots), beside our link. trackio is installed for the benchmark only (``pip install trackio``); it is not a
dependency of the product.

``--side-by-side [KEYS ...]`` prints only that comparison, as one table: for each count of keys (default 30 and
200) a run is prepared at ``--scale``, written into trackio too, both dashboards served at once and timed round by
round in the same Chromium (the run page's link, the dashboard's link, trackio's link, a click on our Runs tab), with
our server's own time for the first chart; medians of ``--tries`` rounds, and the ratios of our links to trackio's
(below 1: ours draws first).
Absolute times depend on the machine's load; the ratio, taken round by round, much less. ``--floor`` adds, in the
same rounds, the link of the least page Gradio and plotly can make for that chart (``web_floor.py``: one plot, one
page-load event drawing the same figure): ours / floor is the dashboard page's own cost, floor / trackio the stack's.
``--against DIR`` adds the link of an earlier commit's dashboard (DIR: ``git archive COMMIT | tar -x -C DIR``) on the
same store, in the same rounds: our link / its link is a change's own gain.

Usage: ``python benchmarks/bench_web.py [--starts 3] [--steps 500] [--scale 1] [--keys 30] [--trackio]
[--no-browser]``; the issue's comparison: ``python benchmarks/bench_web.py --scale 10 --side-by-side [--floor]``
"""

from __future__ import annotations

import argparse
import os
import random
import socket
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
from web_pages import (  # noqa: E402  (benchmarks/web_pages.py)
    CHART_DRAWN,
    CHROMIUM,
    side_by_side,
    time_chart,
    time_link,
    time_links,
    time_sections,
)

from storage import CompletionRecord, GroupRecord, RunStatus, Store, sqlite_url  # noqa: E402

GOAL_START_S = 5.0
GOAL_RSS_MB = 400.0
GOAL_CHART_S = 1.0
#: What TRL 1.16's GRPOTrainer logs on a CPU run with two reward functions (grpo_trainer.py's ``_metrics``), plus the
#: trainer's own; :func:`metric_keys` adds the user's keys past these.
TRL_KEYS = [
    "reward", "reward_std", "kl", "loss", "entropy", "completions/mean_length", "completions/clipped_ratio",
    "frac_reward_zero_std", "rewards/numeric_answer/mean", "rewards/numeric_answer/std", "rewards/format_regex/mean",
    "rewards/format_regex/std", "grad_norm", "learning_rate", "num_tokens", "step_time", "epoch",
    "completions/min_length", "completions/max_length", "completions/mean_terminated_length",
    "completions/min_terminated_length", "completions/max_terminated_length", "clip_ratio/low_mean",
    "clip_ratio/low_min", "clip_ratio/high_mean", "clip_ratio/high_max", "clip_ratio/region_mean",
    "sampling/importance_sampling_ratio/mean", "sampling/sampling_logp_difference/mean", "tools/call_frequency",
]


def metric_keys(count: int) -> list[str]:
    """``count`` metric keys: TRL's (:data:`TRL_KEYS`), then ``custom/metric_<i>`` (a script's own)."""
    return (TRL_KEYS + [f"custom/metric_{i}" for i in range(max(0, count - len(TRL_KEYS)))])[:count]


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def prepare(data_dir: Path, steps: int, keys: list[str]) -> str:
    """A store with one completed synthetic run of ``steps`` steps of ``keys``; returns its dropdown label. The
    metrics go in through ``Store.record_metric_steps`` (the recorder's path, so the downsampled history is filled as
    a run fills it), 100 steps a call."""
    rng = random.Random(0)
    store = Store(sqlite_url(data_dir / "grpo.db"))
    run = store.create_run(name="bench-web", config={"max_steps": steps}, dataset_id=None, max_steps=steps)
    store.claim_run(run.id)
    for first in range(1, steps + 1, 100):
        chunk = range(first, min(steps, first + 99) + 1)
        store.record_metric_steps(run.id, [(step, {k: rng.random() for k in keys}, time.time()) for step in chunk])
    for step in range(1, steps + 1):
        groups = [
            GroupRecord(step=step, row_index=rng.randrange(400), prompt=f"What is {step} + {g}?", completions=[
                CompletionRecord(index=i, text=f"{step + g + i}", rewards={"numeric_answer": float(i == 0)},
                                 total_reward=float(i == 0), advantage=1.5 if i == 0 else -0.5, num_tokens=3)
                for i in range(4)
            ])
            for g in range(2)
        ]
        store.record_groups(run.id, step, groups)
    store.finish_run(run.id, RunStatus.COMPLETED)
    label = f"#{run.id} bench-web"
    store.close()
    return label


#: Written into a trackio project by a child process (``TRACKIO_DIR`` is read when trackio is imported).
TRACKIO_WRITER = """
import random, sys
from trackio.sqlite_storage import SQLiteStorage
steps, keys = int(sys.argv[1]), sys.argv[2].split(",")
rng = random.Random(0)
for first in range(1, steps + 1, 500):
    chunk = list(range(first, min(steps, first + 499) + 1))
    SQLiteStorage.bulk_log("bench-web", "bench-web", [{k: rng.random() for k in keys} for _ in chunk], steps=chunk)
"""
def start_trackio(tmp: Path, steps: int, keys: list[str], timeout_s: float = 300) -> tuple[subprocess.Popen, str]:
    """Write the run's metrics into a trackio project under ``tmp`` and serve it with ``trackio show``; returns the
    server process and the link to the project."""
    env = {**os.environ, "TRACKIO_DIR": str(tmp / "trackio"), "GRADIO_ANALYTICS_ENABLED": "False"}
    subprocess.run([sys.executable, "-c", TRACKIO_WRITER, str(steps), ",".join(keys)], env=env, check=True,
                   timeout=timeout_s)
    port = _free_port()
    with open(tmp / "trackio.log", "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-c", "from trackio.cli import main; main()", "show", "--project", "bench-web"],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**env, "GRADIO_SERVER_PORT": str(port)},
        )
    url = f"http://127.0.0.1:{port}/"
    started = time.perf_counter()
    while time.perf_counter() - started < 120:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return process, url + "?project=bench-web"
        except OSError:
            time.sleep(0.2)
    stop_server(process)
    raise RuntimeError("trackio did not answer:\n" + (tmp / "trackio.log").read_text()[-2000:])


def start_floor(data_dir: Path, log_path: Path, timeout_s: float = 120) -> tuple[subprocess.Popen, str]:
    """Serve ``web_floor.py`` (one plot, one load event drawing the run's first chart) on ``data_dir``'s store;
    returns the process and its address."""
    port = _free_port()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, str(ROOT / "benchmarks" / "web_floor.py"), "--data-dir", str(data_dir), "--port",
             str(port)], stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT,
            env={**os.environ, "GRADIO_ANALYTICS_ENABLED": "False"},
        )
    url = f"http://127.0.0.1:{port}/"
    started = time.perf_counter()
    while time.perf_counter() - started < timeout_s:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return process, url
        except OSError:
            time.sleep(0.1)
    stop_server(process)
    raise RuntimeError("the floor page did not answer:\n" + log_path.read_text()[-2000:])


def compare_with_trackio(scale: int, steps: int, key_counts: list[int], tries: int, floor: bool = False,
                         against: Path | None = None) -> None:
    """The side-by-side table: for each of ``key_counts``, one run of ``steps * scale`` steps prepared for us and
    written into trackio, both served at once and timed in turn (:func:`side_by_side`), with our server's own work
    for the first chart (:func:`time_server_work`); medians of ``tries`` rounds, and the ratios of our links' times
    (the run's own page, the dashboard's ``?run=1&tab=runs``) to trackio's, round by round (below 1: ours draws
    first). ``against``: a copy of an earlier commit (``git archive``
    unpacked) served on the same store and its link timed in the same rounds (our link / its link, round by round:
    below 1, the change made the link faster)."""
    rows = []
    for count in key_counts:
        with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
            data_dir = Path(tmp) / "data"
            data_dir.mkdir()
            keys = metric_keys(count)
            prepare(data_dir, steps * scale, keys)
            work = time_server_work(data_dir, repeats=5)["first chart"]
            process, _ = start_server(data_dir, _free_port(), Path(tmp) / "server.log")
            url = next(f"http://127.0.0.1:{c.laddr.port}/"
                       for c in psutil.Process(process.pid).net_connections(kind="tcp")
                       if c.status == psutil.CONN_LISTEN)
            trackio, trackio_url = start_trackio(Path(tmp), steps * scale, keys)
            floor_process, floor_url = start_floor(data_dir, Path(tmp) / "floor.log") if floor else (None, None)
            base_port = _free_port()
            base_process = (start_server(data_dir, base_port, Path(tmp) / "base.log", root=against)[0]
                            if against is not None else None)
            base_url = f"http://127.0.0.1:{base_port}/" if against is not None else None
            try:
                times = side_by_side(url, trackio_url, tries, floor=floor_url, base=base_url)
            finally:
                if base_process is not None:
                    stop_server(base_process)
                stop_server(trackio)
                stop_server(process)
                if floor_process is not None:
                    stop_server(floor_process)
        rows.append((count, times, work))
        print(f"{count} keys: run page {times['page']}, dashboard {times['ours']}, tab {times['tab']}, trackio"
              f" {times['trackio']}{', floor ' + str(times['floor']) if floor else ''}", flush=True)

    def ratio(top: str, bottom: str, times: dict) -> float:  # the median of the rounds' own ratios
        return statistics.median(a / b for a, b in zip(times[top], times[bottom], strict=True))

    def rounds(times: dict, *names: str) -> str:
        return " | ".join(", ".join(f"{t:.1f}" for t in times[name]) for name in names)

    print(f"\nside by side, {steps * scale} steps, {tries} rounds each (median; each round's values in brackets:"
          f" run page | dashboard | trackio | click{' | floor' if floor else ''}); load average"
          f" {os.getloadavg()[0]:.1f} at the end")
    print(f"{'keys':>5} {'run page link':>14} {'dashboard link':>15} {'trackio link':>13} {'page/trackio':>13}"
          f" {'dashboard/trackio':>18} {'Runs tab click':>15} {'server: first chart':>20}"
          + (f" {'floor link':>11} {'page/floor':>11} {'floor/trackio':>14}" if floor else ""))
    for count, times, (wall_ms, cpu_ms) in rows:
        if against is not None:
            print(f"{count:>5} keys: dashboard link / the unchanged page's {ratio('ours', 'base', times):.2f}"
                  f" (medians {statistics.median(times['ours']):.2f} s against {statistics.median(times['base']):.2f}"
                  f" s; rounds {rounds(times, 'base')})")
        floor_cells = (f" {statistics.median(times['floor']):>10.2f}s {ratio('page', 'floor', times):>11.2f}"
                       f" {ratio('floor', 'trackio', times):>14.2f}") if floor else ""
        names = ("page", "ours", "trackio", "tab", *(("floor",) if floor else ()))
        print(f"{count:>5} {statistics.median(times['page']):>13.2f}s {statistics.median(times['ours']):>14.2f}s"
              f" {statistics.median(times['trackio']):>12.2f}s {ratio('page', 'trackio', times):>13.2f}"
              f" {ratio('ours', 'trackio', times):>18.2f} {statistics.median(times['tab']):>14.2f}s"
              f" {wall_ms:>11.0f} ms (cpu {cpu_ms:.0f}){floor_cells}   [{rounds(times, *names)}]")


def time_server_work(data_dir: Path, repeats: int = 10) -> dict[str, tuple[float, float]]:
    """The web process's own work for the Runs tab, in this process on the prepared store, ``repeats`` times each:
    the first chart (``refresh_series`` on a fresh page: the overview's downsampled history and the run's key list,
    then ``training_figure`` serialised as Gradio sends it) and the opening of the largest section (its keys'
    histories read, then its figure). Returns ``name -> (median wall ms, median CPU ms)``: the CPU time is this
    process's own, so it holds on a loaded machine where the wall time does not."""
    from types import SimpleNamespace

    from app.tabs.runs.sections import drawn_keys, section_figure, section_keys
    from app.tabs.runs.tab import refresh_series
    from app.views.chart_options import ChartOptions
    from app.views.charts import training_figure

    store = Store(sqlite_url(data_dir / "grpo.db"))
    ctx, run = SimpleNamespace(store=store), store.list_runs()[0]
    times: dict[str, list[tuple[float, float]]] = {"first chart": [], "largest section opened": []}
    try:
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            series, _ = refresh_series(ctx, run.id, None)
            training_figure(series, f"#{run.id} {run.name}", None).to_json()
            times["first chart"].append((time.perf_counter() - wall, time.process_time() - cpu))
            grouped = section_keys(series)
            largest = max((k for k in grouped if k != "overview"), key=lambda k: len(grouped[k]))
            wall, cpu = time.perf_counter(), time.process_time()
            keys = drawn_keys(grouped[largest], ChartOptions())
            section_figure(ctx, run, series, keys, ChartOptions(), {}).to_json()
            times["largest section opened"].append((time.perf_counter() - wall, time.process_time() - cpu))
            times.setdefault(f"(largest section: {largest}, {len(keys)} of {len(grouped[largest])} charts)", [])
    finally:
        store.close()
    return {name: (statistics.median(w for w, _ in values) * 1000 if values else 0.0,
                   statistics.median(c for _, c in values) * 1000 if values else 0.0)
            for name, values in times.items()}


def start_server(data_dir: Path, port: int, log_path: Path, timeout_s: float = 120,
                 root: Path = ROOT) -> tuple[subprocess.Popen, float]:
    """Start the dashboard (``root``'s); returns (process, seconds until ``/`` answered 200)."""
    return start_dashboard(data_dir, port, log_path, timeout_s=timeout_s, poll_s=0.05, root=root)


def torch_mapped(pid: int) -> bool:
    """Whether any ``libtorch`` shared object is mapped into process ``pid``."""
    try:
        return "libtorch" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def memory(pid: int) -> tuple[float, float, int]:
    """(server RSS MB, children RSS MB, number of children)."""
    process = psutil.Process(pid)
    children = process.children(recursive=True)
    child_rss = 0
    for child in children:
        try:
            child_rss += child.memory_info().rss
        except psutil.NoSuchProcess:
            pass
    return process.memory_info().rss / 1e6, child_rss / 1e6, len(children)


def browse(url: str, label: str, watch_s: float, tries: int = 3) -> tuple[str, list[float], list[float], list[float],
                                                                         dict]:
    """Time the first chart (:func:`time_chart`; the run page's link, :func:`time_link`), then open the run's charts
    and groups in headless Chromium; returns what was done and the timings."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        tab_click, deep_link = time_chart(browser, url, tries)
        run_page = [time_link(browser, url + "run?run=1", CHART_DRAWN, 60) for _ in range(tries)]
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.set_default_timeout(60_000)
        page.goto(url)
        page.get_by_role("tab", name="Runs").click()
        page.locator("#runs-plot .js-plotly-plot").wait_for()
        page.wait_for_timeout(watch_s * 1000)  # a few refresh ticks
        sections = time_sections(page)
        page.get_by_role("tab", name="Inspect").click()
        page.locator("#inspect-run input").click()
        page.get_by_role("option", name=label).first.click()
        page.locator("#inspect-summary").get_by_text("groups").wait_for()
        groups = page.locator("#inspect-groups .grpo-group").count()
        browser.close()
    return f"Runs tab charts + Inspect ({groups} groups shown) in Chromium", tab_click, deep_link, run_page, sections


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--starts", type=int, default=3, help="server starts timed (median reported)")
    parser.add_argument("--steps", type=int, default=500, help="steps of the synthetic run (before --scale)")
    parser.add_argument("--scale", type=int, default=1, help="multiply --steps (10: the issue's 10x case)")
    parser.add_argument("--keys", type=int, default=30, help="metric keys the run records (TRL's, then the user's)")
    parser.add_argument("--watch", type=float, default=6.0, help="seconds the Runs tab stays open (refresh ticks)")
    parser.add_argument("--no-browser", action="store_true", help="plain HTTP only, no Chromium")
    parser.add_argument("--trackio", action="store_true", help="time trackio's link to the same data beside ours")
    parser.add_argument("--side-by-side", type=int, nargs="*", metavar="KEYS",
                        help="only the table of our link against trackio's, for each count of keys (default 30 200), "
                             "at --scale (give 10 for the 10x case); --tries rounds each")
    parser.add_argument("--tries", type=int, default=3, help="rounds of --side-by-side (median reported)")
    parser.add_argument("--floor", action="store_true",
                        help="with --side-by-side: also time the floor page (web_floor.py: one plot, one load event "
                             "drawing the same first chart), the least the stack can reach")
    parser.add_argument("--against", type=Path, metavar="DIR",
                        help="with --side-by-side: also time the link of the dashboard in DIR (an earlier commit, "
                             "e.g. `git archive COMMIT | tar -x -C DIR`) on the same run, in the same rounds: the "
                             "change's own gain, our link / its link")
    args = parser.parse_args()
    if args.side_by_side is not None:
        compare_with_trackio(args.scale, args.steps, args.side_by_side or [30, 200], args.tries, args.floor,
                             args.against.resolve() if args.against else None)
        return

    with tempfile.TemporaryDirectory(prefix="bench-web-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        steps, keys = args.steps * args.scale, metric_keys(args.keys)
        prepared = time.perf_counter()
        label = prepare(data_dir, steps, keys)
        print(f"prepared {steps} steps x {len(keys)} metrics in {time.perf_counter() - prepared:.0f} s", flush=True)
        server_work = time_server_work(data_dir)
        log_path = Path(tmp) / "server.log"
        starts = []
        process = None
        for index in range(args.starts):
            process, seconds = start_server(data_dir, _free_port(), log_path)
            starts.append(seconds)
            print(f"start {index + 1}/{args.starts}: first 200 after {seconds:.2f} s", flush=True)
            if index < args.starts - 1:
                stop_server(process)
        assert process is not None
        idle_rss, _, _ = memory(process.pid)
        url = next(
            f"http://127.0.0.1:{c.laddr.port}/" for c in psutil.Process(process.pid).net_connections(kind="tcp")
            if c.status == psutil.CONN_LISTEN
        )
        tab_click: list[float] = []
        deep_link: list[float] = []
        run_page: list[float] = []
        sections: dict[str, float] = {}
        if args.no_browser or not os.path.exists(CHROMIUM):
            for _ in range(5):
                urllib.request.urlopen(url, timeout=10).read()
            done = "GET / five times (no browser)"
        else:
            try:
                done, tab_click, deep_link, run_page, sections = browse(url, label, args.watch)
            except Exception as exc:  # noqa: BLE001 - report the memory anyway, and what failed
                done = f"browser step failed ({type(exc).__name__}: {str(exc).splitlines()[0]})"
        rss, child_rss, children = memory(process.pid)
        mapped = torch_mapped(process.pid)
        side_by_side: tuple[list[float], list[float]] = ([], [])
        if args.trackio and not args.no_browser and os.path.exists(CHROMIUM):
            trackio, trackio_url = start_trackio(Path(tmp), steps, keys)
            try:
                side_by_side = time_links(url + "run?run=1", trackio_url)
            finally:
                stop_server(trackio)
        stop_server(process)

    start = statistics.median(starts)
    print(f"\nrun open: {done}; synthetic run of {steps} steps x {len(keys)} metrics, 2 groups x 4 per step")
    print(f"{'measure':<42} {'value':>10}  {'goal':>8}  verdict")
    print(f"{'start to first HTTP 200 (median of ' + str(len(starts)) + ')':<42} {start:>9.2f}s  {'< 5 s':>8}  "
          f"{'ok' if start < GOAL_START_S else 'OVER'}")
    for name, times in (("Runs tab click to first chart (median)", tab_click),
                        ("link ?run=1&tab=runs to chart (median)", deep_link),
                        ("run page link run?run=1 to chart (median)", run_page)):
        if times:
            value = statistics.median(times)
            print(f"{name:<42} {value:>9.2f}s  {'< 1 s':>8}  {'ok' if value < GOAL_CHART_S else 'OVER'}"
                  f"  (each: {', '.join(f'{t:.2f}' for t in times)})")
    for name, times in (("the run page's link to its chart (side by side)", side_by_side[0]),
                        ("trackio's link to the project's chart", side_by_side[1])):
        if times:
            print(f"{name:<42} {statistics.median(times):>9.2f}s  (each: {', '.join(f'{t:.2f}' for t in times)})")
    for name, (wall_ms, cpu_ms) in server_work.items():
        if name.startswith("("):
            print(f"  {name}")
            continue
        print(f"{'server work: ' + name + ' (median)':<42} {wall_ms:>8.0f}ms  cpu {cpu_ms:.0f} ms")
    for section, seconds in sections.items():
        print(f"{'open section ' + section + ' to its charts':<42} {seconds:>9.2f}s")
    print(f"{'server RSS just after start':<42} {idle_rss:>8.0f}MB  {'':>8}")
    print(f"{'server RSS with the run open':<42} {rss:>8.0f}MB  {'< 400 MB':>8}  "
          f"{'ok' if rss < GOAL_RSS_MB else 'OVER'}")
    print(f"{'children RSS (' + str(children) + ' processes)':<42} {child_rss:>8.0f}MB")
    print(f"{'libtorch mapped into the server':<42} {'yes' if mapped else 'no':>10}  {'no':>8}  "
          f"{'ok' if not mapped else 'WRONG'}")


if __name__ == "__main__":
    main()
