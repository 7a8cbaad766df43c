"""The namespace modes of the sandbox: no network, no view of the project, the store or the host's /tmp.

These run where the host's mode is ``bwrap`` (CI installs bubblewrap and sets ``GRPO_SANDBOX_REQUIRED=1``, which
turns a weaker mode into a failure instead of a skip). ``test_as_an_unprivileged_user`` repeats the checks under
``runuser -u nobody`` with the system's Python, so the non-root path (user namespaces) is exercised as well.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
from pathlib import Path

import pytest

from grpo_core.sandbox import box, seccomp
from grpo_core.sandbox.box import ExecStatus, run_python, sandbox_info
from grpo_core.sandbox.host import IsolationMode, Plan, SandboxInfo
from grpo_core.settings import load_settings
from storage import Store

PROJECT = Path(__file__).resolve().parents[3]
INFO = sandbox_info()
needs_bwrap = pytest.mark.skipif(INFO.mode is not IsolationMode.BWRAP, reason=f"sandbox mode is {INFO.mode.value}")


def test_mode_is_reported():
    assert isinstance(INFO.mode, IsolationMode)
    assert INFO.mode.value in INFO.describe()
    if INFO.mode is IsolationMode.BWRAP:
        assert INFO.warning is None
    else:
        assert INFO.warning  # a weaker mode always says why
    if os.environ.get("GRPO_SANDBOX_REQUIRED"):
        assert INFO.mode is IsolationMode.BWRAP, INFO.warning


@pytest.fixture
def listener():
    """A real TCP server on the host's 127.0.0.1; ``accepted`` lists the connections it got."""
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    server.settimeout(0.2)
    accepted: list[tuple[str, int]] = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                conn, peer = server.accept()
            except OSError:
                continue
            accepted.append(peer)
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1], accepted
    stop.set()
    thread.join(timeout=5)
    server.close()


NETWORK_PROBE = """
import json, socket
results = {}
for name, family, kind, address in [
    ("loopback_tcp", socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", PORT)),
    ("localhost_tcp", socket.AF_INET, socket.SOCK_STREAM, ("localhost", PORT)),
    ("outside_tcp", socket.AF_INET, socket.SOCK_STREAM, ("1.1.1.1", 443)),
    ("outside_udp", socket.AF_INET, socket.SOCK_DGRAM, ("8.8.8.8", 53)),
]:
    try:
        with socket.socket(family, kind) as s:
            s.settimeout(2)
            if kind == socket.SOCK_DGRAM:
                s.sendto(b"x", address)
                s.recvfrom(10)
            else:
                s.connect(address)
        results[name] = "connected"
    except OSError as exc:
        results[name] = type(exc).__name__
print(json.dumps(results))
"""


@needs_bwrap
def test_no_network_not_even_the_hosts_loopback(listener):
    port, accepted = listener
    result = run_python(NETWORK_PROBE.replace("PORT", str(port)), timeout_s=20)
    assert result.status is ExecStatus.OK, result.stderr
    outcomes = json.loads(result.stdout)
    assert set(outcomes) == {"loopback_tcp", "localhost_tcp", "outside_tcp", "outside_udp"}
    assert "connected" not in outcomes.values(), outcomes
    assert accepted == []  # nothing reached the host's server
    with socket.create_connection(("127.0.0.1", port), timeout=5):  # while the host itself can
        pass


@needs_bwrap
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="seccomp filter for x86_64 and aarch64")
def test_no_network_socket_can_even_be_opened():
    code = textwrap.dedent(
        """
        import socket
        for family in (socket.AF_INET, socket.AF_INET6, socket.AF_NETLINK, socket.AF_PACKET):
            try:
                socket.socket(family, socket.SOCK_DGRAM if family == socket.AF_NETLINK else socket.SOCK_STREAM)
                print(family.name, "opened")
            except OSError as exc:
                print(family.name, type(exc).__name__)
        a, b = socket.socketpair()  # AF_UNIX stays (multiprocessing needs it); abstract names are per netns
        a.sendall(b"x")
        print("AF_UNIX", b.recv(1).decode())
        """
    )
    result = run_python(code)
    assert result.status is ExecStatus.OK, result.stderr
    assert result.stdout.split("\n")[:5] == [
        "AF_INET PermissionError",
        "AF_INET6 PermissionError",
        "AF_NETLINK PermissionError",
        "AF_PACKET PermissionError",
        "AF_UNIX x",
    ]


