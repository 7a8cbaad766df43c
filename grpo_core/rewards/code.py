"""Code reward rules: run the completion's Python against the row's tests in the sandbox, time it, check its style.

Rules (category ``code``):

* ``code_tests``: share of the row's tests passed; -0.1 on timeout; 0.0 on a syntax error; ``None`` without tests.
* ``code_runtime``: for code passing all its tests, ``reference time / its time`` clipped to [0, 1].
* ``code_style``: share of non-blank lines without a PEP 8 violation (``pycodestyle``).

The code of a completion is the last fenced block tagged ``python``/``py``/``python3`` or untagged
(an unclosed last fence, as in a truncated generation, counts), else the whole completion (:func:`extract_code`).

Tests (the ``tests`` column), see :func:`split_tests` and ``docs/rewards-code.md``:

* HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", arXiv 2107.03374): the source
  of a ``check(candidate)`` function plus an ``entry_point`` column naming the function under test. Each
  top-level statement of ``check``'s body that contains an ``assert`` is one test; other statements run in order.
* A list of assert statements, or a string of them (one statement per test; JSON-encoded lists accepted);
  ``unittest.TestCase`` methods and pytest-style ``def test_*()`` functions.
* stdin/stdout tests: ``[{"input", "output"}]`` (CodeContests, open-r1) and APPS's ``input_output`` JSON
  (Hendrycks et al. 2021, "Measuring Coding Challenge Competence With APPS", arXiv 2105.09938), call-based with
  ``fn_name`` or programs run once per test in a fresh process.

The prompt's own helpers (its header, :func:`prompt_header`: HumanEval/32's ``poly``) run before the completion and,
in the tests' namespace, after its names, so the tests always call the prompt's versions. A test unit that passes
without running any of the completion's code earns no credit (``assert True``).

How a test program runs (see :func:`build_test_program`): the harness (the script the sandbox runs) forks the
*solution server* first, then reads the tests and a random per-run nonce from its stdin (so no copy of them is ever
in the server's memory), and sends the server the completion's code, which it ``exec``-utes in a namespace of its own
with ``__name__ == "__solution__"`` (so ``if __name__ == "__main__":`` demos do not run). The test units then run
in the harness, each guarded by ``try/except BaseException``; the completion's names there are proxies that send
each call to the server, whose results come back as plain data (JSON with tags for tuples, sets, bytes...) rebuilt
from builtin types, so no ``__eq__``, ``__bool__`` or ``__hash__`` of the completion runs where an assertion is
evaluated. The harness makes itself non-dumpable before the completion runs (the server, same uid, cannot read its
memory or descriptors through ``/proc`` or ``ptrace``); frames and ``gc`` in the server hold neither tests nor
nonce. The server's stdout and stderr go to ``/dev/null``; the harness writes its summary line, prefixed with the
nonce, to a private descriptor, so output printed by the completion cannot fake a result. Exiting early
(``sys.exit``, ``os._exit``) fails the tests that had yet to run; an exception the completion raises is re-raised
in the harness by builtin name, except those that would steer the tests' control flow (``StopIteration``) or are
not ordinary errors (``SystemExit``...), which become a plain failure. The load message's names are checked (no
dunders, no builtins). ``code_runtime``'s clock is the harness's. See ``docs/sandbox.md`` for what remains.
"""

from __future__ import annotations

import ast
import functools
import json
import logging
import math
import re
import secrets
import textwrap
from collections.abc import Sequence
from typing import Any, NamedTuple

import pycodestyle

from grpo_core.rewards.columns import column_values
from grpo_core.rewards.registry import RewardRule, RuleParam, completion_text, register
from grpo_core.sandbox.box import ExecResult, ExecStatus, run_many

logger = logging.getLogger(__name__)

TIMEOUT_REWARD = -0.1
"""``code_tests`` reward of a completion whose run hit the time limit: below wrong code, so loops are discouraged."""

RUNTIME_SMOOTHING_S = 1e-4
"""Added to both times in ``code_runtime``'s ratio, so sub-millisecond timer noise does not dominate."""

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}


def extract_code(text: str) -> str:
    """The Python code of a completion.

    The last fenced block tagged ``python``, ``py``, ``python3`` or untagged (blocks in other languages are
    skipped; a last fence without its closing ``````` runs to the end of the text), else the whole text.
    """
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in _PYTHON_TAGS]
    return blocks[-1] if blocks else text


# ----------------------------------------------------------------------------------------------------------------
# Tests -> units


def _contains_assert(node: ast.AST) -> bool:
    """Whether executing ``node`` can run an ``assert`` (asserts inside function/class definitions do not count)."""
    if isinstance(node, ast.Assert):
        return True
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
        return False
    return any(_contains_assert(child) for child in ast.iter_child_nodes(node))


def _contains_return(node: ast.AST) -> bool:
    if isinstance(node, ast.Return):
        return True
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
        return False
    return any(_contains_return(child) for child in ast.iter_child_nodes(node))


def _source(text: str, node: ast.stmt) -> str:
    segment = ast.get_source_segment(text, node, padded=True)
    return textwrap.dedent(segment) if segment is not None else ast.unparse(node)


def _is_test_case(node: ast.stmt) -> bool:
    """A ``class X(unittest.TestCase)`` (any base whose name ends in ``TestCase``)."""
    if not isinstance(node, ast.ClassDef):
        return False
    names = [b.id if isinstance(b, ast.Name) else b.attr if isinstance(b, ast.Attribute) else "" for b in node.bases]
    return any(name.endswith("TestCase") for name in names)


def _is_unittest_main(node: ast.stmt) -> bool:
    """A top-level ``unittest.main(...)`` call (it would run every case again and exit)."""
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute | ast.Name)
        and (node.value.func.attr if isinstance(node.value.func, ast.Attribute) else node.value.func.id) == "main"
    )


def _split_statements(text: str) -> list[tuple[str, str]]:
    """Top-level statements of ``text``: those containing an assert are ``test`` units, the rest ``setup``.

    ``unittest``: each ``test*`` method of a ``TestCase`` class is a test unit (``Case("test_x").debug()``, which
    runs ``setUp``/``tearDown`` and raises on a failed ``self.assert*``); pytest style: each top-level
    ``def test_*()`` without parameters is a test unit (a call of it). A top-level ``unittest.main()`` is dropped.

    Raises:
        SyntaxError: ``text`` does not parse.
    """
    module = ast.parse(text)
    units: list[tuple[str, str]] = []
    for stmt in module.body:
        if _is_unittest_main(stmt):
            continue
        units.append(("test" if _contains_assert(stmt) else "setup", _source(text, stmt)))
        if _is_test_case(stmt):
            for item in stmt.body:
                if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                    units.append(("test", f"{stmt.name}({item.name!r}).debug()"))
        elif (
            isinstance(stmt, ast.FunctionDef)
            and stmt.name.startswith("test")
            and not (stmt.args.args or stmt.args.posonlyargs or stmt.args.kwonlyargs or stmt.args.vararg)
        ):
            units.append(("test", f"{stmt.name}()"))
    return units


def _stdio_text(value: Any) -> str | None:
    """A program's input or expected output: a string, or a list of lines (joined, each ending in a newline)."""
    if isinstance(value, str):
        return value
    if isinstance(value, list | tuple) and all(isinstance(line, str) for line in value):
        return "".join(line if line.endswith("\n") else line + "\n" for line in value)
    return None


def _literal(value: Any) -> str | None:
    """``value`` (decoded JSON) as Python source, or ``None`` when it has no literal (NaN, infinities)."""
    text = repr(value)
    try:
        return text if ast.literal_eval(text) == value else None
    except (ValueError, SyntaxError, RecursionError, MemoryError):
        return None


