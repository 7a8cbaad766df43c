"""A CPU run's worker shares the machine with the web process: started nicer, torch threads as set (a core left to
the web process on request; grpo_core.training.cpu_share); GPU runs, Ray jobs and ``grpo-dashboard train`` keep their priority and threads."""

from __future__ import annotations

import os
import sys

import psutil
import pytest

from grpo_core.processes import kill_process_group
from grpo_core.settings import load_settings
from grpo_core.training import launcher as launcher_module
from grpo_core.training.cpu_share import cpu_threads, parse_cpu_threads, parse_worker_nice
from grpo_core.training.launcher import Launcher, worker_launch
from storage import RunStatus


@pytest.mark.parametrize(("raw", "expected"), [(None, 10), ("", 10), (" 0 ", 0), ("5", 5), ("19", 19)])
def test_worker_nice_is_a_whole_number_from_0_to_19(raw, expected):
    assert parse_worker_nice(raw) == expected


@pytest.mark.parametrize("raw", ["-1", "20", "ten", "1.5"])
def test_a_worker_nice_outside_0_to_19_is_refused_naming_the_variable(raw):
    with pytest.raises(ValueError, match="GRPO_WORKER_NICE"):
        parse_worker_nice(raw)


@pytest.mark.parametrize(("raw", "expected"), [(None, "all"), ("", "all"), ("AUTO", "auto"), ("all", "all"),
                                               ("3", "3"), ("007", "7")])
def test_cpu_threads_setting(raw, expected):
    assert parse_cpu_threads(raw) == expected


@pytest.mark.parametrize("raw", ["0", "-2", "many", "1025", "2.5"])
def test_a_cpu_threads_setting_that_is_not_auto_all_or_a_count_is_refused(raw):
    with pytest.raises(ValueError, match="GRPO_WORKER_CPU_THREADS"):
        parse_cpu_threads(raw)


@pytest.mark.parametrize(("setting", "default", "cores", "expected"), [
    ("auto", 2, 2, 1),  # a laptop's two cores: one for training, one for the dashboard
    ("auto", 8, 8, 7),
    ("auto", 4, 8, 4),  # never more than torch's own default
    ("auto", 1, 1, 1),  # one core: still one thread
    ("all", 2, 2, None),
    ("3", 2, 2, 3),
])
def test_auto_leaves_one_core_and_all_keeps_torch_default(setting, default, cores, expected):
    assert cpu_threads(setting, default, cores=cores) == expected


def test_settings_read_the_worker_share_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("GRPO_WORKER_NICE", raising=False)
    monkeypatch.delenv("GRPO_WORKER_CPU_THREADS", raising=False)
    defaults = load_settings(data_dir=tmp_path)
    assert (defaults.worker_nice, defaults.worker_cpu_threads) == (10, "all")
    monkeypatch.setenv("GRPO_WORKER_NICE", "0")
    monkeypatch.setenv("GRPO_WORKER_CPU_THREADS", "all")
    assert (load_settings(data_dir=tmp_path).worker_nice, load_settings(data_dir=tmp_path).worker_cpu_threads) == (
        0, "all")
    monkeypatch.setenv("GRPO_WORKER_NICE", "-5")
    with pytest.raises(ValueError, match="GRPO_WORKER_NICE=-5 is outside 0 to 19"):
        load_settings(data_dir=tmp_path)


def test_only_a_worker_beside_the_web_process_gets_the_share(store, settings):
    run = store.create_run(name="r", config={"max_steps": 1}, dataset_id=None, max_steps=1)
    shared = worker_launch(settings.with_overrides(worker_nice=4, worker_cpu_threads="2"), run, share_cpu=True)
    assert shared.nice == 4 and shared.env["GRPO_WORKER_CPU_THREADS"] == "2"
    alone = worker_launch(settings, run, gpus=["0"], share_cpu=False)
    assert alone.nice == 0 and "GRPO_WORKER_CPU_THREADS" not in alone.env


#: The started "worker": it waits to be looked at.
FAKE_WORKER = "import time; time.sleep(60)"


def _started_worker(store, settings, monkeypatch, *, machine_gpus, **config) -> psutil.Process:
    """Queue a run with ``config``, let a launcher start it (its worker command replaced by :data:`FAKE_WORKER`) on
    a machine with ``machine_gpus``; the worker's process."""
    monkeypatch.setattr(launcher_module, "worker_command", lambda *a, **k: [sys.executable, "-c", FAKE_WORKER])
    monkeypatch.delenv("GRPO_WORKER_CPU_THREADS", raising=False)
    launcher = Launcher(store, settings)
    launcher._machine_gpus = list(machine_gpus)
    run = store.create_run(name="r", config={"max_steps": 1, **config}, dataset_id=None, max_steps=1)
    launcher.tick()
    started = store.get_run(run.id)
    assert started.status == RunStatus.RUNNING, started.error
    return psutil.Process(started.worker_pid)


@pytest.mark.parametrize(("overrides", "nice_added", "threads"), [
    ({}, 10, "all"),  # the defaults: nicer, torch's own threads
    ({"worker_nice": 3, "worker_cpu_threads": "auto"}, 3, "auto"),  # a core left to the web process
    ({"worker_nice": 0}, 0, "all"),  # off
])
def test_the_launcher_starts_a_cpu_worker_nicer_with_a_core_left(store, settings, monkeypatch, overrides,
                                                                    nice_added, threads):
    worker = _started_worker(store, settings.with_overrides(**overrides), monkeypatch, machine_gpus=[],
                             device="cpu")
    try:
        assert worker.nice() == min(19, os.nice(0) + nice_added)
        assert worker.environ()["GRPO_WORKER_CPU_THREADS"] == threads
        group = f"/proc/{worker.pid}/autogroup"
        if nice_added and os.path.exists(group):  # a kernel that schedules sessions as groups: the group too
            assert open(group).read().split("nice")[-1].strip() == str(min(19, nice_added))
    finally:
        kill_process_group(worker.pid)


def test_a_gpu_run_keeps_the_web_process_priority_and_torch_threads(store, settings, monkeypatch):
    worker = _started_worker(store, settings, monkeypatch, machine_gpus=["0"], device="cuda")
    try:
        assert worker.nice() == os.nice(0)
        assert "GRPO_WORKER_CPU_THREADS" not in worker.environ()
        assert worker.environ()["CUDA_VISIBLE_DEVICES"] == "0"
    finally:
        kill_process_group(worker.pid)


def test_a_child_in_this_session_is_niced_but_its_group_left_alone():
    """The autogroup is its session's: raising it for a child of this session would lower this process too."""
    import subprocess

    from grpo_core.processes import lower_priority

    group = "/proc/self/autogroup"
    before = open(group).read() if os.path.exists(group) else None
    child = subprocess.Popen([sys.executable, "-c", FAKE_WORKER])  # same session as this process
    try:
        changed = lower_priority(child.pid, 2)
        assert changed == [f"nice {min(19, os.nice(0) + 2)}"]
        assert psutil.Process(child.pid).nice() == min(19, os.nice(0) + 2)
        if before is not None:
            assert open(group).read() == before
    finally:
        child.kill()
        child.wait()
