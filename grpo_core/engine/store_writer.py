"""Store writes off the training thread: a bounded queue of writes, applied in order by one writer thread.

The recorder's callbacks run on the training thread between optimizer steps; a write to the store there (a commit
per step, SQLite's file lock, a PostgreSQL round trip) delays the next step. :class:`StoreWriter` takes plain
callables, ``write(store) -> None``, and applies them on its own thread in the order they were submitted:

* **Back-pressure, never loss.** The queue holds at most ``max_pending`` writes; :meth:`StoreWriter.submit` blocks
  while it is full, so a store slower than training slows training down rather than dropping records.
* **Batches.** The thread takes every write waiting (at most ``batch_size``) at once and applies them one after
  the other, so a backlog costs one wake-up, not one per write.
* **Failures surface.** The first write that raises stops the writing (later writes are discarded, in order not
  to record step N+1 without step N); the next :meth:`~StoreWriter.submit`, :meth:`~StoreWriter.wait_applied`,
  :meth:`~StoreWriter.flush` or :meth:`~StoreWriter.raise_if_failed` on the training thread raises
  :class:`RecordingError` with the write's exception as its cause (so :func:`grpo_core.runs.failures.failure_text`
  still recognises a full disk), and never blocks on a dead writer.
* **Marks.** :meth:`~StoreWriter.submit` returns the write's sequence number; :meth:`~StoreWriter.wait_applied`
  waits until every write up to a number is in the store (the recorder's "step N is recorded before step N+1
  is scored" rule, and a flush before a checkpoint).

A write is any callable taking the :class:`~storage.Store`; :class:`StoreWrite` names one for the log and the
error message. The recorder submits one per logged step (:meth:`storage.Store.record_step`, one transaction), a
progress beat for a step that logs nothing and, when the writer is idle before a scoring, a cancel check (each of
the last two at most once per its ``progress_interval_s``). A new kind of record is one more callable submitted the same way. Writes must hold plain Python
values (numbers, strings, records), never tensors: they outlive the step that made them.

With ``inline=True`` nothing is queued: each write is applied inside :meth:`~StoreWriter.submit`, on the caller's
thread (the recorder's behaviour before the writer thread, kept for comparison in ``benchmarks/bench_recording.py``
and for tests that want no thread).
"""

from __future__ import annotations

import queue
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from storage import Store

#: Default most writes waiting in the queue (a step submits one or two: a cancel check, its record).
MAX_PENDING = 64
#: Default most writes applied per wake-up of the writer thread.
BATCH_SIZE = 32
#: Default seconds :meth:`StoreWriter.close` waits for the queue to drain and the thread to end.
JOIN_TIMEOUT_S = 60.0
_DIGITS = re.compile(r"\d+")  # folded out of a write's label: one label per kind of write ("step N metrics")


class RecordingError(RuntimeError):
    """A write to the store failed on the writer thread (its exception is ``__cause__``), or the writer was closed
    or did not drain in time."""


@dataclass(frozen=True)
class StoreWrite:
    """One write for the writer thread: ``apply(store)``, with a ``label`` for error messages
    (``"step 3 metrics"``)."""

    label: str
    apply: Callable[[Store], Any] = field(repr=False)

    def __call__(self, store: Store) -> None:
        self.apply(store)


