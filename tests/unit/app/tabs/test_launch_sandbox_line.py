"""The Launch tab's sandbox line: the isolation mode in force, and a warning where it is weaker than bwrap."""

from __future__ import annotations

from app.tabs.launch import layout as launch
from grpo_core.sandbox.host import IsolationMode, SandboxInfo


def test_line_names_the_mode_without_warning(monkeypatch):
    info = SandboxInfo("/usr/bin/python3", True, (1, 2), IsolationMode.BWRAP)
    monkeypatch.setattr(launch, "sandbox_info", lambda: info)
    line = launch.sandbox_line()
    assert "`bwrap`" in line and "no network" in line and "own uid per execution" in line
    assert "⚠️" not in line


def test_line_warns_without_namespaces(monkeypatch):
    info = SandboxInfo("/usr/bin/python3", False, None, IsolationMode.NONE, "NO NAMESPACES: bwrap is not installed")
    monkeypatch.setattr(launch, "sandbox_info", lambda: info)
    line = launch.sandbox_line()
    assert line.startswith("⚠️")
    assert "NO NAMESPACES: bwrap is not installed" in line
    assert "`none`" in line and "network and world-readable files are reachable" in line


def test_line_of_this_host():
    line = launch.sandbox_line()
    assert launch.sandbox_info().mode.value in line
