"""Tests of the one request/answer round trip of the web halves of jobs (grpo_core.child_jobs.request): the request reaches
the worker module as JSON, its answer comes back, and a worker that fails, hangs, answers nothing or answers garbage
raises the job's own error with a message saying so; the temporary folder never stays. Real child processes, running
small worker modules written into ``tmp_path``."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from grpo_core.child_jobs.request import ChildJob, ask_worker

WORKERS = {
    "echo_worker": """
        import json, sys
        request, out = sys.argv[1], sys.argv[3]
        print("working on", request)
        data = json.loads(open(request).read())
        open(out, "w").write(json.dumps({"got": data, "argv": sys.argv[2]}))
    """,
    "failing_worker": """
        print("a line the user should see")
        raise SystemExit("worker gave up: no GPU")
    """,
    "silent_worker": """
        print("exits 0 but writes no answer")
    """,
    "garbage_worker": """
        import sys
        open(sys.argv[3], "w").write("{not json")
    """,
    "hanging_worker": """
        import time
        time.sleep(60)
    """,
}


class JobFailed(RuntimeError):
    pass


@pytest.fixture()
def workers(tmp_path: Path) -> dict[str, str]:
    """The environment that lets a child import the worker modules above."""
    folder = tmp_path / "workers"
    folder.mkdir()
    for name, source in WORKERS.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return {"PYTHONPATH": str(folder)}


def job(module: str) -> ChildJob:
    return ChildJob(module=module, error=JobFailed, failed="asking the test worker failed",
                     timed_out="the test worker took longer than {timeout_s} s and was stopped")


class Request(BaseModel):
    prompt: str
    seed: int


@pytest.mark.parametrize("request_", [{"prompt": "P", "when": Path("/x")}, Request(prompt="P", seed=3)])
def test_the_request_goes_in_as_json_and_the_answer_comes_back(workers, tmp_path, request_) -> None:
    answer = ask_worker(job("echo_worker"), request_, timeout_s=60, env=workers, workdir=tmp_path)
    expected = request_.model_dump() if isinstance(request_, BaseModel) else {"prompt": "P", "when": "/x"}
    assert answer == {"got": expected, "argv": "--out"}
    assert [p.name for p in tmp_path.iterdir()] == ["workers"]  # the request's folder is gone


@pytest.mark.parametrize(
    ("module", "message"),
    [
        ("failing_worker", r"^asking the test worker failed \(exit status 1\):\n(.|\n)*worker gave up: no GPU"),
        ("silent_worker", r"^asking the test worker failed \(exit status 0\):\nexits 0 but writes no answer"),
        ("garbage_worker", r"^asking the test worker failed: its answer is not JSON"),
        ("not_a_module_anywhere", r"No module named not_a_module_anywhere"),
    ],
)
def test_a_failing_worker_raises_the_jobs_error_with_its_output(workers, tmp_path, module, message) -> None:
    with pytest.raises(JobFailed, match=message):
        ask_worker(job(module), {"prompt": "P"}, timeout_s=60, env=workers, workdir=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["workers"]


def test_a_hanging_worker_is_stopped_at_the_limit(workers, tmp_path) -> None:
    started = time.monotonic()
    with pytest.raises(JobFailed, match="^the test worker took longer than 2 s and was stopped$"):
        ask_worker(job("hanging_worker"), {}, timeout_s=2, env=workers, workdir=tmp_path)
    assert time.monotonic() - started < 20
    assert [p.name for p in tmp_path.iterdir()] == ["workers"]


def test_each_job_gets_a_folder_named_after_its_worker() -> None:
    assert job("grpo_core.try_model.worker").folder_prefix == "grpo-try-model-"
    assert job("grpo_core.reward_check.worker").folder_prefix == "grpo-reward-check-"