def _io_units(value: Any) -> list[tuple[str, str]] | None:
    """Units of stdin/stdout tests, or ``None`` when ``value`` is not of that shape.

    * a list of ``{"input": ..., "output": ...}`` objects (CodeContests, open-r1's code sets): one ``stdio`` unit each;
    * APPS's ``input_output``: ``{"inputs": [...], "outputs": [...]}``; with ``"fn_name"``, call-based: one test unit
      ``<fn_name>(*inputs[i])`` equal to ``outputs[i]`` (or to its only item, tuples read as lists, as APPS's
      checker does; a ``class Solution`` method of that name also serves), else ``stdio`` units.

    Raises:
        ValueError: the shape is recognised but malformed (message says what is wrong).
    """
    if isinstance(value, dict) and ("inputs" in value or "outputs" in value):
        inputs, outputs = value.get("inputs"), value.get("outputs")
        if not isinstance(inputs, list) or not isinstance(outputs, list) or len(inputs) != len(outputs):
            raise ValueError("'inputs' and 'outputs' must be lists of the same length")
        name = value.get("fn_name")
        if name:
            if not isinstance(name, str) or not name.isidentifier():
                raise ValueError(f"'fn_name' must be a Python name, got {name!r}")
            units = []
            for given, want in zip(inputs, outputs, strict=True):
                args = given if isinstance(given, list) else [given]
                args_src, want_src = _literal(args), _literal(want)
                if args_src is None or want_src is None:
                    continue
                units.append(
                    (
                        "test",
                        f"_f = {name} if {name!r} in globals() else Solution().{name}\n"
                        f"_r = _f(*{args_src})\n_r = list(_r) if type(_r) is tuple else _r\n_w = {want_src}\n"
                        "assert _r == _w or (type(_w) is list and len(_w) == 1 and _r == _w[0])",
                    )
                )
            return units
        pairs = list(zip(inputs, outputs, strict=True))
    elif isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        if not all("input" in item and "output" in item for item in value):
            raise ValueError("each test must be an object with 'input' and 'output'")
        pairs = [(item["input"], item["output"]) for item in value]
    else:
        return None
    units = []
    for index, (given, want) in enumerate(pairs):
        given_text, want_text = _stdio_text(given), _stdio_text(want)
        if given_text is None or want_text is None:
            raise ValueError(f"test {index}: input and output must be text (or lists of lines)")
        units.append(("stdio", json.dumps([given_text, want_text])))
    return units


def _humaneval_units(tests: str, entry_point: str) -> list[tuple[str, str]]:
    """Units of a HumanEval ``check(candidate)`` test module (falls back to one ``check(entry_point)`` test)."""
    whole = [("setup", tests), ("test", f"check({entry_point})")]
    try:
        module = ast.parse(tests)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return whole
    checks = [s for s in module.body if isinstance(s, ast.FunctionDef) and s.name == "check"]
    if not checks or not entry_point.isidentifier():
        return whole
    check = checks[-1]
    if check.args.args and not any(isinstance(s, ast.Global | ast.Nonlocal) for s in ast.walk(check)):
        param = check.args.args[0].arg
    else:
        return whole
    units = [("setup", _source(tests, s)) for s in module.body if s is not check]
    units.append(("setup", f"{param} = {entry_point}"))
    for stmt in check.body:
        if _contains_return(stmt):
            return whole  # control flow a module cannot reproduce
        units.append(("test" if _contains_assert(stmt) else "setup", _source(tests, stmt)))
    if not any(kind == "test" for kind, _ in units):
        return whole
    return units


def split_tests(tests: Any, entry_point: str | None = None) -> list[tuple[str, str]]:
    """Turn a row's ``tests`` value into ordered ``(kind, source)`` units, ``kind`` being ``setup``, ``test`` or
    ``stdio`` (source: JSON ``[input, expected output]`` of a program run).

    Accepted shapes:

    * a string with ``def check(`` and an ``entry_point``: HumanEval; the module's other statements, then
      ``candidate = <entry_point>``, then each statement of ``check``'s body (a test if it holds an assert).
      A ``check`` that ``return``s early or uses ``global`` runs whole, as one test ``check(<entry_point>)``.
    * a string of Python statements: each top-level statement holding an assert is a test, others are setup;
      if it does not parse, each line starting with ``assert`` is a test and other non-blank lines setup.
      A string holding a JSON list of strings is read as that list.
    * a list/tuple of strings: each is split as above (an item that does not parse is one test, which fails).
    * ``unittest.TestCase`` classes (each ``test*`` method one test) and pytest-style ``def test_*()`` functions.
    * stdin/stdout tests, as objects or their JSON text (see :func:`_io_units`): ``[{"input", "output"}, ...]``
      and APPS's ``{"inputs": [...], "outputs": [...], "fn_name"?: ...}``.

    Returns an empty list for ``None``, an empty string or list, malformed stdin/stdout tests, or tests without any
    assert (:func:`why_tests_unreadable` says why).
    """
    try:
        return _split_tests(tests, entry_point)
    except ValueError:
        return []


def why_tests_unreadable(tests: Any, entry_point: str | None = None) -> str | None:
    """Why ``code_tests`` cannot read a row's ``tests`` value, or ``None`` when it can (see :func:`split_tests`)."""
    if tests is None or (isinstance(tests, str) and not tests.strip()):
        return "it is empty"
    try:
        units = _split_tests(tests, entry_point)
    except ValueError as exc:
        return f"stdin/stdout tests: {exc}"
    if units:
        return None
    if isinstance(tests, dict):
        return f"an object with keys {sorted(map(str, tests))[:6]}, neither asserts nor stdin/stdout tests"
    return (
        "no test found: expected assert statements (a string or a list), a HumanEval check(candidate) with an "
        "entry_point column, unittest/pytest tests, [{input, output}] or APPS's {inputs, outputs} JSON"
    )


def _split_tests(tests: Any, entry_point: str | None) -> list[tuple[str, str]]:
    """:func:`split_tests`, raising ``ValueError`` for malformed stdin/stdout tests."""
    if tests is None:
        return []
    if hasattr(tests, "tolist") and not isinstance(tests, str):  # a numpy array from a dataset column
        tests = tests.tolist()
    if isinstance(tests, dict) or (isinstance(tests, list) and tests and isinstance(tests[0], dict)):
        io = _io_units(tests)
        return io if io and any(kind != "setup" for kind, _ in io) else []
    if isinstance(tests, str):
        stripped = tests.strip()
        if not stripped:
            return []
        if stripped[0] in "[{":
            try:
                decoded = json.loads(stripped)
            except (ValueError, RecursionError):  # a test text nested past the interpreter's limit is code
                decoded = None
            if isinstance(decoded, list) and all(isinstance(item, str) for item in decoded):
                return _split_tests(decoded, entry_point)
            if isinstance(decoded, dict | list):
                io = _io_units(decoded)
                if io is not None:
                    return io
        if entry_point and re.search(r"^def\s+check\s*\(", tests, re.MULTILINE):
            units = _humaneval_units(tests, str(entry_point).strip())
        else:
            try:
                units = _split_statements(tests)
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                units = [
                    ("test" if line.lstrip().startswith("assert") else "setup", line.strip())
                    for line in tests.splitlines()
                    if line.strip()
                ]
    elif isinstance(tests, Sequence):
        units = []
        for item in tests:
            if item is None or not str(item).strip():
                continue
            try:
                units.extend(_split_statements(str(item)))
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                units.append(("test", str(item)))
    else:
        return []
    return units if any(kind != "setup" for kind, _ in units) else []


_CODE_START = re.compile(r"^(?:from\s|import\s|def\s|class\s|async\s+def\s|@)", re.MULTILINE)


