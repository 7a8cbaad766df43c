"""Where a run's worker trains: a child process of the web process (``local``) or a Ray job on a cluster (``ray``).

The launcher (:mod:`grpo_core.training.launcher`) decides which queued run starts and when; an executor starts, watches and
stops the worker of one run. Both run the same command (:func:`grpo_core.training.launcher.worker_command`), and the worker
reports into the store the same way, so the store stays the source of truth for a run's status, steps and error;
the executor only answers "is the worker still there?" and "what did it print last?".

* :class:`LocalExecutor`: the worker is a child process (:func:`grpo_core.processes.start_process`) whose output
  goes to ``train.log`` in the run folder; a restarted dashboard finds it again by the pid in the store.
* :class:`RayExecutor`: the worker is a Ray job submitted through ``ray.job_submission.JobSubmissionClient``
  (entrypoint: ``cd <run folder> && exec <worker command>``; ``entrypoint_num_cpus`` = ``num_processes``,
  ``entrypoint_num_gpus`` = the GPUs the run needs; the store URL, the shared folder and the worker's settings as
  the runtime environment's ``env_vars``). Its output is the Ray job's log; its submission id is stored with the run
  (``ray_submission_id``), so a restarted dashboard re-attaches to it by asking Ray. Ray is imported only here and
  only when this executor is used (``pip install 'grpo-dashboard[ray]'``).

Cancel is cooperative first in both: the store's cancel flag, which the worker's heartbeat reads and turns into a
stop at the next step with a checkpoint. A single-process Ray job is also asked to stop through Ray at once
(``stop_job``: Ray sends SIGTERM, which the worker treats like the flag, and SIGKILL after
``RAY_JOB_STOP_WAIT_TIME_S``, set to the launcher's cancel grace period). A multi-process one is not sent SIGTERM
early (torchrun would kill its ranks before they checkpoint); it gets ``stop_job`` once the grace period is over.
This module imports no torch.
"""

from __future__ import annotations

import enum
import logging
import os
import shlex
import signal
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo_core.processes import kill_process_group, lower_priority, process_alive, start_process, tail_text
from grpo_core.settings import Settings
from grpo_core.training.gpus import GpuAllocationError, gpus_needed, parse_gpu_list
from storage import RunInfo

log = logging.getLogger(__name__)

RAY_STOP_WAIT_ENV = "RAY_JOB_STOP_WAIT_TIME_S"
"""Read by Ray's job supervisor: seconds between the SIGTERM of ``stop_job`` and its SIGKILL (Ray's default: 3)."""

MULTI_PROCESS_STOP_WAIT_S = 10
"""Ray's SIGTERM-to-SIGKILL wait for a multi-process job, stopped only after the cancel grace period anyway."""

CARRIED_ENV_PREFIXES = ("GRPO_", "HF_", "TRANSFORMERS_", "TOKENIZERS_", "HUGGINGFACE_")
"""Variables of the web process's environment that a Ray job's worker gets too (worker limits, offline hub flags);
a Ray worker otherwise sees its node's environment, not the dashboard's."""

STARTING_GRACE_S = 30.0
"""Seconds a claimed local run may have no worker pid yet (being written) before it counts as gone."""


class WorkerState(enum.Enum):
    """What an executor knows of a run's worker."""

    STARTING = "starting"  # claimed but not started yet (local), or waiting for the cluster's resources (Ray)
    RUNNING = "running"
    GONE = "gone"  # exited, however it ended: the store's status says how the run ended
    UNKNOWN = "unknown"  # cannot tell now (the Ray cluster does not answer): ask again at the next pass


@dataclass(frozen=True)
class WorkerLaunch:
    """What starting one run's worker needs.

    Attributes:
        command: the worker's argv (:func:`grpo_core.training.launcher.worker_command`).
        folder: the run folder (its working directory; on a cluster under the shared folder).
        env: variables the worker needs on top of its node's environment (store URL, offline flags, ...).
        gpus: GPU ids picked by the launcher (``CUDA_VISIBLE_DEVICES``; local only, empty elsewhere).
        gpu_count: GPUs the run needs (Ray reserves them on a node and sets ``CUDA_VISIBLE_DEVICES`` itself).
        processes: the run's ``num_processes`` (the CPUs a Ray job reserves).
        nice: niceness a local worker gets added right after it starts (a CPU run's, see
            :mod:`grpo_core.training.cpu_share`; 0: none).
    """

    command: Sequence[str]
    folder: Path
    env: Mapping[str, str] = field(default_factory=dict)
    gpus: Sequence[str] = ()
    gpu_count: int = 0
    processes: int = 1
    nice: int = 0


