"""The ``plugin`` reward rule: a user's own reward function, named ``module:function`` or ``path/file.py:function``,
imported lazily in the process that scores (the worker), never at launch in the web process.

This is the one rule that runs code the user wrote (not sandboxed, unlike :mod:`grpo_core.rewards.code`, which runs
the model's completions): the function gets TRL's arguments (``completions``, ``prompts``, ``completion_ids``,
``trainer_state``, the dataset's columns) and returns one float or ``None`` per completion.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import numbers
import os
import re
import sys
from collections.abc import Callable, Sequence
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


def load_plugin_function(target: str) -> Callable[..., Any]:
    """Import the module (or execute the ``.py`` file) named by ``target`` and return the callable it names.

    Raises:
        ValueError: the module or file cannot be loaded, or the attribute is missing or not callable; the message
            names the target and chains the original error.
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
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(module_name)
        obj: Any = module
        for part in attribute.split("."):
            obj = getattr(obj, part)
    except Exception as exc:
        raise ValueError(f"reward plugin {target!r} could not be loaded: {type(exc).__name__}: {exc}") from exc
    if not callable(obj):
        raise ValueError(f"reward plugin {target!r} is not callable (it is a {type(obj).__name__})")
    return obj


class PluginReward:
    """A user's reward function ``module:function``, imported lazily on the first call.

    The web process builds and validates this object without importing the user's code; the module is loaded
    in whichever process first calls it (the training worker). The loaded function is dropped when pickling and
    loaded again after, so the object stays picklable. The function is called as ``function(completions, **kwargs)``
    with everything TRL passes (``prompts``, ``completion_ids``, dataset columns, ``trainer_state``...).

    Call: ``(completions, **kwargs) -> list[float | None]``: the function's result as floats, ``None`` kept.

    Raises:
        ValueError: (on call) the target cannot be loaded, or it returned something other than a list (or tuple) of
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

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        if self._fn is None:
            self._fn = load_plugin_function(self.target)
        result = self._fn(completions, **kwargs)
        if not isinstance(result, (list, tuple)) or len(result) != len(completions):
            got = f"{len(result)} values" if isinstance(result, (list, tuple)) else type(result).__name__
            raise ValueError(
                f"reward plugin {self.target!r} must return a list of {len(completions)} numbers or None; got {got}"
            )
        rewards: list[float | None] = []
        for index, value in enumerate(result):
            if value is None:
                rewards.append(None)
            elif isinstance(value, numbers.Real):
                rewards.append(float(value))
            else:
                raise ValueError(
                    f"reward plugin {self.target!r} returned {type(value).__name__} {value!r} at index {index}; "
                    "rewards must be numbers or None"
                )
        return rewards


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
