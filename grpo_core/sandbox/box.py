"""Run untrusted, model-written Python in a throw-away child process with resource limits, in namespaces of its own.

What callers use: :func:`run_python` (one script), :func:`run_many` (several, in parallel), :func:`sandbox_info`
(how this host isolates them) and the results, :class:`ExecResult` and :class:`ExecStatus`.

Each call of :func:`run_python` writes the code to ``main.py`` in a fresh folder and runs ``python -I -B main.py``
there, in a new session, with an emptied environment and ``resource`` limits on CPU time, address space, file
size, process count and core dumps (:mod:`~grpo_core.sandbox.limits`). Output is read incrementally through pipes
with a size cap, a wall-clock deadline kills the whole process group, and every process the child left behind is
killed before the call returns (:mod:`~grpo_core.sandbox.reaping`).

Where the host allows it, the child also runs in namespaces of its own, made by a well-kept tool rather than by
code of ours; the *isolation mode* is resolved once per process (:mod:`~grpo_core.sandbox.host`):

* ``bwrap``: no network, own PIDs, IPC and UTS, a file system of read-only ``/usr`` and the interpreter's prefix
  and a private, size-limited ``/tmp`` (:mod:`~grpo_core.sandbox.namespaces`), and a seccomp filter refusing
  sockets but ``AF_UNIX``, new namespaces, the keyring, ``bpf``, ``ptrace``... (:mod:`~grpo_core.sandbox.seccomp`).
* ``unshare``, when ``bwrap`` is missing or cannot run: network, PID, IPC and UTS namespaces only.
* ``uid`` / ``none``: no namespaces; a loud warning is logged and shown in the Launch tab.

As root (as in CI), the child also runs under a uid/gid of its own from a pool of unused ids
(:mod:`~grpo_core.sandbox.uid_pool`), so that file permissions, ``kill`` and ``RLIMIT_NPROC`` protect the host and
leftovers die by ``kill(-1, SIGKILL)`` issued as that uid. Without root it runs as the host's user (inside a user
namespace in ``bwrap``/``unshare``). See ``docs/sandbox.md`` for what the sandbox does and does not protect against.
"""

from __future__ import annotations

import enum
import os
import secrets
import selectors
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from grpo_core.sandbox.host import IsolationMode, Plan, SandboxInfo, resolve_plan
from grpo_core.sandbox.limits import ChildLimits, Limit, base_env, child_limits, user_task_count, with_extra_processes
from grpo_core.sandbox.namespaces import SANDBOX_TMP, bwrap_command, memfd, memfd_bytes, unshare_command
from grpo_core.sandbox.reaping import cleanup
from grpo_core.sandbox.seccomp import seccomp_program
from grpo_core.sandbox.uid_pool import uid_has_processes

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
    plan: Plan,
    mode: IsolationMode,
    code: str,
    uid: int | None,
    *,
    timeout_s: float,
    limits: list[Limit],
    tmp_mb: int,
    nproc_extra: int,
    max_output_bytes: int = 64_000,
    stdin: bytes | None = None,
) -> ExecResult:
    """Start ``code`` the way ``mode`` says (under ``uid`` if not ``None``), collect it, clean up.

    ``limits`` are set before exec (RLIMIT_NPROC among them gets ``nproc_extra`` added: the namespace tool's own
    processes when they count against it).
    """
    namespaced = mode in (IsolationMode.BWRAP, IsolationMode.UNSHARE)
    limits = with_extra_processes(limits, nproc_extra)
    workdir: str | None = None
    script_fd: int | None = None
    stdin_fd: int | None = None
    seccomp_fd: int | None = None
    try:
        try:
            if mode is IsolationMode.BWRAP:
                cwd = f"{SANDBOX_TMP}/grpo-sandbox-{secrets.token_hex(8)}"
                script_fd = memfd(code)
                seccomp = seccomp_program()
                if seccomp is not None:
                    seccomp_fd = memfd_bytes("seccomp", seccomp)
                argv = bwrap_command(plan, uid, cwd, script_fd, seccomp_fd, tmp_mb)
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
                    argv = unshare_command(plan, uid, script)
                else:
                    argv = [plan.plain_interpreter, "-I", "-B", script]
        except OSError as exc:
            return ExecResult(ExecStatus.SETUP_ERROR, None, "", f"cannot write the script: {exc}", 0.0)
        switch = uid is not None and not namespaced  # the namespace modes switch inside, with setpriv
        if stdin is not None:
            try:
                stdin_fd = memfd_bytes("stdin", stdin)  # a file, not a pipe: nothing to feed while reading outputs
            except OSError as exc:
                return ExecResult(ExecStatus.SETUP_ERROR, None, "", f"cannot prepare stdin: {exc}", 0.0)
        start = time.monotonic()
        try:
            proc = subprocess.Popen(
                argv,
                cwd=popen_cwd,
                env=base_env(cwd),
                stdin=stdin_fd if stdin_fd is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
                close_fds=True,
                pass_fds=tuple(fd for fd in (script_fd, seccomp_fd) if fd is not None),
                preexec_fn=ChildLimits(limits),
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
            killed = cleanup(proc, uid, namespaced)
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


_PROBE_CODE = "import os, json, math, re, collections, socket; print(os.getuid())"


def _probe(plan: Plan, uid: int | None) -> str | None:
    """Run a tiny script the way ``plan`` would; ``None`` if it printed the expected uid, else why not."""
    expected = str(uid if uid is not None else os.getuid())
    result = _execute(plan, plan.info.mode, _PROBE_CODE, uid, timeout_s=30.0, limits=[], tmp_mb=8, nproc_extra=0)
    if result.ok and result.stdout.strip() == expected:
        return None
    return (result.stderr.strip().splitlines() or [f"exit {result.returncode}"])[-1][:200]


_identity_lock = threading.Lock()
_identity_cache: list[Plan] = []


def _identity() -> Plan:
    """The sandbox set-up of this process, resolved once (under a lock: two uid pools would share uids)."""
    with _identity_lock:
        if not _identity_cache:
            _identity_cache.append(resolve_plan(_probe))
        return _identity_cache[0]


def sandbox_info() -> SandboxInfo:
    """How this host runs sandboxed code: isolation mode (and why not better), interpreter, uid per child.

    Resolved on the first call (it runs a few probe children: about a second) and cached for the process.
    """
    return _identity().info


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
        nproc = max_processes if uid is not None else user_task_count() + max_processes
        extra = 0 if uid is not None or not namespaced else (3 if mode is IsolationMode.BWRAP else 1)
        limits = child_limits(cpu_s=cpu_s, memory_mb=memory_mb, max_file_mb=max_file_mb, nproc=nproc)
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
            pool.release(uid, retire=killed and uid_has_processes(uid))


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
