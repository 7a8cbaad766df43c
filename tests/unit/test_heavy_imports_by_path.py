"""The rule a reader takes from a path (docs/architecture.md, "Rules"): torch, transformers, TRL and PEFT are imported
only in the engine (``grpo_core/engine/``), in a child job's entry point (a file named ``worker.py``) and in
``grpo_core/integrations/``, at every level: module level, inside functions and methods, in ``if``/``try`` blocks, and
through ``importlib.import_module("torch...")`` or ``__import__`` with a literal name.

Read from the source (``ast.walk`` over each whole module), so an import that only runs on some path is seen too;
``tests/unit/test_layering.py`` and ``tests/integration/test_web_process_torch_free.py`` check what the web process
actually loads."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PRODUCT = ("app", "grpo_core", "storage")
HEAVY = frozenset({"torch", "transformers", "trl", "peft"})
ENGINE = REPO / "grpo_core" / "engine"
INTEGRATIONS = REPO / "grpo_core" / "integrations"


def heavy_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every import of a :data:`HEAVY` package anywhere in ``source`` (a module's text).

    Seen: ``import x``, ``from x import y`` (absolute), ``importlib.import_module("x...")``, ``import_module("x")`` and
    ``__import__("x")`` with a literal first argument, at any depth (functions, classes, blocks, lambdas).

    Raises:
        SyntaxError: ``source`` is not Python.
    """
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if name in ("import_module", "__import__") and isinstance(node.args[0].value, str):
                names = [node.args[0].value]
        found.extend((node.lineno, n) for n in names if n.split(".")[0] in HEAVY)
    return found


def may_import_heavy(path: Path) -> bool:
    """True for the files the rule lets import torch: the engine, ``worker.py`` files, ``grpo_core/integrations/``."""
    return path.name == "worker.py" or ENGINE in path.parents or INTEGRATIONS in path.parents


def _product_files() -> list[Path]:
    return sorted(p for top in PRODUCT for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def test_the_finder_sees_imports_at_every_level():
    source = (
        "import os\nimport torch.nn as nn\nfrom transformers import AutoModel\nfrom . import trl\n"
        "def f():\n    import peft\n    class K:\n        def g(self):\n            from trl.trainer import x\n"
        "if True:\n    try:\n        import torchvision\n    except ImportError:\n        import trl\n"
        "h = lambda: __import__('peft.tuners')\nimport importlib\nimportlib.import_module('transformers.utils')\n"
        "import_module('torch')\nimportlib.import_module(name)\nimport_module('numpy')\n"
    )
    assert sorted(heavy_imports(source)) == [  # ast.walk goes breadth first: sorted by line
        (2, "torch.nn"), (3, "transformers"), (6, "peft"), (9, "trl.trainer"), (14, "trl"), (15, "peft.tuners"),
        (17, "transformers.utils"), (18, "torch"),
    ]


def test_the_rule_names_the_engine_the_workers_and_integrations():
    assert may_import_heavy(REPO / "grpo_core" / "engine" / "trainer.py")
    assert may_import_heavy(REPO / "grpo_core" / "preflight" / "worker.py")
    assert may_import_heavy(REPO / "grpo_core" / "training" / "worker.py")
    assert may_import_heavy(REPO / "grpo_core" / "integrations" / "callback.py")
    assert not may_import_heavy(REPO / "grpo_core" / "preflight" / "job.py")
    assert not may_import_heavy(REPO / "grpo_core" / "training" / "launcher.py")
    assert not may_import_heavy(REPO / "app" / "cli" / "main.py")
    assert not may_import_heavy(REPO / "grpo_core" / "engineering.py")


def test_the_walk_finds_the_product_and_both_sides():
    files = _product_files()
    assert REPO / "app" / "server.py" in files and REPO / "storage" / "store.py" in files
    assert any(may_import_heavy(p) and heavy_imports(p.read_text(encoding="utf-8")) for p in files)
    assert sum(not may_import_heavy(p) for p in files) > 100


def test_each_child_job_has_its_halves_side_by_side():
    for subject in ("training", "preflight", "rescore", "try_model", "merge", "reward_check"):
        folder = REPO / "grpo_core" / subject
        assert (folder / "worker.py").is_file(), f"grpo_core/{subject}/ has no worker.py"
        web_half = "launcher.py" if subject == "training" else "job.py"
        assert (folder / web_half).is_file(), f"grpo_core/{subject}/ has no {web_half}"
    assert not (REPO / "grpo_core" / "worker").exists() and not (REPO / "grpo_core" / "jobs").exists()


@pytest.mark.parametrize("path", [p for p in _product_files() if not may_import_heavy(p)],
                         ids=lambda p: p.relative_to(REPO).as_posix())
def test_torch_transformers_trl_and_peft_only_where_the_path_says(path):
    offenders = [f"line {line}: {module}" for line, module in heavy_imports(path.read_text(encoding="utf-8"))]
    assert offenders == [], (f"{path.relative_to(REPO)} imports {offenders}: move that code to grpo_core/engine/ or "
                             "the child job's worker.py")


def _grpo_core_imports(source: str) -> list[tuple[int, str]]:
    """``(line, module)`` of every absolute import of a ``grpo_core`` module in ``source``, at any depth."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names if a.name.startswith("grpo_core."))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("grpo_core."):
            found.append((node.lineno, node.module))
    return found


def test_the_app_never_imports_the_engine_and_only_the_cli_preflight_a_worker():
    """docs/architecture.md: app/ imports grpo_core (never grpo_core.engine); the one child-side module it reaches is
    the preflight's worker, which ``grpo-dashboard preflight`` runs in the CLI's own process (never the web's)."""
    reached = {}
    for path in sorted((REPO / "app").rglob("*.py")):
        for line, module in _grpo_core_imports(path.read_text(encoding="utf-8")):
            if module == "grpo_core.engine" or module.startswith("grpo_core.engine.") or module.endswith(".worker"):
                reached[f"{path.relative_to(REPO).as_posix()}:{line}"] = module
    assert sorted(reached.values()) == ["grpo_core.preflight.worker"], reached
    assert all(place.startswith("app/cli/main.py:") for place in reached)