FILE_PROBE = """
import json, os, sys
seen = {}
for path in PATHS:
    try:
        with open(path, "rb") as fh:
            seen[path] = "read %d bytes" % len(fh.read(16))
    except OSError as exc:
        seen[path] = type(exc).__name__
print(json.dumps({"seen": seen, "root": sorted(os.listdir("/")), "pids": [p for p in os.listdir("/proc") if p.isdigit()]}))
"""


@pytest.fixture
def store_file(tmp_path):
    """A real store: the dashboard's data folder and SQLite file, with one run's worth of tables."""
    settings = load_settings(data_dir=tmp_path / "data")
    settings.ensure_dirs()
    Store(settings.db_url).close()
    return settings.store_file


@needs_bwrap
def test_store_project_and_host_files_are_not_visible(store_file):
    paths = [
        str(store_file),
        str(PROJECT / "README.md"),
        str(PROJECT / "grpo_core" / "sandbox" / "box.py"),
        sys.executable,  # the venv's python lies in the project
        "/etc/passwd",
        "/root/.bash_history",
    ]
    result = run_python(FILE_PROBE.replace("PATHS", repr(paths)))
    assert result.status is ExecStatus.OK, result.stderr
    report = json.loads(result.stdout)
    assert all(outcome == "FileNotFoundError" for outcome in report["seen"].values()), report["seen"]
    assert set(report["root"]) <= {"usr", "bin", "lib", "lib64", "lib32", "sbin", "dev", "proc", "tmp", "root"}
    assert len(report["pids"]) <= 3  # bwrap's init and the child (its own PID namespace)


@needs_bwrap
def test_nothing_is_left_in_the_hosts_tmp():
    marker = f"grpo-leak-{os.getpid()}"
    code = textwrap.dedent(
        f"""
        import os
        for folder in ("/tmp", "/var/tmp", "/dev/shm", "."):
            try:
                open(os.path.join(folder, {marker!r}), "w").write("x")
                print("wrote", folder)
            except OSError as exc:
                print("refused", folder, type(exc).__name__)
        """
    )
    result = run_python(code)
    assert result.status is ExecStatus.OK, result.stderr
    assert "wrote /tmp" in result.stdout  # the private /tmp is writable...
    for folder in (tempfile.gettempdir(), "/tmp", "/var/tmp", "/dev/shm"):
        assert not os.path.exists(os.path.join(folder, marker))  # ...and gone with the sandbox


@needs_bwrap
@pytest.mark.parametrize("folder", ["/tmp", "/dev/shm", "."])
def test_private_tmp_is_size_limited(folder):
    code = f"import os\ntry:\n    open('{folder}/big', 'wb').write(b'0' * (12 * 1024 * 1024))\nexcept OSError as e:\n"
    code += "    print(e.errno == 28)\n"
    result = run_python(code, max_tmp_mb=4, max_file_mb=64)
    assert result.stdout.strip() == "True", result  # ENOSPC at the tmpfs size, before the 64 MiB file limit


@needs_bwrap
def test_interpreter_sees_only_the_standard_library():
    result = run_python("import sys, json\nprint(json.dumps(sys.path))\nimport psutil")
    assert result.status is ExecStatus.FAILED
    assert "ModuleNotFoundError" in result.stderr
    assert not any(str(PROJECT) in entry or "site-packages" in entry for entry in json.loads(result.stdout))


