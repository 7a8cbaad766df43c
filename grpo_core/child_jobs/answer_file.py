"""The worker half of a request/answer job (:func:`grpo_core.child_jobs.request.ask_worker` and the jobs like it):
``python -m MODULE REQUEST --out ANSWER [--progress FILE]`` reads the JSON request, answers it, and writes the JSON
answer; an exception becomes an ``{"error": ...}`` answer (its traceback goes to the log), so the web half always
reads a reason."""

from __future__ import annotations

import argparse
import json
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any


def answer_request(prog: str, answer: Callable[[Any, Path | None], Any], argv: Sequence[str] | None = None, *,
                   progress: bool = False) -> int:
    """Parse ``argv``, call ``answer(request, progress file or None)``, write its result; returns 0.

    Args:
        prog: the module as run (``python -m grpo_core.rescore.worker``), for ``--help``.
        progress: accept ``--progress FILE`` (where the worker reports how far it is).
    """
    parser = argparse.ArgumentParser(prog=prog)
    parser.add_argument("request", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    if progress:
        parser.add_argument("--progress", type=Path)
    args = parser.parse_args(argv)
    try:
        result = answer(json.loads(args.request.read_text()), getattr(args, "progress", None))
    except Exception as exc:  # noqa: BLE001 - reported through the answer file
        traceback.print_exc()
        result = {"error": f"{type(exc).__name__}: {exc}"}
    args.out.write_text(json.dumps(result, default=repr))
    return 0
