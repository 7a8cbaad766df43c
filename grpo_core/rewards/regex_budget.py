"""Regular expressions a user wrote, matched with a time limit: ``format_regex``'s pattern and the ``pattern`` /
``patternProperties`` of a JSON schema that ``json_valid`` reads from a dataset row.

Python's :mod:`re` backtracks without limit and holds the interpreter lock while it does: ``^(a+)+$`` against forty
``a`` and a ``!`` takes days, and in the web process (the try-out bench, the reward-hacking probe) it stops every
login's requests. The third-party ``regex`` module (a dependency of transformers, listed in ours) matches the same
syntax, releases the lock and stops after a ``timeout``. Here:

* :func:`bounded_search`: ``re.search`` through ``regex`` with at most :data:`MATCH_TIMEOUT_S` a match, and no
  more than what is left of the caller's :func:`time_budget`; raises :class:`RegexTimeout` when it runs out;
* :func:`time_budget`: a context in which all bounded matches together take at most ``seconds`` (the web
  process scores a whole group of completions within one budget, so a thousand completions cannot each take a
  second);
* :func:`guard_jsonschema`: makes ``jsonschema``'s ``pattern``, ``patternProperties`` and
  ``additionalProperties`` checks use :func:`bounded_search` (they call ``re.search`` through the module attribute
  ``re`` of ``jsonschema._keywords``, ``jsonschema._legacy_keywords`` and ``jsonschema._utils``).

Source: https://github.com/mrabarnett/mrab-regex (``timeout`` argument); jsonschema 4's keyword modules.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import re
import time
import types
from collections.abc import Iterator
from typing import Any

#: Seconds one match may take (the ``regex`` module may overshoot it a little).
MATCH_TIMEOUT_S = 1.0

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("regex_deadline", default=None)


class RegexTimeout(TimeoutError):
    """A user's regular expression took longer than its time limit (or the budget of its group was spent)."""


@contextlib.contextmanager
def time_budget(seconds: float) -> Iterator[None]:
    """Within the block, bounded matches together take at most ``seconds`` (nested budgets keep the earlier end)."""
    end = time.monotonic() + seconds
    outer = _DEADLINE.get()
    token = _DEADLINE.set(end if outer is None else min(end, outer))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def match_timeout() -> float:
    """Seconds the next match may take: :data:`MATCH_TIMEOUT_S`, or less when a :func:`time_budget` ends sooner.

    Raises:
        RegexTimeout: the budget is already spent.
    """
    deadline = _DEADLINE.get()
    if deadline is None:
        return MATCH_TIMEOUT_S
    left = deadline - time.monotonic()
    if left <= 0:
        raise RegexTimeout("the time for this group's regular expressions is spent")
    return min(MATCH_TIMEOUT_S, left)


@functools.lru_cache(maxsize=256)
def compile_bounded(pattern: str, flags: int = 0) -> Any:
    """``pattern`` compiled by the ``regex`` module with :mod:`re`'s ``flags`` (``re.DOTALL | re.MULTILINE``...).

    Raises:
        re.error: the pattern is not valid for :mod:`re` (checked first, so the two modules accept the same).
    """
    import regex

    re.compile(pattern, flags)
    return regex.compile(pattern, flags)


def bounded_search(pattern: Any, string: str, flags: int = 0) -> Any:
    """``re.search(pattern, string, flags)`` with a time limit (:func:`match_timeout`).

    Raises:
        RegexTimeout: the match took too long.
        re.error: an invalid pattern.
    """
    compiled = compile_bounded(pattern.pattern if isinstance(pattern, re.Pattern) else pattern,
                               pattern.flags if isinstance(pattern, re.Pattern) else flags)
    try:
        return compiled.search(string, timeout=match_timeout())
    except TimeoutError as exc:
        raise RegexTimeout(f"the regular expression {str(compiled.pattern)[:80]!r} took too long") from exc


class _BoundedRe(types.ModuleType):
    """:mod:`re` with ``search`` bounded in time, for the modules of ``jsonschema`` that call ``re.search``."""

    def __init__(self) -> None:
        super().__init__("re")
        self.search = bounded_search

    def __getattr__(self, name: str) -> Any:
        return getattr(re, name)


_JSONSCHEMA_REGEX_MODULES = ("jsonschema._keywords", "jsonschema._legacy_keywords", "jsonschema._utils")


@functools.cache
def guard_jsonschema() -> None:
    """Make ``jsonschema``'s regular-expression keywords call :func:`bounded_search` (once a process).

    Raises:
        RuntimeError: a ``jsonschema`` whose keyword modules no longer call ``re.search`` through their ``re``
            attribute (an untested version): validation would run unbounded, so it is refused.
    """
    import importlib

    bounded = _BoundedRe()
    for name in _JSONSCHEMA_REGEX_MODULES:
        module = importlib.import_module(name)
        if getattr(module, "re", None) not in (re, bounded) and not isinstance(getattr(module, "re", None), _BoundedRe):
            raise RuntimeError(f"{name} does not use the re module as expected; cannot bound its regular expressions")
        module.re = bounded