def _prompt_text(prompt: Any) -> str:
    """The text of a prompt: a string, or the last user message of a conversation."""
    if prompt is None:
        return ""
    if isinstance(prompt, str):
        return prompt
    users = [m for m in prompt if isinstance(m, dict) and m.get("role") == "user"] if isinstance(prompt, list) else []
    return completion_text(users[-1:] or prompt)


def _is_stub(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    """A function whose body is only a docstring, ``pass``, ``...`` or ``raise NotImplementedError``."""
    for stmt in node.body:
        if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
            continue
        if isinstance(stmt, ast.Raise) and "NotImplementedError" in ast.unparse(stmt):
            continue
        return False
    return True


@functools.lru_cache(maxsize=1024)
def prompt_header(prompt: str, entry_point: str | None = None) -> str:
    """The code a prompt gives the completion to build on: its imports, constants, helper functions and classes.

    HumanEval prompts (and others like them) define helpers the tests call (``poly`` in HumanEval/32,
    ``encode_cyclic`` in /38): the harness runs this header in the tests' namespace after the completion's names, so
    the tests call the prompt's helpers, never a completion's redefinition; the server runs it before the completion
    so that a completion may use them without repeating them. The code is the last fenced block of the prompt, else
    the longest tail of it, from a line starting with ``import``/``from``/``def``/``class``/``@``, that parses. The
    function named ``entry_point`` and stubs (a docstring, ``pass``, ``...``, ``raise NotImplementedError``) are
    left out. ``""`` when the prompt holds no code.
    """
    text = prompt or ""
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in _PYTHON_TAGS]
    candidates = blocks[-1:] or [text[m.start() :] for m in _CODE_START.finditer(text)]
    module = None
    for candidate in candidates:
        try:
            module = ast.parse(candidate)
            break
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            continue
    if module is None:
        return ""
    kept = []
    for stmt in module.body:
        if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
            if stmt.name == entry_point or _is_stub(stmt):
                continue
        elif isinstance(stmt, ast.ClassDef):
            if stmt.name == entry_point:
                continue
        elif not isinstance(stmt, ast.Import | ast.ImportFrom | ast.Assign | ast.AnnAssign):
            continue
        kept.append(ast.unparse(stmt))
    return "\n".join(kept) + "\n" if kept else ""


def _headers(kwargs: dict[str, Any], entry_points: list[Any], n: int) -> list[str]:
    """The prompt header of each completion (TRL passes the prompts as ``prompts``)."""
    prompts = kwargs.get("prompts")
    if prompts is None or isinstance(prompts, str) or len(prompts) != n:
        prompts = [prompts if isinstance(prompts, str) else None] * n
    return [
        prompt_header(_prompt_text(p), str(e).strip() if e else None) if p else ""
        for p, e in zip(prompts, entry_points, strict=True)
    ]


# ----------------------------------------------------------------------------------------------------------------
# The test program run in the sandbox
#
# Two processes: the *harness* (the script the sandbox runs; it holds the nonce and the tests) and the *solution
# server*, which the harness forks before it reads the nonce and the tests from its stdin (so no copy of them is in
# the server's memory), and which runs the completion's code and answers calls. The test units run in the harness; every name they use from the
# completion is a proxy that sends the call to the server and gets its result back as plain data (JSON with tags for
# tuples, sets, bytes...), rebuilt in the harness from builtin types only. A result's own ``__eq__``, ``__bool__``
# or ``__hash__`` therefore never runs where the assertion is evaluated, and frame or ``gc`` introspection in the
# server finds neither the tests nor the nonce. The harness makes itself non-dumpable first, so the server cannot
# read its memory or descriptors through ``/proc`` or ``ptrace`` either (same uid).

