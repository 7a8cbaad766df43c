"""Tests of the one child-job protocol (grpo_core.child_jobs): the request reaches the worker module as JSON, its
answer comes back; its progress messages and counts come through the progress file in order; a cancel and a
timeout kill the child's whole process group (a grandchild too); a worker that fails, hangs, answers nothing,
answers garbage or answers the error shape raises the job's own error with a message saying so; the job folder never
stays. Real child processes, running small worker modules written into ``tmp_path``."""

from __future__ import annotations

import os
import textwrap
import time
from pathlib import Path

import pytest
from pydantic import BaseModel

from grpo_core.child_jobs.progress import ProgressEvent, ProgressReader, ProgressWriter
from grpo_core.child_jobs.request import ChildJob, ask_worker, start_child
from grpo_core.processes import process_alive

REPO = Path(__file__).resolve().parents[3]

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
    "steps_worker": """
        from grpo_core.child_jobs.answer_file import answer_request

        def answer(request, progress):
            progress("loading")
            for done in range(1, request["n"] + 1):
                progress.report(done=done, total=request["n"], force=True)
            progress.report("scoring", done=request["n"])
            return {"sum": request["n"] * 2}

        answer_request("steps_worker", answer, echo="[steps] ")
    """,
    "raising_worker": """
        from grpo_core.child_jobs.answer_file import answer_request

        def answer(request, progress):
            raise ValueError(f"row {request['row']} has no prompt")

        answer_request("raising_worker", answer)
    """,
    "family_worker": """
        import subprocess, sys, time
        from grpo_core.child_jobs.answer_file import answer_request

        def answer(request, progress):
            grandchild = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
            progress(f"grandchild {grandchild.pid}")
            time.sleep(60)

        answer_request("family_worker", answer)
    """,
}


class JobFailed(RuntimeError):
    pass


@pytest.fixture()
def workers(tmp_path: Path) -> dict[str, str]:
    """The environment that lets a child import the worker modules above (and this checkout's grpo_core)."""
    folder = tmp_path / "workers"
    folder.mkdir()
    for name, source in WORKERS.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(source))
    return {"PYTHONPATH": os.pathsep.join([str(folder), str(REPO)])}


def job(module: str) -> ChildJob:
    return ChildJob(module=module, error=JobFailed, failed="asking the test worker failed",
                    timed_out="the test worker took longer than {timeout_s} s and was stopped",
                    answered="the test worker answered: {error}")


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
        ("raising_worker", r"^the test worker answered: ValueError: row 7 has no prompt$"),
    ],
)
def test_a_failing_worker_raises_the_jobs_error_with_its_output(workers, tmp_path, module, message) -> None:
    with pytest.raises(JobFailed, match=message):
        ask_worker(job(module), {"prompt": "P", "row": 7}, timeout_s=60, env=workers, workdir=tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["workers"]


def test_a_hanging_worker_is_stopped_at_the_limit(workers, tmp_path) -> None:
    started = time.monotonic()
    with pytest.raises(JobFailed, match="^the test worker took longer than 2 s and was stopped$"):
        ask_worker(job("hanging_worker"), {}, timeout_s=2, env=workers, workdir=tmp_path)
    assert time.monotonic() - started < 20
    assert [p.name for p in tmp_path.iterdir()] == ["workers"]


def test_progress_messages_and_counts_arrive_in_order(workers, tmp_path) -> None:
    with start_child(job("steps_worker"), {"n": 3}, timeout_s=60, env=workers, workdir=tmp_path) as running:
        events = [event for batch in running.watch(poll_s=0.05) for event in batch]
        assert events == [ProgressEvent("loading"), *(ProgressEvent(done=i, total=3) for i in (1, 2, 3)),
                          ProgressEvent("scoring", done=3)]
        assert running.latest == ProgressEvent("scoring", done=3, total=3)  # the newest message and count
        assert running.result() == {"sum": 6}
        assert "[steps] loading" in running.log_tail()  # echoed to the log
    assert not running.folder.exists()


def _grandchild(running) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        running.read_progress()
        if (running.latest.message or "").startswith("grandchild "):
            return int(running.latest.message.split()[1])
        assert running.process.poll() is None, running.log_tail()
        time.sleep(0.05)
    raise AssertionError(f"the worker never reported its grandchild:\n{running.log_tail()}")


def test_a_cancel_kills_the_whole_group_and_says_so(workers, tmp_path) -> None:
    with start_child(job("family_worker"), {}, timeout_s=60, env=workers, workdir=tmp_path) as running:
        grandchild = _grandchild(running)
        running.cancel()
        assert list(running.watch(poll_s=0.05)) == [[]]  # the watch ends at once
        with pytest.raises(JobFailed, match="^asking the test worker failed: cancelled$"):
            running.result()
    assert not running.folder.exists()
    deadline = time.monotonic() + 10
    while process_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(grandchild)


def test_a_timeout_kills_the_whole_group(workers, tmp_path) -> None:
    with start_child(job("family_worker"), {}, timeout_s=60, env=workers, workdir=tmp_path) as running:
        grandchild = _grandchild(running)
        running.deadline = time.monotonic()  # the limit is reached now
        assert running.poll() and running.timed_out
        with pytest.raises(JobFailed, match="^the test worker took longer than 60 s and was stopped"):
            running.result()
    deadline = time.monotonic() + 10
    while process_alive(grandchild) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(grandchild)


def test_leaving_the_block_stops_a_running_child(workers, tmp_path) -> None:
    with start_child(job("hanging_worker"), {}, timeout_s=60, env=workers, workdir=tmp_path) as running:
        pass
    assert running.process.poll() is not None and not running.folder.exists()


def test_the_progress_file_is_read_as_untrusted_complete_lines(tmp_path) -> None:
    path = tmp_path / "progress.jsonl"
    reader = ProgressReader(path)
    assert reader.read_new() == []  # no file yet
    writer = ProgressWriter(path)
    writer.report("a   step\nsplit over lines")
    with open(path, "a") as handle:
        handle.write('[1, 2]\nnot json\n{"message": 5, "done": -3, "total": 1e300}\n{"done": true}\n{"done": 2')
    assert reader.read_new() == [ProgressEvent("a step split over lines"), ProgressEvent(done=0),
                                 ProgressEvent()]
    with open(path, "a") as handle:
        handle.write(', "total": 4}\n')  # the half line, completed
    assert reader.read_new() == [ProgressEvent(done=2, total=4)]
    assert reader.latest == ProgressEvent("a step split over lines", done=2, total=4)


def test_counts_alone_are_written_at_most_every_fifth_of_a_second(tmp_path) -> None:
    path = tmp_path / "progress.jsonl"
    writer = ProgressWriter(path)
    for done in range(100):
        writer.report(done=done, total=100)
    writer.report(done=100, total=100, force=True)
    events = ProgressReader(path).read_new()
    assert events[0] == ProgressEvent(done=0, total=100) and events[-1] == ProgressEvent(done=100, total=100)
    assert len(events) < 10


def test_each_job_gets_a_folder_named_after_its_worker() -> None:
    assert job("grpo_core.try_model.worker").folder_prefix == "grpo-try-model-"
    assert job("grpo_core.reward_check.worker").folder_prefix == "grpo-reward-check-"
