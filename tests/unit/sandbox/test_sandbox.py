"""Tests of the sandbox for model-written code: results, limits, and hostile code that must leave the host unchanged.

The hostile cases that rely on the child running under a uid of its own (writing or deleting the host's files,
killing the host, reading the host's environment through /proc) run only as root, which is how CI runs. Those that
read host pids or expect a ``PermissionError`` on a host path run in the no-namespace mode (``PLAIN``, the fallback
where namespaces are unavailable): in the namespace modes the path is not there at all and pids are the sandbox's
own; ``tests/unit/sandbox/test_sandbox_isolation.py`` covers those modes.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import signal
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from grpo_core.sandbox import box
from grpo_core.sandbox.box import ExecStatus, run_many, run_python, sandbox_info

AS_ROOT = os.geteuid() == 0
PLAIN = "uid" if sandbox_info().switches_user else "none"
"""The no-namespace mode of this host, for the tests that check what the uid switch alone protects."""
needs_own_uid = pytest.mark.skipif(
    not sandbox_info().switches_user, reason="needs root, so that the child runs under a uid of its own"
)


def _sandbox_processes() -> list[psutil.Process]:
    """Live (non-zombie) processes under a sandbox pool uid or a retired one (which count down from the pool)."""
    info = sandbox_info()
    if not info.switches_user:
        return []
    low, high = info.uid_range
    found = []
    for proc in psutil.process_iter(["uids", "status"]):
        uids = proc.info.get("uids")
        if uids and low - 100_000 <= uids.real <= high and proc.info.get("status") != psutil.STATUS_ZOMBIE:
            found.append(proc)
    return found


@pytest.fixture
def host_unchanged():
    """Assert after the test: no child process of ours, no sandbox process, no sandbox folder left behind."""
    me = psutil.Process()
    folders_before = set(glob.glob(os.path.join(tempfile.gettempdir(), "grpo-sandbox-*")))
    before = {proc.pid for proc in _sandbox_processes()}
    # children that lived before this test are not its leftovers (multiprocessing's resource tracker, started by an
    # earlier test of the session, lives as long as this process)
    children_before = {proc.pid for proc in me.children(recursive=True)}
    yield
    leftovers = [p for p in me.children(recursive=True)
                 if p.pid not in children_before and p.status() != psutil.STATUS_ZOMBIE]
    assert leftovers == []
    # The uid pool is the machine's: another test run beside this one (a developer's, say) has short-lived sandbox
    # processes of its own. Those end within moments; one this test left behind (a daemon that escaped) does not.
    deadline = time.monotonic() + 5
    while (left := [p for p in _sandbox_processes() if p.pid not in before]) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert left == []
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "grpo-sandbox-*"))) <= folders_before
    subprocess.run(["true"], check=True)  # the host can still start processes


@pytest.fixture
def open_dir():
    """A world-readable folder in /tmp holding one world-readable file (so only the uid switch protects it)."""
    path = Path(tempfile.mkdtemp(prefix="grpo-test-victim-"))
    path.chmod(0o755)
    victim = path / "keep.txt"
    victim.write_text("precious")
    victim.chmod(0o644)
    yield path
    shutil.rmtree(path, ignore_errors=True)


# --------------------------------------------------------------------------------------------------------------------
# Ordinary results
# --------------------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "status", "returncode", "stdout", "stderr_part"),
    [
        ("print('hi')", ExecStatus.OK, 0, "hi\n", ""),
        ("import sys; print('out'); print('err', file=sys.stderr)", ExecStatus.OK, 0, "out\n", "err"),
        ("import sys; sys.exit(3)", ExecStatus.FAILED, 3, "", ""),
        ("raise ValueError('boom')", ExecStatus.FAILED, 1, "", "ValueError: boom"),
        ("def f(:\n  pass", ExecStatus.FAILED, 1, "", "SyntaxError"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", ExecStatus.FAILED, -signal.SIGTERM, "", ""),
        ("print('é ✓ 中文')", ExecStatus.OK, 0, "é ✓ 中文\n", ""),
        ("import sys; sys.stdout.buffer.write(b'\\xff\\xfe ok')", ExecStatus.OK, 0, "\ufffd\ufffd ok", ""),
        ("", ExecStatus.OK, 0, "", ""),
    ],
)
def test_result_fields(code, status, returncode, stdout, stderr_part, host_unchanged):
    result = run_python(code, timeout_s=30)  # a loaded machine can take seconds to start the interpreter
    assert result.status is status
    assert result.returncode == returncode
    assert result.stdout == stdout
    assert stderr_part in result.stderr
    assert result.ok is (status is ExecStatus.OK)
    assert 0 < result.duration_s < 30
    assert not result.truncated


def test_runs_in_a_fresh_folder_that_is_removed(host_unchanged):
    code = "import os; open('x.txt', 'w').write('1'); print(os.getcwd()); print(os.environ['HOME'])"
    first, second = run_python(code), run_python(code)
    cwd1, home1 = first.stdout.split()
    cwd2, _ = second.stdout.split()
    assert cwd1 == home1
    assert cwd1 != cwd2
    assert os.path.basename(cwd1).startswith("grpo-sandbox-")
    assert not os.path.exists(cwd1) and not os.path.exists(cwd2)


def test_environment_is_emptied(monkeypatch, host_unchanged):
    monkeypatch.setenv("GRPO_TEST_SECRET", "s3cr3t-value")
    result = run_python("import json, os; print(json.dumps(dict(os.environ)))")
    env = json.loads(result.stdout)
    assert set(env) <= {"PATH", "LANG", "HOME", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"}
    assert env["PATH"] == "/usr/bin:/bin"
    assert "s3cr3t-value" not in result.stdout


def test_isolated_mode_and_no_bytecode(host_unchanged):
    result = run_python("import sys; print(sys.flags.isolated, sys.flags.dont_write_bytecode)")
    assert result.stdout.split() == ["1", "1"]


@pytest.mark.skipif(not AS_ROOT, reason="the uid switch happens only as root")
def test_root_host_runs_children_under_their_own_uid(host_unchanged):
    info = sandbox_info()
    assert info.switches_user, "as root the sandbox must not run children as root"
    result = run_python("import os; print(os.getuid(), os.geteuid(), os.getgid(), os.getgroups())")
    uid, euid, gid, groups = result.stdout.split(maxsplit=3)
    assert int(uid) == int(euid) == int(gid) != 0
    assert groups.strip() == "[]"


def test_run_many_keeps_order_and_runs_in_parallel(host_unchanged):
    codes = [f"import time; s = time.time(); time.sleep(0.5); print({i}, s, time.time())" for i in range(4)]
    results = run_many(codes, max_workers=4)
    assert [r.stdout.split()[0] for r in results] == ["0", "1", "2", "3"]
    spans = [tuple(float(x) for x in r.stdout.split()[1:]) for r in results]
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # all four were running at once
    assert [r.stdout for r in run_many(["print(1)", "print(2)"], max_workers=1)] == ["1\n", "2\n"]
    assert run_many([]) == []


def test_setup_error_is_reported_not_raised(monkeypatch):
    def broken(*args, **kwargs):
        raise OSError("no fork for you")

    monkeypatch.setattr(box.subprocess, "Popen", broken)
    result = run_python("print(1)")
    assert result.status is ExecStatus.SETUP_ERROR
    assert "no fork for you" in result.stderr


# --------------------------------------------------------------------------------------------------------------------
# Limits and hostile code: each must end in bounded time with the host unchanged
# --------------------------------------------------------------------------------------------------------------------


def test_infinite_loop_hits_the_wall_clock_timeout(host_unchanged):
    result = run_python("while True:\n    pass", timeout_s=1.0, cpu_s=10)
    assert result.status is ExecStatus.TIMEOUT
    assert result.killed
    assert 0.9 < result.duration_s < 10  # stopped by the 1 s wall clock, not left running


def test_sleeping_loop_hits_the_wall_clock_timeout(host_unchanged):
    result = run_python("import time\nwhile True:\n    time.sleep(1)", timeout_s=1.0)
    assert result.status is ExecStatus.TIMEOUT
    assert result.duration_s < 10  # stopped by the 1 s wall clock, not left running


def test_cpu_limit_ends_a_busy_loop(host_unchanged):
    result = run_python("while True:\n    pass", timeout_s=10.0, cpu_s=1)
    assert result.status is ExecStatus.TIMEOUT
    assert result.returncode == -signal.SIGXCPU  # the CPU limit ended it, long before the 10 s wall clock


def test_huge_allocation_fails_fast(host_unchanged):
    result = run_python("x = bytearray(10 * 1024 ** 3)\nprint('allocated')")
    assert result.status is ExecStatus.FAILED
    assert "MemoryError" in result.stderr
    assert "allocated" not in result.stdout
    assert result.duration_s < 30


@pytest.mark.parametrize("stream", ["stdout", "stderr"])
def test_printing_gigabytes_is_cut_at_the_cap(stream, host_unchanged):
    code = f"import sys\nline = 'x' * 1_000_000\nfor _ in range(10_000):\n    sys.{stream}.write(line)"
    result = run_python(code, max_output_bytes=10_000, timeout_s=5)
    assert result.status is ExecStatus.OUTPUT_LIMIT
    assert result.killed and result.truncated
    assert len(getattr(result, stream)) == 10_000
    assert result.duration_s < 30


def test_big_file_hits_the_file_size_limit(host_unchanged):
    result = run_python("open('big', 'wb').write(b'0' * (4 * 1024 * 1024))", max_file_mb=1)
    assert result.status is ExecStatus.FAILED
    assert result.returncode == -signal.SIGXFSZ or "File too large" in result.stderr


FORK_BOMB = "import os\nwhile True:\n    os.fork()"
STUBBORN_FORK_BOMB = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass"


@pytest.mark.parametrize("code", [FORK_BOMB, STUBBORN_FORK_BOMB], ids=["fork_bomb", "stubborn_fork_bomb"])
def test_fork_bomb_is_contained(code, host_unchanged):
    start = time.monotonic()
    result = run_python(code, timeout_s=1.5)
    assert result.status in (ExecStatus.FAILED, ExecStatus.TIMEOUT)
    assert time.monotonic() - start < 30


@needs_own_uid
def test_process_count_is_bounded_by_max_processes(host_unchanged):
    code = textwrap.dedent(
        """
        import os, time
        n = 0
        for _ in range(100):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(60)
                os._exit(0)
            n += 1
        print(n, flush=True)
        """
    )
    result = run_python(code, max_processes=8, timeout_s=3, isolation=PLAIN)
    assert result.status is ExecStatus.OK
    assert int(result.stdout) == 7  # the limit counts the child itself
    assert result.killed  # the sleepers were killed, not waited for
    assert result.duration_s < 30  # the sleepers (60 s) were not waited for


def test_descendant_holding_the_pipes_does_not_block(host_unchanged):
    code = "import os, time\nif os.fork() == 0:\n    time.sleep(60)\nprint('main done', flush=True)"
    result = run_python(code, timeout_s=5, isolation=PLAIN)
    assert result.status is ExecStatus.OK
    assert result.stdout.startswith("main done")
    assert result.killed
    assert result.duration_s < 30  # the 60 s sleeper was not waited for


@needs_own_uid
def test_process_escaping_the_session_is_killed(host_unchanged):
    code = textwrap.dedent(
        """
        import os, sys, time
        r, w = os.pipe()
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:  # daemon: new session, stdio closed
                devnull = os.open(os.devnull, os.O_RDWR)
                for fd in (0, 1, 2):
                    os.dup2(devnull, fd)
                os.write(w, str(os.getpid()).encode())
                os.close(w)
                time.sleep(60)
            os._exit(0)
        os.close(w)
        print(os.read(r, 100).decode(), flush=True)
        """
    )
    result = run_python(code, timeout_s=5, isolation=PLAIN)
    assert result.status is ExecStatus.OK
    daemon = int(result.stdout)
    time.sleep(0.1)
    assert not psutil.pid_exists(daemon) or psutil.Process(daemon).status() == psutil.STATUS_ZOMBIE


@needs_own_uid
def test_killing_the_parent_fails(host_unchanged):
    result = run_python("import os\nos.kill(os.getppid(), 9)\nprint('killed it')")
    assert result.status is ExecStatus.FAILED
    assert "PermissionError" in result.stderr
    assert "killed it" not in result.stdout
    assert psutil.Process().is_running()  # we are still here


@needs_own_uid
def test_parent_environment_is_not_readable(monkeypatch, host_unchanged):
    monkeypatch.setenv("GRPO_TEST_SECRET", "s3cr3t-value")
    probe = subprocess.Popen(["sleep", "10"], env={"GRPO_TEST_SECRET": "s3cr3t-value"})  # a second host process
    try:
        code = textwrap.dedent(
            """
            import os
            found = []
            for pid in [os.getppid()] + [p for p in os.listdir('/proc') if p.isdigit()]:
                try:
                    with open(f'/proc/{pid}/environ', 'rb') as fh:
                        found.append(fh.read().decode('utf-8', 'replace'))
                except OSError:
                    pass
            print(repr(found))
            """
        )
        result = run_python(code)
    finally:
        probe.kill()
        probe.wait()
    assert result.status is ExecStatus.OK
    assert "s3cr3t-value" not in result.stdout


@needs_own_uid
def test_writing_outside_its_folder_fails(open_dir, host_unchanged):
    target = open_dir / "pwned.txt"
    victim = open_dir / "keep.txt"
    code = f"open({str(target)!r}, 'w').write('x')"
    assert run_python(code, isolation=PLAIN).status is ExecStatus.FAILED
    assert not target.exists()
    result = run_python(f"open({str(victim)!r}, 'a').write('overwritten')", isolation=PLAIN)
    assert result.status is ExecStatus.FAILED
    assert "PermissionError" in result.stderr
    assert victim.read_text() == "precious"


@needs_own_uid
def test_deleting_files_fails(open_dir, host_unchanged):
    result = run_python(f"import shutil\nshutil.rmtree({str(open_dir)!r})", isolation=PLAIN)
    assert result.status is ExecStatus.FAILED
    assert "PermissionError" in result.stderr
    assert (open_dir / "keep.txt").read_text() == "precious"


@needs_own_uid
def test_children_cannot_touch_each_other(host_unchanged):
    """Two concurrent executions get different uids: one cannot read the other's folder."""
    code_a = "import os, time\nopen('secret', 'w').write('a')\nprint(os.getcwd(), flush=True)\ntime.sleep(1.5)"
    code_b = textwrap.dedent(
        """
        import glob, time
        time.sleep(0.5)
        seen = []
        for path in glob.glob('/tmp/grpo-sandbox-*/secret'):
            try:
                seen.append(open(path).read())
            except OSError:
                pass
        print(seen)
        """
    )
    a, b = run_many([code_a, code_b], max_workers=2)
    assert a.status is ExecStatus.OK and b.status is ExecStatus.OK
    assert b.stdout.strip() == "[]"
