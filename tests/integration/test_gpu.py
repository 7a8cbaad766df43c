"""On a CUDA machine: the worker trains in bfloat16 where the GPU supports it and records the GPU's memory and
utilisation at every step. Marked ``gpu``: skipped without a CUDA GPU (tests/conftest.py); ``make gpu-check``
runs them on a GPU machine."""

from __future__ import annotations

from pathlib import Path

import pytest

from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import tiny_config

pytestmark = pytest.mark.gpu


def test_the_worker_picks_bfloat16_on_a_gpu_that_supports_it():
    import torch

    from grpo_core.engine.policy_model import pick_device, policy_dtype

    assert pick_device("auto") == "cuda"
    expected = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float32
    assert policy_dtype("cuda") == expected
    assert policy_dtype("cpu") == torch.float32


def test_a_two_step_gpu_run_records_gpu_metrics_each_step(store, settings, tiny_model_dir):
    import torch

    run = submit_run(store, tiny_config(tiny_model_dir, device="cuda")).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=240), "the run did not finish"
    final = store.get_run(run.id)
    log = Path(final.log_path).read_text(errors="replace")
    assert final.status == RunStatus.COMPLETED, (final.error, log[-3000:])
    dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float32"
    assert f"on cuda in {dtype}" in log
    assert final.provenance["device"]["type"] == "cuda"

    by_step: dict[int, dict[str, float | None]] = {}
    for point in store.metrics_since(run.id):
        by_step.setdefault(point.step, {})[point.key] = point.value
    assert sorted(by_step) == [1, 2]
    for step in (1, 2):
        values = by_step[step]
        allocated, reserved, peak = (values[f"gpu/memory_{k}_mib"] for k in ("allocated", "reserved", "peak"))
        assert 0 < allocated <= reserved  # the caching allocator holds at least what tensors use
        assert allocated <= peak  # the peak since the previous step includes now
        if "gpu/utilization" in values:  # only where NVML answers
            assert 0 <= values["gpu/utilization"] <= 100
