"""Restarting the dashboard does not stop training: workers live in their own session, and a new launcher on the
same store re-attaches to them through the pids in the store (it neither marks them failed nor starts them again).

The run is held at step 3's scoring by a gate rule (tests/integration/gates.py), so the restart surely happens while
it trains; the test releases it once the new launcher (or the new dashboard process) is up.
"""

from __future__ import annotations

import gc
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sqlalchemy import text

from grpo_core.processes import free_port, process_alive
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import REWARDS, tiny_config, wait_for
from tests.integration.gates import Gate

MAX_STEPS = 4


def _gated_config(tiny_model_dir: Path, tmp_path: Path):
    """A 4-step config whose gate rule holds the worker at step 3's scoring until the test releases it."""
    gate = Gate.create(tmp_path, at_step=2)
    return tiny_config(tiny_model_dir, max_steps=MAX_STEPS, rewards=[REWARDS[1], gate.rule()]), gate


def _assert_trained_once(store, run_id: int) -> None:
    final = store.get_run(run_id)
    log = Path(final.log_path).read_text(errors="replace")
    assert final.status == RunStatus.COMPLETED, (final.error, log[-2000:])
    assert log.count(f"training {MAX_STEPS} steps") == 1  # one worker, never started again
    with store.engine.connect() as conn:
        counts = conn.execute(
            text("SELECT step, key, COUNT(*) FROM metrics WHERE run_id = :r GROUP BY step, key"), {"r": run_id}
        ).all()
    assert sorted({step for step, _, _ in counts}) == list(range(1, MAX_STEPS + 1))
    assert all(n == 1 for _, _, n in counts)
    assert store.group_steps(run_id) == list(range(1, MAX_STEPS + 1))
    assert all(len(store.groups_at(run_id, step)) == 2 for step in range(1, MAX_STEPS + 1))


@pytest.mark.backends("sqlite", "postgres")
def test_a_new_launcher_reattaches_to_a_running_worker(store, settings, tiny_model_dir, tmp_path):
    config, gate = _gated_config(tiny_model_dir, tmp_path)
    run = submit_run(store, config).run
    first = Launcher(store, settings)
    gate.wait_reached(240, launcher=first)
    pid = store.get_run(run.id).worker_pid
    del first  # the dashboard process "dies"; its Popen handle goes with it
    gc.collect()

    second = Launcher(store, settings)
    for _ in range(3):
        second.tick()
        time.sleep(0.5)
    during = store.get_run(run.id)
    assert during.status == RunStatus.RUNNING and during.worker_pid == pid
    assert process_alive(pid)
    gate.release()
    assert second.wait_idle(timeout_s=240)
    _assert_trained_once(store, run.id)


def _serve(settings, port: int, log: Path) -> subprocess.Popen:
    command = [sys.executable, "-m", "app", "serve", "--data-dir", str(settings.data_dir), "--db", settings.db_url,
               "--host", "127.0.0.1", "--port", str(port)]
    with open(log, "ab") as out:
        return subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        probe.settimeout(0.5)
        return probe.connect_ex(("127.0.0.1", port)) == 0


def test_killing_and_restarting_the_dashboard_process_keeps_training(store, settings, tiny_model_dir, tmp_path):
    config, gate = _gated_config(tiny_model_dir, tmp_path)
    run = submit_run(store, config).run
    log = tmp_path / "serve.log"
    servers = [_serve(settings, free_port(), log)]
    try:
        gate.wait_reached(300)
        pid = store.get_run(run.id).worker_pid
        os.killpg(servers[0].pid, signal.SIGKILL)  # the dashboard dies hard: no shutdown code runs
        servers[0].wait(timeout=30)
        assert process_alive(pid), "the worker died with the dashboard"

        port = free_port()
        servers.append(_serve(settings, port, log))
        wait_for(lambda: _listening(port), 120)
        time.sleep(2 * settings.poll_interval_s)  # a few launcher passes over the running run
        during = store.get_run(run.id)
        assert during.status == RunStatus.RUNNING and during.worker_pid == pid, log.read_text()[-2000:]
        gate.release()
        wait_for(lambda: store.get_run(run.id).status.is_final, 240)
        _assert_trained_once(store, run.id)
    finally:
        gate.release()
        for server in servers:
            if server.poll() is None:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(timeout=30)
