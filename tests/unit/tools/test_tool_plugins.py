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
