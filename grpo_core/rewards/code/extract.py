"""Where a completion's code and a prompt's helpers are: the last Python fence of a completion, a prompt's header."""

from __future__ import annotations

import ast
import functools
import re
from typing import Any

from grpo_core.rewards.registry import completion_text

_FENCE = re.compile(r"^[ \t]*```[ \t]*([\w+.-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.DOTALL | re.MULTILINE)
_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}


def extract_code(text: str) -> str:
    """The Python code of a completion.

    The last fenced block tagged ``python``, ``py``, ``python3`` or untagged (blocks in other languages are
    skipped; a last fence without its closing ``````` runs to the end of the text), else the whole text.
    """
    blocks = [m.group(2) for m in _FENCE.finditer(text) if m.group(1).lower() in _PYTHON_TAGS]
    return blocks[-1] if blocks else text


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


def prompt_headers(kwargs: dict[str, Any], entry_points: list[Any], n: int) -> list[str]:
    """The prompt header of each completion (TRL passes the prompts as ``prompts``)."""
    prompts = kwargs.get("prompts")
    if prompts is None or isinstance(prompts, str) or len(prompts) != n:
        prompts = [prompts if isinstance(prompts, str) else None] * n
    return [
        prompt_header(_prompt_text(p), str(e).strip() if e else None) if p else ""
        for p, e in zip(prompts, entry_points, strict=True)
    ]