NON_ROOT_SCRIPT = """
import json, sys
sys.path[:0] = [PROJECT, SITE]
from grpo_core.sandbox.box import run_python, sandbox_info
from grpo_core.rewards.code.correctness import CodeTestsReward
info = sandbox_info()
net = run_python(NET, timeout_s=20)
files = run_python(FILES)
eq = CodeTestsReward(timeout_s=5)([FORGERY], tests=[["assert f(1) == 2", "assert f(2) == 3"]])
print(json.dumps({"mode": info.mode.value, "uid_switch": info.switches_user, "net": net.stdout, "net_err": net.stderr,
                  "files": files.stdout, "files_err": files.stderr, "eq": eq}))
"""


@pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None, reason="needs root to become nobody")
def test_as_an_unprivileged_user(listener, store_file):
    """The same checks as a normal user (``nobody``), with the system's Python and the project on ``sys.path``."""
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    site = [p for p in sys.path if p.endswith("site-packages") and os.path.isdir(p)]
    if not os.path.exists(python) or not site:
        pytest.skip(f"needs {python} and a site-packages folder")
    check = subprocess.run(["runuser", "-u", "nobody", "--", python, "-c", f"import os; os.stat({site[0]!r})"])
    if check.returncode != 0:
        pytest.skip("nobody cannot read this virtual environment")
    port, accepted = listener
    script = NON_ROOT_SCRIPT
    for name, value in {
        "PROJECT": str(PROJECT),
        "SITE": site[0],
        "NET": NETWORK_PROBE.replace("PORT", str(port)),
        "FILES": FILE_PROBE.replace("PATHS", repr([str(store_file), str(PROJECT / "README.md"), "/etc/passwd"])),
        "FORGERY": "class Any:\n    def __eq__(self, other):\n        return True\n\ndef f(x):\n    return Any()\n",
    }.items():
        script = script.replace(name, repr(value))
    done = subprocess.run(
        ["runuser", "-u", "nobody", "--", python, "-I", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        cwd="/",
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["mode"] == "bwrap" or not os.environ.get("GRPO_SANDBOX_REQUIRED"), report
    assert report["uid_switch"] is False
    if report["mode"] == "bwrap":
        assert "connected" not in json.loads(report["net"]).values(), report
        assert set(json.loads(report["files"])["seen"].values()) == {"FileNotFoundError"}, report
    assert accepted == []
    assert report["eq"] == [0.0]


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_unshare_fallback_has_no_network(listener):
    """The ``unshare`` mode (bwrap missing or broken): network and PID namespaces without a file-system view."""
    plan = box._identity()
    fallback = Plan(
        SandboxInfo(plan.plain_interpreter, plan.info.switches_user, plan.info.uid_range, IsolationMode.UNSHARE),
        plan.pool,
        plan.plain_interpreter,
        shutil.which("unshare"),
        () if os.geteuid() == 0 else ("--map-current-user",),
        shutil.which("setpriv"),
        (),
        shutil.which("unshare"),
    )
    if box._probe(fallback, plan.pool.uids[0] if plan.pool else None) is not None:
        pytest.skip("unshare cannot make namespaces here")
    port, accepted = listener
    uid = plan.pool.acquire() if plan.pool else None
    try:
        code = (
            NETWORK_PROBE.replace("PORT", str(port))
            + "import os\nprint(json.dumps([p for p in os.listdir('/proc') if p.isdigit()]))"
        )
        result = box._execute(
            fallback, IsolationMode.UNSHARE, code, uid, timeout_s=20, limits=[], tmp_mb=8, nproc_extra=0
        )
    finally:
        if uid is not None:
            plan.pool.release(uid)
    assert result.status is ExecStatus.OK, result.stderr
    outcomes, pids = result.stdout.splitlines()
    assert "connected" not in json.loads(outcomes).values()
    assert accepted == []
    assert len(json.loads(pids)) <= 2  # its own PID namespace: unshare's child and the interpreter


SYSCALL_PROBE = textwrap.dedent(
    """
    import ctypes, errno, json, os, threading
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    NR = json.loads(os.environ.get("NR", "{}") or "{}") or NUMBERS

    def call(name, *args):
        ctypes.set_errno(0)
        r = libc.syscall(ctypes.c_long(NR[name]), *[ctypes.c_long(a) for a in args])
        return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?"), r

    text = [ctypes.create_string_buffer(b) for b in (b"user", b"key", b"value")]
    out = {}
    out["unshare(CLONE_NEWUSER)"] = call("unshare", 0x10000000)[0]
    out["unshare(CLONE_NEWNS)"] = call("unshare", 0x20000)[0]
    state, pid = call("clone", 0x10000000 | 17, 0, 0, 0, 0)  # CLONE_NEWUSER | SIGCHLD, fork-like
    if state == "ok" and pid == 0:
        os._exit(0)
    out["clone(CLONE_NEWUSER)"] = state
    out["clone3"] = call("clone3", 0, 0)[0]
    out["keyctl(get session keyring)"] = call("keyctl", 0, -3, 0)[0]
    out["add_key"] = call("add_key", *[ctypes.addressof(t) for t in text], 5, -3)[0]
    out["request_key"] = call("request_key", ctypes.addressof(text[0]), ctypes.addressof(text[1]), 0, -3)[0]
    out["bpf"] = call("bpf", 0, 0, 0)[0]
    out["ptrace(PTRACE_TRACEME)"] = call("ptrace", 0, 0, 0, 0)[0]
    out["perf_event_open"] = call("perf_event_open", 0, 0, -1, -1, 0)[0]
    out["userfaultfd"] = call("userfaultfd", 0)[0]
    out["mount"] = call("mount", 0, 0, 0, 0, 0)[0]
    out["setns"] = call("setns", 0, 0)[0]
    out["process_vm_readv"] = call("process_vm_readv", os.getpid(), 0, 0, 0, 0, 0)[0]
    out["kexec_load"] = call("kexec_load", 0, 0, 0, 0)[0]
    out["init_module"] = call("init_module", 0, 0, 0)[0]
    child = os.fork()  # ordinary processes and threads still work (glibc falls back from clone3 to clone)
    if child == 0:
        os._exit(7)
    out["fork"] = os.waitstatus_to_exitcode(os.waitpid(child, 0)[1])
    box = []
    thread = threading.Thread(target=box.append, args=(1,))
    thread.start()
    thread.join()
    out["thread"] = box
    print(json.dumps(out))
    """
)


@needs_bwrap
@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="seccomp filter for x86_64 and aarch64")
def test_namespaces_keyring_bpf_ptrace_and_kernel_interfaces_are_denied():
    machine = os.uname().machine
    numbers = dict(seccomp.DENIED_SYSCALLS[machine], clone=seccomp.NR_CLONE[machine], clone3=seccomp.NR_CLONE3)
    result = run_python(f"NUMBERS = {numbers!r}\n" + SYSCALL_PROBE)
    assert result.status is ExecStatus.OK, result.stderr
    out = json.loads(result.stdout)
    assert out.pop("fork") == 7 and out.pop("thread") == [1]
    assert out.pop("clone3") == "ENOSYS"  # so that glibc falls back to clone(), which the filter can read
    assert out == {name: "EPERM" for name in out}, out


@pytest.mark.skipif(os.uname().machine not in ("x86_64", "aarch64"), reason="seccomp filter for x86_64 and aarch64")
def test_without_the_filter_the_probe_would_succeed():
    """The probe above can fail: with no filter, this process may read its session keyring and trace itself."""
    machine = os.uname().machine
    numbers = dict(seccomp.DENIED_SYSCALLS[machine], clone=seccomp.NR_CLONE[machine], clone3=seccomp.NR_CLONE3)
    code = f"NUMBERS = {numbers!r}\n" + SYSCALL_PROBE.split("text = ")[0] + textwrap.dedent(
        """
        print(json.dumps({"keyctl": call("keyctl", 0, -3, 0)[0]}))
        """
    )
    done = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True, timeout=60, check=False)
    outcome = json.loads(done.stdout)
    if outcome != {"keyctl": "ok"}:  # e.g. Docker's default seccomp profile denies keyctl to the host itself
        pytest.skip(f"this host refuses keyctl outside the sandbox too: {outcome}")
    assert outcome == {"keyctl": "ok"}, done.stderr