_CODEC = """\
def _encode(x, keep, depth=0):
    # Plain data as JSON: None, bool, int, float, str natively; lists as lists; other builtins tagged. Subclasses of
    # builtins become their base value; iterators become their items (at most 100000); anything else a reference.
    if depth > 200:
        raise RecursionError("value nested too deeply")
    t = type(x)
    if x is None or t is bool or t is int or t is float or t is str:
        return x
    if t is list:
        return [_encode(v, keep, depth + 1) for v in x]
    if t is tuple:
        return {"t": [_encode(v, keep, depth + 1) for v in x]}
    if t is dict:
        return {"d": [[_encode(k, keep, depth + 1), _encode(v, keep, depth + 1)] for k, v in x.items()]}
    if t is set or t is frozenset:
        return {"s" if t is set else "f": [_encode(v, keep, depth + 1) for v in x]}
    if t is bytes or t is bytearray:
        return {"b" if t is bytes else "ba": x.hex()}
    if t is complex:
        return {"c": [x.real, x.imag]}
    if t is range:
        return {"rg": [x.start, x.stop, x.step]}
    value = _encode_stdlib(x, t, keep, depth)
    if value is not None:
        return value
    for base in (int, float, str, bytes):
        if isinstance(x, base):
            return _encode(getattr(base, "__" + base.__name__ + "__")(x), keep, depth)
    for base in (list, tuple, dict, set, frozenset):
        if isinstance(x, base):
            return _encode(base(dict.items(x) if base is dict else x), keep, depth)
    if hasattr(t, "__next__") and hasattr(t, "__iter__"):
        items = []
        for v in x:
            items.append(_encode(v, keep, depth + 1))
            if len(items) > 100000:
                raise ValueError("iterator too long")
        return {"i": items}
    return keep(x)


def _encode_stdlib(x, t, keep, depth):
    # Value types of the standard library that results often are (Fraction, Decimal, deque, Counter, OrderedDict,
    # defaultdict of a builtin, namedtuple, dates): sent as their plain parts and rebuilt by the receiver from its own
    # copy of the module, so the comparison there is the real type's. Looked up in sys.modules: a module that was
    # never imported has no instances. None for anything else.
    import sys
    modules = sys.modules
    for module_name, class_name, tag in _STDLIB_TYPES:
        module = modules.get(module_name)
        if module is None or t is not getattr(module, class_name, None):
            continue
        if tag == "fr":
            return {tag: [_encode(int.__int__(x.numerator), keep), _encode(int.__int__(x.denominator), keep)]}
        if tag == "dc":
            return {tag: str.__str__(t.__str__(x))}
        if tag in ("dq", "od", "ct"):
            items = list(x.items()) if tag != "dq" else list(x)
            extra = x.maxlen if tag == "dq" else None
            return {tag: [_encode(items, keep, depth + 1), extra if type(extra) is int else None]}
        if tag == "dd":
            factory = x.default_factory
            name = factory.__name__ if factory in (int, float, str, list, dict, set, tuple, bool) else None
            return {tag: [_encode(list(dict.items(x)), keep, depth + 1), name]}
        if tag in ("date", "datetime", "time", "timedelta"):
            parts = [x.days, x.seconds, x.microseconds] if tag == "timedelta" else [t.isoformat(x)]
            return {tag: [p if type(p) in (int, str) else str(p) for p in parts]}
    if isinstance(x, tuple) and type(getattr(t, "_fields", None)) is tuple and t.__bases__ == (tuple,):
        fields = [str(f) for f in t._fields if type(f) is str]
        if len(fields) == len(x):  # a namedtuple: its fields by name too
            return {"nt": [str(t.__name__), fields, [_encode(v, keep, depth + 1) for v in tuple.__iter__(x)]]}
    return None


_STDLIB_TYPES = (
    ("fractions", "Fraction", "fr"), ("decimal", "Decimal", "dc"), ("collections", "deque", "dq"),
    ("collections", "OrderedDict", "od"), ("collections", "Counter", "ct"), ("collections", "defaultdict", "dd"),
    ("datetime", "datetime", "datetime"), ("datetime", "date", "date"), ("datetime", "time", "time"),
    ("datetime", "timedelta", "timedelta"),
)


_SERVER_SIDE = {}  # the solution server's namespace, set in the server process only (see the "fn" tag)


def _decode_stdlib(tag, body, remote):
    # The receiver's own instance of a standard value type sent by _encode_stdlib; None for another tag.
    if tag == "fr":
        import fractions
        return fractions.Fraction(int(_decode(body[0], remote)), int(_decode(body[1], remote)))
    if tag == "dc":
        import decimal
        return decimal.Decimal(str(body))
    if tag in ("dq", "od", "ct", "dd"):
        import collections
        items, extra = _decode(body[0], remote), body[1]
        if tag == "dq":
            return collections.deque(items, extra if type(extra) is int else None)
        if tag == "dd":
            kinds = {"int": int, "float": float, "str": str, "list": list, "dict": dict, "set": set, "tuple": tuple,
                     "bool": bool}
            return collections.defaultdict(kinds.get(extra), items)
        return collections.OrderedDict(items) if tag == "od" else collections.Counter(dict(items))
    if tag in ("date", "datetime", "time", "timedelta"):
        import datetime
        kind = getattr(datetime, tag)
        return kind(*[int(p) for p in body]) if tag == "timedelta" else kind.fromisoformat(str(body[0]))
    if tag == "nt":
        import collections
        name, fields, items = body
        try:
            kind = collections.namedtuple(str(name), [str(f) for f in fields])
        except ValueError:
            return tuple(_decode(i, remote) for i in items)
        return kind(*[_decode(i, remote) for i in items])
    if tag == "fn":
        # A function of the tests passed to the completion (``apply(lambda v: v * 10, xs)``), rebuilt in the server
        # from its code with the completion's globals. Only the server accepts code: the harness never runs any.
        if "globals" not in _SERVER_SIDE:
            raise ValueError("code is accepted by the solution server only")
        import marshal, types
        code, defaults = marshal.loads(bytes.fromhex(body[0])), _decode(body[1], remote)
        return types.FunctionType(code, _SERVER_SIDE["globals"], None, tuple(defaults) if defaults else None)
    if tag == "o":
        name, attributes = body
        kind = type(str(name) if str(name).isidentifier() else "Object", (), {})
        instance = kind()
        for key, value in _decode(attributes, remote).items():
            if type(key) is str and not key.startswith("__"):
                setattr(instance, key, value)
        return instance
    return None


def _decode(v, remote):
    t = type(v)
    if v is None or t is bool or t is int or t is float or t is str:
        return v
    if t is list:
        return [_decode(i, remote) for i in v]
    if t is not dict or len(v) != 1:
        raise ValueError("not plain data")
    (tag, body), = v.items()
    if tag == "d":
        return {_decode(k, remote): _decode(i, remote) for k, i in body}
    if tag in ("b", "ba"):
        return (bytes if tag == "b" else bytearray).fromhex(body)
    if tag == "c":
        return complex(float(body[0]), float(body[1]))
    if tag == "rg":
        return range(*[int(i) for i in body])
    if tag == "r":
        return remote(body)
    if tag not in ("t", "s", "f", "i"):
        return _decode_stdlib(tag, body, remote)
    items = [_decode(i, remote) for i in body]
    kinds = {"t": tuple, "s": set, "f": frozenset, "i": iter}
    return kinds[tag](items)


def _json_reader():
    # JSON text -> value with the C scanner of ``json`` but without importing ``json`` (nor ``re``, its cost).
    import _json

    class Context:
        strict = True
        object_hook = object_pairs_hook = None
        parse_float, parse_int, memo = float, int, {}
        parse_constant = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}.__getitem__

    scan = _json.make_scanner(Context())

    def loads(text):
        value, end = scan(text, 0)
        if text[end:].strip():
            raise ValueError("extra data after the JSON value")
        return value

    return loads


def _channel(rfd, wfd, dumps, loads):
    # Length-prefixed messages over two pipes; ``dumps``/``loads`` turn a message into text and back.
    import os
    # Bound now: the completion may patch builtins and modules of the server before the channel is used.
    read, write, min_, len_, from_bytes = os.read, os.write, min, len, int.from_bytes

    def send(message):
        data = dumps(message).encode("utf-8", "surrogatepass")
        data = len_(data).to_bytes(4, "big") + data
        while data:
            data = data[write(wfd, data):]

    def receive():
        def exact(n):
            chunks, left = [], n
            while left:
                chunk = read(rfd, min_(left, 1 << 20))
                if not chunk:
                    raise EOFError("the other process is gone")
                chunks.append(chunk)
                left -= len_(chunk)
            return b"".join(chunks)

        size = from_bytes(exact(4), "big")
        if size > 32 * 1024 * 1024:
            raise ValueError("message too large")
        return loads(exact(size).decode("utf-8", "surrogatepass"))

    return send, receive
"""

# The server speaks JSON to the harness without importing ``json`` (its import, through ``re``, costs more than the
# rest of the server's start-up): ``_json``'s C string escaper does the only hard part. Requests from the harness
# (trusted, plain data built by ``_encode``) arrive as Python literals and are read with ``eval`` and no builtins.
_SERVER_JSON = """\
def _json_text(x, escape):
    t = type(x)
    if x is None:
        return "null"
    if t is bool:
        return "true" if x else "false"
    if t is int:
        return int.__repr__(x)
    if t is float:
        text = float.__repr__(x)
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}.get(text, text)
    if t is str:
        return escape(x)
    if t is list:
        return "[" + ",".join([_json_text(v, escape) for v in x]) + "]"
    if t is dict:
        return "{" + ",".join([escape(k) + ":" + _json_text(v, escape) for k, v in x.items()]) + "}"
    raise TypeError("not JSON: " + t.__name__)
"""

