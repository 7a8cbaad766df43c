"""A user's own tool functions and environment class as plugins (RunConfig.tool_plugins, RunConfig.environment):
under the same login boundary as reward plugins (a plain login may only name code in the admin's plugin folders or
allowed packages; nothing is imported to check), and loaded by the worker as TRL's ``tools`` and
``environment_factory``."""

from __future__ import annotations

import pytest

from grpo_core.access.boundary import Boundary, BoundaryError
from grpo_core.run_config import RunConfig

TOOLS = '''
import os


def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: its name.
    """
    return "sunny"


class Shop:
    def reset(self, **kwargs):
        self.basket = []

    def add(self, item: str) -> str:
        """Add an item to the basket.

        Args:
            item: what to add.
        """
        self.basket.append(item)
        return f"{len(self.basket)} items"
'''


@pytest.fixture
def plugins(tmp_path):
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / "agent_tools.py").write_text(TOOLS)
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "evil.py").write_text(TOOLS)
    return folder, outside


def test_a_plain_login_may_name_tools_and_environments_only_in_the_plugin_folders(plugins):
    folder, outside = plugins
    login = Boundary(enforced=True, plugin_dirs=(folder.resolve(),))
    checked = login.check_config(RunConfig(dataset_id=1, tool_plugins=[f"{folder}/agent_tools.py:weather"],
                                           environment=f"{folder}/agent_tools.py:Shop"))
    assert checked.tool_plugins == [f"{folder.resolve()}/agent_tools.py:weather"]
    assert checked.environment == f"{folder.resolve()}/agent_tools.py:Shop"
    for config, where in [
        (RunConfig(dataset_id=1, tool_plugins=["os:system"]), "tool plugin 1"),
        (RunConfig(dataset_id=1, tool_plugins=[f"{folder}/agent_tools.py:weather", f"{outside}/evil.py:weather"]),
         "tool plugin 2"),
        (RunConfig(dataset_id=1, environment="subprocess:Popen"), "environment"),
        (RunConfig(dataset_id=1, environment=f"{folder}/agent_tools.py:os.system"), "environment"),
    ]:
        with pytest.raises(BoundaryError, match=where):
            login.check_config(config)
    with pytest.raises(BoundaryError, match="cannot resume"):
        login.check_stored({"model": "", "tool_plugins": ["os:system"]}, "resume")
    # the single user (no logins) and a [run-code] login keep their freedom
    assert Boundary().check_config(RunConfig(tool_plugins=["os:system"])).tool_plugins == ["os:system"]
    runner = Boundary(enforced=True, may_run_code=True)
    assert runner.check_config(RunConfig(dataset_id=1, environment="x.y:Env")).environment == "x.y:Env"


def test_the_worker_hands_plugins_to_trl_as_tools_and_environment_factory(plugins):
    from grpo_core.engine.trainer import tool_arguments

    folder, _ = plugins
    arguments = tool_arguments(RunConfig(tools=["calculator"], tool_plugins=[f"{folder}/agent_tools.py:weather"],
                                         environment=f"{folder}/agent_tools.py:Shop"))
    assert [t.__name__ for t in arguments["tools"]] == ["calculator", "weather"]
    environment = arguments["environment_factory"]()
    environment.reset()
    assert environment.add("apple") == "1 items"
    assert tool_arguments(RunConfig()) == {}
    with pytest.raises(ValueError, match="could not be loaded"):
        tool_arguments(RunConfig(tool_plugins=[f"{folder}/missing.py:nothing"]))


HANGING = '''
import threading

RELEASE = threading.Event()  # set by the test at its end: the hung calls' threads then finish


def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: the key.
    """
    RELEASE.wait(120)
    return "late"


class Desk:
    def reset(self, **kwargs):
        self.calls = 0

    def ask(self, question: str) -> str:
        """Ask the desk.

        Args:
            question: what to ask.
        """
        self.calls += 1
        if question == "hang":
            RELEASE.wait(120)
        if question == "raise":
            raise KeyError(question)
        return f"answer {self.calls}"

    def get_reward(self) -> float:
        RELEASE.wait(120)
        return 1.0
'''


