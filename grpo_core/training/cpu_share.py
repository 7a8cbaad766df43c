"""How a CPU training worker shares the machine with the web process that started it: a lower CPU priority, and
torch threads that leave the web process a core. Imports no torch.

A CPU run's worker is busy on every core it is given for the whole run, while the dashboard's web process needs a
core for a moment at each click or refresh. Two settings, read once by the web process
(:class:`grpo_core.settings.Settings`) and applied by the launcher to each local worker it starts for a run that
trains on the CPU (no GPU given to it):

* ``worker_nice`` (``GRPO_WORKER_NICE``, default :data:`DEFAULT_WORKER_NICE`): added to the worker's niceness right
  after it starts (:func:`grpo_core.processes.lower_priority`), before it imports anything, so its threads and the
  processes it starts (``accelerate``'s ranks) inherit it. Linux schedules a session's processes as one group where
  the kernel groups them ("autogroup", ``/proc/sys/kernel/sched_autogroup_enabled``; the worker leads its own
  session), and then a niceness counts only inside the group: the group's own niceness
  (``/proc/<pid>/autogroup``) is raised by as much. 0 leaves the worker at the web process's priority.
* ``worker_cpu_threads`` (``GRPO_WORKER_CPU_THREADS``, default ``all``): torch's intra-op threads in the worker,
  passed as ``GRPO_WORKER_CPU_THREADS`` and applied by :func:`grpo_core.engine.policy_model.share_cpu_threads` once
  the worker knows it trains on the CPU: ``auto`` leaves one of the cores this process may use to the web process
  (:func:`cpu_threads`), ``all`` keeps torch's default (one per physical core), a number sets that many.
  ``OMP_NUM_THREADS`` in the worker's environment wins over both.

GPU runs are left alone: their worker keeps the web process's priority and torch's default threads. Runs on a Ray
cluster, and ``grpo-dashboard train`` (no web process beside it), too.
"""

from __future__ import annotations

import os

ENV_WORKER_NICE = "GRPO_WORKER_NICE"
ENV_WORKER_CPU_THREADS = "GRPO_WORKER_CPU_THREADS"
DEFAULT_WORKER_NICE = 10
"""Niceness added to a CPU worker: under contention the web process gets about 10x the worker's CPU time (the
kernel's weights: 1024 at nice 0, 110 at nice 10); alone, the worker still gets every idle cycle."""
MAX_NICE = 19
THREAD_CHOICES = ("auto", "all")
DEFAULT_WORKER_CPU_THREADS = "all"
"""torch's own thread count: leaving a core (``auto``) halves a 2-core laptop's training threads, and no slowdown of
the pages by a training run was measured that it would cure (docs/configuration.md)."""


def parse_worker_nice(raw: object, source: str = ENV_WORKER_NICE) -> int:
    """A niceness increment from a setting: a whole number from 0 to 19 (empty: :data:`DEFAULT_WORKER_NICE`).

    Raises:
        ValueError: not a whole number, or outside 0-19 (a negative one would need privileges to raise the worker
            above the web process); the message names ``source``.
    """
    text = str(raw).strip() if raw is not None else ""
    if not text:
        return DEFAULT_WORKER_NICE
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{source}={text!r} is not a whole number (0 to {MAX_NICE})") from None
    if not 0 <= value <= MAX_NICE:
        raise ValueError(f"{source}={value} is outside 0 to {MAX_NICE}")
    return value


def parse_cpu_threads(raw: object, source: str = ENV_WORKER_CPU_THREADS) -> str:
    """A torch thread setting: ``auto``, ``all`` or a whole number of threads from 1 to 1024 (empty:
    :data:`DEFAULT_WORKER_CPU_THREADS`);
    returned as text, lower case.

    Raises:
        ValueError: anything else; the message names ``source``.
    """
    text = str(raw).strip().lower() if raw is not None else ""
    if not text:
        return DEFAULT_WORKER_CPU_THREADS
    if text in THREAD_CHOICES:
        return text
    if text.isdigit() and 1 <= int(text) <= 1024:
        return str(int(text))
    raise ValueError(f"{source}={text!r} is not auto, all or a number of threads from 1 to 1024")


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, e.g. a container's share), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def cpu_threads(setting: str, torch_default: int, cores: int | None = None) -> int | None:
    """The torch intra-op threads for a CPU worker under ``setting`` (:func:`parse_cpu_threads`), or ``None`` to
    keep ``torch_default``.

    ``auto``: one thread per usable core (``cores``, default :func:`usable_cores`) but one, at least 1 and at most
    ``torch_default`` (2 cores: 1 thread; 8 cores: 7). ``all``: ``None``. A number: that number.

    Raises:
        ValueError: ``setting`` is not one :func:`parse_cpu_threads` returns.
    """
    setting = parse_cpu_threads(setting)
    if setting == "all":
        return None
    if setting == "auto":
        spare = (usable_cores() if cores is None else cores) - 1
        return max(1, min(torch_default, spare))
    return int(setting)
