"""Tests for grpo_core.engine.store_writer: writes applied in order on the writer thread, back-pressure when the
queue is full (nothing dropped), flush and close, and a failing write that surfaces on the caller's thread without
hanging it. The store is a real SQLite file; a few writes are plain callables that record what they saw."""

from __future__ import annotations

import errno
import threading
import time

import pytest

from grpo_core.engine.store_writer import RecordingError, StoreWrite, StoreWriter
from grpo_core.runs.failures import failure_text
from tests.store_helpers import record_metrics


def _create_run(store):
    return store.create_run(name="run", config={"model": "m", "max_steps": 100}, dataset_id=None, max_steps=100)


def test_writes_are_applied_in_submission_order_on_another_thread(store):
    seen: list[tuple[int, str]] = []
    writer = StoreWriter(store, name="order", max_pending=4, batch_size=3)
    for i in range(200):
        writer.submit(lambda _store, i=i: seen.append((i, threading.current_thread().name)))
    writer.flush(10)
    assert [i for i, _ in seen] == list(range(200))
    assert {name for _, name in seen} == {"order"}
    assert writer.applied == writer.submitted == 200
    writer.close()


def test_metrics_of_every_step_reach_the_store_once_after_close(store):
    run = _create_run(store)
    writer = StoreWriter(store, max_pending=2)
    for step in range(1, 31):
        writer.submit(StoreWrite(f"step {step} metrics",
                                 lambda s, step=step: record_metrics(s, run.id, step, {"reward": step / 10}, 0.0)))
    writer.close(30)
    points = store.metrics_since(run.id, keys=["reward"])
    assert [(p.step, p.value) for p in points] == [(step, pytest.approx(step / 10)) for step in range(1, 31)]
    # the CPU the writes took, in all and by label (digits folded, so one label per kind of write)
    assert set(writer.busy_by_label) == {"step N metrics"}
    assert writer.busy_by_label["step N metrics"] == pytest.approx(writer.busy_s) and writer.busy_s > 0
    with pytest.raises(RecordingError, match="closed"):
        writer.submit(lambda _store: None)


def test_a_full_queue_blocks_the_submitter_until_the_writer_catches_up(store):
    release = threading.Event()
    applied: list[int] = []

    def slow(i):
        def write(_store):
            release.wait(10)
            applied.append(i)
        return write

    writer = StoreWriter(store, max_pending=2, batch_size=1)
    submitted: list[int] = []

    def produce():
        for i in range(6):
            writer.submit(slow(i))
            submitted.append(i)

    producer = threading.Thread(target=produce)
    producer.start()
    time.sleep(0.5)
    # one write being applied (held), two waiting in the queue, the fourth submit blocked
    assert submitted == [0, 1, 2]
    assert producer.is_alive()
    release.set()
    producer.join(10)
    writer.flush(10)
    assert submitted == applied == list(range(6))  # nothing dropped, order kept
    writer.close()


def test_wait_applied_waits_for_a_mark_and_can_time_out(store):
    release = threading.Event()
    writer = StoreWriter(store)
    first = writer.submit(lambda _store: None)
    held = writer.submit(lambda _store: release.wait(10))
    assert writer.wait_applied(first, timeout_s=5)
    started = time.monotonic()
    assert not writer.wait_applied(held, timeout_s=0.2)
    assert 0.15 < time.monotonic() - started < 2
    with pytest.raises(RecordingError, match="still pending"):
        writer.flush(0.1)
    release.set()
    assert writer.wait_applied(held, timeout_s=5)
    writer.close()


def test_a_failing_write_surfaces_on_the_next_call_and_later_writes_are_not_applied(store):
    run = _create_run(store)
    applied: list[int] = []

    def disk_full(_store):
        raise OSError(errno.ENOSPC, "No space left on device")

    writer = StoreWriter(store)
    writer.submit(lambda s: record_metrics(s, run.id, 1, {"reward": 1.0}, 0.0))
    writer.submit(StoreWrite("step 2 metrics", disk_full))
    writer.submit(lambda _store: applied.append(3))
    with pytest.raises(RecordingError) as caught:
        writer.flush(10)
    assert "step 2 metrics" in str(caught.value)
    assert isinstance(caught.value.__cause__, OSError)
    assert applied == []  # step 3 is never recorded without step 2
    assert [p.step for p in store.metrics_since(run.id)] == [1]
    with pytest.raises(RecordingError):
        writer.submit(lambda _store: applied.append(4))
    with pytest.raises(RecordingError):
        writer.wait_applied()
    with pytest.raises(RecordingError):
        writer.close(5)
    # the run's error says what a user can act on: the OSError is in the chain
    assert failure_text(caught.value).startswith("disk full:")


def test_a_submitter_blocked_on_a_full_queue_gets_the_failure_instead_of_hanging(store):
    release = threading.Event()

    def fail_after_release(_store):
        release.wait(10)
        raise RuntimeError("database is gone")

    writer = StoreWriter(store, max_pending=1, batch_size=1)
    writer.submit(fail_after_release)  # taken by the thread, held
    writer.submit(lambda _store: None)  # fills the queue
    outcome: list[BaseException] = []

    def produce():
        try:
            writer.submit(lambda _store: None, poll_s=0.05)
        except RecordingError as exc:
            outcome.append(exc)

    producer = threading.Thread(target=produce)
    producer.start()
    time.sleep(0.3)
    assert producer.is_alive()  # back-pressure
    release.set()
    producer.join(5)
    assert not producer.is_alive()
    # the submit either raised, or went in while the thread discarded the queue; then the next call raises
    if not outcome:
        with pytest.raises(RecordingError):
            writer.flush(5)
    else:
        assert "database is gone" in str(outcome[0])


def test_inline_writer_applies_each_write_in_submit_on_the_callers_thread(store):
    seen: list[str] = []
    writer = StoreWriter(store, inline=True)
    writer.submit(lambda _store: seen.append(threading.current_thread().name))
    assert seen == [threading.current_thread().name]
    assert writer.applied == 1
    with pytest.raises(RecordingError) as caught:
        writer.submit(lambda _store: 1 / 0)
    assert isinstance(caught.value.__cause__, ZeroDivisionError)


def test_bounds_below_one_are_refused(store):
    with pytest.raises(ValueError):
        StoreWriter(store, max_pending=0)


def test_start_starts_one_thread_before_any_write_and_inline_starts_none(store):
    writer = StoreWriter(store, name="early")
    assert writer.start() is writer
    writer.start()
    assert [t.name for t in threading.enumerate()].count("early") == 1
    writer.close()
    assert "early" not in [t.name for t in threading.enumerate()]
    inline = StoreWriter(store, name="never", inline=True).start()
    assert "never" not in [t.name for t in threading.enumerate()]
    inline.close()