class StoreWriter:
    """Applies store writes in submission order on one daemon thread, started by :meth:`start` or the first
    :meth:`submit`.

    Args:
        store: the store written to (its engine is shared with the training thread: SQLAlchemy's engine is
            thread-safe, and each store method opens its own session).
        name: the thread's name.
        max_pending: the queue's bound; :meth:`submit` blocks while that many writes wait.
        batch_size: most writes taken per wake-up.
        inline: apply each write in :meth:`submit` on the caller's thread instead (no thread, no queue).
    """

    def __init__(
        self,
        store: Store,
        *,
        name: str = "store-writer",
        max_pending: int = MAX_PENDING,
        batch_size: int = BATCH_SIZE,
        inline: bool = False,
    ) -> None:
        if max_pending < 1 or batch_size < 1:
            raise ValueError("max_pending and batch_size must be at least 1")
        self.store = store
        self.name = name
        self.batch_size = batch_size
        self.inline = inline
        self._queue: queue.Queue[tuple[int, Callable[[Store], Any]] | None] = queue.Queue(maxsize=max_pending)
        self._done = threading.Condition()
        self._submitted = 0  # sequence number of the last write submitted (training thread only)
        self._applied = 0  # sequence number of the last write applied or discarded (under _done)
        self._error: BaseException | None = None
        self._failed_write = ""
        self._closed = False
        self._thread: threading.Thread | None = None
        # CPU seconds of the applying thread spent in writes (time.thread_time), by each write's label with its
        # digits folded; for benchmarks
        self.busy_by_label: dict[str, float] = {}

    # ------------------------------------------------------------------------------------------ training thread
    @property
    def submitted(self) -> int:
        """Sequence number of the last write submitted (0 before any)."""
        return self._submitted

    @property
    def applied(self) -> int:
        """Sequence number of the last write the thread is done with (applied, or discarded after a failure)."""
        with self._done:
            return self._applied

    @property
    def busy_s(self) -> float:
        """CPU seconds the applying thread spent in writes so far (``time.thread_time``), all labels together."""
        return sum(self.busy_by_label.values())

    @property
    def error(self) -> BaseException | None:
        """The exception of the write that failed, if one did."""
        return self._error

    def start(self) -> StoreWriter:
        """Start the writer thread now (starting a thread takes milliseconds on a loaded machine: better before the
        first step than inside it); nothing in ``inline`` mode, nothing if started. Returns itself."""
        if not self.inline and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
            self._thread.start()
        return self

    def submit(self, write: Callable[[Store], Any], *, poll_s: float = 0.1) -> int:
        """Queue ``write`` (called as ``write(store)`` on the writer thread) and return its sequence number.

        Blocks while the queue is full (back-pressure), waking every ``poll_s`` seconds to check that the writer
        has not failed.

        Raises:
            RecordingError: an earlier write failed, or the writer is closed.
        """
        self.raise_if_failed()
        if self._closed:
            raise RecordingError(f"{self.name}: the writer is closed")
        self._submitted += 1
        number = self._submitted
        if self.inline:
            self._apply(number, write)
            self.raise_if_failed()
            return number
        self.start()
        while True:
            try:
                self._queue.put((number, write), timeout=poll_s)
                return number
            except queue.Full:
                self.raise_if_failed()

    def wait_applied(self, number: int | None = None, timeout_s: float | None = None) -> bool:
        """Wait until every write up to sequence number ``number`` (default: all submitted) is in the store.

        Returns False when ``timeout_s`` seconds passed first (``None``: no limit).

        Raises:
            RecordingError: a write failed.
        """
        target = self._submitted if number is None else min(number, self._submitted)
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._done:
            while self._applied < target and self._error is None:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    break
                self._done.wait(remaining)
            reached = self._applied >= target
        self.raise_if_failed()
        return reached

    def flush(self, timeout_s: float | None = JOIN_TIMEOUT_S) -> None:
        """Wait until every write submitted so far is in the store.

        Raises:
            RecordingError: a write failed, or the queue did not drain within ``timeout_s`` seconds.
        """
        if not self.wait_applied(timeout_s=timeout_s):
            raise RecordingError(
                f"{self.name}: {self._submitted - self.applied} store writes still pending after {timeout_s} s"
            )

    def close(self, timeout_s: float = JOIN_TIMEOUT_S) -> None:
        """Flush, then stop the thread (joined for at most ``timeout_s`` seconds). Safe to call twice; later
        :meth:`submit` calls raise.

        Raises:
            RecordingError: a write failed (even one before this call), or the queue did not drain in time.
        """
        if self._closed:
            self.raise_if_failed()
            return
        self._closed = True
        try:
            self.flush(timeout_s)
        finally:
            if self._thread is not None:
                try:
                    self._queue.put(None, timeout=1.0)
                except queue.Full:  # a failed drain left writes behind; the daemon thread dies with the process
                    pass
                self._thread.join(timeout=1.0)

    def raise_if_failed(self) -> None:
        """Raise :class:`RecordingError` (from the write's exception) if a write failed."""
        if self._error is not None:
            raise RecordingError(
                f"recording to the store failed ({self._failed_write}): {type(self._error).__name__}: {self._error}"
            ) from self._error

    # ------------------------------------------------------------------------------------------- writer thread
    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            batch = [first]
            while len(batch) < self.batch_size:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for item in batch:
                if item is None:
                    return
                self._apply(*item)

    def _apply(self, number: int, write: Callable[[Store], Any]) -> None:
        if self._error is None:
            name = getattr(write, "label", None) or getattr(write, "__name__", repr(write))
            started = time.thread_time()
            try:
                write(self.store)
            except BaseException as exc:  # noqa: BLE001 - handed to the training thread, which raises it
                self._failed_write = name
                self._error = exc
            kind = _DIGITS.sub("N", name)
            self.busy_by_label[kind] = self.busy_by_label.get(kind, 0.0) + time.thread_time() - started
        with self._done:
            self._applied = number
            self._done.notify_all()
