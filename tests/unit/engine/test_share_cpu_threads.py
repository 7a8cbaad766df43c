"""The worker's torch threads as the launcher asks (grpo_core.engine.policy_model.share_cpu_threads)."""

from __future__ import annotations

import pytest

from grpo_core.engine.policy_model import share_cpu_threads


@pytest.fixture
def torch_threads():
    import torch

    before = torch.get_num_threads()
    yield torch
    torch.set_num_threads(before)


def test_a_cpu_worker_takes_the_threads_it_is_given(torch_threads):
    assert share_cpu_threads("cpu", {"GRPO_WORKER_CPU_THREADS": "1"}) == 1
    assert torch_threads.get_num_threads() == 1
    assert share_cpu_threads("cpu", {"GRPO_WORKER_CPU_THREADS": "auto"}) == torch_threads.get_num_threads()


@pytest.mark.parametrize("environ", [
    {},  # not started beside a web process (grpo-dashboard train, a script)
    {"GRPO_WORKER_CPU_THREADS": "all"},
    {"GRPO_WORKER_CPU_THREADS": "1", "OMP_NUM_THREADS": "2"},  # the user's OpenMP setting wins
])
def test_torch_keeps_its_threads_unless_asked(torch_threads, environ):
    torch_threads.set_num_threads(2)
    assert share_cpu_threads("cpu", environ) is None
    assert torch_threads.get_num_threads() == 2


def test_a_gpu_run_keeps_torch_threads(torch_threads):
    torch_threads.set_num_threads(2)
    assert share_cpu_threads("cuda", {"GRPO_WORKER_CPU_THREADS": "1"}) is None
    assert torch_threads.get_num_threads() == 2


def test_a_bad_setting_fails_the_run_naming_it():
    with pytest.raises(ValueError, match="GRPO_WORKER_CPU_THREADS='lots'"):
        share_cpu_threads("cpu", {"GRPO_WORKER_CPU_THREADS": "lots"})
