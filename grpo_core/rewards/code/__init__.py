"""Code reward rules: run the completion's Python against the row's tests in the sandbox, time it, check its style.

Rules (category ``code``):

* ``code_tests``: share of the row's tests passed; -0.1 on timeout; 0.0 on a syntax error; ``None`` without tests.
* ``code_runtime``: for code passing all its tests, ``reference time / its time`` clipped to [0, 1].
* ``code_style``: share of non-blank lines without a PEP 8 violation (``pycodestyle``).

The code of a completion is the last fenced block tagged ``python``/``py``/``python3`` or untagged
(an unclosed last fence, as in a truncated generation, counts), else the whole completion (:func:`~grpo_core.rewards.code.extract.extract_code`).

Tests (the ``tests`` column), see :func:`~grpo_core.rewards.code.units.split_tests` and ``docs/rewards-code.md``:

* HumanEval (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", arXiv 2107.03374): the source
  of a ``check(candidate)`` function plus an ``entry_point`` column naming the function under test. Each
  top-level statement of ``check``'s body that contains an ``assert`` is one test; other statements run in order.
* A list of assert statements, or a string of them (one statement per test; JSON-encoded lists accepted);
  ``unittest.TestCase`` methods and pytest-style ``def test_*()`` functions.
* stdin/stdout tests: ``[{"input", "output"}]`` (CodeContests, open-r1) and APPS's ``input_output`` JSON
  (Hendrycks et al. 2021, "Measuring Coding Challenge Competence With APPS", arXiv 2105.09938), call-based with
  ``fn_name`` or programs run once per test in a fresh process.

The prompt's own helpers (its header, :func:`~grpo_core.rewards.code.extract.prompt_header`: HumanEval/32's ``poly``) run before the completion and,
in the tests' namespace, after its names, so the tests always call the prompt's versions. A test unit that passes
without running any of the completion's code earns no credit (``assert True``).

How a test program runs (see :func:`~grpo_core.rewards.code.program.build_test_program` and the harness's own
modules, :mod:`grpo_core.rewards.code.harness`): the harness (the script the sandbox runs) forks the
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

Modules: :mod:`~grpo_core.rewards.code.correctness` (``code_tests``), :mod:`~grpo_core.rewards.code.runtime`
(``code_runtime``), :mod:`~grpo_core.rewards.code.style` (``code_style``), :mod:`~grpo_core.rewards.code.extract` (the
completion's code, the prompt's header), :mod:`~grpo_core.rewards.code.units` (tests -> units),
:mod:`~grpo_core.rewards.code.program` (one completion's test program and its result),
:mod:`~grpo_core.rewards.code.harness` (the program the sandbox runs). Importing this package registers the rules.
"""

from grpo_core.rewards.code import correctness, runtime, style  # noqa: F401  (each registers its rule on import)
