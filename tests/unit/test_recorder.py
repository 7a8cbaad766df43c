"""Tests for grpo_core.worker.recorder's RunRecorder driven as TRL's Trainer drives it (its callbacks, in the
Trainer's order), on a real SQLite store whose writes are made slow: the callbacks return without waiting for the
store, step N is in the store before step N+1 is scored, a saving step flushes before the checkpoint, a cancel
requested before the optimizer update stops that very step, and a failed write fails the next callback."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from transformers import TrainerControl, TrainerState

from grpo_core.worker.models import EndOfSequence
from grpo_core.worker.recorder import Heartbeat, RolloutTap, RunRecorder
from grpo_core.worker.store_writer import RecordingError

SLOW_S = 0.3
ARGS = SimpleNamespace(world_size=1)


def _running_run(store):
    run = store.create_run(name="run", config={"model": "m", "max_steps": 10}, dataset_id=None, max_steps=10)
    assert store.claim_run(run.id, 1)
    return run


def _slow_metrics(store, seconds: float = SLOW_S) -> list[str]:
    """Make ``store.record_metrics`` take ``seconds``; returns the list of thread names it ran on."""
    original = store.record_metrics
    threads: list[str] = []

    def slow(*args, **kwargs):
        threads.append(threading.current_thread().name)
        time.sleep(seconds)
        return original(*args, **kwargs)

    store.record_metrics = slow
    return threads


def _recorder(store, run, **kwargs) -> RunRecorder:
    tap = RolloutTap(lambda completions, **_: [0.0] * len(completions), EndOfSequence(ids=(0,), pad_id=None), 8)
    recorder = RunRecorder(store, run.id, reward_names=["r"], reward_weights=[1.0], num_generations=2,
                           heartbeat=Heartbeat(store, run.id), tap=tap, **kwargs)
    recorder.attach(SimpleNamespace(model=SimpleNamespace(training=True), _logs={}))
    return recorder


def _step(recorder: RunRecorder, state: TrainerState, control: TrainerControl, logs: dict) -> None:
    """One optimizer step's callbacks after the rollout: pre-optimizer, step end, log."""
    recorder.on_pre_optimizer_step(ARGS, state, control)
    state.global_step += 1
    recorder.on_step_end(ARGS, state, control)
    recorder.on_log(ARGS, state, control, logs=logs)


def test_callbacks_return_before_the_slow_store_has_the_step(store):
    run = _running_run(store)
    threads = _slow_metrics(store)
    recorder = _recorder(store, run)
    state, control = TrainerState(), TrainerControl()
    started = time.perf_counter()
    _step(recorder, state, control, {"reward": 0.5, "loss": 0.1})
    spent = time.perf_counter() - started
    assert spent < SLOW_S / 3, f"the callbacks took {spent:.3f} s"
    assert store.metrics_since(run.id) == []  # still being written
    recorder.flush(10)
    assert {p.key: p.value for p in store.metrics_since(run.id)} == {"reward": 0.5, "loss": pytest.approx(0.1)}
    assert threads == [f"recorder-{run.id}"]
    assert store.get_run(run.id).current_step == 1
    recorder.close()


def test_step_n_is_in_the_store_before_step_n_plus_one_is_scored(store):
    run = _running_run(store)
    _slow_metrics(store)
    recorder = _recorder(store, run)
    state, control = TrainerState(), TrainerControl()
    _step(recorder, state, control, {"reward": 0.5})
    assert store.metrics_since(run.id) == []
    recorder.tap(["a", "b"])  # the scoring of step 2
    assert [p.step for p in store.metrics_since(run.id)] == [1]
    recorder.close()


def test_a_saving_step_flushes_before_the_checkpoint_is_written(store):
    run = _running_run(store)
    _slow_metrics(store)
    recorder = _recorder(store, run)
    state, control = TrainerState(), TrainerControl()
    control.should_save = True  # TRL's flow callback decided this step saves; the checkpoint comes after on_log
    _step(recorder, state, control, {"reward": 0.5})
    assert [p.step for p in store.metrics_since(run.id)] == [1]
    recorder.close()


def test_a_cancel_requested_before_the_optimizer_update_stops_that_step(store):
    run = _running_run(store)
    recorder = _recorder(store, run)
    state, control = TrainerState(), TrainerControl()
    _step(recorder, state, control, {"reward": 0.5})
    assert not control.should_training_stop
    store.request_cancel(run.id)  # during step 2's rollout
    _step(recorder, state, control, {"reward": 0.6})
    assert control.should_training_stop and control.should_save
    assert recorder.cancelled
    recorder.close()
    assert store.get_run(run.id).current_step == 2
    assert [p.step for p in store.metrics_since(run.id)] == [1, 2]


def test_a_failed_write_fails_the_next_callback_with_its_cause(store):
    run = _running_run(store)

    def broken(*args, **kwargs):
        raise RuntimeError("metrics table is gone")

    store.record_metrics = broken
    recorder = _recorder(store, run)
    state, control = TrainerState(), TrainerControl()
    _step(recorder, state, control, {"reward": 0.5})  # queued; fails on the writer thread
    with pytest.raises(RecordingError, match="step 1 metrics") as caught:
        recorder.tap(["a", "b"])
    assert isinstance(caught.value.__cause__, RuntimeError)
    with pytest.raises(RecordingError):
        recorder.close(5)


def test_logged_values_are_stored_as_plain_numbers(store):
    run = _running_run(store)
    recorder = _recorder(store, run)

    class Scalar:  # stands for a 0-d tensor or a NumPy scalar
        def item(self):
            return 2.5

    state, control = TrainerState(), TrainerControl()
    _step(recorder, state, control, {"reward": Scalar()})
    recorder.close()
    assert [(p.key, p.value) for p in store.metrics_since(run.id)] == [("reward", 2.5)]


def test_the_inline_mode_writes_on_the_training_thread(store):
    from grpo_core.worker.store_writer import StoreWriter

    run = _running_run(store)
    threads = _slow_metrics(store, seconds=0.01)
    recorder = _recorder(store, run, writer=StoreWriter(store, inline=True))
    _step(recorder, TrainerState(), TrainerControl(), {"reward": 0.5})
    assert threads == [threading.current_thread().name]
    assert [p.step for p in store.metrics_since(run.id)] == [1]