class LocalExecutor:
    """Workers as child processes of this (web) process, in their own process groups, logging to ``train.log``."""

    name = "local"
    picks_gpus = True  # the launcher allocates this machine's GPU ids (grpo_core.training.gpus)

    def __init__(self) -> None:
        self._children: dict[int, subprocess.Popen] = {}

    def start(self, run: RunInfo, launch: WorkerLaunch, *, log_path: Path) -> dict[str, Any]:
        """Start the worker, ``launch.nice`` nicer than this process (:func:`grpo_core.processes.lower_priority`,
        before it has imported anything); returns the run fields to record (``worker_pid``, ``log_path``).

        Raises:
            OSError: the log cannot be opened or the program not started.
        """
        env = {**os.environ, **launch.env}
        if launch.gpus:
            env["CUDA_VISIBLE_DEVICES"] = ",".join(launch.gpus)
        child = start_process(launch.command, log_path=log_path, cwd=launch.folder, env=env)
        self._children[run.id] = child
        if launch.nice:
            lowered = lower_priority(child.pid, launch.nice)
            log.info("run %s: worker pid %s at a lower CPU priority: %s", run.id, child.pid,
                     ", ".join(lowered) or "unchanged")
        return {"worker_pid": child.pid, "log_path": str(log_path)}

    def child(self, run_id: int) -> subprocess.Popen | None:
        """The child process this executor started for run ``run_id`` and has not reaped yet."""
        return self._children.get(run_id)

    def collect_exited(self) -> None:
        """Reap the children that exited (no zombies); their runs' final status is in the store."""
        for run_id, child in list(self._children.items()):
            if child.poll() is not None:
                del self._children[run_id]

    def state(self, run: RunInfo) -> WorkerState:
        """Whether the worker of a running run is alive: this launcher's child, else the pid in the store (a
        worker started by an earlier dashboard, or a headless ``train`` that claimed the run itself)."""
        child = self._children.get(run.id)
        if child is not None and child.poll() is None:
            return WorkerState.RUNNING
        if process_alive(run.worker_pid):
            return WorkerState.RUNNING
        if run.worker_pid is None and run.started_at and time.time() - run.started_at.timestamp() < STARTING_GRACE_S:
            return WorkerState.STARTING  # claimed a moment ago; the pid is being written
        return WorkerState.GONE

    def request_stop(self, run: RunInfo) -> None:
        """Nothing beyond the store's cancel flag, which the worker reads at its next heartbeat."""

    def force_stop(self, run: RunInfo) -> bool:
        """SIGKILL the worker's process group (``accelerate``'s children included); True: it is stopped."""
        if run.worker_pid:
            kill_process_group(run.worker_pid, signal.SIGKILL)
        return True

    def log_tail(self, run: RunInfo, max_lines: int = 40) -> str:
        """The last ``max_lines`` lines of the run's ``train.log`` ("" without one)."""
        return tail_text(run.log_path, max_lines=max_lines)


def ray_gpu_count(config: Mapping[str, Any], cluster_gpus: float) -> int:
    """GPUs a Ray job of run ``config`` reserves (``entrypoint_num_gpus``).

    The ``gpus`` field's ids name GPUs of one machine, so on a cluster only their number counts; without it, one per
    process (:func:`grpo_core.training.gpus.gpus_needed`), none for ``device: cpu`` or on a cluster without GPUs (``device:
    auto`` then trains on the CPU, as it does locally).

    Raises:
        GpuAllocationError: the run needs more GPUs than the whole cluster has, so it could never start.
    """
    if str(config.get("device", "auto")) == "cpu":
        return 0
    listed = parse_gpu_list(str(config.get("gpus", "") or ""))
    needed = len(listed) if listed else gpus_needed(dict(config))
    if not listed and cluster_gpus <= 0:
        return 0
    if needed > cluster_gpus:
        raise GpuAllocationError(f"the run needs {needed} GPUs; the Ray cluster has {cluster_gpus:g}")
    return needed


