"""Bounded reading of YAML and JSON text that a user sends: run configs, sweeps, rule parameters, dataset rows.

Every text that crosses the API or the UI is read here, with limits checked *while* it is read, so a few hundred
bytes cannot turn into gigabytes or minutes of work (the "billion laughs" attack: nested YAML aliases, each
repeating the one before, expand 577 bytes into ~10^9 nodes when a consumer walks, validates or writes the result):

- **size**: at most :data:`MAX_TEXT_BYTES` bytes (UTF-8), checked before anything is parsed;
- **aliases** (``*name``) are refused in the first pass below, before any node is built, and so are merge keys
  (``<<``, whose only use is to repeat another mapping); an anchor alone (``&name``) is harmless and accepted;
- **tags**: only the core schema's (``!!str``, ``!!int``, ``!!float``, ``!!bool``, ``!!null``, ``!!seq``,
  ``!!map``); ``!!python/...``, ``!!binary``, ``!!set``, ``!!timestamp`` and application tags are refused by name.
  A plain scalar that looks like a date stays text (PyYAML would make it a ``datetime``, which no field accepts);
- **shape**: at most :data:`MAX_NODES` nodes (scalars, lists and mappings) and :data:`MAX_DEPTH` levels of nesting;
- **time**: the first pass stops after :data:`MAX_PARSE_S` seconds (a backstop: the limits above keep any text's
  read to milliseconds, ~40 ms for a 64 KB flood of values; see ``benchmarks/bench_bounded_parse.py``);
- a key given twice in one mapping is refused (both parsers would keep the last silently).

The YAML side reads the text twice: first its events only (libyaml's C parser, no node built), counting and
checking each against the limits; then, when nothing was refused, it is loaded with PyYAML's safe constructor (the
C composer again), whose work the first pass has bounded; without libyaml both passes are PyYAML's pure-Python ones.
A syntax error is reported as PyYAML's own parser places it (libyaml often points at the next line). Errors are one
line starting with the text's ``source`` and, where the parser knows it, the line and column (1-based). Dataset
files are not read here: their size is the upload limit's, and :mod:`grpo_core.datasets.formats` reads them with
:func:`json.loads`, whose failures (syntax, nesting past the interpreter, huge numbers) it reports by line. Imports no
torch; pure.
"""

from __future__ import annotations

import json
import time
from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

import yaml

#: Largest text accepted, in bytes of UTF-8: a run config with every field and several reward rules is ~4 KB.
MAX_TEXT_BYTES = 64 * 1024
#: Most scalars, lists and mappings in one text.
MAX_NODES = 10_000
#: Deepest nesting of lists and mappings (a run config nests ~5 levels: rewards, a rule, its params, a schema).
MAX_DEPTH = 32
#: Seconds one parse may take before it is stopped.
MAX_PARSE_S = 2.0

YAML_CORE_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("str", "int", "float", "bool", "null", "seq", "map")
)
_MERGE_TAG = "tag:yaml.org,2002:merge"
_TIMESTAMP_TAG = "tag:yaml.org,2002:timestamp"


class ParseError(ValueError):
    """A text refused by :func:`load_yaml` or :func:`load_json`; the message names the source and, where known, the
    line and column."""


@dataclass(frozen=True)
class ParseLimits:
    """The bounds one parse is held to (see the module docstring); ``max_bytes=None``: no size limit (a file whose
    size an upload limit already bounds)."""

    max_bytes: int | None = MAX_TEXT_BYTES
    max_nodes: int = MAX_NODES
    max_depth: int = MAX_DEPTH
    max_seconds: float = MAX_PARSE_S


DEFAULT_LIMITS = ParseLimits()


class _Refused(yaml.MarkedYAMLError):
    """A limit broken while composing; ``problem`` is the whole reason (not a syntax error)."""


def _where(mark: Any) -> str:
    return f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""


def _size_error(text: Any, source: str, limits: ParseLimits) -> str | None:
    if not isinstance(text, str):
        return f"{source}: expected text, got {type(text).__name__}"
    if limits.max_bytes is None:
        return None
    size = len(text.encode("utf-8", errors="surrogatepass"))
    if size <= limits.max_bytes:
        return None
    return (f"{source}: {size:,} bytes is over the limit of {limits.max_bytes:,} bytes for one text; "
            "a run config is a few kilobytes")


