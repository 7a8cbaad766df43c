"""The worker's heartbeat: tells the store the training process lives, and reads the run's cancel flag.

:class:`Heartbeat` beats from a daemon thread of the main process; :class:`SilentHeartbeat` stands in on the other
processes of a multi-process run (only the main one writes). :class:`~grpo_core.engine.recorder.RunRecorder` turns
the cancel flag into ``control.should_training_stop``.
"""

from __future__ import annotations

import threading

from storage import Store


class Heartbeat:
    """A daemon thread that tells the store every ``interval_s`` seconds that the worker lives.

    It also reads the run's cancel flag; :attr:`cancel_requested` becomes True once the dashboard asks to stop.
    """

    def __init__(self, store: Store, run_id: int, interval_s: float = 5.0) -> None:
        self.store = store
        self.run_id = run_id
        self.interval_s = interval_s
        self.cancel_requested = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"heartbeat-{run_id}", daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def beat(self, *, step: int | None = None, phase: str | None = None) -> None:
        """Write a heartbeat now (with a step or phase); never raises (a busy store only delays the next one)."""
        try:
            if self.store.heartbeat(self.run_id, step=step, phase=phase):
                self.cancel_requested.set()
        except Exception:  # noqa: BLE001 - a missed heartbeat must not kill training
            pass

    def check_cancel(self) -> bool:
        """Read the run's cancel flag now (no write) and set :attr:`cancel_requested` if it is up; returns the flag.
        Never raises (an unreadable store leaves the flag as it was)."""
        try:
            if self.store.cancel_requested(self.run_id):
                self.cancel_requested.set()
        except Exception:  # noqa: BLE001 - the periodic beat reads it again
            pass
        return self.cancel_requested.is_set()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.beat()

    def stop(self) -> None:
        self._stop.set()


class SilentHeartbeat:
    """The heartbeat of a process that must not write to the store (a non-main rank of a multi-process run).

    Same interface as :class:`Heartbeat`; it writes nothing and reads nothing. Its :attr:`cancel_requested` is set
    only by the worker's SIGTERM handler; whether training stops is the main process's decision, which
    :class:`RunRecorder` broadcasts to every process.
    """

    def __init__(self) -> None:
        self.cancel_requested = threading.Event()

    def start(self) -> SilentHeartbeat:
        """Nothing to start; returns itself, like :meth:`Heartbeat.start`."""
        return self

    def beat(self, *, step: int | None = None, phase: str | None = None) -> None:
        """Do nothing: only the main process reports."""

    def check_cancel(self) -> bool:
        """Read nothing; returns :attr:`cancel_requested` (set by SIGTERM only)."""
        return self.cancel_requested.is_set()

    def stop(self) -> None:
        """Nothing to stop."""
