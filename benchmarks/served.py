"""The dashboard served for a benchmark: ``python -m app serve`` on a data directory and port, in its own session,
its output appended to a log; waited for until ``/`` answers HTTP 200; stopped (terminate, then kill).

Used by ``bench_web.py``, ``bench_watchers.py`` and ``bench_responsive.py``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_dashboard(data_dir: Path, port: int, log_path: Path, *, env: dict[str, str] | None = None,
                    timeout_s: float = 120, poll_s: float = 0.2, root: Path = ROOT) -> tuple[subprocess.Popen, float]:
    """Start the dashboard on ``127.0.0.1:port`` with ``data_dir`` (``env`` added to this process's environment,
    Gradio's analytics off), the one in ``root`` (default: this checkout; another: a copy of an earlier commit, its
    code first on the path); returns the process and the seconds until ``/`` answered 200.

    Raises:
        RuntimeError: ``/`` did not answer 200 within ``timeout_s`` (the process is killed; the message ends with the
            log's last 2,000 characters).
    """
    child_env = {**os.environ, "GRADIO_ANALYTICS_ENABLED": "False", **(env or {})}
    if root != ROOT:
        child_env["PYTHONPATH"] = os.pathsep.join([str(root), *filter(None, [child_env.get("PYTHONPATH")])])
    started = time.perf_counter()
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--data-dir", str(data_dir), "--port", str(port)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=root, env=child_env,
        )
    url = f"http://127.0.0.1:{port}/"
    while time.perf_counter() - started < timeout_s:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return process, time.perf_counter() - started
        except OSError:
            time.sleep(poll_s)
    process.kill()
    raise RuntimeError("the dashboard did not answer:\n" + log_path.read_text()[-2000:])


def stop_server(process: subprocess.Popen, timeout_s: float = 30) -> None:
    """Terminate ``process`` and wait ``timeout_s`` for it, then kill it."""
    process.terminate()
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