def _check_events(text: str, limits: ParseLimits, parser_class: Any = None) -> None:
    """Read ``text``'s YAML events (libyaml's parser when installed: no node is built) and refuse what breaks a limit.

    Raises:
        _Refused: an alias, a merge key, a tag outside the core schema, too many values, too deep, too slow.
        yaml.YAMLError: a syntax error.
    """
    parser = (parser_class or _EVENT_PARSER)(text)
    deadline = time.monotonic() + limits.max_seconds
    nodes = depth = 0
    try:
        while True:
            event = parser.get_event()
            if event is None:
                return
            mark = event.start_mark
            if isinstance(event, yaml.AliasEvent):
                raise _Refused(problem=f"YAML alias *{event.anchor} refused: aliases can expand a few hundred bytes "
                               "into gigabytes; write the value out", problem_mark=mark)
            if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                depth -= 1
                continue
            if not isinstance(event, yaml.NodeEvent):
                continue
            nodes += 1
            if nodes > limits.max_nodes:
                raise _Refused(problem=f"more than {limits.max_nodes:,} values; a config is far smaller",
                               problem_mark=mark)
            if nodes % 256 == 0 and time.monotonic() > deadline:
                raise _Refused(problem=f"reading took over {limits.max_seconds:g} s; send a smaller text",
                               problem_mark=mark)
            if event.tag not in (None, "!") and event.tag not in YAML_CORE_TAGS:
                shown = event.tag.replace("tag:yaml.org,2002:", "!!")
                raise _Refused(problem=f"YAML tag {shown} refused: only plain values, lists and mappings are read",
                               problem_mark=mark)
            if isinstance(event, yaml.ScalarEvent):
                if event.value == "<<" and not event.style and event.tag is None:  # plain: C gives "", Python None
                    raise _Refused(problem="YAML merge key << refused: write the fields out", problem_mark=mark)
                continue
            depth += 1
            if depth > limits.max_depth:
                raise _Refused(problem=f"nested deeper than {limits.max_depth} levels", problem_mark=mark)
    finally:
        parser.dispose()


def _python_parser_error(text: str, limits: ParseLimits) -> yaml.YAMLError | None:
    """The error PyYAML's pure-Python parser gives for ``text`` (under the same limits), or ``None``."""
    try:
        _check_events(text, limits, yaml.SafeLoader)
    except yaml.YAMLError as exc:
        return exc
    return None


def _check_time(limits: ParseLimits) -> None:
    if limits.max_seconds <= 0:
        raise _Refused(problem=f"reading took over {limits.max_seconds:g} s; send a smaller text")


class _UniqueKeyConstructor(yaml.constructor.SafeConstructor):
    """PyYAML's safe constructor refusing a key repeated in a mapping; a plain scalar that looks like a date stays
    text (an explicit ``!!timestamp`` is refused before construction)."""

    def construct_mapping(self, node, deep=False):
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"{key!r} is given twice (the last would win silently)", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_UniqueKeyConstructor.add_constructor(_TIMESTAMP_TAG, yaml.constructor.SafeConstructor.construct_yaml_str)

if yaml.__with_libyaml__:  # libyaml's parser and composer, in C: ~5x faster than PyYAML's own
    _EVENT_PARSER: Any = yaml.CSafeLoader

    class _Loader(yaml.cyaml.CParser, _UniqueKeyConstructor, yaml.resolver.Resolver):
        def __init__(self, stream: str) -> None:
            yaml.cyaml.CParser.__init__(self, stream)
            _UniqueKeyConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
else:  # pragma: no cover - PyYAML built without libyaml
    _EVENT_PARSER = yaml.SafeLoader

    class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer,
                  _UniqueKeyConstructor, yaml.resolver.Resolver):
        def __init__(self, stream: str) -> None:
            yaml.reader.Reader.__init__(self, stream)
            yaml.scanner.Scanner.__init__(self)
            yaml.parser.Parser.__init__(self)
            yaml.composer.Composer.__init__(self)
            _UniqueKeyConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)


def _yaml_error_message(exc: yaml.YAMLError, text: str, source: str, limits: ParseLimits, *, composed: bool) -> str:
    """The one-line message for a YAML error: a syntax error found by libyaml is placed by PyYAML's own parser,
    which points at the spot (libyaml often at the next line)."""
    if "maximum nesting depth" in str(getattr(exc, "problem", "") or ""):  # libyaml's own limit, while scanning
        return f"{source}{_where(getattr(exc, 'problem_mark', None))}: nested deeper than {limits.max_depth} levels"
    if not composed and _EVENT_PARSER is not yaml.SafeLoader:
        exc = _python_parser_error(text, limits) or exc
    mark = getattr(exc, "problem_mark", None)
    if isinstance(exc, _Refused):
        return f"{source}{_where(mark)}: {exc.problem}"
    return f"{source}{_where(mark)}: not valid YAML ({getattr(exc, 'problem', None) or exc})"