_SERVER = """
def _serve(rfd, wfd):
    # The solution server, forked from the harness before the harness read the tests or the nonce.
    import os
    from _json import encode_basestring_ascii as escape

    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # stdin held the tests (unread here); stdout and stderr are the sandbox's, not the server's
        os.dup2(null, fd)
    os.close(null)
    eval_, literals = eval, {"__builtins__": {}, "nan": float("nan"), "inf": float("inf")}
    send, receive = _channel(rfd, wfd, lambda m: _json_text(m, escape), lambda text: eval_(text, literals))
    import sys

    exec_, compile_, Base, dict_, fork, waitpid = exec, compile, BaseException, dict, os.fork, os.waitpid
    refs = []

    def keep(x):
        refs.append(x)
        return {"r": len(refs) - 1}

    def encode(x):
        return _encode(x, keep)

    def decode(v):
        return _decode(v, lambda ref: refs[ref])

    request = receive()
    code, header, stdio = request["code"], request["header"], request["stdio"]
    del request
    try:
        compiled = compile_(code, "<completion>", "exec")
    except Base:
        send({"load": "syntax_error"})
        return
    del code
    builtins_ = __builtins__
    ns = {"__name__": "__solution__", "__builtins__": builtins_}
    _SERVER_SIDE["globals"] = ns
    if header:  # the prompt's own helpers (HumanEval's ``poly``), which the completion may use without repeating
        try:
            exec_(compile_(header, "<prompt>", "exec"), ns)
        except Base:
            pass
    if stdio:
        send({"load": "ok", "names": {}})
    else:
        try:
            exec_(compiled, ns)
        except Base:
            send({"load": "load_error"})
            return
        names = {}
        module_type = type(os)
        for name, value in list(ns.items()):
            if name.startswith("__"):
                continue
            t = type(value)
            if t is module_type:  # the harness imports its own copy: the completion may have patched this one
                try:
                    names[name] = {"m": str(value.__name__)}
                except Base:
                    pass
                continue
            if hasattr(t, "__next__") or hasattr(t, "read"):  # a top-level iterator or file stays in the server
                names[name] = keep(value)
                continue
            try:
                names[name] = encode(value)
            except Base:
                names[name] = keep(value)
        send({"load": "ok", "names": names})

    def run_program(text):
        # One run of a stdin/stdout program, in a fresh process: its stdin is ``text``, its stdout comes back.
        data = text.encode("utf-8", "surrogatepass")
        inp = os.memfd_create("stdin")
        out = os.memfd_create("stdout")
        os.write(inp, data)
        os.lseek(inp, 0, 0)
        pid = fork()
        if pid == 0:
            status = 1
            try:
                os.close(rfd)
                os.close(wfd)
                os.dup2(inp, 0)
                os.dup2(out, 1)
                try:
                    exec_(compiled, {"__name__": "__main__", "__builtins__": builtins_})
                    status = 0
                except SystemExit as stop:
                    status = 0 if stop.code in (None, 0) else 1
                try:
                    sys.stdout.flush()
                except Base:
                    status = 1
            except Base:
                pass
            finally:
                os._exit(status)
        os.close(inp)
        _, code = waitpid(pid, 0)
        size = os.lseek(out, 0, 2)
        os.lseek(out, 0, 0)
        chunks, left = [], min(size, 8 * 1024 * 1024)
        while left > 0:
            chunk = os.read(out, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        os.close(out)
        return {"out": b"".join(chunks).decode("utf-8", "replace"), "exit": code}

    while True:
        request = receive()
        try:
            if request["op"] == "run":
                answer = {"value": encode(run_program(request["stdin"]))}
            else:
                target = refs[request["ref"]]
                if request["op"] == "call":
                    args = decode(request["args"])
                    value = target(*args, **decode(request["kwargs"]))
                    answer = {"value": encode(value)}
                    mutable = (list, dict, set, bytearray)
                    # A function that returns nothing works in place (``nums.sort()``, LeetCode's "modify nums
                    # in-place"): the caller sees what the call did to its arguments. One that returns a value
                    # does not send them back, so it cannot also rewrite the list the tests compare it with
                    # (``assert f(xs) == sorted(xs)``).
                    if value is None and any(type(a) in mutable for a in args):
                        answer["args"] = [encode(a) if type(a) in mutable else None for a in args]
                else:
                    answer = {"value": encode(getattr(target, request["name"]))}
        except Base as exc:
            try:
                answer = {"raise": type(exc).__name__}
            except Base:
                answer = {"raise": "Exception"}
            try:  # the message, for tests that check it (``assert "negative" in str(e)``): plain text only
                message = str(exc)
                if type(message) is str:
                    answer["message"] = message[:2000]
            except Base:
                pass
        send(answer)
"""

