"""The launch's check of a run's tool plugins and environment class (grpo_core.tools.job.check_tool_plugins): each is
imported in a child process (never in the web process), as reward plugins are, so a typo in a target, an environment
class without ``reset`` or a tool whose JSON schema TRL cannot build is refused at launch with a located message,
not found by the worker after it has loaded the model."""

from __future__ import annotations

import pytest

from grpo_core.tools.job import check_tool_plugins

PLUGINS = '''
def weather(city: str) -> str:
    """The weather in a city.

    Args:
        city: its name.
    """
    return "sunny"


def undocumented(city: str) -> str:
    return "sunny"


def untyped(city):
    """The weather in a city.

    Args:
        city: its name.
    """
    return "sunny"


class Shop:
    def __init__(self):
        raise RuntimeError("the class is inspected, never instantiated")

    def reset(self, **kwargs):
        self.basket = []

    def add(self, item: str) -> str:
        """Add an item to the basket.

        Args:
            item: what to add.
        """
        return "1 item"

    @staticmethod
    def total(prices: list[float]) -> float:
        """The basket's total.

        Args:
            prices: each item's price.
        """
        return sum(prices)

    async def ask(self, question: str) -> str:
        """Ask the shop.

        Args:
            question: what to ask.
        """
        return "yes"

    def get_reward(self) -> float:
        return 1.0


class NoReset:
    def add(self, item: str) -> str:
        """Add an item.

        Args:
            item: what to add.
        """
        return "ok"


class ResetAttribute:
    reset = None


class BadMethod:
    def reset(self, **kwargs):
        pass

    def add(self, item: str) -> str:
        """Add an item."""
        return "ok"


class StaticUntyped:
    def reset(self, **kwargs):
        pass

    @staticmethod
    def total(prices) -> float:
        """The basket's total.

        Args:
            prices: each item's price.
        """
        return 0.0


def make_shop():
    return NoReset()
'''


@pytest.fixture(scope="module")
def plugin_file(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("plugins") / "agent_tools.py"
    path.write_text(PLUGINS, encoding="utf-8")
    return str(path)


def test_tools_and_an_environment_trl_can_use_pass(plugin_file):
    schemas = check_tool_plugins([f"{plugin_file}:weather"], f"{plugin_file}:Shop")
    # the schemas TRL renders into the prompt: the plugin, then the environment's public methods (TRL's order)
    assert [s["function"]["name"] for s in schemas] == ["weather", "add", "ask", "total"]
    assert schemas[1]["function"]["parameters"]["properties"] == {"item": {"type": "string", "description": "what to add."}}
    assert check_tool_plugins([], "") == []  # nothing to check: no child


@pytest.mark.parametrize(("tools", "environment", "message"), [
    ([], "{f}:Env", r"^environment '.*agent_tools\.py:Env': no class Env in .*agent_tools\.py$"),
    ([], "{f}:NoReset", r"^environment '.*:NoReset': the environment class NoReset has no callable reset"),
    ([], "{f}:ResetAttribute", r"^environment '.*:ResetAttribute': .* has no callable reset"),
    ([], "{f}:make_shop", r"^environment '.*:make_shop': the environment class NoReset has no callable reset"),
    ([], "{f}:BadMethod", r"^environment '.*:BadMethod': method add: TRL cannot build its JSON schema: .*'item'"),
    ([], "{f}:StaticUntyped", r"^environment '.*:StaticUntyped': method total: .*prices is missing a type hint"),
    (["{f}:weather", "{f}:undocumented"], "",
     r"^tool_plugins: tool 2 '.*:undocumented': TRL cannot build its JSON schema: .*undocumented.*no docstring"),
    (["{f}:untyped"], "", r"^tool_plugins: tool 1 '.*:untyped': TRL cannot build its JSON schema: .*type hint"),
    (["{f}:weathr"], "", r"^tool_plugins: tool 1 '.*:weathr': no function weathr in "),
    (["no_such_module_here:tool"], "", r"^tool_plugins: tool 1 'no_such_module_here:tool': could not be loaded: "
                                       r"ModuleNotFoundError"),
])
def test_a_tool_or_environment_trl_cannot_use_is_refused_with_a_located_message(plugin_file, tools, environment,
                                                                                  message):
    with pytest.raises(ValueError, match=message):
        check_tool_plugins([t.format(f=plugin_file) for t in tools], environment.format(f=plugin_file))


@pytest.mark.parametrize("schemas", ["not a list", [1], [{"x": "y" * 60_000}], [{}] * 300])
def test_the_checks_schemas_are_checked_like_any_answer(monkeypatch, schemas):
    from grpo_core.tools import job

    monkeypatch.setattr(job, "ask_worker", lambda *args, **kwargs: {"problems": [], "schemas": schemas})
    with pytest.raises(ValueError, match="schema"):
        check_tool_plugins(["m:f"], "")
