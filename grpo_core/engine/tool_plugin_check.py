"""The check of a run's tool plugins and environment class before it is queued, run in a child process
(:mod:`grpo_core.tools.worker`, action ``check_plugins``; :func:`grpo_core.tools.job.check_tool_plugins` asks it):
what the worker would otherwise find only after loading the model.

For each tool plugin (``RunConfig.tool_plugins``): it imports and names a callable (:func:`load_plugin_function`), and
transformers' ``get_json_schema`` (what renders TRL's ``tools`` into the prompt, through ``apply_chat_template``) can
build its JSON schema (type hints, a Google-style docstring describing each argument).

For the environment (``RunConfig.environment``, TRL's ``environment_factory`` protocol, TRL 1.16
``GRPOTrainer.__init__``): it imports; a class is inspected without being instantiated (its ``__init__`` may hold
resources), while a factory function is called once, as TRL does, to see its instance's class; the class has a
callable ``reset`` (TRL raises otherwise), and each public method other than ``reset`` and ``get_reward`` (the tools TRL
extracts from it) has a JSON schema. Imports transformers (not torch).

:func:`plugin_schemas` answers those tools' JSON schemas, in the order TRL renders them into the prompt (the plugins,
then the environment's methods), so that the launch counts prompt lengths with them.
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Callable, Sequence
from typing import Any

from grpo_core.rewards.plugin import load_plugin_function, parse_plugin_target


class _Placeholder:
    """What an environment method is bound to for its schema (``self`` dropped, as on TRL's bound methods)."""


def _load(target: str, label: str, kind: str) -> tuple[Callable[..., Any] | None, str | None]:
    """``(the callable, None)``, or ``(None, a located problem)`` for ``target`` (``label`` names it)."""
    try:
        module, attribute = parse_plugin_target(target)
    except ValueError as exc:
        return None, f"{label}: {exc}"
    try:
        return load_plugin_function(target), None
    except ValueError as exc:
        cause = exc.__cause__  # an attribute missing from the module, not one its own code failed to find
        if isinstance(cause, AttributeError) and getattr(cause, "name", None) in attribute.split("."):
            return None, f"{label}: no {kind} {attribute} in {module}"
        return None, f"{label}: " + str(exc).removeprefix(f"reward plugin {target!r} ")


def _schema_problem(fn: Callable[..., Any]) -> str | None:
    """Why transformers' ``get_json_schema`` cannot describe ``fn`` (its message), or ``None``."""
    from transformers.utils import get_json_schema

    try:
        get_json_schema(fn)
    except Exception as exc:  # noqa: BLE001 - DocstringParsingException, TypeHintParsingException, or the user's code
        return str(exc) or type(exc).__name__
    return None


def tool_problems(target: str, position: int) -> list[str]:
    """The problems of tool plugin ``target`` (1-based ``position`` in ``tool_plugins``); empty when TRL can use it."""
    label = f"tool_plugins: tool {position} {target!r}"
    fn, problem = _load(target, label, "function")
    if fn is None:
        return [problem or f"{label}: cannot be loaded"]
    if (why := _schema_problem(fn)) is not None:
        return [f"{label}: TRL cannot build its JSON schema: {why}"]
    return []


def environment_problems(target: str) -> list[str]:
    """The problems of the environment class ``target``; empty when TRL's ``environment_factory`` can use it."""
    label = f"environment {target!r}"
    factory, problem = _load(target, label, "class")
    if factory is None:
        return [problem or f"{label}: cannot be loaded"]
    if inspect.isclass(factory):
        cls: type = factory
    else:
        try:
            cls = type(factory())
        except Exception as exc:  # noqa: BLE001 - the user's code may raise anything
            return [f"{label}: calling the factory raised {type(exc).__name__}: {exc}"]
    functions = dict(inspect.getmembers(cls, predicate=inspect.isfunction))  # TRL's test, on the class
    if "reset" not in functions:
        return [f"{label}: the environment class {cls.__name__} has no callable reset (TRL's environment_factory "
                "calls reset() before each rollout)"]
    problems = []
    for name, function in functions.items():
        if name in ("reset", "get_reward") or name.startswith("_"):
            continue
        static = isinstance(inspect.getattr_static(cls, name, None), staticmethod)  # TRL's getattr keeps its arguments
        tool = function if static else types.MethodType(function, _Placeholder())
        if (why := _schema_problem(tool)) is not None:
            problems.append(f"{label}: method {name}: TRL cannot build its JSON schema: {why}")
    return problems


def plugin_problems(tool_plugins: Sequence[str], environment: str) -> list[str]:
    """Every problem of ``tool_plugins`` and ``environment`` (see the module docstring), in order; empty: none."""
    problems = [p for position, target in enumerate(tool_plugins, start=1) for p in tool_problems(target, position)]
    if environment:
        problems += environment_problems(environment)
    return problems


def _environment_class(target: str) -> type | None:
    factory, _ = _load(target, "environment", "class")
    if factory is None:
        return None
    if inspect.isclass(factory):
        return factory
    try:
        return type(factory())
    except Exception:  # noqa: BLE001 - the user's code may raise anything (reported by environment_problems)
        return None


def plugin_schemas(tool_plugins: Sequence[str], environment: str) -> list[dict[str, Any]]:
    """The JSON schemas (transformers' ``get_json_schema``) TRL renders into the prompt for ``tool_plugins`` and the
    environment's public methods (TRL 1.16 ``GRPOTrainer.__init__``: ``tools + methods``, methods in
    ``inspect.getmembers`` order); a plugin or method that has a problem (:func:`plugin_problems`) is left out."""
    from transformers.utils import get_json_schema

    tools: list[Callable[..., Any]] = []
    for target in tool_plugins:
        fn, _ = _load(target, "tool", "function")
        if fn is not None:
            tools.append(fn)
    cls = _environment_class(environment) if environment else None
    if cls is not None:
        for name, function in inspect.getmembers(cls, predicate=inspect.isfunction):
            if name in ("reset", "get_reward") or name.startswith("_"):
                continue
            static = isinstance(inspect.getattr_static(cls, name, None), staticmethod)
            tools.append(function if static else types.MethodType(function, _Placeholder()))
    schemas = []
    for tool in tools:
        try:
            schemas.append(get_json_schema(tool))
        except Exception:  # noqa: BLE001 - reported by plugin_problems
            continue
    return schemas


def run_tool_schemas_of(config: Any) -> list[dict[str, Any]] | None:
    """The JSON schemas TRL renders into the prompts of run ``config`` (a ``RunConfig``): its library tools', then
    its plugins' and environment's (:func:`plugin_schemas`); ``None`` for a run without tools. For the worker's
    prompt-length check (:func:`grpo_core.models.prompt_lengths.require_prompts_fit`)."""
    from grpo_core.models.prompt_tokens import run_tool_schemas

    dump = config.model_dump(mode="json")
    plugins = plugin_schemas(list(config.tool_plugins), config.environment) \
        if config.tool_plugins or config.environment else []
    return run_tool_schemas(dump, plugins)
