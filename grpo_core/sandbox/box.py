"""Run untrusted, model-written Python in a throw-away child process with resource limits, in namespaces of its own.

Each call of :func:`run_python` writes the code to ``main.py`` in a fresh folder and runs ``python -I -B main.py``
there, in a new session, with an emptied environment and ``resource`` limits on CPU time, address space, file
size, process count and core dumps. Output is read incrementally through pipes with a size cap, a wall-clock
deadline kills the whole process group, and every process the child left behind is killed before the call
returns.

Where the host allows it, the child also runs in namespaces of its own, made by a well-kept tool rather than by
code of ours (the *isolation mode*, resolved once per process and reported by :func:`sandbox_info`):

* ``bwrap`` (Debian's ``bubblewrap``): new network namespace (no network at all, not even the host's loopback;
  a seccomp filter refuses ``socket()`` of every family but ``AF_UNIX``), new PID namespace (``/proc`` shows only the sandbox's own processes), IPC and UTS namespaces; the file system
  is an empty root holding read-only ``/usr`` (shared libraries, the system's Python) and the interpreter's own
  prefix, ``/dev``'s null devices, and a private, size-limited ``/tmp`` (a tmpfs) in which the working folder
  lives. The project, the data directory, ``/etc``, ``/home``, ``/root`` and the host's ``/tmp`` are not there.
  The interpreter runs with ``-S`` (standard library only).
* ``unshare`` (util-linux), when ``bwrap`` is missing or cannot run: network, PID, IPC and UTS namespaces only;
  the child still sees the host's file system.
* ``uid`` / ``none``: no namespaces (neither tool works here); a loud warning is logged and shown in the Launch
  tab.

When the host runs as root (as CI does), the child also runs under a uid/gid of its own, taken from a pool of
otherwise unused ids (one id per concurrent execution), with no supplementary groups (``bwrap`` and ``unshare``
run as root and hand over to that uid with ``setpriv``). That is what makes file permissions, ``kill`` and
``/proc/<pid>/environ`` protect the host, and what makes ``RLIMIT_NPROC`` (which counts the processes of a
*user*, and is not enforced for root) bound a fork bomb. Leftover processes are then killed with
``kill(-1, SIGKILL)`` issued *as that uid*, which also reaches processes that escaped the process group with
``setsid()``. In the ``uid`` mode, if the interpreter running this module is not reachable by an unprivileged uid
(e.g. a pyenv build under ``/root``), the sandbox uses the first of ``/usr/local/bin/python3.X``,
``/usr/bin/python3.X``, ``python3`` that is, so the child then sees only the standard library.

Without root, the child runs as the host's own user (in ``bwrap``/``unshare``, inside a user namespace): limits,
the emptied environment, the process-group kill and a session scan still apply. See ``docs/sandbox.md`` for what
the sandbox does and does not protect against.
"""

from __future__ import annotations

import enum
import logging
import os
import queue
import resource
import secrets
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import psutil

logger = logging.getLogger(__name__)

UID_POOL_SIZE = 256
"""Number of distinct uids the sandbox uses when running as root (= most concurrent executions)."""

_READ_CHUNK = 65_536
_EXIT_GRACE_S = 0.2  # after the main child exits, how long to keep reading pipes a grandchild still holds open
_POLL_S = 0.1


class ExecStatus(str, enum.Enum):
    """How an execution ended."""

    OK = "ok"
    """The child exited with code 0."""
    FAILED = "failed"
    """Non-zero exit code, or killed by a signal the sandbox did not send (file-size limit, OOM killer)."""
    TIMEOUT = "timeout"
    """The wall-clock deadline passed, or the CPU-time limit was hit (SIGXCPU)."""
    OUTPUT_LIMIT = "output_limit"
    """stdout or stderr exceeded ``max_output_bytes``; the child was killed."""
    SETUP_ERROR = "setup_error"
    """The sandbox could not start the child (no interpreter, no temporary folder, fork failed...)."""


@dataclass(frozen=True)
class ExecResult:
    """The outcome of one :func:`run_python` call.

    Attributes:
        status: how it ended (see :class:`ExecStatus`).
        returncode: the child's exit code, negative for a signal (``-9``: SIGKILL), ``None`` if it never started.
        stdout: decoded (UTF-8, invalid bytes replaced) standard output, at most ``max_output_bytes`` bytes.
        stderr: decoded standard error, same cap; the setup error message for ``SETUP_ERROR``.
        duration_s: wall-clock seconds from start to exit (or kill), interpreter start-up included.
        killed: the sandbox had to kill something (timeout, output overflow, or processes left behind; in the
            namespace modes, processes the child left behind die with its PID namespace when it exits, uncounted).
        truncated: stdout or stderr was cut at the cap.
    """

    status: ExecStatus
    returncode: int | None
    stdout: str
    stderr: str
    duration_s: float
    killed: bool = False
    truncated: bool = False

    @property
    def ok(self) -> bool:
        """``status is ExecStatus.OK``."""
        return self.status is ExecStatus.OK


