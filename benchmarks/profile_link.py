"""Where a link's first chart spends its time: one link to a run (``?run=1&tab=runs``) opened in headless Chromium
with the V8 CPU profiler on and the page's requests timed, from navigation to plotly's first trace drawn.

Prepares the same synthetic run as ``bench_web.py`` (``--steps``, ``--scale``, ``--keys``), starts the dashboard
(or uses ``--url``, a dashboard already serving that run), warms Chromium with one page, then profiles ``--rounds``
fresh pages. Reports, per round: the page's config (components, dependencies, bytes), the moments that mark the
path (the HTML received, Gradio's theme fetched: the config processed, plotly.js received, the page load's events
sent to the queue, their answers received, the chart drawn), and the main thread's sampled time by script (Gradio's
page runtime, its components, plotly.js) and by Gradio's own functions that grow with the page's size (building the
component tree, ``find_attached_events``, the loading statuses updated at each event). Sampled times include the
machine's load; compare the shares, not the seconds, across machines.

Usage: ``python benchmarks/profile_link.py [--steps 500] [--scale 10] [--keys 30] [--rounds 2] [--url URL]``
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_web  # noqa: E402
from web_pages import CHART_DRAWN, CHROMIUM  # noqa: E402

#: Gradio front-end functions whose cost grows with the page's components and dependencies (gradio 6's core and
#: Blocks chunks), shown with their inclusive sampled time.
GRADIO_FUNCTIONS = ("traverse", "postprocess", "find_attached_events", "create_node", "reload", "dispatch",
                    "update_loading_stati_state", "update_state", "render_previously_invisible_children", "get_data")
#: Requests that mark the path, by a part of their address.
MARKS = (("theme.css", "Gradio theme fetched (config read)"), ("PlotlyPlot-", "plotly.js received"),
         ("queue/join", "an event sent"), ("queue/data", "answers received"))


def _script(url: str) -> str:
    name = url.rsplit("/", 1)[-1].split("?")[0]
    if name.startswith(("index-", "core-", "Blocks-", "Index-Akn07")):
        return "gradio runtime (" + name.split("-")[0] + ")"
    if name.startswith("PlotlyPlot-"):
        return "plotly.js"
    return "components and other" if name.endswith(".js") else name or "(native)"


def summarise(profile: dict) -> tuple[collections.Counter, collections.Counter, int]:
    """``(ms by script, inclusive ms by Gradio function, total sampled ms)`` of a ``Profiler.stop`` profile."""
    nodes = {node["id"]: node for node in profile["nodes"]}
    parent = {child: node["id"] for node in profile["nodes"] for child in node.get("children", [])}
    by_script: collections.Counter = collections.Counter()
    by_function: collections.Counter = collections.Counter()
    total = 0
    for sample, delta in zip(profile["samples"], profile["timeDeltas"], strict=False):
        frame = nodes[sample]["callFrame"]
        total += delta
        by_script[_script(frame["url"]) if frame["url"] else frame["functionName"] or "(native)"] += delta
        seen, node = set(), sample
        while node is not None and node in nodes:
            name = nodes[node]["callFrame"]["functionName"]
            if name in GRADIO_FUNCTIONS and name not in seen:
                by_function[name] += delta
                seen.add(name)
            node = parent.get(node)
    return by_script, by_function, total


def profile_link(url: str, rounds: int) -> None:
    from playwright.sync_api import sync_playwright

    with urllib.request.urlopen(url + "config", timeout=30) as response:
        config = response.read()
    parsed = json.loads(config)
    print(f"page config: {len(parsed['components'])} components, {len(parsed['dependencies'])} dependencies, "
          f"{len(config) // 1000} KB")
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.goto(url + "?run=1&tab=runs")
        page.wait_for_function(CHART_DRAWN, polling=20, timeout=120_000)
        page.close()
        for index in range(rounds):
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            cdp = page.context.new_cdp_session(page)
            cdp.send("Profiler.enable")
            cdp.send("Profiler.setSamplingInterval", {"interval": 1000})
            cdp.send("Profiler.start")
            marks: dict[str, list[float]] = collections.defaultdict(list)
            started = time.perf_counter()

            def note(request, event: str, marks=marks, started=started) -> None:
                for part, label in MARKS:
                    if part in request.url:
                        marks[f"{label} ({event})"].append(time.perf_counter() - started)

            page.on("request", lambda r: note(r, "sent") if "queue/join" in r.url else None)
            page.on("requestfinished", lambda r: note(r, "done"))
            page.goto(url + "?run=1&tab=runs", wait_until="commit")
            page.wait_for_function(CHART_DRAWN, polling=20, timeout=120_000)
            drawn = time.perf_counter() - started
            by_script, by_function, total = summarise(cdp.send("Profiler.stop")["profile"])
            page.close()
            print(f"\nround {index + 1}: chart drawn after {drawn:.2f} s; main thread sampled {total / 1000:.0f} ms")
            for label, times in sorted(marks.items(), key=lambda item: item[1][0]):
                print(f"  {label:<48} first {times[0]:6.2f} s  last {times[-1]:6.2f} s  ({len(times)}x)")
            print("  by script: " + ", ".join(f"{name} {ms / 1000:.0f} ms" for name, ms in by_script.most_common(7)))
            print("  Gradio functions (inclusive): "
                  + ", ".join(f"{name} {by_function[name] / 1000:.0f} ms" for name in GRADIO_FUNCTIONS))
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--scale", type=int, default=10)
    parser.add_argument("--keys", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--url", help="a dashboard already serving the run (its address, ending in /)")
    args = parser.parse_args()
    if args.url:
        profile_link(args.url, args.rounds)
        return
    with tempfile.TemporaryDirectory(prefix="profile-link-") as tmp:
        data_dir = Path(tmp) / "data"
        data_dir.mkdir()
        bench_web.prepare(data_dir, args.steps * args.scale, bench_web.metric_keys(args.keys))
        port = bench_web._free_port()
        process, _ = bench_web.start_server(data_dir, port, Path(tmp) / "server.log")
        try:
            profile_link(f"http://127.0.0.1:{port}/", args.rounds)
        finally:
            bench_web.stop_server(process)


if __name__ == "__main__":
    main()
