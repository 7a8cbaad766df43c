"""The ``plugin`` reward rule: a user's own reward function, named ``module:function`` or ``path/file.py:function``,
imported lazily in the process that scores (the worker), never at launch in the web process.

This is the one rule that runs code the user wrote (not sandboxed, unlike :mod:`grpo_core.rewards.code`, which runs
the model's completions). The function is called exactly as TRL's ``GRPOTrainer._calculate_rewards`` (TRL 1.16.0)
calls a reward function: keyword arguments only, ``prompts=``, ``completions=``, ``completion_ids=``,
``trainer_state=``, ``log_extra=``, ``log_metric=`` and one per dataset column (:func:`call_reward_function`); a
function without ``**kwargs`` gets just the arguments it declares. ``async def`` functions are awaited. It returns
one float or ``None`` per completion.

Before a run is queued, :mod:`grpo_core.reward_check.job` imports and calls each plugin once in a child process, so a
broken plugin is refused in seconds rather than after the model has loaded.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import importlib
import importlib.util
import inspect
import numbers
import os
import re
import sys
from collections.abc import Awaitable, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from grpo_core.rewards.registry import RewardRule, RuleParam, register

# --------------------------------------------------------------------------------------------------------------------
# plugin
# --------------------------------------------------------------------------------------------------------------------

_DOTTED_NAME_RE = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*$")


def parse_plugin_target(target: str) -> tuple[str, str]:
    """Split ``package.module:function`` or ``/path/to/file.py:function`` into ``(module_or_path, attribute)``.

    The attribute may be dotted (``module:Class.method``). Only the syntax is checked; nothing is imported.

    Raises:
        ValueError: no ``:``, an empty part, a module part that is neither a dotted name nor a ``.py`` path, or an
            attribute that is not a dotted Python name.
    """
    target = target.strip()
    if ":" not in target:
        raise ValueError(
            f"parameter 'target': {target!r} must look like 'package.module:function' or '/path/to/file.py:function'"
        )
    module, attribute = (part.strip() for part in target.rsplit(":", 1))
    if not module or not attribute:
        raise ValueError(f"parameter 'target': {target!r} has an empty module or function part")
    if not module.endswith(".py") and not _DOTTED_NAME_RE.match(module):
        raise ValueError(f"parameter 'target': {module!r} is neither a dotted module name nor a path to a .py file")
    if not _DOTTED_NAME_RE.match(attribute):
        raise ValueError(f"parameter 'target': {attribute!r} is not a Python function name")
    return module, attribute


class _ReachesOut(Exception):
    """An attribute path that walks through another module (``file.py:os.system``)."""

    def __init__(self, target: str) -> None:
        super().__init__(f"reward plugin {target!r} reaches into another module through its attributes; name that "
                         "module itself as 'package.module:function'")


def load_plugin_function(target: str) -> Callable[..., Any]:
    """Import the module (or execute the ``.py`` file) named by ``target`` and return the callable it names.

    A ``.py`` file's folder is added to the end of ``sys.path``, so the file may import modules beside it.

    The attribute path may not walk through another module (``file.py:os.system`` is refused: name ``os:system``
    itself, which :mod:`grpo_core.access.boundary` can then allow or refuse).

    Raises:
        ValueError: the module or file cannot be loaded, the attribute is missing, not callable or reached through
            another module; the message names the target and chains the original error.
    """
    module_name, attribute = parse_plugin_target(target)
    try:
        if module_name.endswith(".py"):
            digest = hashlib.sha1(os.path.abspath(module_name).encode()).hexdigest()[:12]
            unique = f"grpo_reward_plugin_{digest}"
            spec = importlib.util.spec_from_file_location(unique, module_name)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {module_name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[unique] = module  # so functions and classes defined there can be pickled by reference
            folder = os.path.dirname(os.path.abspath(module_name))
            if folder not in sys.path:  # its own modules beside it import, as they would from a script there; after
                sys.path.append(folder)  # the installed packages, so a file there never shadows one of those
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        obj: Any = module
        for part in attribute.split("."):
            if obj is not module and inspect.ismodule(obj):
                raise _ReachesOut(target)
            obj = getattr(obj, part)
        if inspect.ismodule(obj):
            raise _ReachesOut(target)
    except _ReachesOut as exc:
        raise ValueError(str(exc)) from None
    except Exception as exc:
        raise ValueError(f"reward plugin {target!r} could not be loaded: {type(exc).__name__}: {exc}") from exc
    if not callable(obj):
        raise ValueError(f"reward plugin {target!r} is not callable (it is a {type(obj).__name__})")
    return obj


#: The keyword arguments TRL passes to every reward function besides the dataset's columns (TRL 1.16.0,
#: ``GRPOTrainer._calculate_rewards``).
TRL_REWARD_ARGUMENTS = ("prompts", "completions", "completion_ids", "trainer_state", "log_extra", "log_metric")


class PluginSignatureError(ValueError):
    """A reward function whose parameters TRL's call cannot fill; the message names the parameter and the fix."""


