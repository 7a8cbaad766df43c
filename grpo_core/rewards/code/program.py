"""One completion's test program for the sandbox (the harness script plus its stdin), and its result read back.

The harness itself is :mod:`grpo_core.rewards.code.harness`; :func:`run_tests` runs a batch of programs in parallel.
"""

from __future__ import annotations

import json
import logging
import math
import secrets
from typing import NamedTuple

from grpo_core.rewards.code.harness import harness_script
from grpo_core.sandbox.box import ExecResult, ExecStatus, run_many

logger = logging.getLogger(__name__)


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
    :func:`~grpo_core.rewards.code.extract.prompt_header`) and answers calls, and the harness runs the test units with the completion's results
    carried over as plain data (see :mod:`grpo_core.rewards.code.harness`). A ``stdio`` unit (source: JSON ``[input,
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
    return CodeTestProgram(harness_script(), json.dumps(payload).encode("ascii"))


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


def run_tests(
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

