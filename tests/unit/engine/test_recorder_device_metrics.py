"""The recorder writes the device's metrics (GPU memory and utilisation on CUDA) beside TRL's at each training log,
not at an evaluation's log nor at the closing summary; without a GPU, :func:`gpu_step_metrics` gives nothing."""

from __future__ import annotations

from types import SimpleNamespace

from grpo_core.engine.policy_model import GPU_METRIC_KEYS, gpu_step_metrics
from grpo_core.engine.recorder import RunRecorder


def _recorder(store, calls: list[int]) -> tuple[RunRecorder, int]:
    run = store.create_run(name="r", config={}, dataset_id=None, max_steps=3)

    def device_metrics() -> dict[str, float]:
        calls.append(1)
        return {"gpu/memory_allocated_mib": 100.0 + len(calls), "gpu/memory_peak_mib": 250.0}

    recorder = RunRecorder(store, run.id, reward_names=["r"], reward_weights=[1.0], num_generations=2,
                           device_metrics=device_metrics)
    return recorder, run.id


def test_device_metrics_are_recorded_at_training_logs_only(store):
    calls: list[int] = []
    recorder, run_id = _recorder(store, calls)
    state = SimpleNamespace(is_world_process_zero=True, global_step=1)
    control = SimpleNamespace(should_save=False)
    recorder.on_log(None, state, control, logs={"reward": 0.5, "loss": 0.1})
    recorder.on_log(None, state, control, logs={"eval_reward": 0.4})  # an evaluation at the same step
    recorder.on_log(None, state, control, logs={"train_runtime": 3.0, "train_loss": 0.1})  # the closing summary
    recorder.close()  # the writes are applied by the recorder's writer thread
    points = {(p.step, p.key): p.value for p in store.metrics_since(run_id)}
    assert points[(1, "gpu/memory_allocated_mib")] == 101.0  # the first call's value, not overwritten
    assert points[(1, "gpu/memory_peak_mib")] == 250.0
    assert points[(1, "reward")] == 0.5 and points[(1, "eval_reward")] == 0.4
    assert len(calls) == 1


def test_other_ranks_record_nothing(store):
    calls: list[int] = []
    recorder, run_id = _recorder(store, calls)
    recorder.on_log(None, SimpleNamespace(is_world_process_zero=False, global_step=1),
                    SimpleNamespace(should_save=False), logs={"reward": 1.0})
    recorder.close()
    assert store.metrics_since(run_id) == [] and calls == []


def test_no_gpu_metrics_without_cuda():
    import torch

    if torch.cuda.is_available():
        assert set(gpu_step_metrics(reset_peak=False)) <= set(GPU_METRIC_KEYS)
    else:
        assert gpu_step_metrics() == {}
