"""Starts queued runs as worker subprocesses and watches them, from an APScheduler job in the web process.

Every ``poll_interval_s`` the launcher (1) marks ``failed`` the running runs whose worker process is gone, with
the tail of their log, (2) kills the process group of a cancelled run that did not stop within
``cancel_grace_s``, and (3) starts queued runs, oldest first, while fewer than ``max_concurrent_runs`` train,
giving each its GPUs (``CUDA_VISIBLE_DEVICES``, see :mod:`grpo_core.gpus`); a run waiting for GPUs lets later runs
that fit start first.
Workers are independent processes (own session and process group, output to ``train.log`` in the run folder,
started without a shell), so closing the browser or restarting the dashboard does not stop training; a restarted
launcher re-attaches to them through the pids in the store. Child processes are started and stopped through
:mod:`grpo_core.processes`, the run folder comes from :mod:`grpo_core.run_files`. This module imports no torch.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from grpo_core.gpus import GpuAllocationError, allocate_gpus, gpus_needed, machine_gpus, parse_gpu_list
from grpo_core.processes import free_port, kill_process_group, process_alive, start_process, tail_text
from grpo_core.run_files import log_path as run_log_path
from grpo_core.run_files import run_dir
from grpo_core.settings import ENV_DB_URL, Settings
from storage import RunInfo, RunStatus, Store

log = logging.getLogger(__name__)

def worker_command(settings: Settings, run: RunInfo, main_process_port: int | None = None) -> list[str]:
    """The argv that trains ``run``: the worker module, or ``accelerate launch`` of it for several processes.

    Several processes go through accelerate's torchrun launcher (``--multi_gpu``; on the CPU the processes talk
    over gloo), rendezvousing on ``main_process_port`` (default: accelerate's 29500, which two multi-process runs
    at once would share).
    """
    # The store URL travels in the environment (GRPO_DB_URL, see _spawn), never in argv: a password in it would show in
    # `ps` and in the log.
    worker_args = ["-m", "grpo_core.worker.train", str(run.id), "--data-dir", str(settings.data_dir)]
    processes = int(run.config.get("num_processes", 1) or 1)
    if processes > 1:
        port = ["--main_process_port", str(main_process_port)] if main_process_port else []
        return [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            *port,
            "--num_processes",
            str(processes),
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            *worker_args,
        ]
    return [sys.executable, *worker_args]


def start_worker(
    store: Store, settings: Settings, run: RunInfo, gpus: Sequence[str] = (), env: dict[str, str] | None = None
) -> subprocess.Popen | None:
    """Start the worker of a claimed (``running``) run: :func:`worker_command` in the run folder, its output appended
    to ``train.log`` there, ``CUDA_VISIBLE_DEVICES`` = ``gpus`` when given, a free rendezvous port for several
    processes. Records the worker's pid, log, run folder and GPUs in the store. The dashboard's launcher and the
    headless ``grpo-dashboard train`` both start workers here.

    Args:
        env: extra environment variables for the worker (over this process's; the store URL is always set).

    Returns:
        The child process, or ``None`` when it could not be started (the run is then ``failed`` with the reason).
    """
    folder = run_dir(settings, run.id)
    folder.mkdir(parents=True, exist_ok=True)
    log_path = run_log_path(folder)
    processes = int(run.config.get("num_processes", 1) or 1)
    command = worker_command(settings, run, main_process_port=free_port() if processes > 1 else None)
    child_env = {
        **os.environ,
        "PYTHONUNBUFFERED": "1",
        "TOKENIZERS_PARALLELISM": "false",
        **(env or {}),
        ENV_DB_URL: settings.db_url,
    }
    if gpus:
        child_env["CUDA_VISIBLE_DEVICES"] = ",".join(gpus)
    try:
        child = start_process(command, log_path=log_path, cwd=folder, env=child_env)
    except OSError as exc:
        store.finish_run(run.id, RunStatus.FAILED, error=f"could not start the worker: {exc}")
        return None
    cleared = {"phase": None} if run.phase else {}  # "waiting for GPUs"; the worker reports its own next
    store.update_run(
        run.id, worker_pid=child.pid, log_path=str(log_path), run_dir=str(folder), gpus=",".join(gpus) or None,
        **cleared,
    )
    log.info("run %s: started worker pid %s: %s", run.id, child.pid, " ".join(command))
    return child


def fail_vanished_worker(store: Store, run: RunInfo) -> bool:
    """Mark ``failed`` a running run whose worker exited without setting a final status, with the last 20 lines of
    its log in the error; returns whether the run changed (False: it had a final status already)."""
    tail = tail_text(run.log_path, max_lines=20)
    error = "the worker process exited without reporting a result"
    if tail:
        error += "; last lines of its log:\n" + tail
    return store.finish_run(run.id, RunStatus.FAILED, error=error)


class Launcher:
    """Starts and supervises worker processes for the runs in a store.

    Args:
        store: the store.
        settings: data directory, ``max_concurrent_runs``, intervals.
        env: extra environment variables for workers (tests use it to keep them offline).
    """

    def __init__(self, store: Store, settings: Settings, env: dict[str, str] | None = None) -> None:
        self.store = store
        self.settings = settings
        self.env = dict(env or {})
        self._children: dict[int, subprocess.Popen] = {}
        self._cancel_seen: dict[int, float] = {}
        self._lock = threading.Lock()
        self._scheduler = None
        self._machine_gpus: list[str] | None = None

    # ------------------------------------------------------------------------------------------------ control
    def start(self) -> None:
        """Run :meth:`tick` every ``poll_interval_s`` seconds in an APScheduler background thread."""
        from apscheduler.schedulers.background import BackgroundScheduler

        self._scheduler = BackgroundScheduler(daemon=True)
        self._scheduler.add_job(
            self.tick,
            "interval",
            seconds=self.settings.poll_interval_s,
            max_instances=1,
            coalesce=True,
            id="grpo-launcher",
        )
        self._scheduler.start()
        self.tick()

    def shutdown(self) -> None:
        """Stop polling. Workers keep training; a later launcher re-attaches to them."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None

    def tick(self) -> None:
        """One supervision pass: reap, enforce cancels, start queued runs. Never raises."""
        with self._lock:
            try:
                self._reap()
                self._enforce_cancels()
                self._start_queued()
            except Exception:  # noqa: BLE001 - a failed pass is logged; the next one retries
                log.exception("launcher pass failed")

    def cancel(self, run_id: int) -> RunInfo:
        """Ask a run to stop (a queued one is cancelled at once). The worker stops at its next step."""
        run = self.store.request_cancel(run_id)
        if run.status == RunStatus.RUNNING:
            self._cancel_seen.setdefault(run_id, time.monotonic())
        return run

    # ------------------------------------------------------------------------------------------------ passes
    def _reap(self) -> None:
        for run_id, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[run_id]
        for run in self.store.list_runs([RunStatus.RUNNING]):
            child = self._children.get(run.id)
            if child is not None or process_alive(run.worker_pid):
                continue
            if run.worker_pid is None and run.started_at and time.time() - run.started_at.timestamp() < 30:
                continue  # claimed a moment ago; the pid is being written
            if fail_vanished_worker(self.store, run):
                log.warning("run %s: worker %s is gone; marked failed", run.id, run.worker_pid)

    def _enforce_cancels(self) -> None:
        now = time.monotonic()
        stopping = [r for r in self.store.list_runs([RunStatus.RUNNING]) if r.cancel_requested]
        for run_id in set(self._cancel_seen) - {r.id for r in stopping}:
            del self._cancel_seen[run_id]  # stopped; a resumed run's next cancel gets a fresh grace period
        for run in stopping:
            first = self._cancel_seen.setdefault(run.id, now)
            if now - first < self.settings.cancel_grace_s or not run.worker_pid:
                continue
            log.warning("run %s did not stop within %.0f s; killing its process group", run.id, now - first)
            kill_process_group(run.worker_pid, signal.SIGKILL)
            self.store.finish_run(run.id, RunStatus.CANCELLED, error="stopped by force after the cancel grace period")
            self._cancel_seen.pop(run.id, None)

    def machine_gpus(self) -> list[str]:
        """The GPUs runs may get (``nvidia-smi -L``, asked once); empty on a machine without GPUs."""
        if self._machine_gpus is None:
            self._machine_gpus = machine_gpus()
        return self._machine_gpus

    def _start_queued(self) -> None:
        running_runs = self.store.list_runs([RunStatus.RUNNING])
        running = len(running_runs)
        in_use = {gpu for r in running_runs for gpu in parse_gpu_list(r.gpus)}
        queued = sorted(self.store.list_runs([RunStatus.QUEUED]), key=lambda r: r.id)
        for run in queued:
            if running >= self.settings.max_concurrent_runs:
                break
            try:
                gpus = allocate_gpus(
                    str(run.config.get("gpus", "") or ""), gpus_needed(run.config), self.machine_gpus(), in_use
                )
            except GpuAllocationError as exc:
                self.store.finish_run(run.id, RunStatus.FAILED, error=str(exc))
                continue
            if gpus is None:  # waits for GPUs; a later run that needs fewer (or none) may start first
                waiting = f"waiting for {gpus_needed(run.config)} free GPU(s)"
                if run.phase != waiting:
                    self.store.update_run(run.id, phase=waiting)
                continue
            if self.store.claim_run(run.id):
                self._spawn(run, gpus)
                in_use.update(gpus)
                running += 1

    def _spawn(self, run: RunInfo, gpus: Sequence[str] = ()) -> None:
        child = start_worker(self.store, self.settings, run, gpus, env=self.env)
        if child is not None:
            self._children[run.id] = child

    def wait_idle(self, timeout_s: float, run_ids: Sequence[int] | None = None) -> bool:
        """Tick until no run (or none of ``run_ids``) is queued or running; True if that happened in time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            self.tick()
            active = self.store.list_runs([RunStatus.QUEUED, RunStatus.RUNNING])
            if not [r for r in active if run_ids is None or r.id in run_ids]:
                return True
            time.sleep(0.5)
        return False