def _unwrapped(fn: Callable[..., Any]) -> Callable[..., Any]:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def is_async_function(fn: Callable[..., Any]) -> bool:
    """True when calling ``fn`` returns a coroutine: an ``async def`` function, a ``functools.partial`` of one, or an
    object whose ``__call__`` is ``async def`` (the forms TRL's ``is_async_callable`` recognises)."""
    fn = _unwrapped(fn)
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        type(fn).__call__ if not inspect.isfunction(fn) else None
    )


def select_arguments(fn: Callable[..., Any], arguments: Mapping[str, Any], target: str = "") -> dict[str, Any]:
    """The part of ``arguments`` (TRL's keyword arguments for one call) that ``fn`` accepts.

    A function with ``**kwargs`` gets everything; one without gets only the parameters it names (extra positional
    ``*args`` are allowed and stay empty).

    Raises:
        PluginSignatureError: ``fn`` has a positional-only parameter, or a required parameter that is neither one
            of :data:`TRL_REWARD_ARGUMENTS` nor a key of ``arguments`` (a dataset column); the message names it.
    """
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):  # a builtin without a signature: pass everything, as TRL does
        return dict(arguments)
    label = f"reward plugin {target!r}" if target else "the reward function"
    for parameter in parameters:
        if parameter.kind is inspect.Parameter.POSITIONAL_ONLY and parameter.default is inspect.Parameter.empty:
            raise PluginSignatureError(
                f"{label} has the positional-only parameter {parameter.name!r}; TRL passes every argument by "
                "keyword (prompts=, completions=, ...), so remove the '/'"
            )
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters):
        return dict(arguments)
    accepted: set[str] = set()
    for parameter in parameters:
        if parameter.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY):
            if parameter.name not in arguments and parameter.default is inspect.Parameter.empty:
                columns = sorted(k for k in arguments if k not in TRL_REWARD_ARGUMENTS)
                raise PluginSignatureError(
                    f"{label} needs the argument {parameter.name!r}, which TRL does not pass and the dataset has no "
                    f"such column (TRL passes {', '.join(TRL_REWARD_ARGUMENTS)}; dataset columns: "
                    f"{', '.join(columns) or 'none'}); give it a default or declare **kwargs instead"
                )
            accepted.add(parameter.name)
    return {key: value for key, value in arguments.items() if key in accepted}


def _run_to_completion(awaitable: Awaitable[Any]) -> Any:
    """Await ``awaitable`` from synchronous code: on a new event loop, or in a helper thread when this thread already
    runs one."""

    async def wait() -> Any:
        return await awaitable

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wait()).result()


def check_rewards(result: Any, size: int, target: str) -> list[float | None]:
    """``result`` as a list of ``size`` floats or ``None``.

    Raises:
        ValueError: ``result`` is not a list (or tuple) of ``size`` real numbers or ``None``; the message names
            ``target``.
    """
    if not isinstance(result, (list, tuple)) or len(result) != size:
        got = f"{len(result)} values" if isinstance(result, (list, tuple)) else type(result).__name__
        raise ValueError(f"reward plugin {target!r} must return a list of {size} numbers or None; got {got}")
    rewards: list[float | None] = []
    for index, value in enumerate(result):
        if value is None:
            rewards.append(None)
        elif isinstance(value, numbers.Real):
            rewards.append(float(value))
        else:
            raise ValueError(
                f"reward plugin {target!r} returned {type(value).__name__} {value!r} at index {index}; "
                "rewards must be numbers or None"
            )
    return rewards


