"""Runs trained as Ray jobs (``executor: ray``) on a real Ray cluster: the tiny Llama, through the launcher, into the
store, each job submitted with ``JobSubmissionClient`` and watched through Ray.

* a run completes with every step recorded once, its Ray job succeeded and its log read from Ray;
* a cancel (the store's flag and Ray's ``stop_job``) ends ``cancelled`` with a checkpoint, the job ``STOPPED``;
* a worker killed inside its job ends ``failed`` with the tail of the job's log;
* a new launcher (a restarted dashboard) re-attaches to the running job by its stored submission id: the job is
  neither submitted again nor marked failed, and every step is recorded once.

Needs a Ray head (``ray start --head --num-cpus 2``; ``.ci/run`` starts one) whose job submission address is in
``GRPO_TEST_RAY_ADDRESS`` (``http://127.0.0.1:8265``); skipped without one unless ``GRPO_RAY_REQUIRED=1``. The
head must run on this machine: the store is a SQLite file and the run folders are under ``tmp_path``. Each cancel,
kill or restart happens while a :class:`tests.integration.gates.Gate` holds the worker at a known step.
"""

from __future__ import annotations

import gc
import os
import signal
import time

import pytest
from sqlalchemy import text

from grpo_core.runs.files import last_checkpoint
from grpo_core.submit.queue import submit_run
from grpo_core.training.executors import RayExecutor
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import REWARDS, tiny_config, wait_for
from tests.integration.gates import Gate
from tests.ray_head import ray_address_or_skip

ADDRESS = ray_address_or_skip()


@pytest.fixture
def ray_settings(settings):
    return settings.with_overrides(executor="ray", ray_address=ADDRESS)


@pytest.fixture(scope="module")
def client():
    from ray.job_submission import JobSubmissionClient

    return JobSubmissionClient(ADDRESS)


def _assert_steps_recorded_once(store, run_id: int, steps: int) -> None:
    with store.engine.connect() as conn:
        counts = conn.execute(
            text("SELECT step, key, COUNT(*) FROM metrics WHERE run_id = :r GROUP BY step, key"), {"r": run_id}
        ).all()
    assert sorted({step for step, _, _ in counts}) == list(range(1, steps + 1))
    assert all(n == 1 for _, _, n in counts), "a metric row was recorded twice"
    assert {key for _, key, _ in counts} >= {"reward", "loss"}
    assert store.group_steps(run_id) == list(range(1, steps + 1))
    for step in range(1, steps + 1):
        assert len(store.groups_at(run_id, step)) == 2, f"step {step}"


def _jobs_of(client, run) -> list:
    """The cluster's jobs of ``run`` (by its folder: every test's store numbers its runs from 1)."""
    return [job for job in client.list_jobs() if (job.metadata or {}).get("grpo_run_dir") == run.run_dir]


def test_a_ray_job_trains_the_run_with_every_step_recorded(store, ray_settings, tiny_model_dir, client):
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=2)).run
    launcher = Launcher(store, ray_settings)
    assert isinstance(launcher.executor, RayExecutor)
    assert launcher.wait_idle(timeout_s=240)

    final = store.get_run(run.id)
    log = launcher.log_tail(final, max_lines=400)
    assert final.status == RunStatus.COMPLETED, (final.error, log[-2000:])
    assert final.ray_submission_id and final.ray_submission_id.startswith(f"grpo-run-{run.id:05d}-")
    assert final.log_path is None  # the output is the job's log
    wait_for(lambda: client.get_job_status(final.ray_submission_id).is_terminal(), 60)  # the worker exits after
    assert str(client.get_job_status(final.ray_submission_id).value) == "SUCCEEDED"
    info = client.get_job_info(final.ray_submission_id)
    assert "grpo_core.training.worker" in info.entrypoint and ray_settings.db_url not in info.entrypoint
    assert f"[run {run.id}] training 2 steps" in log
    assert final.run_dir == str(ray_settings.runs_dir / f"run-{run.id:05d}")
    assert (ray_settings.runs_dir / f"run-{run.id:05d}" / "adapter" / "adapter_config.json").is_file()
    _assert_steps_recorded_once(store, run.id, steps=2)