def ray_entrypoint(command: Sequence[str], folder: Path) -> str:
    """The shell line Ray runs (it starts entrypoints with ``shell=True``): the worker command in the run folder,
    ``exec``-ed so that Ray's stop signals reach the worker itself rather than a shell."""
    return f"cd {shlex.quote(str(folder))} && exec {shlex.join(list(command))}"


def carried_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The variables of ``environ`` a Ray job's worker gets (:data:`CARRIED_ENV_PREFIXES`)."""
    return {k: v for k, v in environ.items() if k.startswith(CARRIED_ENV_PREFIXES)}


def ray_submission_id(run: RunInfo) -> str:
    """A fresh Ray submission id for one start of ``run`` (a resumed run is a new job): ``grpo-run-00042-<hex>``."""
    return f"grpo-run-{run.id:05d}-{uuid.uuid4().hex[:10]}"


class RayExecutor:
    """Workers as Ray jobs on the cluster whose job submission address (``http://HEAD:8265``) is ``address``.

    Args:
        address: the Ray dashboard address (``settings.ray_address``).
        stop_wait_s: Ray's SIGTERM-to-SIGKILL wait for a single-process job that is cancelled (the launcher's cancel
            grace period).
        client: a ``JobSubmissionClient``-like object (tests); default: one made on first use.
    """

    name = "ray"
    picks_gpus = False  # Ray reserves GPUs on a node and sets CUDA_VISIBLE_DEVICES itself

    def __init__(self, address: str, *, stop_wait_s: float = 60.0, client: Any = None) -> None:
        self.address = address
        self.stop_wait_s = stop_wait_s
        self._client = client
        self._cluster_gpus: tuple[float, float] | None = None  # (GPUs, when asked)

    @property
    def client(self):
        """The ``ray.job_submission.JobSubmissionClient`` (Ray imported on first use).

        Raises:
            RuntimeError: Ray is not installed, or the cluster does not answer at ``address``.
        """
        if self._client is None:
            try:
                from ray.job_submission import JobSubmissionClient
            except ImportError as exc:
                raise RuntimeError("the ray executor needs Ray: pip install 'grpo-dashboard[ray]'") from exc
            try:
                self._client = JobSubmissionClient(self.address)
            except Exception as exc:  # noqa: BLE001 - Ray raises ConnectionError, RuntimeError, ...
                raise RuntimeError(f"cannot reach the Ray cluster at {self.address}: {exc}") from exc
        return self._client

    def cluster_gpus(self, max_age_s: float = 60.0) -> float:
        """GPUs of the cluster's live nodes (Ray's state API, asked at most every ``max_age_s`` seconds); 0 when the
        cluster cannot say."""
        now = time.monotonic()
        if self._cluster_gpus is None or now - self._cluster_gpus[1] > max_age_s:
            try:
                from ray.util.state import list_nodes

                nodes = list_nodes(address=self.address, detail=True)
                total = sum(float((n.resources_total or {}).get("GPU", 0)) for n in nodes if n.state == "ALIVE")
            except Exception:  # noqa: BLE001 - no answer: count no GPUs, the run trains on the CPU
                log.warning("could not ask the Ray cluster at %s for its GPUs", self.address, exc_info=True)
                total = 0.0
            self._cluster_gpus = (total, now)
        return self._cluster_gpus[0]

    def gpu_count(self, config: Mapping[str, Any]) -> int:
        """:func:`ray_gpu_count` for this cluster. Raises GpuAllocationError as it does."""
        return ray_gpu_count(config, self.cluster_gpus())

    def start(self, run: RunInfo, launch: WorkerLaunch, *, log_path: Path | None = None) -> dict[str, Any]:
        """Submit the worker as a Ray job; returns the run fields to record (``ray_submission_id``; no
        ``log_path``: the output is the job's log, see :meth:`log_tail`).

        Raises:
            RuntimeError: Ray is missing, or the cluster refused or did not answer the submission.
        """
        submission_id = ray_submission_id(run)
        wait_s = int(self.stop_wait_s) if launch.processes <= 1 else MULTI_PROCESS_STOP_WAIT_S
        env = {**carried_env(os.environ), **launch.env, RAY_STOP_WAIT_ENV: str(max(1, wait_s))}
        try:
            self.client.submit_job(
                entrypoint=ray_entrypoint(launch.command, launch.folder),
                submission_id=submission_id,
                runtime_env={"env_vars": env},
                metadata={"grpo_run_id": str(run.id), "grpo_run_name": run.name[:200],
                          "grpo_run_dir": str(launch.folder)},
                entrypoint_num_cpus=max(1, launch.processes),
                entrypoint_num_gpus=launch.gpu_count or None,
            )
        except RuntimeError:
            raise
        except Exception as exc:  # noqa: BLE001 - connection errors and the like, said in the run's error
            raise RuntimeError(f"the Ray cluster at {self.address} did not take the job: {exc}") from exc
        return {"ray_submission_id": submission_id, "log_path": None}

    def collect_exited(self) -> None:
        """Nothing to reap: Ray owns the processes."""

    def state(self, run: RunInfo) -> WorkerState:
        """The Ray job's status: PENDING -> STARTING, RUNNING -> RUNNING, SUCCEEDED/FAILED/STOPPED -> GONE;
        UNKNOWN when the cluster does not answer (a run is never failed because the dashboard lost the cluster)."""
        if not run.ray_submission_id:
            return WorkerState.UNKNOWN
        try:
            status = self.client.get_job_status(run.ray_submission_id)
        except Exception:  # noqa: BLE001 - cluster unreachable or the job forgotten: try again later
            log.warning("run %s: could not get the status of Ray job %s", run.id, run.ray_submission_id,
                        exc_info=True)
            return WorkerState.UNKNOWN
        value = str(getattr(status, "value", status)).upper()
        if value == "PENDING":
            return WorkerState.STARTING
        if value == "RUNNING":
            return WorkerState.RUNNING
        return WorkerState.GONE

    def _stop(self, run: RunInfo) -> None:
        if not run.ray_submission_id:
            return
        try:
            self.client.stop_job(run.ray_submission_id)
        except Exception:  # noqa: BLE001 - the next pass asks again
            log.warning("run %s: could not stop Ray job %s", run.id, run.ray_submission_id, exc_info=True)

    def request_stop(self, run: RunInfo) -> None:
        """Ask Ray to stop a single-process job now (SIGTERM = the worker's cooperative stop; SIGKILL after
        ``stop_wait_s``); a multi-process job relies on the store's cancel flag until :meth:`force_stop`."""
        if int(run.config.get("num_processes", 1) or 1) <= 1:
            self._stop(run)

    def force_stop(self, run: RunInfo) -> bool:
        """``stop_job`` (again: Ray ignores a second one); True once the job is over."""
        self._stop(run)
        return self.state(run) == WorkerState.GONE

    def log_tail(self, run: RunInfo, max_lines: int = 40) -> str:
        """The last ``max_lines`` lines of the Ray job's log ("" when there is none or the cluster does not answer).

        Ray returns the whole log; training logs are short (one line per step), so this is read per request."""
        if not run.ray_submission_id:
            return ""
        try:
            text = self.client.get_job_logs(run.ray_submission_id)
        except Exception:  # noqa: BLE001 - the log is a convenience, never an error of its own
            log.warning("run %s: could not read the log of Ray job %s", run.id, run.ray_submission_id, exc_info=True)
            return ""
        return "\n".join(str(text or "").splitlines()[-max_lines:])


Executor = LocalExecutor | RayExecutor


def make_executor(settings: Settings) -> Executor:
    """The executor ``settings.executor`` names (Ray is not imported until the first job is submitted)."""
    if settings.executor == "ray":
        return RayExecutor(settings.ray_address, stop_wait_s=settings.cancel_grace_s)
    return LocalExecutor()
