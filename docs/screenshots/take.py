"""The README's screenshots, taken anew: a short run of the quick start on the real default model, then the Runs and
Inspect tabs in headless Chromium at 1440x900.

    .venv/bin/python docs/screenshots/take.py [--steps 12] [--data-dir DIR]

It trains ``--steps`` steps of the quick start's defaults headless (``grpo-dashboard train``: SmolLM2-135M-Instruct,
the single-digit sums; minutes on two CPU cores), serves the dashboard on that data directory, opens the run by its
link (``?run=1&tab=runs``, then ``&tab=inspect`` at its last step) and writes ``runs.png`` and ``inspect.png`` beside
this file. Left out: the other tabs, and waiting for a run long enough to show learning (the quick start's figure in
the README does that).
"""

from __future__ import annotations

import argparse
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
VIEWPORT = {"width": 1440, "height": 900}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _train(data_dir: Path, steps: int) -> None:
    config = data_dir / "quick_start.yaml"
    config.write_text(f"dataset_path: {REPO / 'examples' / 'arithmetic_sums1.jsonl'}\nmax_steps: {steps}\n")
    subprocess.run([sys.executable, "-m", "app", "train", str(config), "--data-dir", str(data_dir)], check=True)


def _wait_up(url: str, timeout_s: float = 180) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(1)
    raise TimeoutError(f"the dashboard did not answer at {url} within {timeout_s:.0f} s")


def _shoot(url: str, steps: int) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(f"{url}?run=1&tab=runs")
        chart = page.locator("#tab-runs .js-plotly-plot").first
        chart.wait_for(timeout=60_000)
        time.sleep(2)  # the doctor panel and the status card fill after the chart
        chart.scroll_into_view_if_needed()
        page.mouse.wheel(0, -250)  # the run's status card and the chart controls above the chart stay in view
        time.sleep(1)
        page.screenshot(path=str(HERE / "runs.png"))
        page.goto(f"{url}?run=1&step={steps}&tab=inspect")
        page.locator("#tab-inspect").get_by_text("advantage").first.wait_for(timeout=60_000)
        time.sleep(2)
        page.screenshot(path=str(HERE / "inspect.png"))
        browser.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=12, help="steps of the quick start to train first")
    parser.add_argument("--data-dir", type=Path, default=None, help="a data directory (default: a new temporary one)")
    args = parser.parse_args(argv)
    data_dir = args.data_dir or Path(tempfile.mkdtemp(prefix="grpo-screenshots-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    if not any((data_dir / "runs").glob("run-*")):
        _train(data_dir, args.steps)
    port = _free_port()
    server = subprocess.Popen([sys.executable, "-m", "app", "serve", "--data-dir", str(data_dir), "--port", str(port)],
                              start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}/"
        _wait_up(url)
        _shoot(url, args.steps)
    finally:
        server.terminate()
        server.wait(timeout=30)
    print(f"wrote {HERE / 'runs.png'} and {HERE / 'inspect.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