def load_yaml(text: str, *, source: str = "config", error: type[Exception] = ParseError,
              limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """``text`` read as YAML (JSON is YAML) within ``limits``: plain values, lists and mappings only.

    Returns the value (``None`` for an empty text).

    Raises:
        ParseError (or ``error``): the text is over the size limit, not YAML, uses an alias, a merge key or a tag
            outside the core schema, has too many values or too deep a nesting, repeats a key, or took too long;
            the message starts with ``source`` and gives the line and column where the parser knows them.
    """
    text = "" if text is None else text
    too_big = _size_error(text, source, limits)
    if too_big:
        raise error(too_big)
    loader = None
    try:
        _check_time(limits)
        _check_events(text, limits)  # every limit, before a single node is composed
        loader = _Loader(text)
        return loader.get_single_data()
    except _Refused as exc:
        raise error(f"{source}{_where(exc.problem_mark)}: {exc.problem}") from None
    except yaml.YAMLError as exc:
        raise error(_yaml_error_message(exc, text, source, limits, composed=loader is not None)) from None
    except (ValueError, OverflowError) as exc:  # e.g. an integer of more digits than Python converts
        raise error(f"{source}: a value cannot be read ({exc})") from None
    finally:
        if loader is not None:
            loader.dispose()


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise _DuplicateKey(key)
        result[key] = value
    return result


class _DuplicateKey(ValueError):
    pass


def check_shape(value: Any, source: str, limits: ParseLimits = DEFAULT_LIMITS,
                error: type[Exception] = ParseError) -> None:
    """Refuse a value already built (a JSON body's part: an ingest run's config, provenance, a group's extra columns)
    with more than ``limits.max_nodes`` values or nested deeper than ``limits.max_depth``, and, when
    ``limits.max_bytes`` is set, whose compact JSON is longer than that many characters. Counted without recursion,
    before anything walks the value recursively.

    Raises:
        ParseError (or ``error``): the message starts with ``source`` and says which limit.
    """
    _check_shape(value, source, limits, error)
    if limits.max_bytes is None:
        return
    try:
        size = len(json.dumps(value, allow_nan=True, separators=(",", ":")))
    except (TypeError, ValueError) as exc:
        raise error(f"{source}: not JSON ({exc})") from None
    if size > limits.max_bytes:
        raise error(f"{source}: {size:,} characters of JSON is over the limit of {limits.max_bytes:,}")


def _check_shape(value: Any, source: str, limits: ParseLimits, error: type[Exception]) -> None:
    """Count the nodes and the depth of a parsed JSON value without recursion."""
    nodes = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        nodes += 1
        if nodes > limits.max_nodes:
            raise error(f"{source}: more than {limits.max_nodes:,} values; a config is far smaller")
        if depth > limits.max_depth:
            raise error(f"{source}: nested deeper than {limits.max_depth} levels")
        if isinstance(item, dict):
            stack.extend((child, depth + 1) for child in item.values())
        elif isinstance(item, list):
            stack.extend((child, depth + 1) for child in item)


def load_json(text: str, *, source: str = "JSON", error: type[Exception] = ParseError,
              limits: ParseLimits = DEFAULT_LIMITS) -> Any:
    """``text`` read as JSON within ``limits`` (a key repeated in one object refused).

    Raises:
        ParseError (or ``error``): over the size limit, not JSON (with line and column), a repeated key, too many
            values, too deep a nesting, or a number Python cannot convert; the message starts with ``source``.
    """
    text = "" if text is None else text
    too_big = _size_error(text, source, limits)
    if too_big:
        raise error(too_big)
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise error(f"{source}, line {exc.lineno}, column {exc.colno}: not valid JSON ({exc.msg})") from None
    except _DuplicateKey as exc:
        raise error(f"{source}: key {exc.args[0]!r} is given twice (the last would win silently)") from None
    except RecursionError:
        raise error(f"{source}: nested deeper than {limits.max_depth} levels") from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise error(f"{source}: a value cannot be read ({exc})") from None
    _check_shape(value, source, limits, error)
    return value


class _PlainDumper(yaml.SafeDumper):
    """PyYAML's safe dumper writing every value out: no ``&anchor``/``*alias`` for an object met twice, so what it
    writes is what :func:`load_yaml` reads back."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def dump_yaml(value: Any) -> str:
    """``value`` (plain values, lists, mappings) as block YAML, keys in their order, without anchors or aliases."""
    return yaml.dump(value, Dumper=_PlainDumper, sort_keys=False, allow_unicode=True)
