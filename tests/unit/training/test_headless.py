"""What ``grpo-dashboard train`` refuses before it stores anything: GPUs it cannot have (grpo_core/training/headless.py)."""

from __future__ import annotations

import pytest

from grpo_core.training.headless import HeadlessRefusal, headless_gpus

CONFIG = {"num_processes": 2, "device": "cuda", "gpus": ""}


def test_more_processes_than_the_machine_has_gpus_is_refused(store):
    with pytest.raises(HeadlessRefusal, match=r"needs 2 GPUs \(one per process\) but this machine has 1"):
        headless_gpus(store, CONFIG, available=["0"])


@pytest.mark.parametrize(
    ("config", "available", "expected"),
    [
        ({**CONFIG, "device": "cpu"}, ["0"], []),  # a CPU run gets no GPUs
        (CONFIG, [], []),  # no GPUs on the machine: nothing to assign
        (CONFIG, ["0", "1", "2"], ["0", "1"]),  # the first free ones
        ({**CONFIG, "gpus": "2,0"}, ["0", "1", "2"], ["2", "0"]),  # named ones, as given
    ],
)
def test_gpus_are_chosen_as_the_launcher_chooses(store, config, available, expected):
    assert headless_gpus(store, config, available=available) == expected


def test_gpus_held_by_a_running_run_are_refused_with_the_holder(store):
    other = store.create_run(name="other", config={"num_processes": 1}, dataset_id=None, max_steps=1)
    assert store.claim_run(other.id)
    store.update_run(other.id, gpus="0")
    assert headless_gpus(store, CONFIG, available=["0", "1", "2"]) == ["1", "2"]
    with pytest.raises(HeadlessRefusal, match=rf"1 of 2 are free: running runs hold them \(#{other.id} \(GPUs 0\)\)"):
        headless_gpus(store, CONFIG, available=["0", "1"])
    assert headless_gpus(store, {**CONFIG, "gpus": "0,1"}, available=["0", "1"]) == ["0", "1"]  # shared on purpose


def test_a_run_another_launcher_claimed_is_not_started_twice(store, settings):
    from grpo_core.training.headless import train_headless
    from storage import RunStatus

    run = store.create_run(name="taken", config={"num_processes": 1}, dataset_id=None, max_steps=1)
    assert store.claim_run(run.id)  # a dashboard's launcher was first
    assert train_headless(store, settings, store.get_run(run.id)) == RunStatus.RUNNING
    assert store.get_run(run.id).worker_pid is None  # no worker started from here