def call_reward_function(fn: Callable[..., Any], arguments: Mapping[str, Any], target: str = "") -> Any:
    """Call ``fn`` as TRL's GRPOTrainer calls a reward function: keyword arguments only (see
    :func:`select_arguments`), awaiting the result when ``fn`` is ``async`` (or returns an awaitable).

    Returns whatever ``fn`` returns (after awaiting); check it with :func:`check_rewards`.

    Raises:
        PluginSignatureError: see :func:`select_arguments`; anything ``fn`` raises propagates.
    """
    result = fn(**select_arguments(fn, arguments, target))
    if inspect.isawaitable(result):
        result = _run_to_completion(result)
    return result


class PluginReward:
    """A user's reward function ``module:function``, imported lazily on the first call.

    The web process builds and validates this object without importing the user's code; the module is loaded
    in whichever process first calls it (the training worker, or the child process of
    :mod:`grpo_core.reward_check.job`). The loaded function is dropped when pickling and loaded again after, so the
    object stays picklable. The function is called by keyword with everything TRL passes (``prompts``,
    ``completions``, ``completion_ids``, ``trainer_state``, ``log_extra``, ``log_metric``, dataset columns), or with
    just the parameters it declares when it has no ``**kwargs``; an ``async def`` function is awaited here (the
    worker hands such functions to TRL as :class:`AsyncPluginReward` instead, so TRL awaits them concurrently).

    Call: ``(completions, **kwargs) -> list[float | None]``: the function's result as floats, ``None`` kept.

    Raises:
        ValueError: (on call) the target cannot be loaded, its parameters do not fit TRL's call
            (:class:`PluginSignatureError`), or it returned something other than a list (or tuple) of
            ``len(completions)`` real numbers or ``None``; the message names the target.
    """

    def __init__(self, target: str, name: str = "") -> None:
        self.target = target
        self.__name__ = name or parse_plugin_target(target)[1].split(".")[-1]
        self._fn: Callable[..., Any] | None = None

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fn"] = None
        return state

    def load(self) -> Callable[..., Any]:
        """The user's function, imported on first use (see :func:`load_plugin_function`)."""
        if self._fn is None:
            self._fn = load_plugin_function(self.target)
        return self._fn

    def is_async(self) -> bool:
        """True when the user's function is ``async`` (imports it)."""
        return is_async_function(self.load())

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        result = call_reward_function(self.load(), {"completions": completions, **kwargs}, self.target)
        return check_rewards(result, len(completions), self.target)


class AsyncPluginReward:
    """An ``async`` plugin as TRL wants it: an object whose ``__call__`` is ``async def``, so that
    ``GRPOTrainer`` gathers it with the other async reward functions on its event loop (TRL's
    ``is_async_callable``). Picklable like :class:`PluginReward`, which it wraps; same name, same checks."""

    def __init__(self, plugin: PluginReward) -> None:
        self.plugin = plugin
        self.__name__ = plugin.__name__

    async def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        fn = self.plugin.load()
        result = fn(**select_arguments(fn, {"completions": completions, **kwargs}, self.plugin.target))
        if inspect.isawaitable(result):
            result = await result
        return check_rewards(result, len(completions), self.plugin.target)


def make_plugin(target: str = "", name: str = "") -> PluginReward:
    """Build ``plugin``; checks only the syntax of ``target`` (nothing is imported).

    Raises:
        ValueError: see :func:`parse_plugin_target`; also an empty target.
    """
    if not target.strip():
        raise ValueError("parameter 'target': give the reward function as 'package.module:function' or 'file.py:fn'")
    parse_plugin_target(target)
    return PluginReward(target.strip(), name.strip())


register(
    RewardRule(
        name="plugin",
        description="your own reward function, 'package.module:function' or '/path/file.py:function'",
        factory=make_plugin,
        params=(
            RuleParam("target", "str", "", "package.module:function or /path/to/file.py:function"),
            RuleParam("name", "str", "", "metric name (default: the function's name)"),
        ),
        category="plugin",
    )
)