_HARNESS = (
    _CODEC
    + _SERVER_JSON
    + _SERVER
    + """
def _same_output(got, want):
    # A program's stdout against the expected one: equal line by line (trailing blanks ignored), else token by
    # token, numbers written with a point or an exponent in the expected output within 1e-6 (absolute or relative).
    def lines(text):
        rows = [line.rstrip() for line in text.strip().splitlines()]
        return rows
    if lines(got) == lines(want):
        return True
    got_tokens, want_tokens = got.split(), want.split()
    if len(got_tokens) != len(want_tokens):
        return False
    for a, b in zip(got_tokens, want_tokens):
        if a == b:
            continue
        if not any(c in b for c in ".eE"):
            return False
        try:
            x, y = float(a), float(b)
        except ValueError:
            return False
        if not (abs(x - y) <= 1e-6 or abs(x - y) <= 1e-6 * abs(y)):
            return False
    return True


def _harness():
    import builtins, os, sys, time

    if hasattr(sys, "set_int_max_str_digits"):  # results such as 10**5000 travel as text (the server inherits this)
        sys.set_int_max_str_digits(100_000)
    if not hasattr(builtins, "exit"):  # -S leaves out site's exit() and quit(), which programs end with
        builtins.exit = builtins.quit = sys.exit

    null = os.open(os.devnull, os.O_RDWR)
    # The server is forked first, before anything secret is in this process: the tests and the nonce come on stdin,
    # read below; the server's copy of stdin is closed before it reads anything but the completion's code.
    server_in, to_server = os.pipe()  # (read end, write end)
    from_server, server_out = os.pipe()
    if os.fork() == 0:
        try:
            os.close(to_server)
            os.close(from_server)
            _serve(server_in, server_out)
        finally:
            os._exit(0)
    os.close(server_in)
    os.close(server_out)
    try:
        os.remove(__file__)
    except OSError:
        pass
    try:  # the server runs under the same uid: it must not read this process through /proc/<pid>/mem or ptrace
        import _ctypes

        prctl = _ctypes.dlsym(_ctypes.dlopen(None, 2), "prctl")
        _ctypes.call_function(prctl, (4, 0, 0, 0, 0))  # PR_SET_DUMPABLE, 0
    except Exception:
        pass
    chunks = []
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        chunks.append(chunk)
    os.dup2(null, 0)
    p = _json_reader()(b"".join(chunks).decode("utf-8", "surrogatepass"))
    del chunks
    nonce, units, repeats, header = p["nonce"], p["units"], p["repeats"], p["header"]
    write, exit_, perf_counter = os.write, os._exit, time.perf_counter
    exec_, compile_, repr_, all_, max_ = exec, compile, repr, all, max
    Base = BaseException
    out = os.dup(1)
    os.dup2(null, 1)
    os.dup2(null, 2)

    def finish(text):
        write(out, ("\\n" + nonce + " " + text + "\\n").encode())
        exit_(0)  # no atexit handlers, no waiting for the server

    send, receive = _channel(from_server, to_server, repr_, _json_reader())
    stdio = any(kind == "stdio" for kind, _ in units)
    compiled = []  # before the completion loads: its load is timed
    loads = _json_reader()
    for kind, source in units:
        if kind == "stdio":
            try:
                given, want = loads(source)
                compiled.append((kind, (given + "", want + "")))
            except Base:
                compiled.append(("test", None))
            continue
        try:
            compiled.append((kind, compile_(source, "<test>", "exec")))
        except Base:
            compiled.append((kind, None))
    try:
        header_code = compile_(header, "<prompt>", "exec") if header else None
    except Base:
        header_code = None
    load_start = perf_counter()
    try:
        send({"code": p["code"], "header": header, "stdio": stdio})  # from here on the server runs the completion
    except Base:
        finish("load_error")
    try:
        loaded = receive()
    except Base:
        finish("load_error")
    load_s = perf_counter() - load_start  # work done while loading (a table built at import) is the code's time too
    del p
    if type(loaded) is not dict or loaded.get("load") != "ok":
        load = loaded.get("load") if type(loaded) is dict else None
        finish("syntax_error" if load == "syntax_error" else "load_error")

    class Gone(Exception):
        pass

    class CandidateError(Exception):
        # What the completion raised when its type could steer the tests' own control flow (StopIteration ends a
        # ``map`` or a generator early) or is not an ordinary exception (SystemExit, KeyboardInterrupt...).
        pass

    class Remote:
        # A value of the completion that is not plain data: it can be called and its attributes read (in the
        # server); it equals only itself and has no truth value here.
        __slots__ = ("ref",)

        def __init__(self, ref):
            self.ref = ref

        def __call__(self, *args, **kwargs):
            request = {"op": "call", "ref": self.ref, "args": encode(list(args)), "kwargs": encode(kwargs)}
            return ask(request, args)

        def __getattr__(self, name):
            if name.startswith("__"):
                raise AttributeError(name)
            return ask({"op": "attr", "ref": self.ref, "name": name})

        def __bool__(self):
            raise TypeError("a value of the completion that is not plain data has no truth value")

        def __repr__(self):
            return "<value of the completion>"

    def keep(x):
        if type(x) is Remote:
            return {"r": x.ref}
        attributes = getattr(x, "__dict__", None)
        if type(x) is type(keep) and x.__code__.co_filename == "<test>" and x.__closure__ is None:
            # a function of the tests (``lambda v: v * 10``) passed to the completion: its code, run in the server
            import marshal

            return {"fn": [marshal.dumps(x.__code__).hex(), encode(list(x.__defaults__ or ()))]}
        if type(attributes) is dict and type(x).__module__ == "__tests__":
            # an object of a class the tests define (a TreeNode, a ListNode): a copy of its attributes
            return {"o": [type(x).__name__, encode(attributes)]}
        raise TypeError("only plain data can be passed to the completion, not " + type(x).__name__)

    def encode(x):
        return _encode(x, keep)

    state = {"gone": False, "asked": 0}
    ordinary = (StopIteration, StopAsyncIteration)

    def update(arguments, after):
        # An argument the call changed in place (``nums.sort()``, ``grid[0][0] = 1``): its new content, as data.
        for argument, new in zip(arguments, after):
            if new is None:
                continue
            value = _decode(new, Remote)
            if type(argument) is not type(value):
                continue
            if type(argument) in (list, bytearray):
                argument[:] = value
            else:
                argument.clear()
                argument.update(value)

    def ask(request, arguments=()):
        state["asked"] += 1
        if state["gone"]:
            raise Gone("the completion's process is gone")
        try:
            send(request)
            answer = receive()
            if "value" in answer:
                if type(answer.get("args")) is list:
                    update(arguments, answer["args"])
                return _decode(answer["value"], Remote)
            name, message = answer["raise"], answer.get("message")
        except (OSError, EOFError, ValueError, KeyError, TypeError, RecursionError, AttributeError) as exc:
            if isinstance(exc, (OSError, EOFError)):
                state["gone"] = True
            raise Gone("no usable answer from the completion's process") from None
        kind = getattr(builtins, name, None) if type(name) is str else None
        if not (isinstance(kind, type) and issubclass(kind, Exception)) or issubclass(kind, ordinary):
            kind = CandidateError
        try:
            error = kind(message if type(message) is str else "raised by the completion")
        except Base:
            error = CandidateError("raised by the completion: " + str(name))
        raise error

    def run_program(text):
        answer = ask({"op": "run", "stdin": text})
        if type(answer) is not dict or type(answer.get("out")) is not str or answer.get("exit") != 0:
            raise CandidateError("the program failed")
        return answer["out"]

    ns = {"__name__": "__tests__", "__builtins__": builtins}
    names = set()
    import sys

    stdlib = sys.stdlib_module_names - {"antigravity", "this", "idlelib", "tkinter", "turtle", "turtledemo"}
    try:
        for name, value in loaded["names"].items():
            # Only the completion's own names: never a dunder such as ``__builtins__``, never a builtin (a
            # completion's ``abs`` or ``len`` would judge the tests' own checks).
            if not (type(name) is str and name.isidentifier() and not name.startswith("__")):
                continue
            if hasattr(builtins, name):
                continue
            if type(value) is dict and list(value) == ["m"]:
                # A module the completion imported (``math``, which tests may use without importing it): the
                # harness's own copy of the standard library's module, never the completion's (it may be patched).
                module = value["m"]
                if type(module) is str and module.split(".")[0] in stdlib and not module.startswith("_"):
                    try:
                        __import__(module)
                        ns[name] = sys.modules[module]
                    except Base:
                        pass
                continue
            ns[name] = _decode(value, Remote)
            names.add(name)
    except Base:
        finish("load_error")
    del loaded
    if header_code is not None:  # the prompt's helpers, as the prompt wrote them, over any of the completion's
        try:
            exec_(header_code, ns)
        except Base:
            pass
    own = {name: ns[name] for name in names}  # the completion's values, as the tests first see them

    def names_of(code):  # every name a code object (and the functions, lambdas, classes inside it) looks up
        found = set(code.co_names)
        for const in code.co_consts:
            if type(const) is type(code):
                found |= names_of(const)
        return found

    loads_of = [names_of(unit) if kind == "test" and unit is not None else () for kind, unit in compiled]
    clean = dict(ns)

    def one_round():
        # Each test unit: "1" passed, "0" failed, "-" passed without running any of the completion's code (no
        # credit: ``assert True``); setup units before a test count towards it (``x = f(1)``, then ``assert x``).
        ns.clear()
        ns.update(clean)
        bits = []
        state["asked"] = 0
        for index, (kind, unit) in enumerate(compiled):
            # a test that reads a value of the completion (``assert ANSWER == 42``) uses it without a call
            reads = any(name in own and ns.get(name) is own[name] for name in loads_of[index])
            try:
                if kind == "stdio":
                    given, want = unit
                    ok = _same_output(run_program(given), want)
                    if not want.strip():
                        ok = None  # an empty expected output: the empty program would pass
                else:
                    if unit is None:
                        raise SyntaxError("test does not compile")
                    exec_(unit, ns)
                    ok = True
            except Base:
                ok = False
            if kind != "setup":
                if ok is True and state["asked"] == 0 and not reads:
                    ok = None
                bits.append("-" if ok is None else ("1" if ok else "0"))
                state["asked"] = 0
        return bits

    # Every round runs the same units the same way, through the same proxies, and every round is judged; the
    # time is the harness's clock around a round, the slowest round counting (so a completion gains nothing by
    # behaving differently in some rounds, nor by caching results across them), plus the time the completion took
    # to load (so precomputing at import is no way around the clock).
    start = perf_counter()
    bits = one_round()
    slowest = perf_counter() - start
    for _ in range(repeats - 1 if repeats > 1 else 0):
        if "0" in bits or "1" not in bits:
            break
        start = perf_counter()
        again = one_round()
        slowest = max_(slowest, perf_counter() - start)
        bits = ["0" if b == "1" and a != "1" else b for b, a in zip(bits, again)]
    finish("passed " + ("".join(bits) or "-") + " " + repr_(load_s + slowest))


_harness()
"""
)


class CodeTestProgram(NamedTuple):
    """What the sandbox runs for one completion: ``run_python(program.script, stdin=program.stdin)``.

    Attributes:
        script: the harness, the same text for every completion.
        stdin: the completion's code, the test units, the nonce and ``repeats`` (JSON, ASCII), read by the harness
            after it forked the solution server.
    """

    script: str
    stdin: bytes


def build_test_program(
    code: str, units: list[tuple[str, str]], nonce: str, repeats: int = 1, header: str = ""
) -> CodeTestProgram:
    """The program the sandbox runs for one completion (see :class:`CodeTestProgram`).

    Its last line on stdout is ``<nonce> passed <bits> <seconds>`` (``bits``: one ``1`` passed / ``0`` failed /
    ``-`` no credit per test unit), ``<nonce> syntax_error`` or ``<nonce> load_error`` (the completion raised or
    exited at top level, or its top-level names could not be carried over); nothing if the harness died.

    The harness forks the *solution server* before it reads its stdin, so the server's memory never holds the tests
    or the nonce; the server runs the completion's code (after ``header``, the prompt's own helpers, see
    :func:`prompt_header`) and answers calls, and the harness runs the test units with the completion's results
    carried over as plain data (see the comment above ``_CODEC``). A ``stdio`` unit (source: JSON ``[input,
    expected output]``) runs the completion as a program, in a fresh process forked by the server, with that input
    on its stdin; the harness compares its stdout (``_same_output`` in the harness: lines, else tokens, decimals within 1e-6). A test unit that passes without any call
    into the completion's code since the previous test unit (``assert True``) earns no credit (``-``).

    ``repeats``: rounds of all units (at least one); every round is judged (a unit passes only if it passes in
    every round), and ``seconds`` is the harness's ``time.perf_counter`` time of the completion's load plus the
    slowest round, process round trips included, measured where the completion cannot reach it. Rounds after a failing one are skipped.

    What the tests can do with the completion's names: call them with plain-data arguments (or values they
    returned), read attributes of returned objects, and compare, iterate or test the truth of plain results.
    Arguments are copies: a test that expects the completion to mutate its argument in place fails. Top-level names
    of the completion that shadow a builtin (``abs``, ``len``...), dunder names, and names ``header`` defines are not
    carried over to the tests (the tests get the real builtins and the prompt's own helpers).
    """
    payload = {"nonce": str(nonce), "code": str(code), "units": [[str(k), str(u)] for k, u in units]}
    payload["repeats"] = int(repeats)
    payload["header"] = str(header or "")
    return CodeTestProgram(_HARNESS, json.dumps(payload).encode("ascii"))


