"""The worker half of every child job (:mod:`grpo_core.child_jobs.request` is the web half):
``python -m grpo_core.<subject>.worker REQUEST --out ANSWER --progress FILE`` reads the JSON request, answers it
while reporting progress through one :class:`~grpo_core.child_jobs.progress.ProgressWriter`, and writes the JSON
answer atomically (a worker killed while writing leaves no half answer). An exception becomes THE error shape,
``{"error": "<type>: <message>"}`` (its traceback goes to the log), so the web half always reads a reason.
"""

from __future__ import annotations

import argparse
import json
import os
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grpo_core.child_jobs.progress import ProgressWriter


def error_answer(exc: BaseException) -> dict[str, str]:
    """The one error shape of an answer: ``{"error": "<exception type>: <message>"}``."""
    return {"error": f"{type(exc).__name__}: {exc}"}


def write_answer(path: Path, answer: Any) -> None:
    """Write ``answer`` as JSON to ``path`` through a temporary file and a rename (values JSON cannot hold are
    written as their ``repr``).

    Raises:
        OSError: the folder cannot be written.
    """
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(answer, default=repr, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, path)


def answer_request(prog: str, answer: Callable[[Any, ProgressWriter], Any], argv: Sequence[str] | None = None, *,
                   echo: str | None = None) -> int:
    """Parse ``argv``, call ``answer(request, progress)``, write its result (or the error shape); returns 0.

    Args:
        prog: the module as run (``python -m grpo_core.rescore.worker``), for ``--help``.
        answer: the worker's function: the request (JSON value) and the job's progress writer; returns the answer
            (a JSON-able value).
        echo: each progress message is also printed to the log after this prefix (``"[preflight] "``); None: not.
    """
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("request", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--progress", type=Path)
    args = parser.parse_args(argv)
    try:
        result = answer(json.loads(args.request.read_text(encoding="utf-8")), ProgressWriter(args.progress, echo=echo))
    except Exception as exc:  # noqa: BLE001 - reported through the answer file
        traceback.print_exc()
        result = error_answer(exc)
    write_answer(args.out, result)
    return 0
