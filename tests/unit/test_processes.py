"""Tests of the one way child processes are started and stopped (grpo_core.processes): no shell, own process group
(a stop kills the grandchildren too), output appended to a log file, and the log's tail."""

from __future__ import annotations

import os
import sys
import time

from grpo_core.processes import free_port, process_alive, start_process, stop_process, tail_text


def _wait(predicate, timeout_s: float = 20.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_a_child_runs_in_its_own_group_logs_to_a_file_and_stops_with_its_children(tmp_path):
    log = tmp_path / "child.log"
    log.write_text("earlier line\n")
    grandchild_pid = tmp_path / "grandchild.pid"
    script = (
        "import subprocess, sys, time\n"
        "print('hello from the child', flush=True)\n"
        "print('to stderr', file=sys.stderr, flush=True)\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        f"open({str(grandchild_pid)!r}, 'w').write(str(p.pid))\n"
        "time.sleep(60)\n"
    )
    child = start_process([sys.executable, "-c", script], log_path=log, cwd=tmp_path)
    try:
        assert _wait(lambda: grandchild_pid.is_file() and grandchild_pid.read_text().strip())
        assert process_alive(child.pid)
        assert os.getpgid(child.pid) == child.pid  # its own process group, not ours
        assert os.getpgid(child.pid) != os.getpgid(0)
    finally:
        stop_process(child)
    grandchild = int(grandchild_pid.read_text())
    assert child.poll() is not None and not process_alive(child.pid)
    assert _wait(lambda: not process_alive(grandchild)), "the grandchild outlived the stop"
    assert tail_text(log).splitlines() == ["earlier line", "hello from the child", "to stderr"]
    assert tail_text(log, max_lines=1) == "to stderr"


def test_tail_text_of_nothing_is_empty(tmp_path):
    assert tail_text(None) == ""
    assert tail_text(tmp_path / "missing.log") == ""


def test_free_port_is_a_port_number():
    assert 1024 <= free_port() <= 65535
