"""Tests for grpo_core.engine.recorder's RunRecorder driven as TRL's Trainer drives it (its callbacks, in the
Trainer's order), on a real SQLite store whose writes are made slow: the callbacks return without waiting for the
store, step N is in the store before step N+1 is scored, a saving step flushes before the checkpoint, a cancel
requested before the step's scoring stops that very step (one asked later, or with a busy writer, the next), steps
faster than the progress interval get a cancel check and a progress beat once per interval (the last step always
beaten), and a failed write fails the next callback."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from transformers import TrainerControl, TrainerState

from grpo_core.engine.group_capture import RolloutTap
from grpo_core.engine.heartbeat import Heartbeat
from grpo_core.engine.policy_model import EndOfSequence
from grpo_core.engine.recorder import RunRecorder
from grpo_core.engine.store_writer import RecordingError

SLOW_S = 0.3
ARGS = SimpleNamespace(world_size=1)


def _running_run(store):
    run = store.create_run(name="run", config={"model": "m", "max_steps": 10}, dataset_id=None, max_steps=10)
    assert store.claim_run(run.id, 1)
    return run


def _slow_metrics(store, seconds: float = SLOW_S) -> list[str]:
    """Make ``store.record_step`` (a step's metrics, groups and heartbeat, one transaction) take ``seconds``; returns
    the list of thread names it ran on."""
    original = store.record_step
    threads: list[str] = []

    def slow(*args, **kwargs):
        threads.append(threading.current_thread().name)
        time.sleep(seconds)
        return original(*args, **kwargs)

    store.record_step = slow
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


def test_a_cancel_requested_before_the_scoring_stops_that_step(store):
    run = _running_run(store)
    recorder = _recorder(store, run, progress_interval_s=0.0)  # a check before every scoring, as for slow steps
    state, control = TrainerState(), TrainerControl()
    _step(recorder, state, control, {"reward": 0.5})
    recorder.wait_recorded()  # step 1's own transaction read the flag before the cancel
    assert not control.should_training_stop
    store.request_cancel(run.id)  # during step 2's rollout
    recorder.tap(["a", "b"])  # the scoring of step 2: step 1 is in the store, the writer idle
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

    store.record_step = broken
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
    from grpo_core.engine.store_writer import StoreWriter

    run = _running_run(store)
    threads = _slow_metrics(store, seconds=0.01)
    recorder = _recorder(store, run, writer=StoreWriter(store, inline=True))
    _step(recorder, TrainerState(), TrainerControl(), {"reward": 0.5})
    assert threads == [threading.current_thread().name]
    assert [p.step for p in store.metrics_since(run.id)] == [1]


class _ThreadNotingCapture:
    """Stands for a TokenCapture: notes the thread its ``snapshot`` and ``attach`` run on."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []

    def snapshot(self):
        self.calls.append(("snapshot", threading.current_thread().name))
        return "snapshot of step"

    def attach(self, groups, snapshot=None):
        self.calls.append((f"attach {snapshot}", threading.current_thread().name))
        return groups


def test_the_groups_are_built_on_the_writer_thread_and_recorded_with_the_metrics_in_one_write(store):
    from collections import deque

    run = _running_run(store)
    capture = _ThreadNotingCapture()
    recorder = _recorder(store, run, token_capture=capture)
    logs = {"prompt": deque(["2+2?", "2+2?"]), "completion": deque(["4", "5"]),
            "rewards": {"r": deque([1.0, 0.0])}, "advantages": deque([0.5, -0.5]), "extra": {}}
    recorder.attach(SimpleNamespace(model=SimpleNamespace(training=True), _logs=logs))
    writes: list[str] = []
    submit = recorder.writer.submit
    recorder.writer.submit = lambda write, **kw: (writes.append(getattr(write, "label", "?")), submit(write, **kw))[1]
    recorder.tap(["4", "5"])  # the scoring of step 1
    state, control = TrainerState(), TrainerControl()
    _step(recorder, state, control, {"reward": 0.5})
    logs["completion"].extend(["later", "later"])  # TRL's next generation changes its buffers: the copy is kept
    recorder.flush(10)
    main = threading.current_thread().name
    assert capture.calls == [("snapshot", main), ("attach snapshot of step", f"recorder-{run.id}")]
    assert writes[-1] == "step 1 metrics, train groups"
    (group,) = store.groups_at(run.id, 1)
    assert [(c.text, c.advantage, c.rewards) for c in group.completions] == [("4", 0.5, {"r": 1.0}),
                                                                          ("5", -0.5, {"r": 0.0})]
    assert [p.key for p in store.metrics_since(run.id)] == ["reward"]
    # The same generation logged again (TRL logs without a new rollout): its groups are not recorded twice.
    _step(recorder, state, control, {"reward": 0.6})
    assert writes[-1] == "step 2 metrics" and store.group_steps(run.id) == [1]
    # TRL's closing summary at the last step is its own write, named apart (benchmarks leave it out of a step's cost)
    recorder.on_log(ARGS, state, control, logs={"train_runtime": 1.5, "train_loss": 0.1})
    recorder.close()
    assert writes[-1] == "step 2 run summary"
    assert {p.key for p in store.metrics_since(run.id)} >= {"train_runtime", "train_loss"}


def _fast_step(recorder: RunRecorder, state: TrainerState, control: TrainerControl) -> None:
    """A step that logs nothing (``logging_steps`` > 1): its scoring, then its end."""
    recorder.tap(["a", "b"])
    state.global_step += 1
    recorder.on_step_end(ARGS, state, control)


def _write_labels(recorder: RunRecorder) -> list[str]:
    labels: list[str] = []
    submit = recorder.writer.submit
    recorder.writer.submit = lambda write, **kw: (labels.append(write.label), submit(write, **kw))[1]
    return labels


def _three_fast_steps(store, progress_interval_s: float):
    """A recorder with ``progress_interval_s`` after three steps that log nothing, taken in quick succession;
    returns the run, the recorder, the labels of the writes it submitted, and TRL's state and control."""
    run = _running_run(store)
    recorder = _recorder(store, run, progress_interval_s=progress_interval_s)
    labels = _write_labels(recorder)
    state, control = TrainerState(), TrainerControl()
    for _ in range(3):
        _fast_step(recorder, state, control)
    return run, recorder, labels, state, control


def test_fast_steps_get_a_cancel_check_and_a_progress_beat_once_per_interval(store):
    run, recorder, labels, state, control = _three_fast_steps(store, 0.5)
    assert labels == ["cancel check", "step 1 heartbeat"]  # steps 2 and 3 came within the interval
    store.request_cancel(run.id)
    time.sleep(0.55)
    _fast_step(recorder, state, control)  # the interval has passed: checked before its scoring, stopped at its end
    assert labels[2:] == ["cancel check", "step 4 heartbeat"]
    assert control.should_training_stop and control.should_save and recorder.cancelled
    recorder.on_train_end(ARGS, state, control)
    assert store.get_run(run.id).current_step == 4
    recorder.close()


def test_a_step_longer_than_the_interval_gets_the_check_before_its_scoring_even_after_a_logged_step(store):
    run = _running_run(store)
    recorder = _recorder(store, run, progress_interval_s=0.3)
    state, control = TrainerState(), TrainerControl()
    recorder.tap(["a", "b"])  # step 1's scoring: the first check
    time.sleep(0.35)  # a slow step 1: its log comes after the interval
    _step(recorder, state, control, {"reward": 0.5})
    recorder.wait_recorded()  # step 1's own transaction read the flag before the cancel
    store.request_cancel(run.id)  # during step 2's rollout, just after step 1's log
    recorder.tap(["a", "b"])  # step 2's scoring: checked, a check being due whatever step 1's log read
    _step(recorder, state, control, {"reward": 0.6})
    assert control.should_training_stop and recorder.cancelled
    recorder.close()


def test_the_last_step_is_beaten_at_the_end_even_within_the_interval(store):
    run, recorder, labels, state, control = _three_fast_steps(store, 60.0)
    recorder.wait_recorded()
    assert store.get_run(run.id).current_step == 1
    recorder.on_train_end(ARGS, state, control)
    assert labels == ["cancel check", "step 1 heartbeat", "step 3 heartbeat"]
    assert store.get_run(run.id).current_step == 3
    recorder.close()


def test_a_busy_writer_is_not_waited_for_and_the_cancel_stops_the_next_step_at_the_latest(store):
    run = _running_run(store)
    _slow_metrics(store)  # every step's write takes SLOW_S
    recorder = _recorder(store, run)
    state, control = TrainerState(), TrainerControl()
    _step(recorder, state, control, {"reward": 0.5})
    started = time.perf_counter()
    _step(recorder, state, control, {"reward": 0.6})  # no scoring in between: step 1 still being written
    assert time.perf_counter() - started < SLOW_S / 3  # no cancel check queued behind it, nothing waited for
    store.request_cancel(run.id)  # during step 3's rollout, the writer still busy with steps 1 and 2
    _step(recorder, state, control, {"reward": 0.7})
    if not control.should_training_stop:  # the writer had not read the flag by step 3's end: step 4 stops
        recorder.tap(["a", "b"])  # the scoring of step 4 waits for steps 1-3, whose transactions read the flag
        _step(recorder, state, control, {"reward": 0.8})
    assert control.should_training_stop and recorder.cancelled
    recorder.close()
    assert [p.step for p in store.metrics_since(run.id)] == list(range(1, state.global_step + 1))
    assert state.global_step in (3, 4)
