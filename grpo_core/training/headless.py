"""A run trained headless (``grpo-dashboard train run.yaml``) through the dashboard's own launch path.

The command queues the run in the store like the Launch tab (:func:`grpo_core.submit.queue.submit_run`, validated
once), then starts its worker exactly as the dashboard's launcher does
(:func:`grpo_core.training.launcher.start_worker`: ``python -m grpo_core.training.worker``, or ``accelerate launch`` of it
for ``num_processes`` > 1 with a free rendezvous port; its GPUs in ``CUDA_VISIBLE_DEVICES``), follows the worker's
``train.log`` onto the terminal and waits for the run's final status. So a config trains the same way
from either side, several processes included. What the launcher would keep queued (GPUs held by other runs) is
refused at once instead, with what to change. Ctrl-C (or SIGTERM) asks the run to stop at its next step, like Cancel;
a second one kills the worker's process group. Imports no torch.
"""

from __future__ import annotations

import codecs
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import TextIO

from grpo_core.processes import kill_process_group
from grpo_core.settings import Settings
from grpo_core.training.executors import LocalExecutor
from grpo_core.training.gpus import GpuAllocationError, allocate_gpus, gpus_needed, machine_gpus, parse_gpu_list
from grpo_core.training.launcher import fail_vanished_worker, start_worker
from storage import RunInfo, RunStatus, Store


class HeadlessRefusal(ValueError):
    """A run config that ``grpo-dashboard train`` cannot start now; the message says why and what to change."""


def headless_gpus(store: Store, config: dict, available: Sequence[str] | None = None) -> list[str]:
    """The ``CUDA_VISIBLE_DEVICES`` of a headless run: as the launcher chooses (:func:`allocate_gpus`), among the GPUs
    that no running run of the store holds.

    Args:
        config: the run config as a mapping (``gpus``, ``num_processes``, ``device``).
        available: the machine's GPUs (default: :func:`machine_gpus`, ``nvidia-smi -L``); empty without GPUs.

    Returns:
        The GPU ids (``[]``: leave ``CUDA_VISIBLE_DEVICES`` as it is: a CPU run, or a machine without GPUs).

    Raises:
        HeadlessRefusal: the machine has fewer GPUs than the run's processes, or fewer are free now (the dashboard
            would keep the run queued; headless, the message names the runs holding them).
    """
    available = machine_gpus() if available is None else list(available)
    running = store.list_runs([RunStatus.RUNNING])
    in_use = {gpu for run in running for gpu in parse_gpu_list(run.gpus)}
    needed = gpus_needed(config)
    try:
        gpus = allocate_gpus(str(config.get("gpus", "") or ""), needed, available, in_use)
    except GpuAllocationError as exc:
        raise HeadlessRefusal(f"{exc}; lower num_processes or set device: cpu") from None
    if gpus is None:
        holders = ", ".join(f"#{run.id} (GPUs {run.gpus})" for run in running if run.gpus)
        raise HeadlessRefusal(
            f"the run needs {needed} free GPU(s) but only {len(set(available) - in_use)} of {len(available)} are "
            f"free: running runs hold them ({holders}); wait for them, or name the GPUs to share in the config's "
            "gpus field (e.g. gpus: '0')"
        )
    return gpus


def train_headless(
    store: Store,
    settings: Settings,
    run: RunInfo,
    gpus: Sequence[str] = (),
    *,
    echo: TextIO | None = None,
    poll_s: float = 0.5,
    env: dict[str, str] | None = None,
) -> RunStatus:
    """Claim the queued ``run``, start its worker as the launcher does and wait for its final status.

    Args:
        gpus: its ``CUDA_VISIBLE_DEVICES`` (:func:`headless_gpus`).
        echo: receives the worker's ``train.log`` as it grows (the terminal); ``None``: nothing is copied.
        poll_s: seconds between looks at the worker and its log.
        env: extra environment variables for the worker.

    Returns:
        The run's final status in the store. A run that another launcher claimed first is not started here: its
        status now is returned. A worker that exits without a final status leaves the run ``failed`` with its log's
        tail, as in the dashboard.
    """
    if not store.claim_run(run.id):
        return store.get_run(run.id).status
    executor = LocalExecutor()
    # no web process beside it: the worker keeps this command's priority and torch's threads
    if not start_worker(store, settings, store.get_run(run.id), executor, gpus, env=env, share_cpu=False):
        return store.get_run(run.id).status
    child = executor.child(run.id)
    follower = _LogFollower(store.get_run(run.id).log_path, echo)
    interrupts = 0

    def on_sigterm(*_):
        raise KeyboardInterrupt

    in_main_thread = threading.current_thread() is threading.main_thread()  # only there can a handler be set
    previous = signal.signal(signal.SIGTERM, on_sigterm) if in_main_thread else None
    try:
        while True:
            try:
                while child.poll() is None:
                    follower.copy_new()
                    time.sleep(poll_s)
                break
            except KeyboardInterrupt:
                interrupts += 1
                if interrupts == 1:
                    store.request_cancel(run.id)
                    _say(echo, f"run #{run.id}: stopping at the next step (a checkpoint is saved); "
                               "interrupt again to kill it")
                else:
                    kill_process_group(child.pid, signal.SIGKILL)
                    _wait(child)
                    store.finish_run(run.id, RunStatus.CANCELLED, error="stopped by force (interrupted twice)")
                    break
    finally:
        if in_main_thread:
            signal.signal(signal.SIGTERM, previous)
        follower.copy_new()
    final = store.get_run(run.id)
    if not final.status.is_final:
        fail_vanished_worker(store, final, executor.log_tail(final, max_lines=20))
    return store.get_run(run.id).status


def _wait(child: subprocess.Popen, timeout_s: float = 10.0) -> None:
    try:
        child.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass


def _say(echo: TextIO | None, message: str) -> None:
    if echo is not None:
        echo.write(message + "\n")
        echo.flush()


class _LogFollower:
    """Copies what a log file gained since the last look onto ``echo`` (``tail -f``)."""

    def __init__(self, path: str | None, echo: TextIO | None) -> None:
        self.path = path
        self.echo = echo
        self.offset = 0
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a character may span two reads

    def copy_new(self) -> None:
        if self.echo is None or not self.path:
            return
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                data = handle.read()
        except OSError:
            return
        if data:
            self.offset += len(data)
            self.echo.write(self.decoder.decode(data))
            self.echo.flush()
