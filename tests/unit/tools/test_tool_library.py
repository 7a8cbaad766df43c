"""The shipped tools (grpo_core.tools.library): the calculator reads arithmetic only, within bounds; the python tool
runs model-written code only in the sandbox, so a hostile call (reaching the network or the host's files) is
contained and comes back as a failed call or harmless output, never a stalled run. The run config's ``tools`` and
``max_tool_calling_iterations``."""

from __future__ import annotations

import os
import socket
import threading
import time
import typing

import pytest

from grpo_core.run_config import ConfigError, RunConfig, ToolName
from grpo_core.sandbox.box import sandbox_info
from grpo_core.sandbox.host import IsolationMode
from grpo_core.tools.library import LIBRARY, PYTHON_TIMEOUT_S, ToolError, calculator, library_tools, python


@pytest.mark.parametrize("expression, result", [
    ("(12 + 30) * 2", "84"), ("7 / 2", "3.5"), ("2 ** 10", "1024"), ("-3 + +4", "1"), ("17 // 5 % 3", "0"),
    ("1.5 * 4", "6"),
])
def test_the_calculator_does_arithmetic(expression, result):
    assert calculator(expression) == result


@pytest.mark.parametrize("expression, message", [
    ("__import__('os').system('id')", "only numbers"),
    ("(1).__class__", "only numbers"),
    ("x + 1", "only numbers"),
    ("9 ** 9 ** 9", "exponent"),
    ("10 ** 999 * 10 ** 999", "too large"),
    ("1 / 0", "division by zero"),
    ("1 +", "not an arithmetic expression"),
    ("1" * 600, "longer than"),
    ("'a' * 3", "only numbers"),
    ("(-8) ** 0.5", "not a finite real"),
])
def test_the_calculator_refuses_anything_else_as_a_failed_call(expression, message):
    with pytest.raises(ToolError, match=message):
        calculator(expression)


def test_the_library_tools_have_what_trl_renders_into_the_prompt():
    from transformers.utils import get_json_schema

    for name, tool in LIBRARY.items():
        schema = get_json_schema(tool)
        assert schema["function"]["name"] == name and schema["function"]["parameters"]["required"]
    assert library_tools(["python", "calculator"]) == [python, calculator]
    with pytest.raises(ValueError, match="unknown tool 'shell'"):
        library_tools(["shell"])


def test_the_python_tool_runs_code_and_returns_its_output():
    assert python("print(6 * 7)").strip() == "42"
    with pytest.raises(ToolError, match="failed"):
        python("raise SystemExit('no')")


def test_a_program_that_hangs_is_a_failed_call_within_the_time_limit():
    started = time.monotonic()
    with pytest.raises(ToolError, match="timeout"):
        python("while True:\n    pass")
    assert time.monotonic() - started < PYTHON_TIMEOUT_S + 10


@pytest.fixture
def host_secret(tmp_path):
    path = tmp_path / "secret.txt"
    path.write_text("host-secret-value")
    os.chmod(path, 0o600)
    return path


@pytest.mark.skipif(sandbox_info().mode not in (IsolationMode.BWRAP,), reason="needs the bwrap sandbox")
def test_a_hostile_call_cannot_reach_the_network_or_the_host_s_files(host_secret):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    server.settimeout(0.2)
    accepted = []
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            try:
                accepted.append(server.accept())
            except OSError:
                continue

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    code = f"""
import socket
for address in [("127.0.0.1", {port}), ("1.1.1.1", 443)]:
    try:
        socket.create_connection(address, timeout=1).close()
        print("CONNECTED", address)
    except Exception as exc:
        print("refused", type(exc).__name__)
try:
    print(open({str(host_secret)!r}).read())
except Exception as exc:
    print("unreadable", type(exc).__name__)
"""
    try:
        output = python(code)
    except ToolError as exc:  # a failed call is contained too
        output = str(exc)
    finally:
        stop.set()
        thread.join(timeout=5)
        server.close()
    assert "CONNECTED" not in output and "host-secret-value" not in output
    assert not accepted


def test_the_run_config_takes_library_tools_and_the_iteration_limit():
    config = RunConfig(tools=["calculator"], max_tool_calling_iterations=3)
    assert config.tools == ["calculator"] and config.max_tool_calling_iterations == 3
    with pytest.raises(ValueError, match="calculator"):
        RunConfig(tools=["shell"])
    assert set(typing.get_args(ToolName)) == set(LIBRARY)  # the config's choices are the library's tools
    with pytest.raises(ValueError, match="twice"):
        RunConfig(tools=["python", "python"])
    with pytest.raises(ValueError):
        RunConfig(max_tool_calling_iterations=0)
    assert issubclass(ConfigError, ValueError)


def test_the_iteration_limit_reaches_trl_s_config(tmp_path):
    from grpo_core.engine.trl_args import to_grpo_config

    args = to_grpo_config(RunConfig(tools=["calculator"], max_tool_calling_iterations=2), tmp_path, use_cpu=True)
    assert args.max_tool_calling_iterations == 2
    assert to_grpo_config(RunConfig(), tmp_path, use_cpu=True).max_tool_calling_iterations is None


def test_the_launch_form_offers_the_library_tools_and_the_iteration_limit():
    from app.tabs.launch.form import config_to_form, field_choices, field_kind, form_omissions, form_to_config

    assert field_kind("tools") == "multiselect" and set(field_choices("tools")) == set(LIBRARY)
    config = RunConfig(dataset_id=1, tools=["python", "calculator"], max_tool_calling_iterations=3)
    form = config_to_form(config)
    again = form_to_config(form)
    assert (again.tools, again.max_tool_calling_iterations) == (["python", "calculator"], 3)
    assert form_to_config({**form, "max_tool_calling_iterations": 0}).max_tool_calling_iterations is None
    # the plugin tools (one target a line) and the environment are on the form too: nothing is left out
    with_plugin = RunConfig(dataset_id=1, tools=["calculator"], environment="/srv/plugins/env.py:Shop",
                            tool_plugins=["/srv/plugins/agent_tools.py:weather", "agent_pkg.tools:lookup"])
    form = config_to_form(with_plugin)
    assert form["tool_plugins"] == "/srv/plugins/agent_tools.py:weather\nagent_pkg.tools:lookup"
    again = form_to_config({**form, "tool_plugins": "  /srv/plugins/agent_tools.py:weather \n\n agent_pkg.tools:lookup",
                            "environment": " /srv/plugins/env.py:Shop "})
    assert (again.tools, again.tool_plugins, again.environment) == (
        with_plugin.tools, with_plugin.tool_plugins, with_plugin.environment)
    assert form_omissions(with_plugin) == []
    with pytest.raises(ConfigError, match="tool_plugins: 33 lines"):
        form_to_config({**form, "tool_plugins": "\n".join(f"m:f{i}" for i in range(33))})
    with pytest.raises(ConfigError, match="tool_plugins"):
        form_to_config({**form, "tool_plugins": "no-colon-here"})


def test_the_library_schemas_are_the_ones_transformers_renders_into_the_prompt():
    from transformers.utils import get_json_schema

    from grpo_core.tools.library import LIBRARY_SCHEMAS, library_schemas

    assert set(LIBRARY_SCHEMAS) == set(LIBRARY)
    for name, tool in LIBRARY.items():
        assert LIBRARY_SCHEMAS[name] == get_json_schema(tool), name
    assert library_schemas(["calculator"]) == [get_json_schema(calculator)]
    with pytest.raises(ValueError, match="unknown tool 'nope'"):
        library_schemas(["nope"])
