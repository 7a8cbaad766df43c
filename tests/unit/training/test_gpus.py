"""Tests for GPU assignment (grpo_core.training.gpus) and the launcher's use of it, the ``gpus`` config field, and the
multi-process worker command. No GPU needed: the machine's GPUs are given or faked."""

from __future__ import annotations

import os
import stat

import pytest

import grpo_core.training.launcher as launcher_module
from grpo_core.run_config import ConfigError, RunConfig, parse_run_config
from grpo_core.training.gpus import (
    GpuAllocationError,
    allocate_gpus,
    gpus_needed,
    machine_gpus,
    parse_gpu_list,
    parse_nvidia_smi_list,
)
from grpo_core.training.launcher import Launcher, worker_command
from storage import RunStatus

SMI_OUTPUT = """GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0b1c)
GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-7f3a)
  MIG 1g.10gb     Device  0: (UUID: MIG-aa)
GPU 2: NVIDIA H100 80GB HBM3 (UUID: GPU-19de)
"""


def test_parse_lists():
    assert parse_nvidia_smi_list(SMI_OUTPUT) == ["0", "1", "2"]
    assert parse_nvidia_smi_list("") == []
    assert parse_nvidia_smi_list("NVIDIA-SMI has failed because it couldn't communicate with the driver") == []
    assert parse_gpu_list(" 0, 1,,2 ") == ["0", "1", "2"]
    assert parse_gpu_list(None) == []


@pytest.mark.parametrize(
    ("requested", "needed", "available", "in_use", "expected"),
    [
        ("", 1, ["0", "1"], [], ["0"]),  # auto: the first free one
        ("", 1, ["0", "1"], ["0"], ["1"]),
        ("", 2, ["0", "1", "2", "3"], ["1"], ["0", "2"]),  # machine order, skipping busy ones
        ("", 1, ["0", "1"], ["0", "1"], None),  # all busy: wait
        ("", 2, ["0", "1", "2"], ["2", "0"], None),  # one free, two needed: wait
        ("", 0, ["0", "1"], [], []),  # a CPU run gets nothing
        ("", 1, [], [], []),  # no GPUs on this machine: leave the environment alone
        ("1,0", 2, ["0", "1"], ["0", "1"], ["1", "0"]),  # explicit: as given, whoever uses them
        ("3", 1, [], [], ["3"]),
    ],
)
def test_allocate_gpus(requested, needed, available, in_use, expected):
    assert allocate_gpus(requested, needed, available, in_use) == expected


def test_allocate_gpus_refuses_more_than_the_machine_has():
    with pytest.raises(GpuAllocationError, match="needs 4 GPUs .* has 2"):
        allocate_gpus("", 4, ["0", "1"], [])


def test_gpus_needed():
    assert gpus_needed({}) == 1
    assert gpus_needed({"num_processes": 4}) == 4
    assert gpus_needed({"num_processes": 4, "device": "cpu"}) == 0


def test_machine_gpus_without_nvidia_smi(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    assert machine_gpus() == []


def test_machine_gpus_reads_nvidia_smi_and_honours_cuda_visible_devices(monkeypatch, tmp_path):
    fake = tmp_path / "nvidia-smi"
    fake.write_text(f"#!/bin/sh\ncat <<'EOF'\n{SMI_OUTPUT}EOF\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert machine_gpus() == ["0", "1", "2"]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,0")
    assert machine_gpus() == ["0", "2"]
    fake.write_text("#!/bin/sh\nexit 9\n")
    assert machine_gpus() == []


def test_gpus_config_field():
    assert RunConfig(gpus=" 0, 1 ", num_processes=2, per_device_train_batch_size=4).gpus == "0,1"
    assert RunConfig(gpus="GPU-0b1c-77").gpus == "GPU-0b1c-77"
    with pytest.raises(ConfigError, match="gpus"):
        parse_run_config({"gpus": "0;1"})
    with pytest.raises(ConfigError, match="one per process"):
        parse_run_config({"gpus": "0", "num_processes": 2, "per_device_train_batch_size": 4})
    assert parse_run_config({"gpus": "0", "num_processes": 2, "per_device_train_batch_size": 4,
                             "device": "cpu"}).gpus == "0"


def _queue(store, name: str, **config):
    return store.create_run(name=name, config={"max_steps": 1, **config}, dataset_id=None, max_steps=1)


def test_launcher_gives_each_run_free_gpus_and_keeps_the_rest_waiting(store, settings, monkeypatch):
    spawned: dict[int, list[str]] = {}

    def fake_spawn(self, run, gpus=()):
        spawned[run.id] = list(gpus)
        self.store.update_run(run.id, worker_pid=os.getpid(), gpus=",".join(gpus) or None)

    monkeypatch.setattr(Launcher, "_spawn", fake_spawn)
    monkeypatch.setattr(launcher_module, "machine_gpus", lambda: ["0", "1", "2"])
    launcher = Launcher(store, settings.with_overrides(max_concurrent_runs=4))
    pair = _queue(store, "pair", num_processes=2)
    big = _queue(store, "big", num_processes=2)  # only one GPU left after "pair": waits
    single = _queue(store, "single")  # fits in the GPU left: starts before "big"
    cpu = _queue(store, "cpu", device="cpu")
    huge = _queue(store, "huge", num_processes=5)

    launcher.tick()

    assert spawned == {pair.id: ["0", "1"], single.id: ["2"], cpu.id: []}
    assert store.get_run(pair.id).gpus == "0,1"
    assert store.get_run(big.id).status == RunStatus.QUEUED
    assert store.get_run(big.id).phase == "waiting for 2 free GPU(s)"
    assert store.get_run(huge.id).status == RunStatus.FAILED
    assert "needs 5 GPUs" in store.get_run(huge.id).error

    store.finish_run(pair.id, RunStatus.COMPLETED)  # frees GPUs 0 and 1
    launcher.tick()
    assert spawned[big.id] == ["0", "1"]


def test_worker_command_for_several_processes(settings, store):
    run = _queue(store, "multi", num_processes=2)
    command = worker_command(settings, run, main_process_port=29876)
    assert command[1:4] == ["-m", "accelerate.commands.launch", "--multi_gpu"]
    assert command[command.index("--main_process_port") + 1] == "29876"
    assert command[command.index("--num_processes") + 1] == "2"
    assert command[-4:-2] == ["grpo_core.training.worker", str(run.id)]
    single = worker_command(settings, _queue(store, "single"))
    assert single[1:3] == ["-m", "grpo_core.training.worker"]
    # The store URL (which may hold a password) never appears in argv; the launcher passes it as GRPO_DB_URL.
    assert settings.db_url not in " ".join(command + single)
