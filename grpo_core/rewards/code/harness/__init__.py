"""The code harness: the program the sandbox runs to test one completion, kept as real, importable module files.

Two processes run it: the *harness* (:mod:`~grpo_core.rewards.code.harness.runner`; it holds the nonce and the tests)
and the *solution server* (:mod:`~grpo_core.rewards.code.harness.server`), which the harness forks before it reads the
nonce and the tests from its stdin (so no copy of them is in the server's memory), and which runs the completion's code
and answers calls. The test units run in the harness; every name they use from the completion is a proxy that sends
the call to the server and gets its result back as plain data (:mod:`~grpo_core.rewards.code.harness.codec`, over
:mod:`~grpo_core.rewards.code.harness.channel`), rebuilt in the harness from builtin types only. A result's own
``__eq__``, ``__bool__`` or ``__hash__`` therefore never runs where the assertion is evaluated, and frame or ``gc``
introspection in the server finds neither the tests nor the nonce. The harness makes itself non-dumpable first, so the
server cannot read its memory or descriptors through ``/proc`` or ``ptrace`` either (same uid).

The sandbox gets one script (:func:`harness_script`): the source of :data:`SCRIPT_MODULES` in that order, read as text,
without their docstrings and their imports of each other (in the script all share one namespace), then the call
``_harness()``. The modules use the standard library only and import it inside their functions; their names keep a
leading underscore, as the completion's code shares the server's process with them.
"""

from __future__ import annotations

import ast
import functools
from importlib import resources

SCRIPT_MODULES = ("codec", "channel", "server", "runner")
"""The harness's modules, in the order the script defines them."""


def _script_part(source: str) -> str:
    """``source`` without its module docstring and its ``from grpo_core...`` imports (the script's own names)."""
    lines = source.splitlines(keepends=True)
    dropped: set[int] = set()
    for index, node in enumerate(ast.parse(source).body):
        docstring = index == 0 and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        if docstring or (isinstance(node, ast.ImportFrom) and (node.level or str(node.module).startswith("grpo_core"))):
            dropped.update(range(node.lineno - 1, (node.end_lineno or node.lineno)))
    return "".join(line for number, line in enumerate(lines) if number not in dropped).strip("\n") + "\n"


@functools.cache
def harness_script() -> str:
    """The harness as the one script the sandbox runs (the same text for every completion).

    Raises:
        SyntaxError: a harness module does not parse (a broken installation).
    """
    package = resources.files(__name__)
    parts = [_script_part(package.joinpath(f"{name}.py").read_text(encoding="utf-8")) for name in SCRIPT_MODULES]
    return "\n\n".join(parts) + "\n\n_harness()\n"
