"""The command lines that start a child in namespaces of its own: ``bwrap`` inside ``unshare``, or ``unshare``.

* ``bwrap`` (Debian's ``bubblewrap``): new network namespace (no network at all, not even the host's loopback),
  new PID namespace (``/proc`` shows only the sandbox's own processes), IPC and UTS namespaces; the file system is
  an empty root holding read-only ``/usr`` and the interpreter's prefix (:func:`grpo_core.sandbox.host.read_only_binds`),
  ``/dev``'s null devices, and a private, size-limited ``/tmp`` (a tmpfs) in which the working folder lives; the
  seccomp filter (:mod:`grpo_core.sandbox.seccomp`) is loaded just before the interpreter starts. bwrap runs as
  PID 1 of an outer PID namespace made by ``unshare --pid --fork``: bwrap leaves the init of its own PID namespace
  unreaped when it exits, and the host's init (in some containers) never reaps it; an exiting PID 1 reaps
  everything in its namespace.
* ``unshare`` (util-linux): network, PID, IPC and UTS namespaces only; the child still sees the host's files.

As root, the tool runs as root and hands over to the pool uid with ``setpriv`` (no groups, no new privileges).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from grpo_core.sandbox.host import Plan

SANDBOX_TMP = "/tmp"
"""Where the private tmpfs is mounted inside the bwrap view (it holds the working folder)."""


def setpriv_args(setpriv: str | None, uid: int | None) -> list[str]:
    """``setpriv`` prefix that drops a root namespace tool's child to ``uid`` (no groups, no new privileges)."""
    if uid is None or setpriv is None:
        return []
    return [setpriv, f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--no-new-privs", "--"]


def memfd(text: str) -> int:
    """A memory file holding ``text`` (UTF-8, lone surrogates kept), positioned at its start."""
    return memfd_bytes("main.py", text.encode("utf-8", errors="surrogatepass"))


def memfd_bytes(name: str, data: bytes) -> int:
    """A memory file named ``name`` holding ``data``, positioned at its start (close-on-exec: a child inherits it
    only where it is passed)."""
    fd = os.memfd_create(name, os.MFD_CLOEXEC)
    try:
        os.write(fd, data)
        os.lseek(fd, 0, os.SEEK_SET)
    except OSError:
        os.close(fd)
        raise
    return fd


def bwrap_args(
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
    (:func:`grpo_core.sandbox.seccomp.seccomp_program`)."""
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
    args += ["--perms", "1777", "--size", str(int(tmp_mb) * 1024 * 1024), "--tmpfs", SANDBOX_TMP]
    args += ["--perms", "0777" if as_root else "0700", "--dir", cwd]
    args += ["--perms", "0644", "--file", str(script_fd), os.path.join(cwd, "main.py"), "--chdir", cwd]
    return args


def bwrap_command(
    plan: Plan, uid: int | None, cwd: str, script_fd: int, seccomp_fd: int | None, tmp_mb: int
) -> list[str]:
    """``unshare --pid --fork -- bwrap ... -- [setpriv ...] env -u PWD python -I -S -B main.py``, run from ``/``:
    the script is copied from ``script_fd`` into ``cwd`` on the private ``/tmp``; ``uid``: the pool uid (as root)."""
    as_root = os.geteuid() == 0
    argv = [plan.unshare, *plan.tool_args, "--pid", "--fork", "--kill-child", "--"]
    argv += [plan.tool, *bwrap_args(plan.binds, cwd, script_fd, tmp_mb, as_root, as_root and uid is None, seccomp_fd)]
    argv.append("--")
    argv += setpriv_args(plan.setpriv, uid)
    argv += [plan.env, "-u", "PWD"]  # bwrap always sets PWD; the environment stays what limits.base_env says
    argv += [plan.info.interpreter, "-I", "-S", "-B", "main.py"]
    return argv


def unshare_command(plan: Plan, uid: int | None, script: str) -> list[str]:
    """``unshare --net --pid --ipc --uts ... -- [setpriv ...] python -I -S -B script`` (the host's file system)."""
    argv = [plan.tool, "--net", "--pid", "--ipc", "--uts", "--fork", "--kill-child", "--mount-proc"]
    argv += [*plan.tool_args, "--", *setpriv_args(plan.setpriv, uid)]
    argv += [plan.info.interpreter, "-I", "-S", "-B", script]
    return argv
