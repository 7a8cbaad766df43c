"""The tools that ship: functions a policy may call in an agentic GRPO run (TRL's ``GRPOTrainer(tools=[...])``).

A TRL tool is a plain function with type hints and a Google-style docstring (``transformers.utils.get_json_schema``
renders it into the prompt); TRL calls it with the arguments the model wrote and records its ``str`` result as the
tool message, or ``{"error": ...}`` when it raises (``GRPOTrainer._tool_call_loop``). Every library tool bounds its
own work, so that a call that would hang or blow up comes back as a failed call, never a stalled run:

* :func:`calculator`: arithmetic on numbers, read with :mod:`ast` (no ``eval``): ``+ - * / // % **``, unary
  signs and parentheses; exponents, operand sizes and the expression's length are bounded.
* :func:`python`: runs model-written code **only in the sandbox** (:func:`grpo_core.sandbox.box.run_python`: no
  network, a private file system, CPU, memory, output and wall-clock limits) and returns its output; a timeout or
  an error is raised as a failed call.

:data:`LIBRARY` maps each tool's name to its function; :func:`library_tools` picks them by name (a run config's
``tools``); :data:`LIBRARY_SCHEMAS` holds the JSON schema transformers' ``get_json_schema`` makes of each (what TRL
renders into the prompt; a test keeps them equal), for the web process, which imports no transformers. Imports no
torch.
"""

from __future__ import annotations

import ast
import json
import math
import operator
from collections.abc import Callable, Sequence

#: Longest calculator expression, in characters.
MAX_EXPRESSION_CHARS = 500
#: Largest exponent, and largest absolute operand, the calculator accepts.
MAX_EXPONENT = 1_000
MAX_OPERAND = 10**100
#: Longest program the python tool runs, in characters; its limits in the sandbox.
MAX_CODE_CHARS = 20_000
PYTHON_TIMEOUT_S = 5.0
PYTHON_MEMORY_MB = 256
PYTHON_OUTPUT_BYTES = 8_000

_BINARY: dict[type, Callable] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_UNARY: dict[type, Callable] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


class ToolError(ValueError):
    """A tool refused its arguments or failed; TRL records the message as the failed call's error."""


def _evaluate(node: ast.AST) -> int | float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        value = node.value
    elif isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolError(f"exponent {right} is larger than {MAX_EXPONENT}")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ToolError("division by zero") from None
        except OverflowError:
            raise ToolError("the result is too large") from None
    elif isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        value = _UNARY[type(node.op)](_evaluate(node.operand))
    else:
        raise ToolError(f"only numbers and + - * / // % ** ( ) are allowed, not {type(node).__name__}")
    if isinstance(value, complex) or (isinstance(value, float) and not math.isfinite(value)):
        raise ToolError("the result is not a finite real number")
    if abs(value) > MAX_OPERAND:
        raise ToolError("the result is too large")
    return value


def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression.

    Args:
        expression: numbers with + - * / // % ** and parentheses, e.g. "(12 + 30) * 2".
    """
    if not isinstance(expression, str):
        raise ToolError("expression must be text")
    if len(expression) > MAX_EXPRESSION_CHARS:
        raise ToolError(f"the expression is longer than {MAX_EXPRESSION_CHARS} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        raise ToolError(f"not an arithmetic expression: {exc.__class__.__name__}") from None
    try:
        value = _evaluate(tree)
    except RecursionError:
        raise ToolError("the expression is nested too deeply") from None
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        value = int(value)
    return str(value)


def python(code: str) -> str:
    """Run a Python program and return what it prints.

    Args:
        code: the program; print the result you need.
    """
    from grpo_core.sandbox.box import run_python

    if not isinstance(code, str):
        raise ToolError("code must be text")
    if len(code) > MAX_CODE_CHARS:
        raise ToolError(f"the program is longer than {MAX_CODE_CHARS} characters")
    result = run_python(code, timeout_s=PYTHON_TIMEOUT_S, cpu_s=int(PYTHON_TIMEOUT_S), memory_mb=PYTHON_MEMORY_MB,
                        max_output_bytes=PYTHON_OUTPUT_BYTES)
    if not result.ok:
        detail = (result.stderr.strip().splitlines() or [""])[-1][:500]
        raise ToolError(f"the program ended with {result.status.value}" + (f": {detail}" if detail else ""))
    return result.stdout[:PYTHON_OUTPUT_BYTES]


#: The library's tools by name.
LIBRARY: dict[str, Callable[..., str]] = {"calculator": calculator, "python": python}


def _schema(name: str, description: str, argument: str, argument_description: str) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": description,
        "parameters": {"type": "object", "properties": {argument: {"type": "string",
                                                                   "description": argument_description}},
                       "required": [argument]},
        "return": {"type": "string"}}}


#: Each library tool's JSON schema, as ``transformers.utils.get_json_schema`` builds it from the function's type hints
#: and docstring (``tests/unit/tools/test_tool_library.py`` compares them); TRL's ``apply_chat_template(tools=...)``
#: renders these into the prompt.
LIBRARY_SCHEMAS: dict[str, dict] = {
    "calculator": _schema("calculator", "Evaluate an arithmetic expression.", "expression",
                          'numbers with + - * / // % ** and parentheses, e.g. "(12 + 30) * 2".'),
    "python": _schema("python", "Run a Python program and return what it prints.", "code",
                      "the program; print the result you need."),
}


def library_schemas(names: Sequence[str]) -> list[dict]:
    """The JSON schemas of the library tools named in ``names``, in that order (copies).

    Raises:
        ValueError: a name is not a library tool; the message lists them.
    """
    unknown = [name for name in names if name not in LIBRARY_SCHEMAS]
    if unknown:
        raise ValueError(f"unknown tool {unknown[0]!r}; the library has {sorted(LIBRARY_SCHEMAS)}")
    return [json.loads(json.dumps(LIBRARY_SCHEMAS[name])) for name in names]


def library_descriptions() -> dict[str, str]:
    """Each library tool's name -> the first line of its docstring (what TRL renders into the prompt as the
    tool's description)."""
    return {name: (tool.__doc__ or "").strip().splitlines()[0] for name, tool in LIBRARY.items()}


def library_tools(names: Sequence[str]) -> list[Callable[..., str]]:
    """The library tools named in ``names``, in that order.

    Raises:
        ValueError: a name is not a library tool; the message lists them.
    """
    tools = []
    for name in names:
        if name not in LIBRARY:
            raise ValueError(f"unknown tool {name!r}; the library has {sorted(LIBRARY)}")
        tools.append(LIBRARY[name])
    return tools
