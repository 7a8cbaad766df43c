"""One request, one answer: the round trip of a web half (``grpo_core/<subject>/job.py``) to its worker half
(``python -m grpo_core.<subject>.worker REQUEST.json --out ANSWER.json``). Imports no torch.

:func:`ask_worker` writes the request as JSON into a fresh temporary folder, starts the worker module there as a child
(:func:`grpo_core.processes.start_process`: no shell, its own process group, its output to a log file, never an unread
pipe), waits for it, kills its whole group past the time limit, and reads the JSON answer; the folder is removed
whatever happens. A job is described once, at the top of its web half, by a :class:`WorkerJob` (the module, the
error its callers catch, and how its failures are worded).

Used by :mod:`grpo_core.try_model.job` and :mod:`grpo_core.reward_check.job`. The preflight
(:mod:`grpo_core.preflight.job`) and the merge (:mod:`grpo_core.merge.job`) are not request/answer jobs: they run
for minutes, are polled while they stream progress, and take their input as a config file or arguments.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from grpo_core.processes import start_process, stop_process, tail_text


@dataclass(frozen=True)
class WorkerJob:
    """A worker module that reads one JSON request and writes one JSON answer.

    Attributes:
        module: the worker half, run as ``python -m MODULE REQUEST --out ANSWER`` (``grpo_core.try_model.worker``).
        error: the exception :func:`ask_worker` raises for this job (its callers catch it).
        failed: the start of the message when the child exits non-zero or writes no answer; ``(exit status N):``
            and the end of its output follow.
        timed_out: the message when it runs past its limit; ``{timeout_s}`` is replaced by the limit, in seconds.
        tail_lines: how many of the output's last lines a failure message carries (at most 3,000 bytes).
    """

    module: str
    error: type[Exception]
    failed: str
    timed_out: str
    tail_lines: int = 30

    @property
    def folder_prefix(self) -> str:
        """The temporary folder's name prefix: ``grpo-try-model-`` for ``grpo_core.try_model.worker`` (the subject
        folder's name when the module is a ``worker``, else the module's own name)."""
        parts = self.module.split(".")
        name = parts[-2] if parts[-1] == "worker" and len(parts) > 1 else parts[-1]
        return "grpo-" + name.replace("_", "-") + "-"


def ask_worker(
    job: WorkerJob,
    request: BaseModel | Mapping[str, Any],
    *,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
) -> Any:
    """Run ``job``'s worker module on ``request`` in a child process and return its JSON answer.

    Args:
        request: a pydantic model (written with ``model_dump_json``) or a JSON-able mapping (values JSON cannot
            hold are written as their ``str``).
        timeout_s: wall-clock limit in seconds; past it the child's whole process group is killed.
        env: variables added to this process's environment for the child.
        workdir: where the temporary folder is made (default: the system's temporary directory).

    Returns:
        The answer file's JSON value, as the worker wrote it (an ``{"error": ...}`` answer is the caller's to read).

    Raises:
        job.error: the child ran past ``timeout_s`` (:attr:`WorkerJob.timed_out`), exited non-zero or wrote no answer
            (:attr:`WorkerJob.failed`, then the end of its output: what it printed, a traceback), or wrote an answer
            that is not JSON.
        OSError: the folder cannot be written or the interpreter not started.
    """
    with tempfile.TemporaryDirectory(prefix=job.folder_prefix, dir=workdir) as tmp:
        request_path, answer_path, log_path = Path(tmp) / "request.json", Path(tmp) / "answer.json", Path(tmp) / "log"
        text = request.model_dump_json() if isinstance(request, BaseModel) else json.dumps(request, default=str)
        request_path.write_text(text, encoding="utf-8")
        command = [sys.executable, "-m", job.module, str(request_path), "--out", str(answer_path)]
        process = start_process(command, log_path=log_path, env={**os.environ, **dict(env or {})})
        try:
            code = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            stop_process(process)
            raise job.error(job.timed_out.format(timeout_s=f"{timeout_s:.0f}")) from None
        if code != 0 or not answer_path.is_file():
            output = tail_text(log_path, max_lines=job.tail_lines, max_bytes=3000)
            raise job.error(f"{job.failed} (exit status {code}):\n{output}")
        try:
            return json.loads(answer_path.read_text(encoding="utf-8"))
        except ValueError as exc:  # a worker killed while writing, or one that printed into the answer
            raise job.error(f"{job.failed}: its answer is not JSON ({exc})") from None
