"""The real dashboard served for a test: ``python -m app serve`` in its own process session on a free port, with its
own data folder and log, stopped (SIGTERM, then SIGKILL) afterwards. Shared by the tests that talk to a served app."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Served:
    """A running dashboard: ``url`` ends with ``/``; ``log_path`` holds its output."""

    url: str
    log_path: Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def serving(data_dir: Path, *args: str, log_path: Path | None = None, timeout_s: float = 180,
            port: int | None = None) -> Iterator[Served]:
    """Serve the dashboard on ``data_dir`` with the extra ``serve`` arguments ``args`` (``--auth u:p``, ...) until the
    block ends. The environment's ``GRPO_*`` settings are left out, so only ``args`` configure it.

    Fails the test (with the log's end) when the server exits or does not answer ``/config`` within ``timeout_s``.
    ``port``: serve there (a dashboard restarted where its clients know it), else on a free port.
    """
    port = port or free_port()
    log_path = log_path or Path(data_dir) / "serve.log"
    Path(log_path).parent.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update(HF_HUB_OFFLINE="1", GRADIO_ANALYTICS_ENABLED="False", PYTHONUNBUFFERED="1")
    command = [sys.executable, "-m", "app", "serve", "--data-dir", str(data_dir), "--port", str(port), *args]
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + timeout_s
        while True:
            if process.poll() is not None:
                pytest.fail(f"the server exited with {process.returncode}:\n{Path(log_path).read_text()[-3000:]}")
            try:
                httpx.get(f"{url}config", timeout=5)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    pytest.fail(f"the server did not answer within {timeout_s} s:\n"
                                f"{Path(log_path).read_text()[-3000:]}")
                time.sleep(0.5)
        yield Served(url=url, log_path=Path(log_path))
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
