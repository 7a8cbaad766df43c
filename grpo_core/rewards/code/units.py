"""A row's ``tests`` value as ordered test units: asserts, HumanEval ``check``, unittest/pytest, stdin/stdout, APPS.

See :func:`split_tests` for the shapes read and ``docs/rewards-code.md`` for their sources.
"""

from __future__ import annotations

import ast
import json
import re
import textwrap
from collections.abc import Sequence
from typing import Any

# Tests -> units


def _contains(node: ast.AST, kind: type[ast.stmt]) -> bool:
    """Whether executing ``node`` can run a statement of ``kind`` (those inside function/class definitions do not
    count): ``ast.Assert`` makes a test, ``ast.Return`` control flow a module cannot reproduce."""
    if isinstance(node, kind):
        return True
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
        return False
    return any(_contains(child, kind) for child in ast.iter_child_nodes(node))


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
        units.append(("test" if _contains(stmt, ast.Assert) else "setup", _source(text, stmt)))
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
    * open-r1's ``verification_info`` (:func:`_verification_info_units`);
    * APPS's ``input_output``: ``{"inputs": [...], "outputs": [...]}``; with ``"fn_name"``, call-based: one test unit
      ``<fn_name>(*inputs[i])`` equal to ``outputs[i]`` (or to its only item, tuples read as lists, as APPS's
      checker does; a ``class Solution`` method of that name also serves), else ``stdio`` units.

    Raises:
        ValueError: the shape is recognised but malformed (message says what is wrong).
    """
    if isinstance(value, dict) and "test_cases" in value:
        return _verification_info_units(value)
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


def _verification_info_units(value: dict[str, Any]) -> list[tuple[str, str]]:
    """open-r1's ``verification_info`` (``open-r1/verifiable-coding-problems-python``, read by its ``code_reward``):
    ``{"language": "python", "test_cases": [{"input": ..., "output": ..., "type": "stdin_stdout"}, ...]}``; one
    ``stdio`` unit per test case.

    Raises:
        ValueError: another language than Python, ``test_cases`` not a list of objects with ``input`` and ``output``,
            or a test case of another ``type`` than ``stdin_stdout``.
    """
    language = value.get("language", "python")
    if not isinstance(language, str) or language.strip().lower() not in ("python", "python3", "py"):
        raise ValueError(f"verification_info language {language!r}: code_tests runs Python only")
    cases = value.get("test_cases")
    if not isinstance(cases, list) or not all(isinstance(case, dict) for case in cases):
        raise ValueError("verification_info 'test_cases' must be a list of objects with 'input' and 'output'")
    for index, case in enumerate(cases):
        kind = case.get("type", "stdin_stdout")
        if kind != "stdin_stdout":
            raise ValueError(f"verification_info test case {index}: type {kind!r}, only 'stdin_stdout' is run")
    return _io_units(cases) or []


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
        if _contains(stmt, ast.Return):
            return whole  # control flow a module cannot reproduce
        units.append(("test" if _contains(stmt, ast.Assert) else "setup", _source(tests, stmt)))
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
    * stdin/stdout tests, as objects or their JSON text (see :func:`_io_units`): ``[{"input", "output"}, ...]``,
      APPS's ``{"inputs": [...], "outputs": [...], "fn_name"?: ...}`` and open-r1's ``verification_info``
      ``{"language": "python", "test_cases": [{"input", "output", "type": "stdin_stdout"}, ...]}``.

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

