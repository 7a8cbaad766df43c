"""THE child-job protocol, web half: request -> child -> answer, for every child job (the preflight, the merge, the
rescoring, Try the model, the reward check). Imports no torch.

A job is described once, at the top of its web half (``grpo_core/<subject>/job.py``), by a :class:`ChildJob`: its
worker module, the error its callers catch and how its failures are worded. :func:`start_child` writes the request
as JSON into a fresh folder and starts ``python -m grpo_core.<subject>.worker request.json --out answer.json
--progress progress.jsonl`` (:func:`grpo_core.processes.start_process`: no shell, its own process group, its output
to ``log`` in that folder, never an unread pipe); the worker answers through
:func:`grpo_core.child_jobs.answer_file.answer_request`. The :class:`RunningJob` it returns is the one way to follow
a child:

* **progress**: :meth:`RunningJob.watch` (or :meth:`RunningJob.poll` and :meth:`RunningJob.read_progress`) gives the
  worker's progress events (:mod:`grpo_core.child_jobs.progress`), :attr:`RunningJob.latest` the newest;
* **cancel**: :meth:`RunningJob.cancel` kills the child's whole process group;
* **timeout**: past ``timeout_s`` a poll kills the group the same way;
* **answer and error**: :meth:`RunningJob.result` returns the answer or raises the job's error, always one of four
  messages (:class:`ChildJob`): timed out, cancelled, the child failed (exit status and the end of its log), or the
  worker's own ``{"error": ...}`` answer;
* **cleanup**: :meth:`RunningJob.close` (or leaving its ``with`` block, or closing a generator that holds it) kills a
  child still running and removes the folder, so no child and no folder outlives its job.

:func:`ask_worker` is the round trip waited for (Try the model, the reward check). Training is the one child that is
not a request/answer job: it outlives the web process, reports into the store and is cancelled through it
(:mod:`grpo_core.training.launcher`); it shares only :func:`worker_argv` and :mod:`grpo_core.processes`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from grpo_core.child_jobs.progress import ProgressEvent, ProgressReader
from grpo_core.processes import start_process, stop_process, tail_text

REQUEST_FILE, ANSWER_FILE, PROGRESS_FILE, LOG_FILE = "request.json", "answer.json", "progress.jsonl", "log"
"""The files of a job's folder."""


def worker_argv(module: str, *args: str) -> list[str]:
    """The argv of a child: this interpreter, ``-m module`` and ``args`` (never a shell line)."""
    return [sys.executable, "-m", module, *args]


@dataclass(frozen=True)
class ChildJob:
    """A child job: a worker module that reads one JSON request and writes one JSON answer.

    The messages are ``str.format`` templates; besides the fields named below they may use the ``context`` given to
    :func:`start_child` (``{run}`` in the merge's). Every failure of every job is one of these four.

    Attributes:
        module: the worker half, run as ``python -m MODULE`` (``grpo_core.try_model.worker``).
        error: the exception :meth:`RunningJob.result` raises for this job (its callers catch it).
        failed: the subject of a failure (``"trying the model failed"``): ``(exit status N):`` and the end of the log
            follow when the child exits non-zero or writes no answer, ``: cancelled`` when it was cancelled.
        timed_out: the message when it runs past its limit; ``{timeout_s}`` is the limit in seconds; the end of the
            log follows when there is one.
        answered: the message for the worker's ``{"error": ...}`` answer; ``{error}`` is the worker's text.
        tail_lines: how many of the log's last lines a message carries (at most :attr:`tail_bytes` bytes).
        in_folder: run the child in its job folder (its working directory) rather than in this process's.
    """

    module: str
    error: type[Exception]
    failed: str
    timed_out: str
    answered: str = "{error}"
    tail_lines: int = 30
    tail_bytes: int = 3000
    in_folder: bool = False

    @property
    def folder_prefix(self) -> str:
        """The job folder's name prefix: ``grpo-try-model-`` for ``grpo_core.try_model.worker`` (the subject folder's
        name when the module is a ``worker``, else the module's own name)."""
        parts = self.module.split(".")
        name = parts[-2] if parts[-1] == "worker" and len(parts) > 1 else parts[-1]
        return "grpo-" + name.replace("_", "-") + "-"