def parse_test_output(result: ExecResult, nonce: str) -> tuple[str, list[bool], float | None]:
    """``(outcome, passed, seconds)`` from a test program's result.

    ``outcome`` is ``timeout``, ``syntax_error``, ``load_error``, ``passed`` or ``no_result`` (crash, early exit,
    memory or output limit); ``passed`` holds one bool per credited test for ``passed`` (tests that ran none of the
    completion's code are left out); ``seconds`` the time of the slowest round.
    """
    if result.status is ExecStatus.TIMEOUT:
        return "timeout", [], None
    prefix = nonce + " "
    lines = [line[len(prefix) :] for line in result.stdout.splitlines() if line.startswith(prefix)]
    if not lines:
        return "no_result", [], None
    fields = lines[-1].split()
    if fields[0] in ("syntax_error", "load_error"):
        return fields[0], [], None
    if fields[0] == "passed" and len(fields) == 3 and set(fields[1]) <= {"0", "1", "-"}:
        try:
            return "passed", [bit == "1" for bit in fields[1] if bit != "-"], float(fields[2])
        except ValueError:
            pass
    return "no_result", [], None


def _cpu_seconds(timeout_s: float) -> int:
    return max(1, math.ceil(timeout_s) + 1)


def _run_tests(
    codes: list[str],
    units: list[list[tuple[str, str]]],
    *,
    timeout_s: float,
    repeats: int,
    max_workers: int | None,
    headers: list[str] | None = None,
) -> list[tuple[str, list[bool], float | None]]:
    """Run each ``codes[i]`` against ``units[i]`` (after ``headers[i]``) in parallel; parsed outcomes in order."""
    nonces = [secrets.token_hex(16) for _ in codes]
    headers = headers if headers is not None else [""] * len(codes)
    programs = [
        build_test_program(c, u, n, repeats, h) for c, u, n, h in zip(codes, units, nonces, headers, strict=True)
    ]
    results = run_many(
        [program.script for program in programs],
        stdins=[program.stdin for program in programs],
        max_workers=max_workers,
        timeout_s=timeout_s,
        cpu_s=_cpu_seconds(timeout_s),
    )
    parsed = []
    for result, nonce in zip(results, nonces, strict=True):
        if result.status is ExecStatus.SETUP_ERROR:
            logger.warning("code reward: the sandbox failed: %s", result.stderr)
            parsed.append(("setup_error", [], None))
        else:
            parsed.append(parse_test_output(result, nonce))
    return parsed


# ----------------------------------------------------------------------------------------------------------------
# code_tests


class CodeTestsReward:
    """Share of the row's tests that the completion's code passes, run in the sandbox.

    Call: ``(completions, tests=[...], entry_point=[...] (optional), prompts=[...] (optional: TRL passes them; their
    header, :func:`prompt_header`, is kept for the tests), **ignored) -> list[float | None]``; see
    :func:`split_tests` for the test shapes. Per completion: passed tests / credited tests in [0, 1] (a test that
    runs none of the completion's code earns no credit; none credited: 0.0); ``TIMEOUT_REWARD`` (-0.1) when the run
    hits ``timeout_s``; 0.0 for a syntax error, code that raises at top level, a crash or an early exit; ``None``
    where the row has no tests it can read (:func:`why_tests_unreadable`) or the sandbox itself failed. All
    completions of a call run in parallel (:func:`~grpo_core.sandbox.box.run_many`).

    Raises:
        ValueError: (on call) the ``tests`` column is missing or a column has the wrong length.
    """

    def __init__(self, timeout_s: float = 5.0, max_workers: int | None = None, name: str = "code_tests") -> None:
        self.timeout_s = float(timeout_s)
        self.max_workers = max_workers
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        tests = column_values(self.__name__, "tests", kwargs, n, required=True)
        entry_points = column_values(self.__name__, "entry_point", kwargs, n, required=False)
        rewards: list[float | None] = [None] * n
        todo = [(i, split_tests(t, e)) for i, (t, e) in enumerate(zip(tests, entry_points, strict=True))]
        todo = [(i, u) for i, u in todo if u]
        codes = [extract_code(completion_text(completions[i])) for i, _ in todo]
        headers = _headers(kwargs, entry_points, n)
        outcomes = _run_tests(
            codes,
            [u for _, u in todo],
            timeout_s=self.timeout_s,
            repeats=0,
            max_workers=self.max_workers,
            headers=[headers[i] for i, _ in todo],
        )
        for (i, _), (outcome, passed, _seconds) in zip(todo, outcomes, strict=True):
            if outcome == "timeout":
                rewards[i] = TIMEOUT_REWARD
            elif outcome == "passed":
                rewards[i] = sum(passed) / len(passed) if passed else 0.0
            elif outcome != "setup_error":
                rewards[i] = 0.0
        return rewards


def make_code_tests(timeout_s: float = 5.0) -> CodeTestsReward:
    """Build ``code_tests``.

    Raises:
        ValueError: ``timeout_s`` is not a positive finite number.
    """
    _check_timeout(timeout_s)
    return CodeTestsReward(timeout_s=timeout_s)


def _check_timeout(timeout_s: float) -> None:
    if not math.isfinite(timeout_s) or timeout_s <= 0:
        raise ValueError(f"parameter 'timeout_s': must be a finite number > 0, got {timeout_s!r}")


# ----------------------------------------------------------------------------------------------------------------
# code_runtime


