"""What a sandboxed child may use: ``resource`` limits set between fork and exec, and an emptied environment.

Each child gets limits on CPU time (``RLIMIT_CPU``: SIGXCPU at the soft limit, SIGKILL a second later), address
space (``RLIMIT_AS``: big allocations raise ``MemoryError``), file size (``RLIMIT_FSIZE``: SIGXFSZ beyond), core
dumps (none) and processes (``RLIMIT_NPROC``, which counts the tasks of a *user*: it bounds a fork bomb under a
pool uid, and is added to the user's current count otherwise). Limits are clamped to the current hard limits,
which an unprivileged child could not raise.
"""

from __future__ import annotations

import os
import resource

import psutil

Limit = tuple[int, int, int]
"""``(resource.RLIMIT_*, soft, hard)``."""


def base_env(home: str) -> dict[str, str]:
    """The child's whole environment: a fixed ``PATH``, UTF-8, ``HOME`` = its working folder, one thread per
    numeric library (which would otherwise start one thread per core and hit ``RLIMIT_NPROC``). Nothing of the
    host's environment reaches it."""
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class ChildLimits:
    """``preexec_fn``: set resource limits in the child between fork and exec (after the uid switch).

    Only ``resource.setrlimit`` runs here (no imports, no allocation-heavy work), because ``preexec_fn`` runs in
    a forked copy of a multi-threaded process.
    """

    def __init__(self, limits: list[Limit]):
        self.limits = limits  # (resource, soft, hard)

    def __call__(self) -> None:
        for which, soft, hard in self.limits:
            resource.setrlimit(which, (soft, hard))


def limit(which: int, soft: int, hard: int | None = None) -> Limit:
    """``(which, soft, hard)`` clamped to the current hard limit, which an unprivileged child cannot raise."""
    hard = soft if hard is None else hard
    current = resource.getrlimit(which)[1]
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    return which, soft, hard


def child_limits(*, cpu_s: int, memory_mb: int, max_file_mb: int, nproc: int) -> list[Limit]:
    """The limits of one execution: CPU seconds (at least 1), address space and file size in MiB, no core dumps,
    ``nproc`` processes and threads (``RLIMIT_NPROC``)."""
    cpu = max(int(cpu_s), 1)
    return [
        limit(resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL one second later
        limit(resource.RLIMIT_AS, int(memory_mb) * 1024 * 1024),
        limit(resource.RLIMIT_FSIZE, int(max_file_mb) * 1024 * 1024),
        limit(resource.RLIMIT_CORE, 0),
        limit(resource.RLIMIT_NPROC, nproc),
    ]


def with_extra_processes(limits: list[Limit], extra: int) -> list[Limit]:
    """``limits`` with ``extra`` added to ``RLIMIT_NPROC`` (the namespace tool's own processes, when they count)."""
    return [
        (which, soft + extra, hard + extra) if which == resource.RLIMIT_NPROC else (which, soft, hard)
        for which, soft, hard in limits
    ]


def user_task_count() -> int:
    """Threads the current (non-root) user runs now: RLIMIT_NPROC counts them all."""
    uid = os.getuid()
    total = 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids = proc.info.get("uids")
        if uids and uids.real == uid:
            total += proc.info.get("num_threads") or 1
    return total
