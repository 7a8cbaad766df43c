"""Starts queued runs as workers and watches them, from an APScheduler job in the web process.

Every ``poll_interval_s`` the launcher (1) marks ``failed`` the running runs whose worker is gone, with the tail of
their log, (2) stops by force a cancelled run that did not stop within ``cancel_grace_s`` nor within a few of its own measured
steps (:mod:`grpo_core.training.cancel_grace`), saying what it kept, and (3) starts queued
runs, oldest first, while fewer than ``max_concurrent_runs`` train, giving each its GPUs (``CUDA_VISIBLE_DEVICES``,
see :mod:`grpo_core.training.gpus`; on a Ray cluster Ray picks them); a run waiting for GPUs lets later runs that fit start
first.
Where a worker trains is the executor's business (:mod:`grpo_core.training.executors`, the ``executor`` setting): a child
process of this one (``local``, the default) or a Ray job on a cluster (``ray``). Either way workers are independent
of the web process, so closing the browser or restarting the dashboard does not stop training; a restarted launcher
re-attaches to them through what the store holds (the pid of a local worker, the submission id of a Ray job). Each
running run is watched by the executor that started it. The run folder comes from :mod:`grpo_core.runs.files`. This
module imports no torch (nor Ray: the Ray executor imports it when it first submits).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence

from grpo_core.child_jobs.request import worker_argv
from grpo_core.processes import free_port
from grpo_core.runs.files import log_path as run_log_path
from grpo_core.runs.files import run_dir
from grpo_core.runs.script_runs import is_script_run
from grpo_core.settings import ENV_DB_URL, ENV_SHARED_DIR, Settings
from grpo_core.training.cancel_grace import FORCED_STOP, cancel_deadline, forced_stop_message  # noqa: F401 (FORCED_STOP: re-exported)
from grpo_core.training.cpu_share import ENV_WORKER_CPU_THREADS
from grpo_core.training.executors import Executor, LocalExecutor, RayExecutor, WorkerLaunch, WorkerState, make_executor
from grpo_core.training.gpus import GpuAllocationError, allocate_gpus, gpus_needed, machine_gpus, parse_gpu_list
from storage import RunInfo, RunStatus, Store

log = logging.getLogger(__name__)

TRAINING_WORKER = "grpo_core.training.worker"
"""Training's child, ``python -m grpo_core.training.worker RUN_ID``: started like every child job
(:func:`grpo_core.child_jobs.request.worker_argv`, :mod:`grpo_core.processes`), but not a request/answer job: it
outlives the web process and reports its steps, its end and reads its cancel flag through the store."""


def worker_command(settings: Settings, run: RunInfo, main_process_port: int | None = None) -> list[str]:
    """The argv that trains ``run``: the worker module, or ``accelerate launch`` of it for several processes.

    Several processes go through accelerate's torchrun launcher (``--multi_gpu``; on the CPU the processes talk
    over gloo), rendezvousing on ``main_process_port`` (default: accelerate's 29500, which two multi-process runs
    at once would share).
    """
    # The store URL travels in the environment (GRPO_DB_URL, see _spawn), never in argv: a password in it would show in
    # `ps` and in the log.
    worker_args = [str(run.id), "--data-dir", str(settings.data_dir)]
    if settings.shared_dir is not None:
        worker_args += ["--shared-dir", str(settings.shared_dir)]
    processes = int(run.config.get("num_processes", 1) or 1)
    if processes > 1:
        port = ["--main_process_port", str(main_process_port)] if main_process_port else []
        return worker_argv(
            "accelerate.commands.launch", "--multi_gpu", *port, "--num_processes", str(processes),
            "--num_machines", "1", "--mixed_precision", "no", "--dynamo_backend", "no",
            "-m", TRAINING_WORKER, *worker_args,
        )
    return worker_argv(TRAINING_WORKER, *worker_args)


def worker_launch(
    settings: Settings, run: RunInfo, gpus: Sequence[str] = (), env: dict[str, str] | None = None,
    gpu_count: int | None = None, share_cpu: bool = False,
) -> WorkerLaunch:
    """What starting ``run``'s worker takes: :func:`worker_command` (a free rendezvous port for several processes),
    the run folder (created), and the worker's environment: ``env`` over unbuffered output, with the store URL and
    the shared folder always set (never in argv).

    Args:
        gpus: ``CUDA_VISIBLE_DEVICES`` for a local worker; ``gpu_count`` (default ``len(gpus)``) is what a Ray job
            reserves.
        share_cpu: the worker trains on this machine's CPU beside the web process: it gets ``settings.worker_nice``
            added and ``GRPO_WORKER_CPU_THREADS`` = ``settings.worker_cpu_threads`` (over ``env``'s;
            :mod:`grpo_core.training.cpu_share`).
    """
    folder = run_dir(settings, run.id)
    folder.mkdir(parents=True, exist_ok=True)
    processes = int(run.config.get("num_processes", 1) or 1)
    command = worker_command(settings, run, main_process_port=free_port() if processes > 1 else None)
    child_env = {"PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false", **(env or {}), ENV_DB_URL: settings.db_url}
    if settings.shared_dir is not None:
        child_env[ENV_SHARED_DIR] = str(settings.shared_dir)
    if share_cpu:
        child_env[ENV_WORKER_CPU_THREADS] = settings.worker_cpu_threads
    return WorkerLaunch(command=command, folder=folder, env=child_env, gpus=tuple(gpus),
                        gpu_count=len(gpus) if gpu_count is None else gpu_count, processes=processes,
                        nice=settings.worker_nice if share_cpu else 0)


def start_worker(
    store: Store, settings: Settings, run: RunInfo, executor: Executor, gpus: Sequence[str] = (),
    env: dict[str, str] | None = None, gpu_count: int | None = None, share_cpu: bool | None = None,
) -> bool:
    """Start the worker of a claimed (``running``) run through ``executor`` (:func:`worker_launch`; its output goes
    to ``train.log`` in the run folder, or to the Ray job's log) and record where it runs (pid or submission id, log,
    run folder, GPUs) in the store. The dashboard's launcher and the headless ``grpo-dashboard train`` both start
    workers here. ``share_cpu`` (default: a local worker given no GPU, which trains on this machine's CPU beside the
    web process) starts it at a lower priority with a core left (:func:`worker_launch`); ``grpo-dashboard train``,
    with no web process beside it, passes False.

    Returns:
        Whether it started; when not, the run is ``failed`` with the reason.
    """
    if share_cpu is None:
        share_cpu = isinstance(executor, LocalExecutor) and not gpus
    launch = worker_launch(settings, run, gpus, env=env, gpu_count=gpu_count, share_cpu=share_cpu)
    try:
        recorded = executor.start(run, launch, log_path=run_log_path(launch.folder))
    except (OSError, RuntimeError, GpuAllocationError) as exc:
        store.finish_run(run.id, RunStatus.FAILED, error=f"could not start the worker: {exc}")
        return False
    cleared = {"phase": None} if run.phase else {}  # "waiting for GPUs"; the worker reports its own next
    store.update_run(run.id, run_dir=str(launch.folder), gpus=",".join(gpus) or None, **recorded, **cleared)
    where = recorded.get("ray_submission_id") or f"pid {recorded.get('worker_pid')}"
    log.info("run %s: started worker (%s %s): %s", run.id, executor.name, where, " ".join(launch.command))
    return True


def fail_vanished_worker(store: Store, run: RunInfo, log_tail: str) -> bool:
    """Mark ``failed`` a running run whose worker exited without setting a final status, with ``log_tail`` (the
    last lines of its log) in the error; returns whether the run changed (False: it had a final status already)."""
    error = "the worker process exited without reporting a result"
    if log_tail:
        error += "; last lines of its log:\n" + log_tail
    return store.finish_run(run.id, RunStatus.FAILED, error=error)


class Launcher:
    """Starts and supervises worker processes for the runs in a store.

    Args:
        store: the store.
        settings: data directory, ``max_concurrent_runs``, intervals, ``executor`` (and ``ray_address``).
        env: extra environment variables for workers (tests use it to keep them offline).
        executor: where new runs train (default: :func:`grpo_core.training.executors.make_executor` of ``settings``).
    """

    def __init__(
        self, store: Store, settings: Settings, env: dict[str, str] | None = None, executor: Executor | None = None
    ) -> None:
        self.store = store
        self.settings = settings
        self.env = dict(env or {})
        self.executor = executor if executor is not None else make_executor(settings)
        # Runs without a Ray job (started by a local launcher, or a headless `train`) are watched by their pid.
        self._local = self.executor if isinstance(self.executor, LocalExecutor) else LocalExecutor()
        self._cancel_seen: dict[int, float] = {}
        self._unwatched: set[int] = set()
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
        """Ask a run to stop (a queued one is cancelled at once). The worker stops at its next step, saving a
        checkpoint; a Ray job is also asked through Ray (see :mod:`grpo_core.training.executors`)."""
        run = self.store.request_cancel(run_id)
        if run.status == RunStatus.RUNNING:
            with self._lock:
                self._note_cancel(run, time.monotonic())
        return run

    def executor_for(self, run: RunInfo) -> Executor | None:
        """The executor watching ``run``: the Ray executor for a Ray job, the local one for a pid; ``None`` for a
        Ray job while this launcher has no Ray executor (it cannot tell whether that job still runs)."""
        if run.ray_submission_id:
            return self.executor if isinstance(self.executor, RayExecutor) else None
        return self._local

    def log_tail(self, run: RunInfo, max_lines: int = 40) -> str:
        """The end of a run's worker output: its ``train.log``, or its Ray job's log ("" when there is none)."""
        executor = self.executor_for(run)
        if executor is None:
            return ""
        return executor.log_tail(run, max_lines=max_lines)

    # ------------------------------------------------------------------------------------------------ passes
    def _reap(self) -> None:
        self.executor.collect_exited()
        if self._local is not self.executor:
            self._local.collect_exited()
        for run in self.store.list_runs([RunStatus.RUNNING]):
            if is_script_run(run):  # trains in a user's own script, maybe elsewhere: it reports its own end
                continue
            executor = self.executor_for(run)
            if executor is None:
                if run.id not in self._unwatched:
                    self._unwatched.add(run.id)
                    log.warning("run %s trains as Ray job %s; serve with --executor ray to watch it", run.id,
                                run.ray_submission_id)
                continue
            state = executor.state(run)
            if state == WorkerState.STARTING and executor is not self._local:
                waiting = "waiting for the Ray cluster's resources"
                if run.phase != waiting:
                    self.store.update_run(run.id, phase=waiting)
                continue
            if state != WorkerState.GONE:
                continue
            if run.cancel_requested:  # e.g. killed by Ray after the grace period that its stop_job started
                if self.store.finish_run(run.id, RunStatus.CANCELLED,
                                         error=forced_stop_message(self.settings, run, mid_step=False)):
                    log.warning("run %s: worker gone after a cancel; marked cancelled", run.id)
                continue
            if fail_vanished_worker(self.store, run, executor.log_tail(run, max_lines=20)):
                log.warning("run %s: worker %s is gone; marked failed", run.id,
                            run.ray_submission_id or run.worker_pid)

    def _note_cancel(self, run: RunInfo, now: float) -> float:
        """When the cancel of ``run`` was first seen; at that first sight its executor is asked to stop it."""
        if run.id not in self._cancel_seen:
            self._cancel_seen[run.id] = now
            executor = self.executor_for(run)
            if executor is not None:
                executor.request_stop(run)
        return self._cancel_seen[run.id]

    def _enforce_cancels(self) -> None:
        now = time.time()  # seconds since the epoch, as the store's metric wall times (cancel_grace.py)
        stopping = [r for r in self.store.list_runs([RunStatus.RUNNING]) if r.cancel_requested]
        for run_id in set(self._cancel_seen) - {r.id for r in stopping}:
            del self._cancel_seen[run_id]  # stopped; a resumed run's next cancel gets a fresh grace period
        for run in stopping:
            first = self._note_cancel(run, now)
            executor = self.executor_for(run)
            if now - first < self.settings.cancel_grace_s or executor is None:
                continue
            if executor is self._local and not run.worker_pid:
                continue
            deadline = cancel_deadline(self.store, run, self.settings.cancel_grace_s, first)
            if now < deadline.at:
                continue  # the step in progress is not yet overdue by the run's own step time
            log.warning("run %s did not stop within %.0f s (%s); stopping it by force", run.id, now - first,
                        deadline.describe())
            self.stop_now(run)

    def stop_now(self, run: RunInfo) -> bool:
        """Stop ``run`` at once, without waiting for its next step: a queued run is cancelled, a running one's worker
        stopped by force (no checkpoint) and the run marked ``cancelled``. Returns whether it is stopped."""
        if run.status == RunStatus.QUEUED:
            return self.store.request_cancel(run.id).status == RunStatus.CANCELLED
        if is_script_run(run):  # the script's process is not ours (maybe not on this machine): only Cancel reaches it
            self.store.request_cancel(run.id)
            return False
        executor = self.executor_for(run)
        if executor is None or not executor.force_stop(run):
            return False
        self.store.finish_run(run.id, RunStatus.CANCELLED, error=forced_stop_message(self.settings, run))
        self._cancel_seen.pop(run.id, None)
        return True

    def machine_gpus(self) -> list[str]:
        """The GPUs runs may get (``nvidia-smi -L``, asked once); empty on a machine without GPUs."""
        if self._machine_gpus is None:
            self._machine_gpus = machine_gpus()
        return self._machine_gpus

    def _start_queued(self) -> None:
        running_runs = [r for r in self.store.list_runs([RunStatus.RUNNING]) if not is_script_run(r)]
        running = len(running_runs)
        in_use = {gpu for r in running_runs for gpu in parse_gpu_list(r.gpus)}
        queued = sorted(self.store.list_runs([RunStatus.QUEUED]), key=lambda r: r.id)
        for run in queued:
            if running >= self.settings.max_concurrent_runs:
                break
            if isinstance(self.executor, RayExecutor):  # the cluster reserves GPUs; a job waits there for them
                try:
                    self.executor.gpu_count(run.config)
                except GpuAllocationError as exc:
                    self.store.finish_run(run.id, RunStatus.FAILED, error=str(exc))
                    continue
                if self.store.claim_run(run.id):
                    self._spawn(run)
                    running += 1
                continue
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
        try:
            gpu_count = self.executor.gpu_count(run.config) if isinstance(self.executor, RayExecutor) else len(gpus)
        except GpuAllocationError as exc:
            self.store.finish_run(run.id, RunStatus.FAILED, error=f"could not start the worker: {exc}")
            return
        start_worker(self.store, self.settings, run, self.executor, gpus, env=self.env, gpu_count=gpu_count)

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
