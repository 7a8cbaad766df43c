"""Faults, each followed by what the store holds afterwards. The worker trains the tiny Llama for real, through the
launcher, into the store: a SQLite file, and a PostgreSQL database where the suite has one (tests/backends.py).

* out of memory (an address-space limit on the worker, a reward rule that allocates past it): failed "out of
  memory", earlier steps intact;
* two runs at once writing to one SQLite file: both complete, every row there, no "database is locked";
* cancel during the first step's scoring: cancelled at step 2 at the latest, with a checkpoint;
* resume after a cancel, and after a killed worker: steps 1..N, each recorded exactly once;
* a worker killed (SIGKILL: nothing is flushed) while step N+1 is scored, just after checkpoint-N: steps 1..N are
  in the store exactly once (the recorder's writer thread stored step N before step N+1's scoring began, and the
  checkpoint was not ahead of the store), and the resumed run records N+1.. without rewriting 1..N;
* a store write that fails on the recorder's writer thread: the run fails with that error, without hanging, and
  keeps the steps stored before it.

Each cancel or kill happens while a :class:`tests.integration.gates.Gate` holds the worker at a known step, so the
outcome does not depend on how fast the machine trains the tiny model.
* disk full in the run folder (a 128 KiB tmpfs; skipped where mounting is not allowed): failed "disk full", store
  consistent;
* a truncated Parquet upload: a located error, and the store and the datasets folder unchanged.

(A worker killed mid-step is in test_worker.py.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
from sqlalchemy import text

from grpo_core.datasets.library import import_dataset
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.runs.actions import resume_run
from grpo_core.runs.files import last_checkpoint
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from grpo_core.training.worker import train_run
from storage import RunStatus
from tests.helpers import (
    REWARDS,
    assert_steps_recorded_once,
    metric_counts,
    tiny_config,
    wait_for,
    wait_until_worker_gone,
)
from tests.integration.gates import Gate


def _step_times(store, run_id: int) -> str:
    """TRL's ``step_time`` of each recorded step, for the printed cancel measurements."""
    times = {p.step: p.value for p in store.metrics_since(run_id, keys=["step_time"])}
    return "step_time " + ", ".join(f"{step}: {value:.1f} s" for step, value in sorted(times.items()) if value)


def _reward_wall_times(store, run_id: int) -> dict[int, float]:
    """``step -> wall_time`` of the run's recorded ``reward`` (when each step was written)."""
    with store.engine.connect() as conn:
        return dict(conn.execute(
            text("SELECT step, wall_time FROM metrics WHERE run_id = :r AND key = 'reward'"), {"r": run_id}
        ).all())


def _plugin(tmp_path: Path, name: str, body: str) -> dict:
    path = tmp_path / f"{name}.py"
    path.write_text(body)
    return {"rule": "plugin", "weight": 1.0, "params": {"target": f"{path}:{name}"}}


# ----------------------------------------------------------------------------------------------- out of memory


@pytest.mark.backends("sqlite", "postgres")
def test_out_of_memory_fails_the_run_with_a_clear_error_and_keeps_earlier_steps(
    store, settings, tiny_model_dir, tmp_path
):
    hog = _plugin(
        tmp_path,
        "hog",
        "import numpy as np\n"
        "def hog(completions, trainer_state=None, **kwargs):\n"
        "    if trainer_state is not None and trainer_state.global_step >= 1:\n"
        "        np.ones(8 * 1024 ** 3, dtype=np.uint8)  # 8 GiB, past the worker's limit\n"
        "    return [0.5] * len(completions)\n",
    )
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=3, rewards=[REWARDS[1], hog])).run
    launcher = Launcher(store, settings, env={"GRPO_WORKER_MAX_MEMORY_MB": "3072"})
    assert launcher.wait_idle(timeout_s=240)
    final = store.get_run(run.id)
    assert final.status == RunStatus.FAILED
    assert final.error.startswith("out of memory:"), final.error
    assert "MemoryError" in final.error
    assert_steps_recorded_once(store, run.id, steps=1)
    assert "worker limits: address space 3072 MB" in Path(final.log_path).read_text()


# ------------------------------------------------------------------------------------------- two runs at once


def test_two_runs_at_once_share_one_sqlite_file(store, settings, tiny_model_dir):
    both = settings.with_overrides(max_concurrent_runs=2)
    first = submit_run(store, tiny_config(tiny_model_dir, max_steps=3, name="first")).run
    second = submit_run(store, tiny_config(tiny_model_dir, max_steps=3, name="second", seed=7)).run
    launcher = Launcher(store, both)
    launcher.tick()
    assert {r.id for r in store.list_runs([RunStatus.RUNNING])} == {first.id, second.id}
    assert launcher.wait_idle(timeout_s=300)

    a, b = store.get_run(first.id), store.get_run(second.id)
    for run in (a, b):
        log = Path(run.log_path).read_text(errors="replace")
        assert run.status == RunStatus.COMPLETED, (run.error, log[-2000:])
        assert "database is locked" not in log
        assert_steps_recorded_once(store, run.id, steps=3)
    assert a.started_at < b.finished_at and b.started_at < a.finished_at  # they really overlapped