def test_a_plugin_tool_or_environment_method_that_hangs_is_a_failed_call_not_a_stalled_run(tmp_path):
    """TRL calls tools synchronously inside its rollout loop: the worker hands it each tool, and each public method
    of the environment, bounded in time, with the name, schema and class TRL reads left as they were."""
    import inspect
    import sys

    from transformers.utils import get_json_schema

    from grpo_core.engine.tool_rollout import ToolTimeout
    from grpo_core.engine.trainer import tool_arguments
    from grpo_core.rewards.plugin import load_plugin_function

    (tmp_path / "desk.py").write_text(HANGING)
    config = RunConfig(tools=["calculator"], tool_plugins=[f"{tmp_path}/desk.py:lookup"],
                       environment=f"{tmp_path}/desk.py:Desk")
    arguments = tool_arguments(config, timeout_s=0.5)
    calculator, lookup = arguments["tools"]
    try:
        assert calculator(expression="6 * 7") == "42"
        with pytest.raises(ToolTimeout, match="lookup did not answer within 0.5 s"):
            lookup(key="x")
        assert get_json_schema(lookup) == get_json_schema(load_plugin_function(f"{tmp_path}/desk.py:lookup"))

        environment = arguments["environment_factory"]()
        assert type(environment).__name__ == "Desk"  # TRL's reward column: rewards/Desk/mean
        tools = [name for name, _ in inspect.getmembers(type(environment), predicate=inspect.isfunction)
                 if name not in ("reset", "get_reward") and not name.startswith("_")]
        assert tools == ["ask"]  # as TRL lists an environment's tools
        original = load_plugin_function(f"{tmp_path}/desk.py:Desk")()
        assert get_json_schema(environment.ask) == get_json_schema(original.ask)
        environment.reset()
        assert environment.ask(question="hi") == "answer 1"
        with pytest.raises(ToolTimeout, match="the tool ask did not answer"):
            environment.ask(question="hang")
        with pytest.raises(KeyError):
            environment.ask(question="raise")
        with pytest.raises(ToolTimeout, match=r"Desk.get_reward\(\) did not answer"):
            environment.get_reward()
    finally:
        for module in list(sys.modules.values()):
            release = getattr(module, "RELEASE", None)
            if getattr(module, "__file__", None) and str(tmp_path) in str(module.__file__) and release is not None:
                release.set()


def test_relative_tool_plugin_and_environment_files_are_stored_absolute(plugins, tmp_path, monkeypatch):
    """The worker runs in the run folder, not where the form or the YAML named the file: a relative ``file.py`` of a
    tool plugin or of the environment is stored absolute (from the working directory; for a run YAML, from its
    folder), as a reward plugin's is; a module target stays as given."""
    from grpo_core.submit.queue import resolve_relative_paths, stored_run_config

    folder, _ = plugins
    monkeypatch.chdir(folder)
    config = RunConfig(dataset_id=1, tool_plugins=["agent_tools.py:weather", "json:dumps"],
                       environment="agent_tools.py:Shop")
    stored = stored_run_config(config)
    assert stored.tool_plugins == [f"{folder.resolve() / 'agent_tools.py'}:weather", "json:dumps"]
    assert stored.environment == f"{folder.resolve() / 'agent_tools.py'}:Shop"
    assert stored_run_config(RunConfig(dataset_id=1)).environment == ""

    monkeypatch.chdir(tmp_path)  # the YAML's folder holds the file, the working directory does not
    beside = resolve_relative_paths(config, folder)
    assert beside.environment == f"{folder.resolve() / 'agent_tools.py'}:Shop"
    assert beside.tool_plugins[0] == f"{folder.resolve() / 'agent_tools.py'}:weather"
    assert resolve_relative_paths(config, tmp_path).environment == "agent_tools.py:Shop"  # found nowhere: as given
