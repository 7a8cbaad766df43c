"""A user's own TRL script with ``DashboardCallback`` under ``accelerate launch`` with two processes (gloo on the
CPU): only the main process writes, the groups of both processes are recorded with TRL's advantages, and Cancel in
the dashboard stops both at the same step."""

from __future__ import annotations

import signal
import sys

from storage import RunStatus
from tests.integration.scripts.runner import check_recorded_run, start_script, wait_until
from tests.servers import free_port


def _accelerate() -> list[str]:
    return [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--main_process_port", str(free_port()),
            "--num_processes", "2", "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no"]


def test_two_processes_record_one_run_with_the_groups_of_both(settings, store, tiny_model_dir, tmp_path):
    log = tmp_path / "log.txt"
    process = start_script(tiny_model_dir, tmp_path / "out", log, target=str(settings.data_dir), steps=2,
                           launcher=_accelerate())
    try:
        assert process.wait(timeout=600) == 0, log.read_text()[-4000:]
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
    [run] = store.list_runs()  # one run, though both processes ran the callback
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.config["num_processes"] == 2
    check_recorded_run(store, run.id, steps=2)
    for step in (1, 2):  # 4 completions per process, groups of 4: one prompt from each process
        assert len(store.groups_at(run.id, step)) == 2


def test_cancel_stops_both_processes_at_the_same_step(settings, store, tiny_model_dir, tmp_path):
    log = tmp_path / "log.txt"
    process = start_script(tiny_model_dir, tmp_path / "out", log, target=str(settings.data_dir), steps=40,
                           step_sleep=0.5, launcher=_accelerate())
    try:
        run = wait_until(lambda: next((r for r in store.list_runs() if r.current_step >= 1), None), 400,
                         "no step was recorded")
        store.request_cancel(run.id)
        assert process.wait(timeout=300) == 0, log.read_text()[-4000:]  # neither process waits in a collective
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
    final = store.get_run(run.id)
    assert final.status == RunStatus.CANCELLED and final.current_step < 40, (final.status, final.error)
    assert log.read_text().count("TRAIN_SECONDS") == 2  # both processes left train() normally