def _run_filter(program: bytes, arch: int, nr: int, arg0: int) -> int:
    """Evaluate a classic-BPF seccomp program on ``struct seccomp_data`` (the kernel's semantics, for the opcodes
    the sandbox's filter uses); returns the action word."""
    import struct as _struct

    data = _struct.pack("=iIQ6Q", nr, arch, 0, arg0, 0, 0, 0, 0, 0)
    ops = [_struct.unpack("=HBBI", program[i : i + 8]) for i in range(0, len(program), 8)]
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = ops[pc]
        if code == 0x20:
            acc = _struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif code == 0x06:
            return k
        else:
            taken = {0x15: acc == k, 0x35: acc >= k, 0x45: bool(acc & k)}[code]
            pc += 1 + (jt if taken else jf)


@pytest.mark.parametrize("machine", ["x86_64", "aarch64"])
def test_the_filter_decides_each_syscall(machine):
    program = seccomp.seccomp_program(machine)
    arch = seccomp.SECCOMP_ARCH[machine][0]
    eperm, enosys, eacces, allow = 0x00050001, 0x00050026, 0x0005000D, 0x7FFF0000
    for name, nr in seccomp.DENIED_SYSCALLS[machine].items():
        assert _run_filter(program, arch, nr, 0) == eperm, name
    clone = seccomp.NR_CLONE[machine]
    assert _run_filter(program, arch, clone, 0x10000000 | 17) == eperm  # CLONE_NEWUSER
    assert _run_filter(program, arch, clone, 0x40000000) == eperm  # CLONE_NEWNET
    assert _run_filter(program, arch, clone, 0x01200011) == allow  # fork(): CHILD_SETTID | CHILD_CLEARTID | SIGCHLD
    assert _run_filter(program, arch, clone, 0x003D0F00) == allow  # pthread_create's flags
    assert _run_filter(program, arch, seccomp.NR_CLONE3, 0) == enosys
    socket = seccomp.SECCOMP_ARCH[machine][1]
    assert _run_filter(program, arch, socket, 1) == allow  # AF_UNIX
    assert _run_filter(program, arch, socket, 2) == eacces  # AF_INET
    assert _run_filter(program, arch, 0x40000000 + 1, 0) == eacces  # x32
    assert _run_filter(program, arch ^ 1, 1, 0) == eacces  # another ABI
    assert _run_filter(program, arch, 0, 0) == allow  # read/io_setup...


def test_the_denied_table_names_each_syscall_once_per_machine():
    """One table feeds both machines: the same names on each (``iopl``, ``ioperm`` exist on x86_64 only), no number
    twice, and none of the numbers the filter decides by argument or answers otherwise (a clone or socket number in
    the deny list would refuse every fork or every AF_UNIX socket)."""
    x86, arm = seccomp.DENIED_SYSCALLS["x86_64"], seccomp.DENIED_SYSCALLS["aarch64"]
    assert set(x86) - set(arm) == {"iopl", "ioperm"} and set(arm) <= set(x86)
    for machine, numbers in seccomp.DENIED_SYSCALLS.items():
        special = {seccomp.NR_CLONE[machine], seccomp.NR_CLONE3, *seccomp.SECCOMP_ARCH[machine][1:]}
        assert len(set(numbers.values())) == len(numbers), machine
        assert not special & set(numbers.values()), machine