@dataclass
class RunningJob:
    """A started child job (see the module docstring). Not thread-safe: one caller follows it.

    Attributes:
        job: what it runs.
        process: the child (leader of its own process group).
        folder: its folder (request, answer, progress, log), removed by :meth:`close`.
        deadline: ``time.monotonic()`` value after which :meth:`poll` kills it.
        timeout_s: its limit, in seconds (for the message).
        context: the fields its messages are formatted with.
    """

    job: ChildJob
    process: subprocess.Popen
    folder: Path
    deadline: float
    timeout_s: float
    context: Mapping[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    timed_out: bool = False
    cancelled: bool = False

    def __post_init__(self) -> None:
        self._progress = ProgressReader(self.folder / PROGRESS_FILE)

    @property
    def log_path(self) -> Path:
        """The child's combined standard output and error."""
        return self.folder / LOG_FILE

    @property
    def elapsed_s(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.started

    @property
    def latest(self) -> ProgressEvent:
        """The newest progress message and count read so far (:meth:`read_progress` reads on)."""
        return self._progress.latest

    def log_tail(self, max_lines: int | None = None) -> str:
        """The last lines of the log (:attr:`ChildJob.tail_lines` by default)."""
        return tail_text(self.log_path, max_lines=max_lines or self.job.tail_lines, max_bytes=self.job.tail_bytes)

    def poll(self) -> bool:
        """True once the child has exited; past the deadline it is killed (with its group) and True returned."""
        if self.process.poll() is not None:
            return True
        if time.monotonic() > self.deadline:
            self.timed_out = True
            stop_process(self.process)
            return True
        return False

    def wait(self) -> None:
        """Block until the child exits, or kill it at the deadline."""
        try:
            self.process.wait(timeout=max(0.0, self.deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            self.timed_out = True
            stop_process(self.process)

    def read_progress(self) -> list[ProgressEvent]:
        """The progress events the worker reported since the last call."""
        return self._progress.read_new()

    def watch(self, poll_s: float = 0.5, sleep: Callable[[float], None] = time.sleep) -> Iterator[list[ProgressEvent]]:
        """Poll every ``poll_s`` seconds until the child exits (or is killed at its deadline, or cancelled between
        two polls), yielding the new progress events of each poll (often ``[]``: a yield is also a heartbeat)."""
        while True:
            done = self.cancelled or self.poll()
            yield self.read_progress()
            if done or self.cancelled:
                return
            sleep(poll_s)

    def cancel(self) -> None:
        """Kill the child's process group now (its :meth:`result` then raises the cancelled message)."""
        if self.process.poll() is None:
            self.cancelled = True
            stop_process(self.process)

    def _message(self, template: str, **fields: Any) -> str:
        return template.format_map({**self.context, **fields})

    def _with_tail(self, message: str) -> str:
        tail = self.log_tail()
        return f"{message}\n{tail}" if tail else message

    def result(self) -> Any:
        """The answer of a finished child (its JSON value).

        Raises:
            ChildJob.error: with :attr:`ChildJob.timed_out` (and the log's end), ``<failed>: cancelled``, ``<failed>
                (exit status N):`` and the log's end (it exited non-zero, was killed, or wrote no answer),
                ``<failed>: its answer is not JSON``, or :attr:`ChildJob.answered` for an ``{"error": ...}`` answer.
            RuntimeError: the child is still running (call :meth:`poll` or :meth:`wait` first).
        """
        code = self.process.poll()
        if code is None:
            raise RuntimeError(f"{self.job.module} is still running")
        failed = self._message(self.job.failed)
        if self.timed_out:
            raise self.job.error(self._with_tail(self._message(self.job.timed_out, timeout_s=f"{self.timeout_s:.0f}")))
        if self.cancelled:
            raise self.job.error(f"{failed}: cancelled")
        answer_path = self.folder / ANSWER_FILE
        if code != 0 or not answer_path.is_file():
            raise self.job.error(f"{failed} (exit status {code}):\n{self.log_tail()}")
        try:
            answer = json.loads(answer_path.read_text(encoding="utf-8"))
        except ValueError as exc:  # a worker that wrote into the answer itself
            raise self.job.error(f"{failed}: its answer is not JSON ({exc})") from None
        if isinstance(answer, dict) and set(answer) == {"error"}:
            raise self.job.error(self._message(self.job.answered, error=str(answer["error"])))
        return answer

    def close(self) -> None:
        """Kill the child's group if it still runs, and remove the folder (idempotent)."""
        if self.process.poll() is None:
            stop_process(self.process)
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> RunningJob:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def start_child(
    job: ChildJob,
    request: BaseModel | Mapping[str, Any],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
    context: Mapping[str, Any] | None = None,
) -> RunningJob:
    """Start ``job``'s worker on ``request`` in a child process and return at once.

    Args:
        request: a pydantic model (written with ``model_dump_json``) or a JSON-able mapping (values JSON cannot
            hold are written as their ``str``).
        timeout_s: wall-clock limit in seconds; a poll past it kills the child's whole process group.
        env: variables added to this process's environment for the child (the store URL travels here, never in
            argv, so a password in it shows neither in ``ps`` nor in the log).
        workdir: where the job folder is made (default: the system's temporary directory).
        context: the fields :class:`ChildJob`'s messages are formatted with.

    Raises:
        OSError: the folder cannot be written or the interpreter not started (nothing is left behind).
    """
    if workdir is not None:
        Path(workdir).mkdir(parents=True, exist_ok=True)
    folder = Path(tempfile.mkdtemp(prefix=job.folder_prefix, dir=workdir))
    try:
        text = request.model_dump_json() if isinstance(request, BaseModel) else json.dumps(request, default=str)
        (folder / REQUEST_FILE).write_text(text, encoding="utf-8")
        argv = worker_argv(job.module, str(folder / REQUEST_FILE), "--out", str(folder / ANSWER_FILE),
                           "--progress", str(folder / PROGRESS_FILE))
        process = start_process(argv, log_path=folder / LOG_FILE, cwd=folder if job.in_folder else None,
                                env={**os.environ, **dict(env or {})})
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return RunningJob(job=job, process=process, folder=folder, deadline=time.monotonic() + timeout_s,
                      timeout_s=timeout_s, context=dict(context or {}))


def ask_worker(
    job: ChildJob,
    request: BaseModel | Mapping[str, Any],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
) -> Any:
    """:func:`start_child`, waited for: the answer (see :meth:`RunningJob.result`); the folder is removed and no
    child is left running, whatever happens.

    Raises:
        job.error: see :meth:`RunningJob.result`.
        OSError: see :func:`start_child`.
    """
    with start_child(job, request, timeout_s=timeout_s, env=env, workdir=workdir) as running:
        running.wait()
        return running.result()
