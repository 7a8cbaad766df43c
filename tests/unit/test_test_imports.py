"""No test module imports from another test module (docs/architecture.md, "Rules"): what tests share lives in
``tests/helpers.py``, in the other non-test modules of ``tests/`` (tiny_model.py, store_helpers.py, servers.py, ...)
or in conftest.py fixtures. A test module that imports another one runs that module's tests' setup and ties the two
files together; moving or renaming one breaks the other.

Read from the source (``ast.walk``: imports at every level, relative ones resolved against the importing package)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TESTS = REPO / "tests"


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def imported_test_modules(source: str, package: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import in ``source`` that names a test module (a module ``test_*``), with
    ``package`` the importing module's package (``tests.unit.rewards``) to resolve relative imports against.

    Seen: ``import tests.x.test_y``, ``from tests.x.test_y import z``, ``from tests.x import test_y``,
    ``from .test_y import z``, ``from . import test_y``, at any depth.
    """
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names if _is_test_module(alias.name))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            if _is_test_module(module):
                found.append((node.lineno, module))
            found.extend((node.lineno, f"{module}.{alias.name}") for alias in node.names if _is_test_module(alias.name))
    return found


def test_the_finder_sees_every_form():
    source = ("import os\nimport tests.integration.test_worker\nfrom tests.helpers import tiny_config\n"
              "from tests.unit.test_x import _run\nfrom tests.e2e import test_dashboard as dashboard\n"
              "def f():\n    from .test_y import z\n    from . import test_z, helpers\n    from ..tiny_model import m\n")
    assert sorted(imported_test_modules(source, "tests.unit.rewards")) == [
        (2, "tests.integration.test_worker"), (4, "tests.unit.test_x"), (5, "tests.e2e.test_dashboard"),
        (7, "tests.unit.rewards.test_y"), (8, "tests.unit.rewards.test_z"),
    ]


def test_no_test_module_imports_another_test_module():
    files = sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)
    assert TESTS / "helpers.py" in files and TESTS / "integration" / "test_worker.py" in files
    offenders = []
    for path in files:
        package = ".".join(path.relative_to(REPO).with_suffix("").parts[:-1])
        for line, module in imported_test_modules(path.read_text(encoding="utf-8"), package):
            offenders.append(f"{path.relative_to(REPO)}:{line}: imports {module}")
    assert offenders == [], "move what they share to tests/helpers.py or a conftest.py fixture"


def test_unit_tests_mirror_the_source_folders():
    """Every folder of tests/unit/ names a source folder: a subject of grpo_core/, storage/, or a folder of app/."""
    unit = TESTS / "unit"
    for folder in sorted(p for p in unit.rglob("*") if p.is_dir() and p.name != "__pycache__"):
        relative = folder.relative_to(unit)
        source = REPO / relative if relative.parts[0] in ("app", "storage") else REPO / "grpo_core" / relative
        assert source.is_dir(), f"tests/unit/{relative.as_posix()}/ mirrors no source folder ({source.relative_to(REPO)})"
    flat = sorted(p.name for p in unit.glob("test_*.py"))
    assert len(flat) <= 12, f"tests/unit/ holds {len(flat)} modules at its top: file them under their subject"
