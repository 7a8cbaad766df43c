"""Every child job goes through the one protocol of grpo_core/child_jobs/ (docs/architecture.md, "Child jobs"):

* no web half (``grpo_core/<subject>/job.py``) starts, signals or waits for a process itself, nor polls files of
  its own: no subprocess, signal, psutil, tempfile, multiprocessing or ``grpo_core.processes``, no ``os`` process
  call, no ``time.sleep`` call, no job-folder file name;
* each web half with a ``worker.py`` beside it describes its child once, as a ``ChildJob`` whose module is that
  worker;
* each such worker answers through ``answer_request`` (request -> answer, one progress file, one error shape).

Training is the one child outside it (it outlives the web process and reports into the store): its halves are
``training/launcher.py`` and ``training/worker.py``, so no ``job.py`` stands there."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

from grpo_core.child_jobs.request import ANSWER_FILE, PROGRESS_FILE, REQUEST_FILE, ChildJob

CORE = Path(__file__).resolve().parents[3] / "grpo_core"
JOB_FILES = sorted(CORE.glob("*/job.py"))
FORBIDDEN_MODULES = {"subprocess", "signal", "psutil", "tempfile", "multiprocessing", "pty", "asyncio.subprocess",
                     "grpo_core.processes"}
OS_PROCESS_CALLS = {"kill", "killpg", "fork", "forkpty", "system", "popen", "waitpid", "wait", "posix_spawn",
                    "posix_spawnp"} | {f"spawn{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")} | {
                    f"exec{s}" for s in ("l", "le", "lp", "lpe", "v", "ve", "vp", "vpe")}
JOB_FOLDER_FILES = {REQUEST_FILE, ANSWER_FILE, PROGRESS_FILE}


def _problems(path: Path) -> list[str]:
    """What in ``path`` starts, signals or polls a process or the job folder outside grpo_core.child_jobs."""
    problems = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        problems += [f"line {node.lineno}: imports {name}" for name in names
                     if any(name == m or name.startswith(m + ".") for m in FORBIDDEN_MODULES)]
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name):
            owner, attribute = node.func.value.id, node.func.attr
            if (owner == "os" and attribute in OS_PROCESS_CALLS) or (owner == "time" and attribute == "sleep"):
                problems.append(f"line {node.lineno}: calls {owner}.{attribute}")
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in JOB_FOLDER_FILES:
            problems.append(f"line {node.lineno}: names the job folder's {node.value}")
    return sorted(problems, key=lambda p: int(p.split(":")[0].split()[1]))


def test_there_are_web_halves_to_check() -> None:
    assert {p.parent.name for p in JOB_FILES} >= {"preflight", "merge", "rescore", "try_model", "reward_check"}


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: p.parent.name)
def test_no_web_half_starts_or_polls_a_child_itself(path: Path) -> None:
    assert _problems(path) == []


@pytest.mark.parametrize("path", JOB_FILES, ids=lambda p: p.parent.name)
def test_each_web_half_describes_its_own_worker_as_a_child_job(path: Path) -> None:
    subject = path.parent.name
    if not (path.parent / "worker.py").is_file():
        pytest.skip(f"{subject} has no worker")
    module = importlib.import_module(f"grpo_core.{subject}.job")
    jobs = [value for value in vars(module).values() if isinstance(value, ChildJob)]
    assert jobs, f"grpo_core/{subject}/job.py describes no ChildJob"
    assert {job.module for job in jobs} == {f"grpo_core.{subject}.worker"}


@pytest.mark.parametrize("path", [p.parent / "worker.py" for p in JOB_FILES if (p.parent / "worker.py").is_file()],
                         ids=lambda p: p.parent.name)
def test_each_worker_answers_through_the_protocol(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    main = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "main")
    calls = {n.func.id for n in ast.walk(main) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert "answer_request" in calls, f"{path.parent.name}/worker.py's main does not call answer_request"


def test_the_check_sees_what_it_forbids(tmp_path: Path) -> None:
    planted = tmp_path / "job.py"
    planted.write_text("import subprocess\nfrom grpo_core.processes import start_process\nimport os, time\n"
                       "def run():\n    os.killpg(1, 9)\n    time.sleep(1)\n    return 'progress.jsonl'\n")
    assert _problems(planted) == ["line 1: imports subprocess", "line 2: imports grpo_core.processes",
                                  "line 2: imports grpo_core.processes.start_process", "line 5: calls os.killpg",
                                  "line 6: calls time.sleep", "line 7: names the job folder's progress.jsonl"]