# ------------------------------------------------------------------------------------------------ cancel


@pytest.mark.backends("sqlite", "postgres")
def test_cancel_during_generation_stops_within_one_step_and_saves_a_checkpoint(
    store, settings, tiny_model_dir, tmp_path
):
    gate = Gate.create(tmp_path, at_step=0)  # holds step 1 between its generation and its scoring
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=50, rewards=[REWARDS[1], gate.rule()])).run
    launcher = Launcher(store, settings)
    gate.wait_reached(240, launcher=launcher)
    assert store.get_run(run.id).current_step == 0  # step 1 is in progress
    launcher.cancel(run.id)
    released = time.monotonic()
    gate.release()
    wait_for(lambda: store.get_run(run.id).status.is_final, 120, interval_s=0.1, launcher=launcher)
    print(f"cancel during generation: step 1 released -> cancelled in {time.monotonic() - released:.2f} s; "
          f"{_step_times(store, run.id)}")

    final = store.get_run(run.id)
    assert final.status == RunStatus.CANCELLED
    assert final.error is None  # it stopped by itself
    # Asked during step 1's scoring (the gate is a reward function). The check queued before the scoring runs on the
    # writer thread while the step scores: when it reads the flag first, step 2's transaction sees the request and
    # step 2 stops; when the request wins that race (a loaded machine), step 1 stops (recorder.py: cancel).
    assert final.current_step in (1, 2)
    assert_steps_recorded_once(store, run.id, steps=final.current_step)
    checkpoint = last_checkpoint(final.run_dir)
    assert checkpoint is not None and checkpoint.step == final.current_step  # saved on the way out, for Resume


@pytest.mark.backends("sqlite", "postgres")
def test_resume_after_cancel_continues_with_every_step_once(store, settings, tiny_model_dir, tmp_path):
    gate = Gate.create(tmp_path, at_step=2)  # steps 1 and 2 recorded, step 3 in progress
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=5, rewards=[*REWARDS, gate.rule(0.1)])).run
    launcher = Launcher(store, settings)
    gate.wait_reached(240, launcher=launcher)
    assert store.get_run(run.id).current_step == 2
    launcher.cancel(run.id)
    released = time.monotonic()
    gate.release()
    wait_for(lambda: store.get_run(run.id).status.is_final, 120, interval_s=0.1, launcher=launcher)
    print(f"cancel during step 3: released -> cancelled in {time.monotonic() - released:.2f} s; "
          f"{_step_times(store, run.id)}")
    cancelled = store.get_run(run.id)
    assert cancelled.status == RunStatus.CANCELLED
    # Asked during step 3's scoring: step 3 finishes and, as above, step 3 or step 4 stops (recorder.py: cancel).
    stopped = cancelled.current_step
    assert stopped in (3, 4)
    assert last_checkpoint(cancelled.run_dir).step == stopped

    wait_until_worker_gone(store, launcher, run.id)
    queued = resume_run(store, settings, run.id)
    assert queued.status == RunStatus.QUEUED and queued.id == run.id
    assert Path(queued.resume_from).name == f"checkpoint-{stopped}"
    assert launcher.wait_idle(timeout_s=240)

    final = store.get_run(run.id)
    log = Path(final.log_path).read_text(errors="replace")
    assert final.status == RunStatus.COMPLETED, (final.error, log[-2000:])
    assert final.current_step == 5
    assert f"resuming from checkpoint-{stopped}" in log
    assert_steps_recorded_once(store, run.id, steps=5)
    assert (Path(final.run_dir) / "adapter" / "adapter_config.json").is_file()


@pytest.mark.backends("sqlite", "postgres")
def test_resume_after_a_killed_worker_drops_the_steps_after_its_checkpoint(store, settings, tiny_model_dir, tmp_path):
    gate = Gate.create(tmp_path, at_step=3)  # steps 1-3 recorded, checkpoint-2 saved, step 4 in progress
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=5, save_steps=2,
                                        rewards=[*REWARDS, gate.rule(0.1)])).run
    launcher = Launcher(store, settings)
    gate.wait_reached(240, launcher=launcher)
    os.killpg(store.get_run(run.id).worker_pid, signal.SIGKILL)
    killed_at = time.time()
    wait_for(lambda: store.get_run(run.id).status.is_final, 60, launcher=launcher)
    assert store.get_run(run.id).status == RunStatus.FAILED
    checkpoint = last_checkpoint(store.get_run(run.id).run_dir)
    assert checkpoint is not None and checkpoint.step == 2
    assert sorted(metric_counts(store, run.id)) == [1, 2, 3]

    wait_until_worker_gone(store, launcher, run.id)
    gate.release()  # the resumed worker passes through
    resume_run(store, settings, run.id)
    assert max(metric_counts(store, run.id)) == 2  # step 3 dropped, to be trained again
    assert store.group_steps(run.id)[-1] == 2
    assert launcher.wait_idle(timeout_s=240)

    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    assert_steps_recorded_once(store, run.id, steps=5)
    times = _reward_wall_times(store, run.id)
    assert all(times[step] > killed_at for step in range(3, 6))  # recorded by the resumed worker


