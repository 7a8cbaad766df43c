"""Tests of the import rules (docs/architecture.md, "Rules"): the web process never imports torch, transformers, TRL or PEFT;
``grpo_core`` outside the child side (the engine, ``grpo_core/engine/``, and the child jobs' entry points, files named
``worker.py``) never imports gradio or torch, and no module outside the child side imports ``grpo_core.engine``, a
``worker`` module or a heavy package at module level; ``storage`` imports neither.

The import checks run in a fresh interpreter (``sys.executable -c ...``), since the test process itself has long
imported everything; the module-level rule is read from the source (``ast``). The paths the web process takes at run
time (launch, preflight, try, export, resume, delete) are driven in
``tests/integration/test_web_process_torch_free.py``."""

from __future__ import annotations

import ast
import json
import os
import pkgutil
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import grpo_core

REPO = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "transformers", "trl", "peft", "gradio")
WORKER_PACKAGE = "grpo_core.engine"  # imported only by child processes (training, preflight, try the model, ...)
# imported only in a user's own training process (DashboardCallback); the rest of grpo_core.integrations (the wire
# format, the spool and its sender) is web side and held to the rules
INTEGRATION_CALLBACK = "grpo_core.integrations.callback"
WORKER_ONLY = {"torch", "transformers", "trl", "peft", "accelerate", "datasets"}


def _is_child_side(module: str) -> bool:
    """True for the engine's modules and the child jobs' entry points (``grpo_core.<subject>.worker``)."""
    return module == WORKER_PACKAGE or module.startswith(WORKER_PACKAGE + ".") or module.rsplit(".", 1)[-1] == "worker"