class IsolationMode(str, enum.Enum):
    """Which namespaces an execution runs in (see the module docstring); the first that works on the host wins."""

    BWRAP = "bwrap"
    """bubblewrap: network, PID, IPC, UTS namespaces and a file system of only the interpreter and a private /tmp."""
    UNSHARE = "unshare"
    """util-linux ``unshare``: network, PID, IPC and UTS namespaces; the host's file system stays visible."""
    UID = "uid"
    """No namespaces; as root, a uid of its own per execution (the mode of earlier versions)."""
    NONE = "none"
    """No namespaces and no uid switch (not root, and neither tool works)."""


@dataclass(frozen=True)
class SandboxInfo:
    """How this host runs sandboxed code (resolved once per process).

    Attributes:
        interpreter: the Python executable started for each execution.
        switches_user: children run under a pool uid (host is root and such a uid can run ``interpreter``).
        uid_range: ``(first, last)`` pool uids when ``switches_user``, else ``None``.
        mode: the isolation mode in force (:class:`IsolationMode`).
        warning: why the host gets less than ``bwrap`` isolation (what is missing), ``None`` with ``bwrap``.
    """

    interpreter: str
    switches_user: bool
    uid_range: tuple[int, int] | None
    mode: IsolationMode = IsolationMode.NONE
    warning: str | None = None

    def describe(self) -> str:
        """One line for people: the mode, what it isolates, and whether children get a uid of their own."""
        what = {
            IsolationMode.BWRAP: "bubblewrap namespaces: no network, only the interpreter and a private /tmp visible",
            IsolationMode.UNSHARE: "unshare namespaces: no network, own PIDs; the host's files stay visible",
            IsolationMode.UID: "no namespaces: network and world-readable files are reachable",
            IsolationMode.NONE: "no namespaces: network and world-readable files are reachable",
        }[self.mode]
        uid = "own uid per execution" if self.switches_user else "runs as the host's user"
        return f"`{self.mode.value}` ({what}; {uid})"


class _UidPool:
    """A blocking pool of unused uids (equal gids), one per concurrent execution.

    A uid that still owns processes after its execution was cleaned up (typically zombies of a fork bomb that
    the system's init has not reaped yet; they count towards ``RLIMIT_NPROC``) is retired and replaced by a
    fresh one, counting down from below the pool.
    """

    def __init__(self, uids: list[int], lowest_fresh: int = 1000):
        self.uids = tuple(uids)
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for uid in uids:
            self._free.put(uid)
        self._next_fresh = min(uids) - 1
        self._lowest_fresh = lowest_fresh
        self._lock = threading.Lock()

    def acquire(self) -> int:
        return self._free.get()

    def release(self, uid: int, *, retire: bool = False) -> None:
        if retire:
            with self._lock:
                fresh = self._fresh_uid()
            if fresh is not None:
                uid = fresh
            else:
                logger.warning("sandbox: no fresh uid left; reusing uid %d although it still owns processes", uid)
        self._free.put(uid)

    def _fresh_uid(self) -> int | None:
        known = _uids_in_use()
        while self._next_fresh >= self._lowest_fresh:
            uid = self._next_fresh
            self._next_fresh -= 1
            if uid not in known and uid not in (65_534, 65_535):
                return uid
        return None


def _uids_in_use() -> set[int]:
    """Uids of every running process and of every user in the password database."""
    used: set[int] = set()
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids:
            used.update(uids)
    try:
        import pwd

        used.update(entry.pw_uid for entry in pwd.getpwall())
    except (ImportError, OSError):  # pragma: no cover - pwd is always there on Linux
        pass
    return used


def _uid_has_processes(uid: int) -> bool:
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids and uid in uids:
            return True
    return False


def _mapped_ranges(path: str) -> list[tuple[int, int]]:
    """``(first, count)`` id ranges usable in this user namespace (``/proc/self/uid_map``)."""
    try:
        with open(path) as fh:
            rows = [line.split() for line in fh if line.strip()]
        return [(int(row[0]), int(row[2])) for row in rows]
    except (OSError, ValueError, IndexError):
        return [(0, 65_536)]


def _pick_uids(size: int) -> list[int]:
    """``size`` uids that are mapped (uid and gid), not 65534/65535, not a known user and run no process."""
    uid_ranges = _mapped_ranges("/proc/self/uid_map")
    gid_ranges = _mapped_ranges("/proc/self/gid_map")

    def mapped(first: int, ranges: list[tuple[int, int]]) -> bool:
        return any(start <= first and first + size <= start + count for start, count in ranges)

    candidates = [1_800_000_000] + [start + count - size - 2 for start, count in uid_ranges]
    base = next(
        (b for b in candidates if b >= 1000 and mapped(b, uid_ranges) and mapped(b, gid_ranges)),
        None,
    )
    if base is None:
        return []
    used = _uids_in_use()
    return [uid for uid in range(base, base + size) if uid not in used and uid not in (65_534, 65_535)]


def _interpreter_candidates() -> list[str]:
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    names = [
        sys.executable,
        f"/usr/local/bin/python{version}",
        f"/usr/bin/python{version}",
        "/usr/local/bin/python3",
        "/usr/bin/python3",
    ]
    seen: list[str] = []
    for name in names:
        if name and name not in seen and os.path.isfile(name) and os.access(name, os.X_OK):
            seen.append(name)
    return seen