@pytest.mark.backends("sqlite", "postgres")
def test_a_worker_killed_after_a_checkpoint_keeps_every_step_before_it_once_and_resume_rewrites_none(
    store, settings, tiny_model_dir, tmp_path
):
    gate = Gate.create(tmp_path, at_step=3)  # steps 1-3 done, checkpoint-3 saved, step 4 held in its scoring
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=5, save_steps=3,
                                        rewards=[*REWARDS, gate.rule(0.1)])).run
    launcher = Launcher(store, settings)
    gate.wait_reached(240, launcher=launcher)
    os.killpg(store.get_run(run.id).worker_pid, signal.SIGKILL)  # at once: the guarantee holds without waiting
    killed_at = time.time()
    wait_for(lambda: store.get_run(run.id).status.is_final, 60, launcher=launcher)
    killed = store.get_run(run.id)
    assert killed.status == RunStatus.FAILED
    assert killed.current_step == 3
    assert_steps_recorded_once(store, run.id, steps=3)
    assert last_checkpoint(killed.run_dir).step == 3  # not ahead of the store

    wait_until_worker_gone(store, launcher, run.id)
    gate.release()
    assert Path(resume_run(store, settings, run.id).resume_from).name == "checkpoint-3"
    assert sorted(metric_counts(store, run.id)) == [1, 2, 3]  # nothing to drop
    assert launcher.wait_idle(timeout_s=240)
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    assert_steps_recorded_once(store, run.id, steps=5)
    times = _reward_wall_times(store, run.id)
    assert all(times[step] < killed_at for step in (1, 2, 3))  # kept from the killed worker, not written again
    assert all(times[step] > killed_at for step in (4, 5))


def test_a_store_write_failing_on_the_writer_thread_fails_the_run_without_hanging(store, settings, tiny_model_dir):
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=4)).run
    original = store.record_step

    def groups_fail_from_step_2(run_id, step, **kwargs):
        if step >= 2 and kwargs.get("groups"):
            raise RuntimeError("groups table unavailable")
        return original(run_id, step, **kwargs)

    store.record_step = groups_fail_from_step_2  # the worker's writer thread calls it through this store
    started = time.monotonic()
    assert train_run(store, settings, run.id) == RunStatus.FAILED
    assert time.monotonic() - started < 240
    final = store.get_run(run.id)
    assert ("RecordingError: recording to the store failed (step 2 metrics, train groups): "
            "RuntimeError: groups table unavailable") in final.error, final.error
    # Stopped at the scoring of step 3, which waits for step 2's write: one transaction for the step's metrics,
    # groups and heartbeat, so step 2 is stored not at all and step 1 whole.
    assert final.current_step == 1
    assert store.group_steps(run.id) == [1]
    assert "reward" in metric_counts(store, run.id)[1]
    assert 2 not in metric_counts(store, run.id)


# --------------------------------------------------------------------------------------------------- disk full


@pytest.mark.backends("sqlite", "postgres")
def test_disk_full_in_the_run_folder_fails_the_run_and_keeps_the_store_consistent(store, settings, tiny_model_dir):
    folder = settings.runs_dir / "run-00001"
    folder.mkdir(parents=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=128k", "tmpfs", str(folder)],
                             capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        run = submit_run(store, tiny_config(tiny_model_dir, max_steps=3, save_steps=1)).run
        assert run.id == 1
        launcher = Launcher(store, settings)
        assert launcher.wait_idle(timeout_s=240)
        final = store.get_run(run.id)
        assert final.status == RunStatus.FAILED
        assert final.error.startswith("disk full:"), final.error
        recorded = sorted(metric_counts(store, run.id))
        assert recorded == list(range(1, final.current_step + 1))  # the steps before the failed save, whole
        assert recorded and recorded[-1] <= 1
        assert store.group_steps(run.id) == recorded
        assert last_checkpoint(folder) is None  # the half-written checkpoint is not one to resume from
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


# -------------------------------------------------------------------------------------------- truncated upload


@pytest.mark.backends("sqlite", "postgres")
def test_truncated_parquet_upload_is_a_clear_error_and_stores_nothing(store, settings, tmp_path):
    good = tmp_path / "prompts.parquet"
    pd.DataFrame({"prompt": [f"What is {i} + 1?" for i in range(50)], "answer": [str(i + 1) for i in range(50)]}
                 ).to_parquet(good)
    data = good.read_bytes()
    upload = tmp_path / "upload.bin"
    upload.write_bytes(data[: len(data) // 2])
    before = (store.list_datasets(), sorted(settings.datasets_dir.iterdir()))

    with pytest.raises(DatasetError) as caught:
        import_dataset(store, settings, upload, source_name="prompts.parquet")
    assert str(caught.value).startswith("prompts.parquet")
    assert "Parquet" in str(caught.value)
    assert (store.list_datasets(), sorted(settings.datasets_dir.iterdir())) == before