def _grpo_core_modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(grpo_core.__path__, "grpo_core.")
        if not _is_child_side(info.name) and info.name != INTEGRATION_CALLBACK
    )


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """The current environment without ``GRPO_*`` settings, pointed at ``tmp_path``, Gradio analytics off."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update({"GRPO_DATA_DIR": str(tmp_path / "data"), "GRADIO_ANALYTICS_ENABLED": "False"})
    return env


def _loaded_after(code: str, tmp_path: Path) -> dict[str, bool]:
    """Run ``code`` in a fresh interpreter; which of :data:`HEAVY` are in ``sys.modules`` afterwards."""
    script = textwrap.dedent(code) + textwrap.dedent(
        f"""
        import json as _json, sys as _sys
        print(_json.dumps({{name: name in _sys.modules for name in {HEAVY!r}}}))
        """
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=_clean_env(tmp_path),
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_module_discovery_finds_the_web_side_modules():
    modules = _grpo_core_modules()
    for expected in (
        "grpo_core.run_config",
        "grpo_core.training.launcher",
        "grpo_core.processes",
        "grpo_core.runs.files",
        "grpo_core.datasets.rows",
        "grpo_core.runs.actions",
        "grpo_core.try_model.job",
        "grpo_core.preflight.report",
        "grpo_core.rewards.plugin",
        "grpo_core.integrations.wire",
        "grpo_core.integrations.spool",
        "grpo_core.integrations.sender",
        "grpo_core.integrations.origin",
    ):
        assert expected in modules
    assert not any(_is_child_side(m) for m in modules) and INTEGRATION_CALLBACK not in modules
    assert "grpo_core.training.worker" not in modules and "grpo_core.preflight.worker" not in modules


def test_web_process_does_not_import_torch_transformers_or_trl(tmp_path):
    loaded = _loaded_after(
        f"""
        from grpo_core.settings import load_settings
        import app.server
        settings = load_settings(data_dir={str(tmp_path / "data")!r})
        ctx = app.server.create_context(settings)
        app.server.build_blocks(ctx)
        import app.cli.integrations, app.api.ingest  # runs recorded from scripts: the HTTP API, token, sync
        import grpo_core.integrations.sender
        app.api.ingest.ingest_routes(ctx.store)
        ctx.store.close()
        """,
        tmp_path,
    )
    assert loaded["gradio"] is True  # the check itself works: the web process does import gradio
    assert {name: loaded[name] for name in ("torch", "transformers", "trl", "peft")} == {
        "torch": False,
        "transformers": False,
        "trl": False,
        "peft": False,
    }


@pytest.mark.parametrize("module", _grpo_core_modules())
def test_grpo_core_web_side_module_imports_no_gradio_or_torch(module, tmp_path):
    loaded = _loaded_after(f"import {module}\n", tmp_path)
    assert [name for name, present in loaded.items() if present] == []


def test_storage_imports_no_torch_or_gradio(tmp_path):
    loaded = _loaded_after(
        f"""
        import storage, storage.tables, storage.store
        store = storage.Store(storage.sqlite_url({str(tmp_path / "s.db")!r}))
        run = store.create_run(name="r", config={{}}, dataset_id=None, max_steps=1)
        store.record_step(run.id, 1, metrics={{"reward": 1.0}}, wall_time=0.0)
        store.close()
        """,
        tmp_path,
    )
    assert [name for name, present in loaded.items() if present] == []


_IMPORT = re.compile(r"^\s*(?:import|from)\s+(gradio|torch)\b", re.MULTILINE)


@pytest.mark.parametrize(("package", "forbidden"), [("grpo_core", {"gradio"}), ("storage", {"gradio", "torch"})])
def test_no_source_file_imports_a_forbidden_package(package, forbidden):
    files = sorted((REPO / package).rglob("*.py"))
    assert files, f"no Python files under {package}/"
    offenders = [
        f"{path.relative_to(REPO)}: import {match}"
        for path in files
        for match in _IMPORT.findall(path.read_text(encoding="utf-8"))
        if match in forbidden
    ]
    assert offenders == []


def _module_level_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, module)`` of every import that runs when the module is imported: statements at module level, in
    class bodies and in ``if``/``try``/``with`` blocks there, not inside functions (those import when called)."""
    found: list[tuple[int, str]] = []

    def visit(statements: list[ast.AST]) -> None:
        for node in statements:
            if isinstance(node, ast.Import):
                found.extend((node.lineno, alias.name) for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.append((node.lineno, node.module))
                found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names)
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    block = getattr(node, field, None)
                    if isinstance(block, list):
                        visit([n for n in block if isinstance(n, ast.stmt | ast.excepthandler)])

    visit(tree.body)
    return found


def _web_side_files() -> list[Path]:
    files = [*(REPO / "app").rglob("*.py"), *(REPO / "storage").rglob("*.py"), *(REPO / "grpo_core").rglob("*.py")]
    engine = REPO / "grpo_core" / "engine"
    callback = REPO / "grpo_core" / "integrations" / "callback.py"
    return sorted(path for path in files if engine not in path.parents and path.name != "worker.py" and path != callback)


def test_module_level_import_finder_sees_nested_blocks_but_not_functions():
    tree = ast.parse("import a\nif x:\n    from b import c\ntry:\n    import d\nexcept E:\n    import e\n"
                     "class K:\n    import f\ndef g():\n    import h\n")
    assert sorted(m for _, m in _module_level_imports(tree)) == ["a", "b", "b.c", "d", "e", "f"]


def test_no_module_outside_the_child_side_imports_it_or_a_heavy_package_at_module_level():
    files = _web_side_files()
    assert REPO / "grpo_core" / "training" / "launcher.py" in files and REPO / "app" / "server.py" in files
    offenders = []
    for path in files:
        for line, module in _module_level_imports(ast.parse(path.read_text(encoding="utf-8"))):
            top = module.split(".")[0]
            if (module.startswith("grpo_core.") and _is_child_side(module)) or top in WORKER_ONLY:
                offenders.append(f"{path.relative_to(REPO)}:{line}: import {module}")
    assert offenders == []