def test_cancel_stops_the_ray_job_and_keeps_a_checkpoint(store, ray_settings, tiny_model_dir, tmp_path, client):
    gate = Gate.create(tmp_path, at_step=1)  # step 1 recorded, step 2 generated and held before its scoring
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=50, rewards=[REWARDS[1], gate.rule()])).run
    launcher = Launcher(store, ray_settings)
    gate.wait_reached(240, launcher=launcher)
    launcher.cancel(run.id)  # the store's flag, and stop_job: SIGTERM, which the worker turns into a stop too
    gate.release()
    wait_for(lambda: store.get_run(run.id).status.is_final, 120, interval_s=0.2, launcher=launcher)

    final = store.get_run(run.id)
    assert final.status == RunStatus.CANCELLED, (final.error, launcher.log_tail(final)[-2000:])
    assert final.error is None  # it stopped by itself at a step boundary, not by force
    assert final.current_step == 2
    checkpoint = last_checkpoint(final.run_dir)
    assert checkpoint is not None and checkpoint.step == 2  # saved on the way out, for Resume
    _assert_steps_recorded_once(store, run.id, steps=2)
    wait_for(lambda: client.get_job_status(final.ray_submission_id).is_terminal(), 60)
    assert str(client.get_job_status(final.ray_submission_id).value) == "STOPPED"


def test_a_worker_killed_inside_its_job_fails_the_run_with_its_log_tail(store, ray_settings, tiny_model_dir, tmp_path):
    gate = Gate.create(tmp_path, at_step=1)
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=3, rewards=[REWARDS[1], gate.rule()])).run
    launcher = Launcher(store, ray_settings)
    try:
        gate.wait_reached(240, launcher=launcher)
        os.kill(store.get_run(run.id).worker_pid, signal.SIGKILL)  # the worker process inside the Ray job
        wait_for(lambda: store.get_run(run.id).status.is_final, 60, interval_s=0.2, launcher=launcher)
    finally:
        gate.release()

    final = store.get_run(run.id)
    assert final.status == RunStatus.FAILED
    assert final.error.startswith("the worker process exited without reporting a result; last lines of its log:")
    assert f"[run {run.id}] training 3 steps" in final.error  # the tail came from the Ray job's log
    assert store.group_steps(run.id) == [1]


def test_a_new_launcher_reattaches_to_the_running_ray_job(store, ray_settings, tiny_model_dir, tmp_path, client):
    gate = Gate.create(tmp_path, at_step=2)  # steps 1-2 recorded, step 3 held
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=4, rewards=[REWARDS[1], gate.rule()])).run
    first = Launcher(store, ray_settings)
    try:
        gate.wait_reached(240, launcher=first)
        submission_id = store.get_run(run.id).ray_submission_id
        del first  # the dashboard "dies"
        gc.collect()

        second = Launcher(store, ray_settings)
        for _ in range(3):
            second.tick()
            time.sleep(0.5)
        during = store.get_run(run.id)
        assert during.status == RunStatus.RUNNING and during.ray_submission_id == submission_id
        assert str(client.get_job_status(submission_id).value) == "RUNNING"
    finally:
        gate.release()
    assert second.wait_idle(timeout_s=240)

    final = store.get_run(run.id)
    log = second.log_tail(final, max_lines=400)
    assert final.status == RunStatus.COMPLETED, (final.error, log[-2000:])
    assert [job.submission_id for job in _jobs_of(client, final)] == [submission_id]  # submitted once
    assert log.count("training 4 steps") == 1
    _assert_steps_recorded_once(store, run.id, steps=4)
