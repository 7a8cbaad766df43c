"""The executors and the launcher's use of them, without a cluster: the Ray executor talks to a fake
``JobSubmissionClient`` that records what it was asked (the real cluster is in tests/integration/test_ray_executor.py).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time

import pytest

from grpo_core.settings import load_settings
from grpo_core.training.executors import (
    LocalExecutor,
    RayExecutor,
    WorkerState,
    carried_env,
    make_executor,
    ray_entrypoint,
    ray_gpu_count,
)
from grpo_core.training.gpus import GpuAllocationError
from grpo_core.training.launcher import FORCED_STOP, Launcher
from storage import RunStatus


class FakeJobs:
    """Answers like ``ray.job_submission.JobSubmissionClient``; ``status``/``logs`` are set by the test."""

    def __init__(self, gpus: float = 0.0) -> None:
        self.submitted: list[dict] = []
        self.stopped: list[str] = []
        self.status: dict[str, str] = {}
        self.logs: dict[str, str] = {}
        self.unreachable = False

    def submit_job(self, **kwargs) -> str:
        self.submitted.append(kwargs)
        self.status[kwargs["submission_id"]] = "PENDING"
        return kwargs["submission_id"]

    def get_job_status(self, submission_id: str) -> str:
        if self.unreachable:
            raise ConnectionError("cluster down")
        return self.status[submission_id]

    def stop_job(self, submission_id: str) -> bool:
        self.stopped.append(submission_id)
        return True

    def get_job_logs(self, submission_id: str) -> str:
        return self.logs.get(submission_id, "")


def _ray_launcher(store, settings, jobs: FakeJobs, gpus: float = 0.0, **overrides) -> Launcher:
    ray_settings = settings.with_overrides(executor="ray", ray_address="http://head:8265", **overrides)
    executor = RayExecutor(ray_settings.ray_address, stop_wait_s=ray_settings.cancel_grace_s, client=jobs)
    executor._cluster_gpus = (gpus, float("inf"))  # never asked again
    return Launcher(store, ray_settings, env={"HF_HUB_OFFLINE": "1"}, executor=executor)


def _queue(store, name: str = "r", **config):
    return store.create_run(name=name, config={"max_steps": 1, **config}, dataset_id=None, max_steps=1)


def test_settings_choose_the_executor_and_refuse_ray_without_an_address(tmp_path, monkeypatch):
    for name in ("GRPO_EXECUTOR", "GRPO_RAY_ADDRESS", "GRPO_SHARED_DIR"):
        monkeypatch.delenv(name, raising=False)
    local = load_settings(data_dir=tmp_path / "d")
    assert local.executor == "local" and isinstance(make_executor(local), LocalExecutor)
    assert local.runs_dir == tmp_path / "d" / "runs"
    ray = load_settings(data_dir=tmp_path / "d", executor="ray", ray_address="http://head:8265",
                        shared_dir=tmp_path / "shared")
    assert isinstance(make_executor(ray), RayExecutor)
    assert ray.runs_dir == tmp_path / "shared" / "runs"
    assert ray.datasets_dir == tmp_path / "shared" / "datasets"
    assert ray.model_cache_dir == tmp_path / "shared" / "models"
    with pytest.raises(ValueError, match="--ray-address"):
        load_settings(data_dir=tmp_path / "d", executor="ray")
    with pytest.raises(ValueError, match="local, ray"):
        load_settings(data_dir=tmp_path / "d", executor="slurm")
    monkeypatch.setenv("GRPO_EXECUTOR", "ray")
    monkeypatch.setenv("GRPO_RAY_ADDRESS", "http://h:8265")
    assert load_settings(data_dir=tmp_path / "d").ray_address == "http://h:8265"


@pytest.mark.parametrize(
    ("config", "cluster_gpus", "expected"),
    [
        ({}, 0, 0),  # device auto on a CPU cluster: trains on the CPU
        ({}, 4, 1),
        ({"num_processes": 2}, 4, 2),
        ({"device": "cpu", "num_processes": 2}, 4, 0),
        ({"gpus": "3"}, 4, 1),  # ids name one machine's GPUs: only their number counts
        ({"gpus": "0,1", "num_processes": 2}, 8, 2),
    ],
)
def test_ray_gpu_count(config, cluster_gpus, expected):
    assert ray_gpu_count(config, cluster_gpus) == expected


def test_ray_gpu_count_refuses_more_gpus_than_the_cluster_has():
    with pytest.raises(GpuAllocationError, match="needs 2 GPUs; the Ray cluster has 1"):
        ray_gpu_count({"num_processes": 2}, 1)
    with pytest.raises(GpuAllocationError):
        ray_gpu_count({"gpus": "0"}, 0)


def test_the_entrypoint_runs_the_worker_command_in_the_run_folder(tmp_path):
    folder = tmp_path / "a b"
    line = ray_entrypoint([sys.executable, "-m", "grpo_core.training.worker", "7"], folder)
    assert shlex.split(line) == ["cd", str(folder), "&&", "exec", sys.executable, "-m", "grpo_core.training.worker", "7"]


def test_only_worker_settings_travel_to_a_ray_job():
    environ = {"GRPO_WORKER_MAX_MEMORY_MB": "3072", "HF_HUB_OFFLINE": "1", "PATH": "/x", "HOME": "/root",
               "AWS_SECRET_ACCESS_KEY": "s"}
    assert carried_env(environ) == {"GRPO_WORKER_MAX_MEMORY_MB": "3072", "HF_HUB_OFFLINE": "1"}


def test_the_launcher_submits_a_queued_run_as_a_ray_job(store, settings):
    jobs = FakeJobs()
    launcher = _ray_launcher(store, settings, jobs, shared_dir=settings.data_dir / "shared")
    run = _queue(store, "two", num_processes=2, device="cpu")
    launcher.tick()

    [job] = jobs.submitted
    started = store.get_run(run.id)
    assert started.status == RunStatus.RUNNING
    assert started.ray_submission_id == job["submission_id"]
    assert started.run_dir == str(settings.data_dir / "shared" / "runs" / f"run-{run.id:05d}")
    assert job["entrypoint_num_cpus"] == 2 and job["entrypoint_num_gpus"] is None
    assert job["metadata"]["grpo_run_id"] == str(run.id) and job["metadata"]["grpo_run_dir"] == started.run_dir
    argv = shlex.split(job["entrypoint"])
    assert argv[:2] == ["cd", started.run_dir]
    assert "accelerate.commands.launch" in argv and argv[argv.index("--shared-dir") + 1] == str(
        settings.data_dir / "shared")
    env = job["runtime_env"]["env_vars"]
    assert env["GRPO_DB_URL"] == settings.db_url and settings.db_url not in job["entrypoint"]
    assert env["GRPO_SHARED_DIR"] == str(settings.data_dir / "shared")
    assert env["HF_HUB_OFFLINE"] == "1"
    assert env["RAY_JOB_STOP_WAIT_TIME_S"] == "10"  # multi-process: Ray's SIGTERM comes after the grace period

    launcher.tick()  # still PENDING at Ray: waiting, not failed
    assert store.get_run(run.id).phase == "waiting for the Ray cluster's resources"
    assert store.get_run(run.id).status == RunStatus.RUNNING


def test_ray_asks_for_the_gpus_a_run_needs_and_fails_one_the_cluster_cannot_hold(store, settings):
    jobs = FakeJobs()
    launcher = _ray_launcher(store, settings, jobs, gpus=2, max_concurrent_runs=4)
    pair = _queue(store, "pair", num_processes=2)
    huge = _queue(store, "huge", num_processes=3)
    launcher.tick()
    assert [job["entrypoint_num_gpus"] for job in jobs.submitted] == [2]
    assert store.get_run(pair.id).status == RunStatus.RUNNING
    assert store.get_run(huge.id).status == RunStatus.FAILED
    assert "the Ray cluster has 2" in store.get_run(huge.id).error


def test_a_gone_ray_job_fails_its_run_with_the_job_log_tail_and_an_unreachable_cluster_fails_nothing(store, settings):
    jobs = FakeJobs()
    launcher = _ray_launcher(store, settings, jobs)
    run = _queue(store)
    launcher.tick()
    submission_id = store.get_run(run.id).ray_submission_id
    jobs.status[submission_id] = "RUNNING"
    jobs.unreachable = True
    launcher.tick()
    assert store.get_run(run.id).status == RunStatus.RUNNING

    jobs.unreachable = False
    jobs.status[submission_id] = "FAILED"
    jobs.logs[submission_id] = "\n".join(f"line {i}" for i in range(100)) + "\nKilled"
    launcher.tick()
    final = store.get_run(run.id)
    assert final.status == RunStatus.FAILED
    assert final.error.startswith("the worker process exited without reporting a result; last lines of its log:")
    assert final.error.endswith("line 99\nKilled") and "line 79" not in final.error
    assert launcher.log_tail(final, max_lines=2) == "line 99\nKilled"


def test_cancel_stops_a_single_process_ray_job_at_once_and_waits_out_the_grace_for_several(store, settings):
    jobs = FakeJobs()
    launcher = _ray_launcher(store, settings, jobs, max_concurrent_runs=2, cancel_grace_s=0.3)
    single = _queue(store, "single")
    multi = _queue(store, "multi", num_processes=2, device="cpu")
    launcher.tick()
    ids = {r.id: r.ray_submission_id for r in store.list_runs([RunStatus.RUNNING])}
    for submission_id in ids.values():
        jobs.status[submission_id] = "RUNNING"
    assert jobs.submitted[0]["runtime_env"]["env_vars"]["RAY_JOB_STOP_WAIT_TIME_S"] == "1"  # the grace, >= 1 s

    launcher.cancel(single.id)
    launcher.cancel(multi.id)
    assert jobs.stopped == [ids[single.id]]  # SIGTERM: the worker's own cooperative stop
    assert store.get_run(single.id).cancel_requested

    time.sleep(0.4)
    launcher.tick()  # past the grace: the multi-process job is stopped through Ray too; still running there
    assert ids[multi.id] in jobs.stopped
    assert store.get_run(multi.id).status == RunStatus.RUNNING
    jobs.status[ids[multi.id]] = "STOPPED"
    jobs.status[ids[single.id]] = "STOPPED"
    launcher.tick()
    for run_id in ids:
        final = store.get_run(run_id)
        assert final.status == RunStatus.CANCELLED and final.error.startswith(FORCED_STOP)
        assert "no checkpoint was saved, so there is nothing to resume from" in final.error


def test_a_local_launcher_leaves_a_ray_job_alone(store, settings):
    jobs = FakeJobs()
    _ray_launcher(store, settings, jobs).tick()  # no queued run: nothing
    run = _queue(store)
    _ray_launcher(store, settings, jobs).tick()
    assert store.get_run(run.id).ray_submission_id
    local = Launcher(store, settings)
    assert isinstance(local.executor, LocalExecutor)
    local.tick()  # it cannot see the job: it must not call the run failed
    assert store.get_run(run.id).status == RunStatus.RUNNING
    assert local.log_tail(store.get_run(run.id)) == ""


def test_local_worker_state_follows_the_pid_in_the_store(store, settings):
    executor = LocalExecutor()
    run = _queue(store)
    assert store.claim_run(run.id)
    assert executor.state(store.get_run(run.id)) == WorkerState.STARTING  # claimed a moment ago, no pid yet
    store.update_run(run.id, worker_pid=os.getpid())
    assert executor.state(store.get_run(run.id)) == WorkerState.RUNNING


def test_ray_is_imported_only_by_the_ray_executor_and_brings_no_torch(tmp_path):
    code = (
        "import sys\n"
        "from grpo_core.training.launcher import Launcher\n"
        "from grpo_core.training.executors import RayExecutor\n"
        "assert 'ray' not in sys.modules\n"
        "try:\n"
        "    RayExecutor('http://127.0.0.1:9').client\n"  # nothing listens there: Ray is imported, then refuses
        "except RuntimeError as exc:\n"
        "    print(exc)\n"
        "print(sorted(m for m in ('ray', 'torch', 'transformers', 'trl') if m in sys.modules))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                            env={**os.environ, "GRPO_DATA_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr[-3000:]
    lines = result.stdout.strip().splitlines()
    assert lines[-1] == "['ray']"
    assert "cannot reach the Ray cluster at http://127.0.0.1:9" in lines[0]
