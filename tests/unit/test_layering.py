"""Tests of the import rules (STYLE.md, "Layers"): the web process never imports torch, transformers or TRL;
``grpo_core`` outside the worker side never imports gradio or torch; ``storage`` imports neither.

Each rule is checked in a fresh interpreter (``sys.executable -c ...``), since the test process itself has long
imported everything."""

from __future__ import annotations

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
HEAVY = ("torch", "transformers", "trl", "gradio")
WORKER_SIDE = {"trainer", "recorder", "worker"}  # modules that run in the training subprocess only


def _grpo_core_modules() -> list[str]:
    return sorted(
        info.name
        for info in pkgutil.walk_packages(grpo_core.__path__, "grpo_core.")
        if info.name.rsplit(".", 1)[-1] not in WORKER_SIDE
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
    for expected in ("grpo_core.catalog", "grpo_core.config", "grpo_core.launcher", "grpo_core.rewards.compose"):
        assert expected in modules
    assert not any(m.rsplit(".", 1)[-1] in WORKER_SIDE for m in modules)


def test_web_process_does_not_import_torch_transformers_or_trl(tmp_path):
    loaded = _loaded_after(
        f"""
        from grpo_core.settings import load_settings
        import app.server
        settings = load_settings(data_dir={str(tmp_path / "data")!r})
        ctx = app.server.create_context(settings)
        app.server.build_blocks(ctx)
        ctx.store.close()
        """,
        tmp_path,
    )
    assert loaded["gradio"] is True  # the check itself works: the web process does import gradio
    assert {name: loaded[name] for name in ("torch", "transformers", "trl")} == {
        "torch": False,
        "transformers": False,
        "trl": False,
    }


@pytest.mark.parametrize("module", _grpo_core_modules())
def test_grpo_core_web_side_module_imports_no_gradio_or_torch(module, tmp_path):
    loaded = _loaded_after(f"import {module}\n", tmp_path)
    assert [name for name, present in loaded.items() if present] == []


def test_storage_imports_no_torch_or_gradio(tmp_path):
    loaded = _loaded_after(
        f"""
        import storage, storage.models, storage.store
        store = storage.Store(storage.sqlite_url({str(tmp_path / "s.db")!r}))
        run = store.create_run(name="r", config={{}}, dataset_id=None, max_steps=1)
        store.record_metrics(run.id, 1, {{"reward": 1.0}}, wall_time=0.0)
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
