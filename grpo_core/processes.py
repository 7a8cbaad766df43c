"""THE child process: how the web process starts, watches and stops a worker, a preflight or a try-the-model job.

Every child is started the same way (:func:`start_process`): this interpreter's argv, no shell, standard input
closed, its own session and process group (so a cancel or a timeout kills the whole tree, ``accelerate``'s children
included, and closing the dashboard does not), and its standard output and error appended to a log file (never an
unread pipe, which would block the child once full). :func:`tail_text` reads the end of such a log. Imports no torch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import psutil


def start_process(
    argv: Sequence[str],
    *,
    log_path: str | Path,
    cwd: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> subprocess.Popen:
    """Start ``argv`` without a shell, in its own session and process group, output appended to ``log_path``.

    Args:
        argv: the command (``[sys.executable, "-m", ...]``).
        log_path: receives standard output and error (created, or appended to).
        cwd: working directory of the child (default: this process's).
        env: the child's whole environment (default: this process's).

    Raises:
        OSError: the log cannot be opened or the program not started.
    """
    with open(log_path, "ab") as log_file:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            cwd=None if cwd is None else str(cwd),
            env=None if env is None else dict(env),
        )


def lower_priority(pid: int, increment: int) -> list[str]:
    """Make process ``pid`` (a child just started, in its own session) ``increment`` nicer than it is: its niceness
    (``psutil``'s ``nice``, i.e. ``setpriority``), and, when it leads its own session, its autogroup's where the
    kernel groups sessions (``/proc/<pid>/autogroup``; there a niceness counts only against the group's other
    processes, see ``sched(7)``).
    Both only ever lower a priority, which needs no privilege; threads and processes the child starts later inherit
    them. Capped at 19. Returns what was changed (``["nice 10", "autogroup nice 10"]``); a process gone meanwhile,
    or a kernel without autogroups, changes nothing.
    """
    if increment <= 0:
        return []
    changed = []
    try:
        process = psutil.Process(pid)
        target = min(19, process.nice() + increment)
        process.nice(target)
        changed.append(f"nice {target}")
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return changed
    try:
        leads_its_session = os.getsid(pid) == pid
    except OSError:
        return changed
    if not leads_its_session:  # its group is its session's, maybe this process's own: left alone
        return changed
    group = Path(f"/proc/{pid}/autogroup")
    for _ in range(3):
        try:  # "/autogroup-123 nice 0"
            target = min(19, int(group.read_text().split("nice")[-1]) + increment)
            group.write_text(str(target))
            changed.append(f"autogroup nice {target}")
        except BlockingIOError:  # EAGAIN: the kernel takes one such change a tenth of a second, machine-wide
            time.sleep(0.11)
            continue
        except (OSError, ValueError):
            pass
        break
    return changed


def process_alive(pid: int | None) -> bool:
    """True when a process with this pid exists and is not a zombie."""
    if not pid:
        return False
    try:
        process = psutil.Process(pid)
        return process.status() != psutil.STATUS_ZOMBIE
    except (psutil.NoSuchProcess, psutil.AccessDenied):
        return False


def kill_process_group(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process group led by ``pid`` (children start their own); ignore a group already gone."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_process(process: subprocess.Popen, wait_s: float = 10.0) -> None:
    """Kill a child started by :func:`start_process`, with its whole process group, and reap it (waiting at most
    ``wait_s`` seconds)."""
    kill_process_group(process.pid, signal.SIGKILL)
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        pass


def tail_text(path: str | Path | None, max_lines: int = 40, max_bytes: int = 64_000) -> str:
    """The last ``max_lines`` lines of a text file (reading at most ``max_bytes`` from its end); "" if unreadable."""
    if not path:
        return ""
    try:
        with open(path, "rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(0, size - max_bytes))
            data = handle.read()
    except OSError:
        return ""
    lines = data.decode("utf-8", errors="replace").splitlines()
    return "\n".join(lines[-max_lines:])


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now (a multi-process run's rendezvous, a test server)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
