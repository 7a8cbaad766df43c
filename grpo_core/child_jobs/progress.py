"""THE progress convention of every child job: the worker appends one JSON line per report to the job's progress
file (:class:`ProgressWriter`, handed to its answer function by :func:`grpo_core.child_jobs.answer_file.answer_request`),
the web half reads the lines it has not seen yet (:class:`ProgressReader`, inside
:class:`grpo_core.child_jobs.request.RunningJob`). Imports no torch.

A line is ``{"message": str | null, "done": int | null, "total": int | null}``: a step in words ("loading the base
model"), a count (completions scored of the total), or both. Appending (never rewriting) keeps every message, so a
reader polling every second still sees each one, in order; a reader only takes lines that end with a newline, so it
never reads half a line the worker is writing. Counts alone are written at most every :data:`COUNT_EVERY_S` seconds
(a rescoring scores thousands of completions a second).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

COUNT_EVERY_S = 0.2
"""Least seconds between two progress lines that carry only a count."""

MAX_MESSAGE_CHARS = 2000
"""A message is cut to this many characters (a progress line is one line of a status, never a log)."""


@dataclass(frozen=True)
class ProgressEvent:
    """One progress report of a worker.

    Attributes:
        message: what the worker is doing, in words (one line), or None.
        done: units of work done (completions scored, prompts sampled), or None.
        total: units of work in all, or None.
    """

    message: str | None = None
    done: int | None = None
    total: int | None = None


def _count(value: object) -> int | None:
    """A count read back from the file: a non-negative int, else None (the file is the child's: never trusted)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return max(0, int(value)) if value == value and abs(value) < 2**62 else None


class ProgressWriter:
    """The worker's side: :meth:`report` appends one line to ``path`` (nothing is written without a path, as when a
    worker's answer function is called in-process by a test or by the command line).

    Args:
        path: the progress file (``--progress FILE``), or None.
        echo: when not None, each message is also printed to standard output (the job's log) after this prefix.
    """

    def __init__(self, path: Path | None, *, echo: str | None = None) -> None:
        self.path, self.echo = path, echo
        self._last_count = 0.0

    def report(self, message: str | None = None, *, done: int | None = None, total: int | None = None,
               force: bool = False) -> None:
        """Report a step (``message``) and/or a count (``done`` of ``total``). A report with only a count is dropped
        when the last one was written under :data:`COUNT_EVERY_S` ago, unless ``force`` (the first and last count).

        Raises:
            OSError: the progress file cannot be written.
        """
        if message is not None and self.echo is not None:
            print(f"{self.echo}{message}", flush=True)
        now = time.monotonic()
        if message is None:
            if not force and now - self._last_count < COUNT_EVERY_S:
                return
            self._last_count = now
        if self.path is None:
            return
        line = {"message": None if message is None else " ".join(str(message).split())[:MAX_MESSAGE_CHARS],
                "done": done, "total": total}
        with open(self.path, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line, ensure_ascii=False) + "\n")

    def __call__(self, message: str) -> None:
        """``report(message)``: a writer is also the ``progress(message)`` callable the loaders take
        (:func:`grpo_core.engine.policy_model.prepare_model`)."""
        self.report(message)


class ProgressReader:
    """The web half's side: :meth:`read_new` returns the events appended since the last call.

    Args:
        path: the progress file the worker appends to.
        max_bytes: the most bytes read in one call (a worker writing without end cannot fill the web process).
    """

    def __init__(self, path: Path, *, max_bytes: int = 1 << 20) -> None:
        self.path, self.max_bytes = path, max_bytes
        self._offset = 0
        self.latest = ProgressEvent()
        """The newest message and the newest count seen so far, merged (a count report keeps the last message)."""

    def read_new(self) -> list[ProgressEvent]:
        """The complete lines appended since the last call, as events (a line that is not a JSON object is
        skipped); ``[]`` while the file does not exist."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self._offset)
                data = handle.read(self.max_bytes)
        except OSError:
            return []
        end = data.rfind(b"\n")
        if end < 0:
            return []
        self._offset += end + 1
        events = []
        for raw in data[:end].splitlines():
            try:
                value = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(value, dict):
                continue
            message = value.get("message")
            event = ProgressEvent(message=message[:MAX_MESSAGE_CHARS] if isinstance(message, str) else None,
                                  done=_count(value.get("done")), total=_count(value.get("total")))
            events.append(event)
            self.latest = ProgressEvent(
                message=event.message if event.message is not None else self.latest.message,
                done=event.done if event.done is not None else self.latest.done,
                total=event.total if event.total is not None else self.latest.total,
            )
        return events