class CodeRuntimeReward:
    """How fast the completion's code passes its tests, relative to a reference: ``clip(t_ref / t, 0, 1)``.

    ``t`` is the harness's ``time.perf_counter`` time of a round of the test units, run through the proxies
    (interpreter start-up and the completion's top-level code excluded, process round trips included), the slowest
    of ``repeats`` rounds, each of which must pass every test (so behaving differently in some rounds, caching
    across rounds or faking a clock gains nothing); both times get
    ``RUNTIME_SMOOTHING_S`` (0.1 ms) added. ``t_ref`` is the row's ``reference_runtime_s`` (seconds) when given,
    else the time of its ``reference_solution`` (or ``canonical_solution``) column run the same way, cached per
    (solution, tests) text for the life of this object.

    Noise: timings of a few milliseconds vary by tens of percent between runs, more when the machine is busy (the
    batch runs in parallel, and training shares the CPU); treat this as a coarse signal that separates
    asymptotically slow code (e.g. quadratic vs linear) from fast code, not as a micro-benchmark.

    Call: ``(completions, tests=[...], entry_point=..., reference_runtime_s=... | reference_solution=... |
    canonical_solution=..., **ignored) -> list[float | None]``. 0.0 where the code does not pass all its tests
    (timeouts included); ``None`` where the row has no tests, no reference, a reference that fails its tests, or
    the sandbox failed.

    Raises:
        ValueError: (on call) the ``tests`` column is missing or a column has the wrong length.
    """

    def __init__(
        self,
        timeout_s: float = 5.0,
        repeats: int = 3,
        max_workers: int | None = None,
        name: str = "code_runtime",
    ) -> None:
        self.timeout_s = float(timeout_s)
        self.repeats = int(repeats)
        self.max_workers = max_workers
        self.__name__ = name
        self._reference_cache: dict[tuple[str, str, str], float | None] = {}

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        n = len(completions)
        tests = column_values(self.__name__, "tests", kwargs, n, required=True)
        entry_points = column_values(self.__name__, "entry_point", kwargs, n, required=False)
        given = column_values(self.__name__, "reference_runtime_s", kwargs, n, required=False)
        references = column_values(self.__name__, "reference_solution", kwargs, n, required=False)
        canonical = column_values(self.__name__, "canonical_solution", kwargs, n, required=False)

        headers = _headers(kwargs, entry_points, n)
        rows: list[tuple[int, list[tuple[str, str]], float | None, tuple[str, str, str] | None]] = []
        for i in range(n):
            units = split_tests(tests[i], entry_points[i])
            if not units:
                continue
            ref_time = _positive_float(given[i])
            ref_key = None
            if ref_time is None:
                solution = references[i] if references[i] else canonical[i]
                if not solution:
                    continue
                ref_key = (str(solution), json.dumps(units), headers[i])
            rows.append((i, units, ref_time, ref_key))

        # Completions and not-yet-cached references run in one parallel batch.
        missing = sorted({key for *_, key in rows if key is not None and key not in self._reference_cache})
        codes = [extract_code(completion_text(completions[i])) for i, *_ in rows] + [key[0] for key in missing]
        units = [u for _, u, *_ in rows] + [json.loads(key[1]) for key in missing]
        outcomes = _run_tests(
            codes,
            units,
            timeout_s=self.timeout_s,
            repeats=self.repeats,
            max_workers=self.max_workers,
            headers=[headers[i] for i, *_ in rows] + [key[2] for key in missing],
        )
        if len(self._reference_cache) > 4096:
            self._reference_cache.clear()
        for key, (outcome, passed, seconds) in zip(missing, outcomes[len(rows) :], strict=True):
            self._reference_cache[key] = seconds if outcome == "passed" and passed and all(passed) else None

        rewards: list[float | None] = [None] * n
        for (i, _, ref_time, ref_key), (outcome, passed, seconds) in zip(rows, outcomes[: len(rows)], strict=True):
            if ref_time is None:
                ref_time = self._reference_cache.get(ref_key)
            if ref_time is None or outcome == "setup_error":
                continue
            if outcome != "passed" or not passed or not all(passed) or seconds is None:
                rewards[i] = 0.0
                continue
            ratio = (ref_time + RUNTIME_SMOOTHING_S) / (seconds + RUNTIME_SMOOTHING_S)
            rewards[i] = min(max(ratio, 0.0), 1.0)
        return rewards

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_reference_cache"] = {}
        return state


def _positive_float(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) and number > 0 else None


def make_code_runtime(timeout_s: float = 5.0, repeats: int = 3) -> CodeRuntimeReward:
    """Build ``code_runtime``.

    Raises:
        ValueError: ``timeout_s`` is not a positive finite number, or ``repeats`` is below 1.
    """
    _check_timeout(timeout_s)
    if repeats < 1:
        raise ValueError(f"parameter 'repeats': must be at least 1, got {repeats!r}")
    return CodeRuntimeReward(timeout_s=timeout_s, repeats=repeats)


# ----------------------------------------------------------------------------------------------------------------
# code_style


class _ViolatedLines(pycodestyle.BaseReport):
    """A pycodestyle report that records the line numbers with a (not ignored) violation."""

    def __init__(self, options: Any) -> None:
        super().__init__(options)
        self.violated: set[int] = set()

    def error(self, line_number: int, offset: int, text: str, check: Any) -> str | None:
        code = super().error(line_number, offset, text, check)
        if code:
            self.violated.add(line_number)
        return code


@functools.lru_cache(maxsize=16)
def _style_guide(max_line_length: int) -> pycodestyle.StyleGuide:
    # config_file=False and parse_argv=False: no user or project configuration changes the score.
    return pycodestyle.StyleGuide(max_line_length=max_line_length, quiet=True, config_file=False, parse_argv=False)


def style_violations(code: str, max_line_length: int = 100) -> set[int]:
    """1-based numbers of the lines of ``code`` with a PEP 8 violation (pycodestyle's default ignore list applies).

    Code that does not tokenize is still checked; pycodestyle reports the tokenizer error (E902) on one line.
    """
    guide = _style_guide(int(max_line_length))
    report = _ViolatedLines(guide.options)
    lines = code.splitlines(keepends=True)
    checker = pycodestyle.Checker(lines=lines, options=guide.options, report=report)
    checker.check_all()
    return report.violated


def style_score(code: str, max_line_length: int = 100) -> float:
    """Share of the non-blank lines of ``code`` without a PEP 8 violation, in [0, 1]; 0.0 for empty code.

    Trailing blank lines are dropped and one final newline added first, so how the code block was cut out of the
    completion does not cost a W391/W292.
    """
    code = code.rstrip() + "\n"
    numbered = [n for n, line in enumerate(code.splitlines(), start=1) if line.strip()]
    if not numbered:
        return 0.0
    bad = style_violations(code, max_line_length)
    return sum(1 for n in numbered if n not in bad) / len(numbered)


class CodeStyleReward:
    """PEP 8 style of the completion's code: share of non-blank lines without a ``pycodestyle`` violation.

    Call: ``(completions, **ignored) -> list[float]``, each in [0, 1]; 0.0 for a completion without code. See
    :func:`style_score`. Code with syntax errors is scored too (pycodestyle works on tokens).
    """

    def __init__(self, max_line_length: int = 100, name: str = "code_style") -> None:
        self.max_line_length = int(max_line_length)
        self.__name__ = name

    def __call__(self, completions: Sequence[Any], **kwargs: Any) -> list[float | None]:
        return [style_score(extract_code(completion_text(c)), self.max_line_length) for c in completions]


def make_code_style(max_line_length: int = 100) -> CodeStyleReward:
    """Build ``code_style``.

    Raises:
        ValueError: ``max_line_length`` is below 20.
    """
    if max_line_length < 20:
        raise ValueError(f"parameter 'max_line_length': must be at least 20, got {max_line_length!r}")
    return CodeStyleReward(max_line_length=max_line_length)


_TIMEOUT_PARAM = RuleParam("timeout_s", "float", 5.0, "wall-clock limit per completion, in seconds")

register(
    RewardRule(
        name="code_tests",
        description=("Share of the row's tests (asserts, HumanEval check, unittest, stdin/stdout, APPS) the completion's "
                     "Python passes in the sandbox (timeout: -0.1)"),
        factory=make_code_tests,
        params=(_TIMEOUT_PARAM,),
        columns=("tests",),
        category="code",
    )
)
register(
    RewardRule(
        name="code_runtime",
        description="For code passing its tests: reference runtime / its runtime, clipped to [0, 1] (noisy)",
        factory=make_code_runtime,
        params=(_TIMEOUT_PARAM, RuleParam("repeats", "int", 3, "timed rounds of the tests; the fastest counts")),
        columns=("tests",),
        category="code",
    )
)
register(
    RewardRule(
        name="code_style",
        description="Share of non-blank code lines without a PEP 8 (pycodestyle) violation",
        factory=make_code_style,
        params=(RuleParam("max_line_length", "int", 100, "longest line allowed (E501)"),),
        category="code",
    )
)
