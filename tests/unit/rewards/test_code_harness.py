"""The code harness's modules on their own (grpo_core/rewards/code/harness/): the script the sandbox gets, the value
codec, the pipe protocol and the stdout comparison, tested in-process (the sandboxed runs are in test_rewards_code.py
and tests/rewards/attacks)."""

from __future__ import annotations

import ast
import collections
import datetime
import decimal
import fractions
import os
from importlib import resources

import pytest

from grpo_core.rewards.code.harness import SCRIPT_MODULES, harness_script
from grpo_core.rewards.code.harness.channel import _channel, _json_reader, _json_text
from grpo_core.rewards.code.harness.codec import _decode, _encode
from grpo_core.rewards.code.harness.runner import _same_output


def _top_level_names(source: str) -> set[str]:
    names = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def test_the_script_holds_every_module_without_its_imports_of_the_others_and_ends_with_the_call():
    script = harness_script()
    tree = ast.parse(script)
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    assert imports == [], "the sandbox's interpreter has no grpo_core: module-level imports must be left out"
    assert "grpo_core" not in script
    assert not (isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant)), "no docstring"
    assert ast.unparse(tree.body[-1]) == "_harness()"
    package = resources.files("grpo_core.rewards.code.harness")
    defined = _top_level_names(script)
    for name in SCRIPT_MODULES:
        assert _top_level_names(package.joinpath(f"{name}.py").read_text()) <= defined, name
    assert script.isascii()


def test_names_the_script_uses_are_defined_in_it():
    """Every global a function of the script reads is a builtin or a name the script itself defines."""
    script = harness_script()
    defined = _top_level_names(script)
    builtin_names = set(dir(__builtins__) if not isinstance(__builtins__, dict) else __builtins__)
    code = compile(script, "<harness>", "exec")

    def globals_of(c):
        found = set(c.co_names) if c.co_name != "<module>" else set()
        for const in c.co_consts:
            if isinstance(const, type(c)):
                found |= globals_of(const)
        return found

    # co_names also holds attribute names; keep the ones spelled like the script's private globals
    private = {n for n in globals_of(code) if n.startswith("_") and not n.startswith("__")}
    stdlib_private = {"_json", "_ctypes", "_exit", "_fields", "_SERVER_SIDE"}
    assert private - defined - builtin_names - stdlib_private == set()


class _Point:
    pass


@pytest.mark.parametrize(
    "value",
    [
        None, True, 3, -2.5, "text", [1, [2, 3]], (1, (2,)), {"a": (1, 2), 3: [4]}, {1, 2}, frozenset({3}),
        b"\x00\xff", bytearray(b"ab"), 2 + 3j, range(1, 10, 2), fractions.Fraction(3, 4), decimal.Decimal("1.10"),
        collections.deque([1, 2], maxlen=5), collections.Counter("aab"), collections.OrderedDict(a=1),
        collections.defaultdict(list, {"k": [1]}), collections.namedtuple("P", "x y")(1, 2),
        datetime.date(2024, 2, 29), datetime.timedelta(days=1, seconds=2),
    ],
    ids=repr,
)
def test_plain_data_comes_back_equal_and_of_the_same_type(value):
    kept = []
    decoded = _decode(_encode(value, kept.append), lambda ref: pytest.fail("no reference expected"))
    assert kept == []
    assert decoded == value
    if not hasattr(value, "_fields"):
        assert type(decoded) is type(value)


def test_a_subclass_of_a_builtin_arrives_as_its_base_value_and_other_objects_as_references():
    class Sneaky(int):
        def __eq__(self, other):  # what a completion would send to pass any assert
            return True

        __hash__ = int.__hash__

    refs = []

    def keep(x):
        refs.append(x)
        return {"r": len(refs) - 1}

    assert type(_decode(_encode(Sneaky(5), keep), None)) is int
    point = _Point()
    assert _decode(_encode([point], keep), lambda ref: ("remote", ref)) == [("remote", 0)]
    assert refs == [point]


def test_decode_refuses_what_is_not_plain_data_and_code_outside_the_server():
    with pytest.raises(ValueError, match="not plain data"):
        _decode({"t": [1], "s": [2]}, None)
    with pytest.raises(ValueError, match="solution server only"):
        _decode({"fn": ["00", []]}, None)


def test_a_message_crosses_the_pipes_from_the_server_writer_to_the_harness_reader():
    r, w = os.pipe()
    try:
        send, _ = _channel(r, w, lambda m: _json_text(m, __import__("_json").encode_basestring_ascii), None)
        _, receive = _channel(r, w, None, _json_reader())
        message = {"value": [1, 2.5, "é\n", None, True, {"t": [float("inf")]}]}
        send(message)
        assert receive() == message
    finally:
        os.close(r)
        os.close(w)


@pytest.mark.parametrize(
    ("got", "want", "same"),
    [
        ("1 2\n3\n", "1 2\n3", True),
        ("1 2  \n", "1 2", True),
        ("0.3333333", "0.33333333", True),
        ("0.34", "0.33333333", False),
        ("3", "3.0", True),
        ("3.0", "3", False),  # only the expected output's decimals allow a tolerance
        ("1 2", "1 2 3", False),
        ("yes", "YES", False),
    ],
)
def test_program_output_is_compared_by_lines_then_by_tokens(got, want, same):
    assert _same_output(got, want) is same
