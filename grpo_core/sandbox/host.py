"""How this host runs sandboxed code: the isolation mode, the interpreter, the uid pool, resolved once by probing.

The first isolation mode that works wins (:class:`IsolationMode`): ``bwrap``, then ``unshare``, then no
namespaces (``uid`` as root, ``none`` otherwise) with a loud warning, shown in the Launch tab. Each candidate is
tried by running a tiny probe script the way the mode would (the caller supplies the runner, see
:func:`resolve_plan`).

As root, children run under a uid of their own from a :class:`~grpo_core.sandbox.uid_pool.UidPool`. In the ``uid``
mode, if the interpreter running this module is not reachable by an unprivileged uid (e.g. a pyenv build under
``/root``), the sandbox uses the first of ``/usr/local/bin/python3.X``, ``/usr/bin/python3.X``, ``python3`` that
is, so the child then sees only the standard library.
"""

from __future__ import annotations

import enum
import logging
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

from grpo_core.sandbox.limits import base_env
from grpo_core.sandbox.uid_pool import UidPool, new_pool

logger = logging.getLogger(__name__)

_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
_TOOL_PATH = "/usr/bin:/bin:/usr/sbin:/sbin:/usr/local/bin"


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


@dataclass(frozen=True)
class Plan:
    """Everything needed to start a child on this host (resolved once per process).

    ``info`` is what ``sandbox_info()`` reports; ``plain_interpreter`` is the interpreter of the no-namespace
    modes (also used when a caller asks for them explicitly); ``tool`` the ``bwrap``/``unshare`` executable and
    ``tool_args`` the flags the probe found working; ``binds`` the read-only folders of the bwrap view.
    """

    info: SandboxInfo
    pool: UidPool | None
    plain_interpreter: str
    tool: str | None = None
    tool_args: tuple[str, ...] = ()
    setpriv: str | None = None
    binds: tuple[str, ...] = ()
    unshare: str | None = None
    env: str = "/usr/bin/env"


Probe = Callable[[Plan, int | None], str | None]
"""Runs a tiny script the way a plan would, under a uid (or ``None``): ``None`` if it worked, else why not."""


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
            env=base_env("/"),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0 and done.stdout.strip() == str(uid).encode()


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


def read_only_binds(interpreter: str) -> tuple[str, ...]:
    """Folders the bwrap view shows read-only: ``/usr`` and the interpreter's prefix when it lies elsewhere.

    ``/lib``, ``/lib64``, ``/bin``, ``/sbin`` are bound too where they are real folders (on merged-``/usr``
    systems they are symlinks, recreated as such by :func:`grpo_core.sandbox.namespaces.bwrap_args`).
    """
    binds = ["/usr"]
    for top in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.isdir(top) and not os.path.islink(top):
            binds.append(top)
    prefix = os.path.dirname(os.path.dirname(interpreter))
    if not any(os.path.commonpath([prefix, b]) == b for b in binds):
        binds.append(prefix)
    return tuple(binds)


def resolve_plan(probe: Probe) -> Plan:
    """Find how this host runs sandboxed code: the uid pool (as root), then the first isolation mode whose
    ``probe`` succeeds (``bwrap``, ``unshare``, each with the interpreters of :func:`_namespace_interpreters` and,
    without root, the user-namespace mappings ``--map-current-user`` / ``--map-root-user``), else no namespaces.

    Logs a warning, and puts it in ``Plan.info.warning``, whenever the result is weaker than ``bwrap``.
    """
    as_root = os.geteuid() == 0
    plain = SandboxInfo(sys.executable, False, None, IsolationMode.NONE)
    pool: UidPool | None = None
    if as_root:
        candidate = new_pool()
        for interpreter in _interpreter_candidates() if candidate is not None else []:
            if _runs_as(interpreter, candidate.uids[0]):
                plain = SandboxInfo(interpreter, True, (candidate.uids[0], candidate.uids[-1]), IsolationMode.UID)
                pool = candidate
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
                    binds = read_only_binds(interpreter) if mode is IsolationMode.BWRAP else ()
                    plan = Plan(info, pool, plain.interpreter, tool, extra, setpriv, binds, unshare)
                    why = probe(plan, probe_uid)
                    if why is None:
                        if reasons:
                            warning = f"{mode.value} isolation only: " + "; ".join(reasons)
                            logger.warning("sandbox: %s", warning)
                            plan = Plan(
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
    return Plan(info, pool, plain.interpreter)