def _runs_as(interpreter: str, uid: int) -> bool:
    """Whether ``interpreter`` starts and imports the standard library under ``uid``."""
    try:
        done = subprocess.run(
            [interpreter, "-I", "-B", "-c", "import os, json, math, re, collections; print(os.getuid())"],
            user=uid,
            group=uid,
            extra_groups=[],
            cwd="/",
            env=_base_env("/"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.strip() == str(uid).encode()


_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOOL_PATH = "/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin"
_PROBE_CODE = "import os, json, math, re, collections, socket; print(os.getuid())"
_SANDBOX_TMP = "/tmp"  # where the private tmpfs is mounted inside the bwrap view


@dataclass(frozen=True)
class _Plan:
    """Everything :func:`run_python` needs to start a child on this host (resolved once per process).

    ``info`` is what :func:`sandbox_info` reports; ``plain_interpreter`` is the interpreter of the no-namespace
    modes (also used when a caller asks for them explicitly); ``tool`` the ``bwrap``/``unshare`` executable and
    ``tool_args`` the flags the probe found working; ``binds`` the read-only folders of the bwrap view.
    """

    info: SandboxInfo
    pool: _UidPool | None
    plain_interpreter: str
    tool: str | None = None
    tool_args: tuple[str, ...] = ()
    setpriv: str | None = None
    binds: tuple[str, ...] = ()
    unshare: str | None = None
    env: str = "/usr/bin/env"


def _namespace_interpreters() -> list[str]:
    """Interpreters a namespace may run, their real paths (a venv's ``python`` resolves to its base interpreter),
    the system's own first.

    An interpreter whose prefix is the project folder, lies in it, or holds it (a venv inside the project made
    with ``--copies``) is skipped: the read-only view would then show the project.
    """
    found: list[str] = []
    for name in [sys.executable, *_interpreter_candidates()]:
        real = os.path.realpath(name)
        prefix = os.path.dirname(os.path.dirname(real))
        inside = os.path.commonpath([prefix, _PROJECT_ROOT]) in (prefix, _PROJECT_ROOT)
        if os.path.isfile(real) and os.access(real, os.X_OK) and not inside and real not in found:
            found.append(real)
    # The system's interpreter (under /usr) first: the view then needs no folder besides /usr, and distributions
    # link it statically, which starts faster than a shared-libpython build such as pyenv's.
    return sorted(found, key=lambda path: not path.startswith("/usr/"))


def _read_only_binds(interpreter: str) -> tuple[str, ...]:
    """Folders the bwrap view shows read-only: ``/usr`` and the interpreter's prefix when it lies elsewhere.

    ``/lib``, ``/lib64``, ``/bin``, ``/sbin`` are bound too where they are real folders (on merged-``/usr``
    systems they are symlinks, recreated as such by :func:`_bwrap_args`).
    """
    binds = ["/usr"]
    for top in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.isdir(top) and not os.path.islink(top):
            binds.append(top)
    prefix = os.path.dirname(os.path.dirname(interpreter))
    if not any(os.path.commonpath([prefix, b]) == b for b in binds):
        binds.append(prefix)
    return tuple(binds)


def _bwrap_args(
    binds: tuple[str, ...],
    cwd: str,
    script_fd: int,
    tmp_mb: int,
    as_root: bool,
    drop_caps: bool,
    seccomp_fd: int | None = None,
) -> list[str]:
    """bwrap flags: new namespaces, read-only ``binds``, private ``/proc`` and ``/dev``, tmpfs ``/dev/shm`` and
    ``/tmp`` of ``tmp_mb`` MiB each, the latter holding the working folder ``cwd`` (mode 0777 as root: the folder is
    root's, the child a pool uid) with the script copied from ``script_fd`` into ``cwd/main.py``. ``drop_caps``: a
    root child that no ``setpriv`` hands over (no pool uid) keeps no capability. ``seccomp_fd``: a filter to load
    (:func:`_seccomp_program`)."""
    args = ["--unshare-net", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try"]
    if not as_root:
        args.append("--unshare-user")
    if drop_caps:
        args += ["--cap-drop", "ALL"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    args += ["--die-with-parent"]
    made: set[str] = set()
    for path in binds:
        # Folders above a bind (e.g. /root for a pyenv interpreter) would get the umask's mode, 0700 as root: the
        # pool uid could not reach the interpreter. They are empty folders of the sandbox's own root.
        for parent in reversed(Path(path).parents[:-1]):
            if str(parent) not in made:
                made.add(str(parent))
                args += ["--perms", "0755", "--dir", str(parent)]
        args += ["--ro-bind", path, path]
    for top in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(top):
            args += ["--symlink", os.readlink(top), top]
    args += ["--proc", "/proc", "--dev", "/dev"]
    args += ["--perms", "1777", "--size", str(int(tmp_mb) * 1024 * 1024), "--tmpfs", "/dev/shm"]  # not /dev's tmpfs
    args += ["--perms", "1777", "--size", str(int(tmp_mb) * 1024 * 1024), "--tmpfs", _SANDBOX_TMP]
    args += ["--perms", "0777" if as_root else "0700", "--dir", cwd]
    args += ["--perms", "0644", "--file", str(script_fd), os.path.join(cwd, "main.py"), "--chdir", cwd]
    return args


# seccomp filter for the bwrap mode (classic BPF over struct seccomp_data: nr at offset 0, arch at 4, args[0]'s low
# 32 bits at 16, as in the kernel's Documentation/userspace-api/seccomp_filter.rst). It refuses:
# * socket() of any family but AF_UNIX, io_uring (which can open sockets without socket()), and syscalls of another
#   ABI (x32, 32-bit): EACCES. The network namespace already leaves nothing to reach; this makes "no network"
#   visible at the first call.
# * new namespaces: unshare() (any), clone() with a CLONE_NEW* flag (a new user namespace gives full capabilities
#   inside it, the door to most kernel exploits of the last years), setns(): EPERM; clone3() with ENOSYS, so that
#   glibc falls back to clone() for threads and processes (clone3 passes its flags in memory a filter cannot read).
# * the kernel keyring (add_key, request_key, keyctl: the child would otherwise share the reward process's session
#   keyring), bpf, ptrace and process_vm_readv/writev (reading or steering another process of the same uid, such as
#   the code rules' harness), perf_event_open, userfaultfd (a tool of kernel race exploits), kexec, modules,
#   mount and the new mount API, pivot_root, chroot, swap, reboot, accounting, clock setting, fanotify, open by
#   handle, pidfd_getfd, kcmp: EPERM. See docs/sandbox.md.
_SECCOMP_ARCH = {  # machine -> (AUDIT_ARCH_*, __NR_socket, __NR_io_uring_setup)
    "x86_64": (0xC000003E, 41, 425),
    "aarch64": (0xC00000B7, 198, 425),
}
_CLONE_NEW_FLAGS = 0x7E020080  # CLONE_NEWNS|NEWCGROUP|NEWUTS|NEWIPC|NEWUSER|NEWPID|NEWNET|NEWTIME
_DENIED_SYSCALLS = {  # machine -> {name: number}, from the kernel's syscall tables (x86_64: syscall_64.tbl;
    # aarch64: the generic include/uapi/asm-generic/unistd.h)
    "x86_64": {
        "io_uring_enter": 426, "io_uring_register": 427, "unshare": 272, "setns": 308, "add_key": 248,
        "request_key": 249, "keyctl": 250, "bpf": 321, "ptrace": 101, "process_vm_readv": 310,
        "process_vm_writev": 311, "perf_event_open": 298, "userfaultfd": 323, "kexec_load": 246,
        "kexec_file_load": 320, "init_module": 175, "finit_module": 313, "delete_module": 176, "mount": 165,
        "umount2": 166, "pivot_root": 155, "chroot": 161, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "swapon": 167, "swapoff": 168,
        "reboot": 169, "acct": 163, "settimeofday": 164, "clock_settime": 227, "adjtimex": 159,
        "clock_adjtime": 305, "fanotify_init": 300, "name_to_handle_at": 303, "open_by_handle_at": 304,
        "pidfd_getfd": 438, "kcmp": 312, "syslog": 103, "iopl": 172, "ioperm": 173, "quotactl": 179,
    },
    "aarch64": {
        "io_uring_enter": 426, "io_uring_register": 427, "unshare": 97, "setns": 268, "add_key": 217,
        "request_key": 218, "keyctl": 219, "bpf": 280, "ptrace": 117, "process_vm_readv": 270,
        "process_vm_writev": 271, "perf_event_open": 241, "userfaultfd": 282, "kexec_load": 104,
        "kexec_file_load": 294, "init_module": 105, "finit_module": 273, "delete_module": 106, "mount": 40,
        "umount2": 39, "pivot_root": 41, "chroot": 51, "open_tree": 428, "move_mount": 429, "fsopen": 430,
        "fsconfig": 431, "fsmount": 432, "fspick": 433, "mount_setattr": 442, "swapon": 224, "swapoff": 225,
        "reboot": 142, "acct": 89, "settimeofday": 170, "clock_settime": 112, "adjtimex": 171,
        "clock_adjtime": 266, "fanotify_init": 262, "name_to_handle_at": 264, "open_by_handle_at": 265,
        "pidfd_getfd": 438, "kcmp": 272, "syslog": 116, "quotactl": 60,
    },
}  # fmt: skip
_NR_CLONE = {"x86_64": 56, "aarch64": 220}
_NR_CLONE3 = 435
_EACCES, _EPERM, _ENOSYS = 13, 1, 38


def _seccomp_program(machine: str | None = None) -> bytes | None:
    """The filter as bwrap's ``--seccomp`` reads it (packed ``struct sock_filter``), ``None`` on other machines.

    ``machine``: ``os.uname().machine`` by default (``x86_64``, ``aarch64``).
    """
    machine = machine or os.uname().machine
    arch = _SECCOMP_ARCH.get(machine)
    if arch is None:
        return None
    audit_arch, nr_socket, nr_io_uring_setup = arch
    load, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06  # BPF_LD|W|ABS, BPF_JMP|JEQ/JGE/JSET|K, BPF_RET|K
    errno, allow = 0x00050000, 0x7FFF0000  # SECCOMP_RET_ERRNO | errno, SECCOMP_RET_ALLOW
    program = [  # (code, jump if true, jump if false, k); jumps are relative to the next instruction
        (load, 0, 0, 4),  # A = arch
        (jeq, 1, 0, audit_arch),  # our ABI -> skip the deny
        (ret, 0, 0, errno | _EACCES),
        (load, 0, 0, 0),  # A = syscall number
        (jge, 0, 1, 0x40000000),  # x32 syscall
        (ret, 0, 0, errno | _EACCES),
        (jeq, 0, 1, nr_io_uring_setup),
        (ret, 0, 0, errno | _EACCES),
        (jeq, 0, 1, _NR_CLONE3),
        (ret, 0, 0, errno | _ENOSYS),
    ]
    for nr in sorted(set(_DENIED_SYSCALLS[machine].values())):
        program += [(jeq, 0, 1, nr), (ret, 0, 0, errno | _EPERM)]
    program += [
        (jeq, 0, 4, _NR_CLONE[machine]),  # clone: deny a CLONE_NEW* flag, allow the rest
        (load, 0, 0, 16),  # A = flags (args[0])
        (jset, 0, 1, _CLONE_NEW_FLAGS),
        (ret, 0, 0, errno | _EPERM),
        (ret, 0, 0, allow),
        (jeq, 0, 3, nr_socket),  # socket: only AF_UNIX
        (load, 0, 0, 16),  # A = family (args[0])
        (jeq, 1, 0, 1),  # AF_UNIX -> allow
        (ret, 0, 0, errno | _EACCES),
        (ret, 0, 0, allow),
    ]
    return b"".join(struct.pack("=HBBI", *instruction) for instruction in program)


def _setpriv_args(setpriv: str | None, uid: int | None) -> list[str]:
    """``setpriv`` prefix that drops a root namespace tool's child to ``uid`` (no groups, no new privileges)."""
    if uid is None or setpriv is None:
        return []
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]


def _memfd(text: str) -> int:
    """A memory file holding ``text`` (UTF-8, lone surrogates kept), positioned at its start."""
    return _memfd_bytes("main.py", text.encode("utf-8", errors="surrogatepass"))


def _memfd_bytes(name: str, data: bytes) -> int:
    """A memory file named ``name`` holding ``data``, positioned at its start."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)  # inherited only where passed
    os.write(fd, data)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def _probe(plan: _Plan, uid: int | None) -> str | None:
    """Run a tiny script the way ``plan`` would; ``None`` if it printed the expected uid, else why not."""
    expected = str(uid if uid is not None else os.getuid())
    result = _execute(plan, plan.info.mode, _PROBE_CODE, uid, timeout_s=30.0, limits=[], tmp_mb=8, nproc_extra=0)
    if result.ok and result.stdout.strip() == expected:
        return None
    return (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1][:200]


def _resolve_identity() -> _Plan:
    as_root = os.geteuid() == 0
    plain = SandboxInfo(sys.executable, False, None, IsolationMode.NONE)
    pool: _UidPool | None = None
    if as_root:
        uids = _pick_uids(UID_POOL_SIZE)
        for interpreter in _interpreter_candidates() if uids else []:
            if _runs_as(interpreter, uids[0]):
                plain = SandboxInfo(interpreter, True, (uids[0], uids[-1]), IsolationMode.UID)
                lowest = min(start for start, count in _mapped_ranges("/proc/self/uid_map") if start <= uids[0])
                pool = _UidPool(uids, lowest_fresh=max(lowest, 1000))
                break
        else:
            logger.warning(
                "sandbox: running as root but no Python interpreter is usable by an unprivileged uid; "
                "children will run as root with resource limits only"
            )
    probe_uid = pool.uids[0] if pool is not None else None
    setpriv = shutil.which("setpriv", path=_TOOL_PATH)
    unshare = shutil.which("unshare", path=_TOOL_PATH)
    reasons: list[str] = []
    # Without root, ``unshare`` needs a user namespace of its own (mapping the host's user) to make the others.
    user_maps: list[tuple[str, ...]] = [()] if as_root else [("--map-current-user",), ("--map-root-user",)]
    if as_root and pool is not None and setpriv is None:
        reasons.append("setpriv (util-linux) is missing, so a namespace cannot hand over to a pool uid")
    else:
        for mode, name, variants in (
            (IsolationMode.BWRAP, "bwrap", user_maps),
            (IsolationMode.UNSHARE, "unshare", user_maps),
        ):
            tool = shutil.which(name, path=_TOOL_PATH)
            if tool is None or unshare is None:
                reasons.append(f"{name if tool is None else 'unshare'} is not installed")
                continue
            why = "no usable interpreter"
            for interpreter in _namespace_interpreters():
                for extra in variants:
                    info = SandboxInfo(interpreter, plain.switches_user, plain.uid_range, mode)
                    binds = _read_only_binds(interpreter) if mode is IsolationMode.BWRAP else ()
                    plan = _Plan(info, pool, plain.interpreter, tool, extra, setpriv, binds, unshare)
                    why = _probe(plan, probe_uid)
                    if why is None:
                        if reasons:
                            warning = f"{mode.value} isolation only: " + "; ".join(reasons)
                            logger.warning("sandbox: %s", warning)
                            plan = _Plan(
                                SandboxInfo(interpreter, plain.switches_user, plain.uid_range, mode, warning),
                                pool, plain.interpreter, tool, extra, setpriv, binds, unshare,
                            )  # fmt: skip
                        return plan
            reasons.append(f"{name} does not work here ({why})")
    if pool is None and as_root:
        reasons.append("children run as root")
    warning = (
        "NO NAMESPACES: model-written code can reach the network (the dashboard on 127.0.0.1 included) and read "
        "world-readable files; " + "; ".join(reasons) + ". Install bubblewrap (apt-get install bubblewrap)."
    )
    logger.warning("sandbox: %s", warning)
    info = SandboxInfo(plain.interpreter, plain.switches_user, plain.uid_range, plain.mode, warning)
    return _Plan(info, pool, plain.interpreter)


_identity_lock = threading.Lock()
_identity_cache: list[_Plan] = []


def _identity() -> _Plan:
    """The sandbox set-up of this process, resolved once (under a lock: two uid pools would share uids)."""
    with _identity_lock:
        if not _identity_cache:
            _identity_cache.append(_resolve_identity())
        return _identity_cache[0]


def sandbox_info() -> SandboxInfo:
    """How this host runs sandboxed code: isolation mode (and why not better), interpreter, uid per child.

    Resolved on the first call (it runs a few probe children: about a second) and cached for the process.
    """
    return _identity().info


def _base_env(home: str) -> dict[str, str]:
    # The thread caps keep numeric libraries (if importable at all) from starting one thread per core, which would
    # hit RLIMIT_NPROC; they carry no information about the host.
    return {
        "PATH": "/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "HOME": home,
        "OMP_NUM_THREADS": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
    }


class _ChildLimits:
    """``preexec_fn``: set resource limits in the child between fork and exec (after the uid switch).

    Only ``resource.setrlimit`` runs here (no imports, no allocation-heavy work), because ``preexec_fn`` runs in
    a forked copy of a multi-threaded process.
    """

    def __init__(self, limits: list[tuple[int, int, int]]):
        self.limits = limits  # (resource, soft, hard)

    def __call__(self) -> None:
        for which, soft, hard in self.limits:
            resource.setrlimit(which, (soft, hard))


def _limit(which: int, soft: int, hard: int | None = None) -> tuple[int, int, int]:
    """``(which, soft, hard)`` clamped to the current hard limit, which an unprivileged child cannot raise."""
    hard = soft if hard is None else hard
    current = resource.getrlimit(which)[1]
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    return which, soft, hard


def _user_task_count() -> int:
    """Threads the current (non-root) user runs now: RLIMIT_NPROC counts them all."""
    uid = os.getuid()
    total = 0
    for proc in psutil.process_iter(["uids", "num_threads"]):
        uids = proc.info.get("uids")
        if uids and uids.real == uid:
            total += proc.info.get("num_threads") or 1
    return total


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


def _kill_uid(uid: int) -> None:
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


def _kill_matching(predicate) -> bool:
    """SIGKILL every process for which ``predicate(psutil.Process)`` holds (skipping this one)."""
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


def _in_session(sid: int):
    def predicate(proc: psutil.Process) -> bool:
        return os.getsid(proc.pid) == sid

    return predicate


def _collect(proc: subprocess.Popen, deadline: float, cap: int) -> tuple[bytes, bytes, bool, bool, bool]:
    """Read stdout/stderr until EOF, the deadline, or overflow.

    Returns ``(out, err, timed_out, overflow, lingering)``; ``lingering``: the child exited but a descendant
    kept the pipes open.
    """
    bufs = {"out": bytearray(), "err": bytearray()}
    timed_out = overflow = lingering = False
    exited_at: float | None = None
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ, "out")
        sel.register(proc.stderr, selectors.EVENT_READ, "err")
        while sel.get_map():
            now = time.monotonic()
            if now >= deadline:
                timed_out = True
                break
            if exited_at is None and proc.poll() is not None:
                exited_at = now
            if exited_at is not None and now - exited_at > _EXIT_GRACE_S:
                lingering = True
                break  # the main child is gone; a descendant still holds the pipes open
            for key, _ in sel.select(min(deadline - now, _POLL_S)):
                data = os.read(key.fd, _READ_CHUNK)
                if not data:
                    sel.unregister(key.fileobj)
                    continue
                buf = bufs[key.data]
                room = cap - len(buf)
                buf += data[: max(room, 0)]
                if len(data) > room:
                    overflow = True
            if overflow:
                break
    if not timed_out and not overflow:
        try:
            proc.wait(timeout=max(deadline - time.monotonic(), 0.0))
        except subprocess.TimeoutExpired:
            timed_out = True
    return bytes(bufs["out"]), bytes(bufs["err"]), timed_out, overflow, lingering


def _cleanup(proc: subprocess.Popen, uid: int | None, namespaced: bool = False) -> bool:
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
        _kill_uid(uid)
    else:
        killed = _kill_matching(_in_session(pgid)) or killed
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:  # pragma: no cover - a child stuck in the kernel
        logger.error("sandbox: child %d did not die after SIGKILL", proc.pid)
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
    return killed


def _status(returncode: int | None, timed_out: bool, overflow: bool) -> ExecStatus:
    if overflow:
        return ExecStatus.OUTPUT_LIMIT
    if timed_out or returncode == -signal.SIGXCPU:
        return ExecStatus.TIMEOUT
    return ExecStatus.OK if returncode == 0 else ExecStatus.FAILED


def _signal_code(returncode: int | None) -> int | None:
    """``bwrap`` and ``unshare`` report a child killed by signal N as exit code 128 + N: back to ``-N``.

    (A script that calls ``sys.exit(128 + N)`` itself reads as killed by N in the namespace modes.)
    """
    if returncode is not None and 128 < returncode < 128 + signal.NSIG:
        return -(returncode - 128)
    return returncode


def _execute(
    plan: _Plan,
    mode: IsolationMode,
    code: str,
    uid: int | None,
    *,
    timeout_s: float,
    limits: list[tuple[int, int, int]],
    tmp_mb: int,
    nproc_extra: int,
    max_output_bytes: int = 64_000,
    stdin: bytes | None = None,
) -> ExecResult:
    """Start ``code`` the way ``mode`` says (under ``uid`` if not ``None``), collect it, clean up.

    ``limits`` are ``_limit`` triples set before exec (RLIMIT_NPROC among them gets ``nproc_extra`` added: the
    namespace tool's own processes when they count against it).
    """
    namespaced = mode in (IsolationMode.BWRAP, IsolationMode.UNSHARE)
    limits = [
        (which, soft + nproc_extra, hard + nproc_extra) if which == resource.RLIMIT_NPROC else (which, soft, hard)
        for which, soft, hard in limits
    ]
    workdir: str | None = None
    script_fd: int | None = None
    stdin_fd: int | None = None
    seccomp_fd: int | None = None
    try:
        try:
            if mode is IsolationMode.BWRAP:
                cwd = f"{_SANDBOX_TMP}/grpo-sandbox-{secrets.token_hex(8)}"
                script_fd = _memfd(code)
                as_root = os.geteuid() == 0
                # bwrap runs as PID 1 of an outer PID namespace made by ``unshare --fork`` (which waits for it):
                # bwrap leaves the init of its own PID namespace unreaped when it exits, and the host's init (in some
                # containers) never reaps it; an exiting PID 1 reaps everything in its namespace.
                argv = [plan.unshare, *plan.tool_args, "--pid", "--fork", "--kill-child", "--"]
                seccomp = _seccomp_program()
                if seccomp is not None:
                    seccomp_fd = _memfd_bytes("seccomp", seccomp)
                bwrap_args = _bwrap_args(
                    plan.binds, cwd, script_fd, tmp_mb, as_root, as_root and uid is None, seccomp_fd
                )
                argv += [plan.tool, *bwrap_args]
                argv.append("--")
                argv += _setpriv_args(plan.setpriv, uid)
                argv += [plan.env, "-u", "PWD"]  # bwrap always sets PWD; the environment stays what _base_env says
                argv += [plan.info.interpreter, "-I", "-S", "-B", "main.py"]
                popen_cwd = "/"
            else:
                workdir = cwd = popen_cwd = tempfile.mkdtemp(prefix="grpo-sandbox-")
                script = os.path.join(workdir, "main.py")
                with open(script, "w", encoding="utf-8", errors="surrogatepass") as fh:
                    fh.write(code)
                if uid is not None:
                    os.chown(workdir, uid, uid)
                    os.chown(script, uid, uid)
                if mode is IsolationMode.UNSHARE:
                    argv = [plan.tool, "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
                    argv += [*plan.tool_args, "--", *_setpriv_args(plan.setpriv, uid)]
                    argv += [plan.info.interpreter, "-I", "-S", "-B", script]
                else:
                    argv = [plan.plain_interpreter, "-I", "-B", script]
        except OSError as exc:
            return ExecResult(ExecStatus.SETUP_ERROR, None, "", f"cannot write the script: {exc}", 0.0)
        switch = uid is not None and not namespaced  # the namespace modes switch inside, with setpriv
        if stdin is not None:
            try:
                stdin_fd = os.memfd_create("stdin", os.MFD_CLOEXEC)  # a file, not a pipe: nothing to feed while reading outputs
                os.write(stdin_fd, stdin)
                os.lseek(stdin_fd, 0, os.SEEK_SET)
            except OSError as exc:
                return ExecResult(ExecStatus.SETUP_ERROR, None, "", f"cannot prepare stdin: {exc}", 0.0)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=popen_cwd,
                env=_base_env(cwd),
                stdin=stdin_fd if stdin_fd is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(fd for fd in (script_fd, seccomp_fd) if fd is not None),
                preexec_fn=_ChildLimits(limits),
                user=uid if switch else None,
                group=uid if switch else None,
                extra_groups=[] if switch else None,
                umask=0o077,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return ExecResult(ExecStatus.SETUP_ERROR, None, "", f"cannot start the sandbox child: {exc}", 0.0)
        for fd in (script_fd, seccomp_fd):
            if fd is not None:
                os.close(fd)
        script_fd = seccomp_fd = None
        try:
            out, err, timed_out, overflow, lingering = _collect(proc, start + timeout_s, max_output_bytes)
            duration = time.monotonic() - start
        finally:
            killed = _cleanup(proc, uid, namespaced)
        returncode = _signal_code(proc.returncode) if namespaced else proc.returncode
        return ExecResult(
            status=_status(returncode, timed_out, overflow),
            returncode=returncode,
            stdout=out.decode("utf-8", errors="replace"),
            stderr=err.decode("utf-8", errors="replace"),
            duration_s=duration,
            killed=killed or timed_out or overflow or lingering,
            truncated=overflow,
        )
    finally:
        for fd in (script_fd, stdin_fd, seccomp_fd):
            if fd is not None:
                os.close(fd)
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)


def run_python(
    code: str,
    *,
    timeout_s: float = 5.0,
    cpu_s: int = 5,
    memory_mb: int = 512,
    max_output_bytes: int = 64_000,
    max_file_mb: int = 16,
    max_processes: int = 16,
    max_tmp_mb: int = 64,
    isolation: IsolationMode | str | None = None,
    stdin: bytes | None = None,
) -> ExecResult:
    """Run ``code`` as a Python script in the sandbox and return what happened. Never raises for bad ``code``.

    Args:
        code: Python source, run as ``__main__`` from ``main.py`` in a fresh folder (the cwd and HOME): in the
            ``bwrap`` mode ``/tmp/grpo-sandbox-<random>`` on the sandbox's private tmpfs (the host never sees it),
            otherwise a ``tempfile.mkdtemp()`` folder of the host, removed afterwards.
        timeout_s: wall-clock limit in seconds, interpreter start-up included; then the session is SIGKILLed.
        cpu_s: CPU-time limit in seconds per process (RLIMIT_CPU; SIGXCPU, then SIGKILL one second later).
        memory_mb: address-space limit per process in MiB (RLIMIT_AS); big allocations raise MemoryError.
        max_output_bytes: cap on each of stdout and stderr in bytes; more kills the child (``OUTPUT_LIMIT``).
        max_file_mb: largest file the child may write, MiB (RLIMIT_FSIZE; SIGXFSZ beyond).
        max_processes: RLIMIT_NPROC. As root the child has a uid of its own, so this bounds its processes and
            threads; otherwise it is added to the user's current thread count.
        max_tmp_mb: size in MiB of the private tmpfs holding ``/tmp`` and the working folder (``bwrap`` mode;
            writes beyond fail with ``ENOSPC``).
        isolation: ``None`` for the host's mode (:func:`sandbox_info`); the no-namespace mode (``"uid"`` as
            root, ``"none"`` otherwise) to force it, e.g. to compare costs.
        stdin: bytes the child reads on its standard input (a memory file); ``None``: ``/dev/null``.

    Returns:
        An :class:`ExecResult`; ``SETUP_ERROR`` when the sandbox itself failed (message in ``stderr``).

    Raises:
        ValueError: ``isolation`` names a namespace mode other than the host's.
    """
    plan = _identity()
    mode = plan.info.mode if isolation is None else IsolationMode(isolation)
    plain_mode = IsolationMode.UID if plan.info.switches_user else IsolationMode.NONE
    if mode in (IsolationMode.UID, IsolationMode.NONE):
        mode = plain_mode
    elif mode is not plan.info.mode:
        raise ValueError(f"isolation {mode.value!r} is not available here (the host's mode: {plan.info.mode.value})")
    pool = plan.pool
    uid = pool.acquire() if pool is not None else None
    killed = False
    try:
        namespaced = mode in (IsolationMode.BWRAP, IsolationMode.UNSHARE)
        # Without a uid of its own, RLIMIT_NPROC counts all of the user's tasks; the namespace tools add their own
        # processes (bwrap: unshare, bwrap and bwrap's init; unshare: itself) to that count.
        nproc = max_processes if uid is not None else _user_task_count() + max_processes
        extra = 0 if uid is not None or not namespaced else (3 if mode is IsolationMode.BWRAP else 1)
        cpu = max(int(cpu_s), 1)
        limits = [
            _limit(resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL one second later
            _limit(resource.RLIMIT_AS, int(memory_mb) * 1024 * 1024),
            _limit(resource.RLIMIT_FSIZE, int(max_file_mb) * 1024 * 1024),
            _limit(resource.RLIMIT_CORE, 0),
            _limit(resource.RLIMIT_NPROC, nproc),
        ]
        result = _execute(
            plan,
            mode,
            code,
            uid,
            timeout_s=timeout_s,
            limits=limits,
            tmp_mb=max_tmp_mb,
            nproc_extra=extra,
            max_output_bytes=max_output_bytes,
            stdin=stdin,
        )
        killed = result.killed
        return result
    finally:
        if uid is not None:
            pool.release(uid, retire=killed and _uid_has_processes(uid))


def run_many(
    codes: Iterable[str],
    *,
    stdins: Iterable[bytes | None] | None = None,
    max_workers: int | None = None,
    **limits,
) -> list[ExecResult]:
    """Run several scripts with :func:`run_python`, in parallel, and return their results in input order.

    Args:
        codes: Python sources.
        stdins: each script's ``stdin`` (same length as ``codes``); ``None``: all read ``/dev/null``.
        max_workers: threads (= concurrent children); default ``os.cpu_count()``. Threads only wait on
            children, so the parallelism is real. ``1`` runs serially in the calling thread.
        **limits: keyword arguments of :func:`run_python` (``timeout_s``, ``memory_mb``...).

    Raises:
        ValueError: ``stdins`` and ``codes`` differ in length.
    """
    codes = list(codes)
    inputs = [None] * len(codes) if stdins is None else list(stdins)
    if len(inputs) != len(codes):
        raise ValueError(f"{len(inputs)} stdins for {len(codes)} scripts")
    workers = max(1, min(max_workers or os.cpu_count() or 1, len(codes) or 1))

    def run(job: tuple[str, bytes | None]) -> ExecResult:
        return run_python(job[0], stdin=job[1], **limits)

    jobs = list(zip(codes, inputs, strict=True))
    if workers == 1:
        return [run(job) for job in jobs]
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sandbox") as executor:
        return list(executor.map(run, jobs))
