"""A user's own TRL script records over HTTP into a served dashboard with a login's API token: every step once,
owned by that login; Cancel in the dashboard stops it; the dashboard stopped for part of the run and restarted
gets every step once; a spool left by a script that ended while the dashboard was down is sent by
``grpo-dashboard sync``; a revoked token records nothing."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

from grpo_core.integrations.spool import Spool
from storage import RunStatus, Store
from tests.integration.scripts.runner import REPO, check_recorded_run, script_env, start_script, wait_until
from tests.servers import free_port, serving


def _data_and_token(tmp_path) -> tuple[Path, str]:
    """A data directory for a served dashboard, and a token of login alice in its store."""
    data = tmp_path / "data"
    data.mkdir()
    store = Store(f"sqlite:///{data}/grpo.db")
    try:
        return data, store.create_api_token("alice", "cluster")[1]
    finally:
        store.close()


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGKILL)
        process.wait()


def test_script_records_over_http_and_cancel_stops_it(tmp_path, tiny_model_dir):
    data, token = _data_and_token(tmp_path)
    with serving(data) as served:
        store = Store(f"sqlite:///{data}/grpo.db")
        log = tmp_path / "log.txt"
        process = start_script(tiny_model_dir, tmp_path / "out", log, target=served.url, token=token, steps=2)
        try:
            assert process.wait(timeout=300) == 0, log.read_text()[-3000:]
        finally:
            _stop(process)
        assert token not in log.read_text()
        [run] = store.list_runs()
        assert run.status == RunStatus.COMPLETED and run.owner == "alice", (run.status, run.error)
        check_recorded_run(store, run.id, steps=2)
        origin = run.provenance["recorded_from"]
        assert origin["via"] == "http" and token not in origin["command"] and "***" in origin["command"]

        # cancel: the flag reaches the script with the answer to its next batch or progress report
        log2 = tmp_path / "log2.txt"
        process = start_script(tiny_model_dir, tmp_path / "out2", log2, target=served.url, token=token, steps=40,
                               step_sleep=0.5)
        try:
            second = wait_until(lambda: next((r for r in store.list_runs() if r.id != run.id and r.current_step >= 1),
                                             None), 240, "the second run recorded no step")
            store.request_cancel(second.id)
            assert process.wait(timeout=120) == 0, log2.read_text()[-3000:]
        finally:
            _stop(process)
        final = wait_until(lambda: (r := store.get_run(second.id)).status.is_final and r, 60, "not marked")
        assert final.status == RunStatus.CANCELLED and final.current_step < 40
        store.close()


def test_dashboard_stopped_and_restarted_during_the_run_gets_every_step_once(tmp_path, tiny_model_dir):
    data, token = _data_and_token(tmp_path)
    port = free_port()
    url = f"http://127.0.0.1:{port}/"
    steps = 8
    log = tmp_path / "log.txt"
    store = Store(f"sqlite:///{data}/grpo.db")
    with serving(data, port=port):
        process = start_script(tiny_model_dir, tmp_path / "out", log, target=url, token=token, steps=steps,
                               step_sleep=1.0, env={"GRPO_DASHBOARD_FINAL_SEND_S": "120"})
        run = wait_until(lambda: next((r for r in store.list_runs() if r.current_step >= 2), None), 240,
                         "two steps were not recorded")
    try:
        # the dashboard is down: training goes on, its steps wait in the spool
        spool_root = tmp_path / "out" / "dashboard-spool"
        wait_until(lambda: any(Spool.open(p).last_seq > Spool.open(p).acked for p in spool_root.iterdir()), 120,
                   "no step waited in the spool")
        assert process.poll() is None, log.read_text()[-3000:]
        with serving(data, port=port):
            assert process.wait(timeout=300) == 0, log.read_text()[-3000:]
    finally:
        _stop(process)
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, (final.status, final.error)
    check_recorded_run(store, run.id, steps=steps)
    assert all(len(store.groups_at(run.id, step)) == 1 for step in range(1, steps + 1))  # once each
    [spool] = [Spool.open(p) for p in spool_root.iterdir()]
    assert spool.finished and store.ingest_cursor(run.id).last_seq == spool.last_seq
    assert "answers again" in log.read_text()
    store.close()


def test_sync_sends_the_spool_of_a_script_that_ended_while_the_dashboard_was_down(tmp_path, tiny_model_dir):
    data, token = _data_and_token(tmp_path)
    port = free_port()
    log = tmp_path / "log.txt"
    process = start_script(tiny_model_dir, tmp_path / "out", log, target=f"http://127.0.0.1:{port}", token=token,
                           steps=2, env={"GRPO_DASHBOARD_FINAL_SEND_S": "1"})
    try:
        assert process.wait(timeout=300) == 0, log.read_text()[-3000:]  # training never waited for the dashboard
    finally:
        _stop(process)
    assert "grpo-dashboard sync" in log.read_text()
    spool_root = tmp_path / "out" / "dashboard-spool"
    command = [sys.executable, "-m", "app", "sync", str(spool_root)]
    with serving(data, port=port):
        revoked = Store(f"sqlite:///{data}/grpo.db")
        wrong = revoked.create_api_token("mallory", "other")
        revoked.revoke_api_token(wrong[0].id)
        # another token is not bound to the spool's URL: sync refuses it without sending (named here, it is sent)
        unbound = subprocess.run([*command, "--token", wrong[1]], cwd=REPO, env=script_env(), capture_output=True,
                                 text=True, timeout=120)
        assert unbound.returncode == 1 and "not recorded with this token" in unbound.stderr
        refused = subprocess.run([*command, "--token", wrong[1], "--url", f"http://127.0.0.1:{port}"], cwd=REPO,
                                 env=script_env(), capture_output=True, text=True, timeout=120)
        assert refused.returncode == 1 and "401" in refused.stderr
        assert revoked.list_runs() == []
        for _ in range(2):  # the second sync finds everything sent
            sent = subprocess.run([*command, "--token", token], cwd=REPO, env=script_env(), capture_output=True,
                                  text=True, timeout=120)
            assert sent.returncode == 0, sent.stderr
        [run] = revoked.list_runs()
        assert run.status == RunStatus.COMPLETED and run.owner == "alice"
        check_recorded_run(revoked, run.id, steps=2)
        revoked.close()
