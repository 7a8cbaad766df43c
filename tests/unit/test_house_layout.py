"""Tests of the house's layout (docs/architecture.md): a folder per subject, a module per idea.

``grpo_core/``'s top level holds only the cross-cutting modules and the subject folders; no module of the product or its
benchmarks is over 500 lines; every module and package opens with a docstring saying what it is."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "grpo_core", "storage")
#: Held to the same length and docstring rules: the scripts that measure the product are read as often as it is.
MEASURED = ("benchmarks",)
CROSS_CUTTING = {"__init__.py", "settings.py", "run_config.py", "trl_fields.py", "processes.py", "bounded_parse.py"}
MAX_LINES = 500


def _modules() -> list[Path]:
    return sorted(p for top in (*PRODUCT, *MEASURED) for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_the_walk_finds_the_product():
    names = {p.relative_to(REPO).as_posix() for p in _modules()}
    assert {"grpo_core/run_config.py", "storage/store.py", "app/server.py", "grpo_core/training/worker.py",
            "benchmarks/bench_web.py"} <= names


def test_grpo_core_top_level_holds_only_cross_cutting_modules_and_subject_folders():
    top = REPO / "grpo_core"
    modules = {p.name for p in top.glob("*.py")}
    assert modules == CROSS_CUTTING, f"move {sorted(modules - CROSS_CUTTING)} into a subject folder"
    for folder in top.iterdir():
        if folder.is_dir() and folder.name not in ("__pycache__", "data"):  # data/: the TRL fields snapshot (JSON)
            assert (folder / "__init__.py").is_file(), f"{folder.name}/ is a subject folder without a package"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_module_is_at_most_500_lines_and_opens_with_a_docstring(path):
    text = path.read_text()
    lines = text.count("\n") + (not text.endswith("\n") and bool(text))
    assert lines <= MAX_LINES, f"{path.relative_to(REPO)} has {lines} lines: split it by idea"
    if path.name == "__main__.py" or text.strip():
        assert ast.get_docstring(ast.parse(text)), f"{path.relative_to(REPO)} opens without a docstring"
