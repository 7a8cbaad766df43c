"""Killing what a sandboxed child leaves behind, and reaping the child.

Every child leads its own session and process group; when it ends (or is killed) the whole group is killed. As
root, every process of the child's pool uid is then killed with ``kill(-1, SIGKILL)`` issued *as that uid*, which
also reaches processes that escaped the group with ``setsid()`` and cannot be outrun by a fork bomb. Without a pool
uid, the processes of the child's session are killed instead. In the namespace modes a child that exited on its own
took its PID namespace, and every process in it, along.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections.abc import Callable

import psutil

logger = logging.getLogger(__name__)


class _KillEveryProcessOfUser:
    """``preexec_fn`` that never execs: after the switch to the pool uid, ``kill(-1, SIGKILL)`` and exit.

    ``kill(-1)`` signals every process the caller may signal (all of that uid) but itself, and walks the process
    table under the kernel's task-list lock, so a fork bomb cannot outrun it. (Its return value cannot tell
    whether anything was killed: processes it may not signal count as "found".)
    """

    def __call__(self) -> None:
        try:
            os.kill(-1, signal.SIGKILL)
        except OSError:
            os._exit(1)
        os._exit(0)


def kill_uid(uid: int) -> None:
    """SIGKILL every process running under ``uid`` (root only)."""
    helper = subprocess.Popen(
        [sys.executable],  # never executed: the preexec_fn exits first
        user=uid,
        group=uid,
        extra_groups=[],
        env={},
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        close_fds=True,
        preexec_fn=_KillEveryProcessOfUser(),
    )
    helper.wait()


def kill_matching(predicate: Callable[[psutil.Process], bool]) -> bool:
    """SIGKILL every process for which ``predicate(psutil.Process)`` holds (skipping this one); True if any."""
    killed = False
    me = os.getpid()
    for proc in psutil.process_iter():
        if proc.pid == me:
            continue
        try:
            if predicate(proc):
                proc.kill()
                killed = True
        except (psutil.Error, OSError):
            continue
    return killed


def in_session(sid: int) -> Callable[[psutil.Process], bool]:
    """A :func:`kill_matching` predicate: the process belongs to session ``sid``."""

    def predicate(proc: psutil.Process) -> bool:
        return os.getsid(proc.pid) == sid

    return predicate


def cleanup(proc: subprocess.Popen, uid: int | None, namespaced: bool = False) -> bool:
    """Kill the child's process group and everything it left behind; reap the child.

    ``namespaced``: the child is ``unshare --pid --fork`` (the namespace modes). When it has exited on its own and
    its group is empty, its PID namespace is gone with every process in it (an exiting PID 1 kills and reaps the
    rest first), so the scans for leftovers (``kill(-1)`` as the pool uid, the session scan) are skipped.

    Returns True if the process group still had members (processes that escaped the group with ``setsid`` are
    killed too, but not counted).
    """
    killed = False
    pgid = proc.pid  # start_new_session: the child leads its own session and process group
    proc.poll()
    try:
        os.killpg(pgid, 0)
        os.killpg(pgid, signal.SIGKILL)
        killed = True
    except (ProcessLookupError, PermissionError):
        pass
    if namespaced and not killed and proc.returncode is not None:
        pass
    elif uid is not None:
        kill_uid(uid)
    else:
        killed = kill_matching(in_session(pgid)) or killed
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a child stuck in the kernel
        logger.error("sandbox: child %d did not die after SIGKILL", proc.pid)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return killed
