"""Browser-test settings and fixtures. Playwright's assertions wait up to 30 s (not its default 5 s) for the page to
show what they expect. Each assertion still waits on the page's own state, never on a fixed sleep; the longer bound
only keeps a loaded 2-core machine (a CI run beside other work) from failing a test that a moment more would pass.

Fixtures: ``server`` (the dashboard served by ``python -m app serve`` on a free port, one per test module; a module
serving its own overrides it), ``browser`` (headless Chromium, one per module), ``page`` (a fresh page on the
server, the Datasets tab loaded). The form helpers are in ``tests/helpers.py``.

Chromium comes from Debian's package (``/usr/bin/chromium``), driven by Playwright; ``.ci/run`` installs it.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest
from playwright.sync_api import expect

expect.set_options(timeout=30_000)


CHROMIUM_CANDIDATES = ("/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome")


CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def _chromium() -> str | None:
    for candidate in CHROMIUM_CANDIDATES:
        if os.path.exists(candidate):
            return candidate
    return shutil.which("chromium")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")

def server(tmp_path_factory):
    """The dashboard served by ``python -m app serve`` on a free port, with its own data directory."""
    data_dir = tmp_path_factory.mktemp("e2e-data")
    port = _free_port()
    log_path = data_dir / "server.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--data-dir", str(data_dir), "--port", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            time.sleep(0.5)
    else:
        process.kill()
        raise AssertionError("the dashboard did not answer:\n" + log_path.read_text()[-3000:])
    yield {"url": url, "data_dir": data_dir}
    process.terminate()
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()


@pytest.fixture(scope="module")

def browser():
    executable = _chromium()
    if executable is None:
        if os.environ.get("GRPO_E2E_REQUIRED"):
            pytest.fail("Chromium is required for the browser tests (apt-get install chromium)")
        pytest.skip("Chromium is not installed (apt-get install chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        instance = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_FLAGS)
        yield instance
        instance.close()


@pytest.fixture

def page(browser, server):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    result = context.new_page()
    result.set_default_timeout(30_000)
    result.goto(server["url"])
    result.get_by_role("tab", name="Datasets").wait_for()
    yield result
    context.close()
