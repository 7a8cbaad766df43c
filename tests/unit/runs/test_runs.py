"""Tests for resuming, deleting and annotating runs (store, grpo_core.runs.actions, grpo_core.runs.files), the
additive migration of an older store, and the failure texts (grpo_core.runs.failures), on a real SQLite file."""

from __future__ import annotations

import errno
import json
import os

import pytest
from sqlalchemy import text

from grpo_core.runs.actions import RunActionError, delete_run, parse_tags, resume_run
from grpo_core.runs.failures import DISK_FULL, OUT_OF_MEMORY, failure_kind, failure_text
from grpo_core.runs.files import last_checkpoint, list_checkpoints
from grpo_core.training.limits import apply_resource_limits
from storage import CompletionRecord, GroupRecord, RunStatus, Store, StoreError
from storage.migrations import add_missing_columns, missing_columns
from tests.store_helpers import count_groups, record_metrics

NEW_RUN_COLUMNS = ("resume_from", "notes", "tags", "gpus", "provenance")

pytestmark = pytest.mark.backends("sqlite", "postgres")  # tests using the store run on both


def _run(store: Store, name: str = "run", max_steps: int = 6):
    return store.create_run(name=name, config={"max_steps": max_steps}, dataset_id=None, max_steps=max_steps)


def _group(step: int) -> GroupRecord:
    return GroupRecord(
        step=step,
        row_index=step,
        prompt=f"prompt {step}",
        completions=[CompletionRecord(index=i, text=f"c{i}", rewards={"r": 1.0}, total_reward=1.0, advantage=0.0)
                     for i in range(2)],
    )


def _record_steps(store: Store, run_id: int, steps: range) -> None:
    for step in steps:
        record_metrics(store, run_id, step, {"reward": float(step), "loss": 0.1}, wall_time=float(step))
        store.record_groups(run_id, step, [_group(step)])


def _count(store: Store, sql: str, **params) -> int:
    with store.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar_one()


def _finished(store: Store, status: RunStatus = RunStatus.CANCELLED, **fields):
    run = _run(store)
    assert store.claim_run(run.id, worker_pid=None)
    if fields:
        store.update_run(run.id, **fields)
    store.finish_run(run.id, status, error="boom" if status == RunStatus.FAILED else None)
    return store.get_run(run.id)


def _checkpoint(run_folder, step: int, complete: bool = True):
    path = run_folder / "output" / f"checkpoint-{step}"
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text("{}")
    if complete:
        (path / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return path


# ------------------------------------------------------------------------------------------------ migration


def test_a_store_missing_the_new_columns_gets_them_and_keeps_its_rows(settings):
    old = Store(settings.db_url)
    run = _run(old, "from-an-older-version")
    with old.engine.begin() as conn:
        for column in NEW_RUN_COLUMNS:
            conn.execute(text(f"ALTER TABLE runs DROP COLUMN {column}"))
    assert [c for _, c in missing_columns(old.engine)] == list(NEW_RUN_COLUMNS)
    old.close()

    store = Store(settings.db_url)  # the migration runs here
    try:
        assert missing_columns(store.engine) == []
        kept = store.get_run(run.id)
        assert kept.name == "from-an-older-version"
        assert (kept.resume_from, kept.notes, kept.tags, kept.gpus, kept.provenance) == (None, "", [], None, None)
        assert store.annotate_run(run.id, notes="n", tags=["a"]).tags == ["a"]
        assert add_missing_columns(store.engine) == []  # idempotent
    finally:
        store.close()


# ------------------------------------------------------------------------------------------ requeue (store)


@pytest.mark.parametrize("status", [RunStatus.CANCELLED, RunStatus.FAILED])
def test_requeue_drops_the_steps_after_the_checkpoint_and_clears_the_attempt(store, status):
    run = _finished(store, status, worker_pid=4242, phase="training", gpus="0")
    _record_steps(store, run.id, range(1, 6))
    store.request_cancel(run.id)  # no effect on a final run, but the flag must be clear after a requeue anyway

    queued = store.requeue_run(run.id, resume_from="/data/runs/run-00001/output/checkpoint-3", from_step=3)

    assert queued.status == RunStatus.QUEUED
    assert queued.resume_from.endswith("checkpoint-3")
    assert queued.current_step == 3
    assert (queued.error, queued.worker_pid, queued.phase, queued.gpus) == (None, None, None, None)
    assert (queued.started_at, queued.finished_at, queued.cancel_requested) == (None, None, False)
    assert sorted({p.step for p in store.metrics_since(run.id)}) == [1, 2, 3]
    assert store.group_steps(run.id) == [1, 2, 3]
    assert _count(store, "SELECT COUNT(*) FROM completions") == 3 * 2  # no orphans of the dropped groups
    assert store.claim_run(run.id)  # the launcher can start it again


def test_requeue_without_a_checkpoint_starts_over(store):
    run = _finished(store, RunStatus.FAILED)
    _record_steps(store, run.id, range(1, 3))
    queued = store.requeue_run(run.id, resume_from=None, from_step=0)
    assert queued.resume_from is None and queued.current_step == 0
    assert store.metrics_since(run.id) == [] and count_groups(store, run.id) == 0


def test_requeue_refuses_runs_that_are_not_failed_or_cancelled(store):
    queued = _run(store)
    running = _run(store)
    store.claim_run(running.id)
    completed = _finished(store, RunStatus.COMPLETED)
    for run in (queued, running, completed):
        with pytest.raises(StoreError, match="only a failed or cancelled run"):
            store.requeue_run(run.id, resume_from=None, from_step=0)
    with pytest.raises(StoreError, match="no run"):
        store.requeue_run(999, resume_from=None, from_step=0)
    assert store.get_run(completed.id).status == RunStatus.COMPLETED


def test_annotate_run_sets_notes_and_tags_independently(store):
    run = _run(store)
    assert store.annotate_run(run.id, notes="lr too high?").notes == "lr too high?"
    tagged = store.annotate_run(run.id, tags=["baseline", "lr-sweep"])
    assert tagged.tags == ["baseline", "lr-sweep"] and tagged.notes == "lr too high?"
    assert store.annotate_run(run.id).tags == ["baseline", "lr-sweep"]
    with pytest.raises(StoreError):
        store.annotate_run(999, notes="x")


# -------------------------------------------------------------------------------------------- checkpoints


def test_last_checkpoint_skips_incomplete_ones(tmp_path):
    assert last_checkpoint(tmp_path) is None
    _checkpoint(tmp_path, 2)
    _checkpoint(tmp_path, 10)
    _checkpoint(tmp_path, 12, complete=False)  # the worker died while saving it
    (tmp_path / "output" / "checkpoint-x").mkdir()
    assert [c.step for c in list_checkpoints(tmp_path)] == [2, 10]  # numeric order, not text order
    assert last_checkpoint(tmp_path).step == 10
    assert last_checkpoint(tmp_path).path == tmp_path / "output" / "checkpoint-10"


# ----------------------------------------------------------------------------------------- resume (lifecycle)


def test_resume_run_continues_from_the_last_complete_checkpoint(store, settings):
    folder = settings.runs_dir / "run-00001"
    run = _finished(store, RunStatus.FAILED, run_dir=str(folder))
    _record_steps(store, run.id, range(1, 6))
    _checkpoint(folder, 2)
    _checkpoint(folder, 4)
    _checkpoint(folder, 5, complete=False)

    queued = resume_run(store, settings, run.id)

    assert queued.resume_from == str(folder / "output" / "checkpoint-4")
    assert queued.current_step == 4
    assert sorted({p.step for p in store.metrics_since(run.id)}) == [1, 2, 3, 4]


def test_resume_run_without_checkpoints_starts_over_and_refuses_active_runs(store, settings):
    run = _finished(store, RunStatus.CANCELLED)
    assert resume_run(store, settings, run.id).resume_from is None
    with pytest.raises(RunActionError, match="only a cancelled or failed run"):
        resume_run(store, settings, run.id)  # now queued
    with pytest.raises(RunActionError):
        resume_run(store, settings, _finished(store, RunStatus.COMPLETED).id)


def test_resume_waits_for_the_previous_worker_to_exit(store, settings, monkeypatch):
    import grpo_core.runs.actions as lifecycle

    run = _finished(store, RunStatus.CANCELLED, worker_pid=os.getpid())
    monkeypatch.setattr(lifecycle, "_worker_still_exiting", lambda r: r.worker_pid == os.getpid())
    with pytest.raises(RunActionError, match="still exiting"):
        resume_run(store, settings, run.id)
    assert store.get_run(run.id).status == RunStatus.CANCELLED


# ----------------------------------------------------------------------------------------- delete (lifecycle)


def test_delete_run_removes_its_folder_and_rows(store, settings):
    folder = settings.runs_dir / "run-00001"
    run = _finished(store, RunStatus.COMPLETED, run_dir=str(folder))
    _record_steps(store, run.id, range(1, 3))
    _checkpoint(folder, 2)
    (folder / "train.log").write_text("log")

    assert delete_run(store, settings, run.id) == folder.resolve()

    assert not folder.exists()
    assert settings.runs_dir.is_dir()
    with pytest.raises(StoreError):
        store.get_run(run.id)
    assert _count(store, "SELECT COUNT(*) FROM metrics") == 0
    assert _count(store, "SELECT COUNT(*) FROM completions") == 0


def test_delete_run_that_never_started_has_no_folder(store, settings):
    run = _run(store)
    store.request_cancel(run.id)
    assert delete_run(store, settings, run.id) is None
    assert store.list_runs() == []


@pytest.mark.parametrize("where", ["outside", "runs_dir", "parent", "symlink"])
def test_delete_run_refuses_folders_outside_the_runs_dir(store, settings, tmp_path, where):
    elsewhere = tmp_path / "precious"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    folder = {
        "outside": elsewhere,
        "runs_dir": settings.runs_dir,
        "parent": settings.runs_dir / "run-00001" / ".." / "..",
        "symlink": settings.runs_dir / "run-00001",
    }[where]
    if where == "symlink":
        folder.symlink_to(elsewhere, target_is_directory=True)
    run = _finished(store, RunStatus.FAILED, run_dir=str(folder))

    with pytest.raises(RunActionError, match="not a run folder"):
        delete_run(store, settings, run.id)

    assert (elsewhere / "keep.txt").read_text() == "keep"
    assert settings.runs_dir.is_dir()
    assert store.get_run(run.id).status == RunStatus.FAILED  # nothing deleted


def test_delete_run_that_never_started_refuses_a_folder_name_leading_outside(store, settings, tmp_path):
    elsewhere = tmp_path / "precious"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    run = _run(store)
    store.request_cancel(run.id)  # never started: no run_dir recorded, the folder name is computed
    (settings.runs_dir / f"run-{run.id:05d}").symlink_to(elsewhere, target_is_directory=True)

    with pytest.raises(RunActionError, match="outside the runs folder"):
        delete_run(store, settings, run.id)

    assert (elsewhere / "keep.txt").read_text() == "keep"
    assert store.get_run(run.id).status == RunStatus.CANCELLED


def test_delete_run_refuses_active_runs(store, settings):
    running = _run(store)
    store.claim_run(running.id)
    with pytest.raises(RunActionError, match="cancel it"):
        delete_run(store, settings, running.id)
    with pytest.raises(RunActionError, match="cancel it"):
        delete_run(store, settings, _run(store).id)


# ------------------------------------------------------------------------------------------------------ tags


@pytest.mark.parametrize(
    ("typed", "tags"),
    [
        ("", []),
        (None, []),
        ("baseline", ["baseline"]),
        (" a ,b,, a ,B , c d ", ["a", "b", "c d"]),
        ("lr  sweep, LR sweep", ["lr sweep"]),
    ],
)
def test_parse_tags(typed, tags):
    assert parse_tags(typed) == tags


def test_parse_tags_limits():
    with pytest.raises(RunActionError, match="longer than"):
        parse_tags("x" * 41)
    with pytest.raises(RunActionError, match="at most"):
        parse_tags(",".join(f"t{i}" for i in range(21)))


# -------------------------------------------------------------------------------------------------- failures


class _TorchStyleOOM(RuntimeError):
    pass


_TorchStyleOOM.__name__ = "OutOfMemoryError"


def _wrapped(inner: BaseException, outer: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as exc:
            raise outer from exc
    except BaseException as caught:  # noqa: BLE001 - the test builds an exception chain
        return caught


@pytest.mark.parametrize(
    ("exc", "free", "kind"),
    [
        (MemoryError(), None, OUT_OF_MEMORY),
        (MemoryError("Unable to allocate 8.00 GiB for an array"), None, OUT_OF_MEMORY),
        (_TorchStyleOOM("CUDA out of memory. Tried to allocate 2.00 GiB"), None, OUT_OF_MEMORY),
        (OSError(errno.ENOSPC, "No space left on device"), None, DISK_FULL),
        (OSError(errno.EFBIG, "File too large"), None, DISK_FULL),
        (_wrapped(OSError(errno.ENOSPC, "No space left on device"), RuntimeError("save failed")), None, DISK_FULL),
        (RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })"), None, DISK_FULL),
        (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 6976 vs 6868"), 4096, DISK_FULL),
        (RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 6976 vs 6868"), 10**10, None),
        (ValueError("bad reward parameter"), 0, None),
        (RuntimeError("reward service unavailable"), None, None),
    ],
)
def test_failure_kind(exc, free, kind):
    assert failure_kind(exc, free) == kind


def test_failure_text_puts_the_hint_first_and_keeps_the_message():
    text_ = failure_text(MemoryError())
    assert text_.startswith("out of memory:") and text_.endswith("MemoryError (no message)")
    disk = failure_text(OSError(errno.ENOSPC, "No space left on device"))
    assert disk.startswith("disk full:") and "No space left on device" in disk
    plain = failure_text(RuntimeError("reward service unavailable"))
    assert plain == "RuntimeError: reward service unavailable"
    long = failure_text(MemoryError("x" * 10_000), max_chars=500)
    assert len(long) == 500 and long.startswith("out of memory:")


def test_worker_limits_are_whole_megabytes():
    assert apply_resource_limits({}) == []
    with pytest.raises(ValueError, match="GRPO_WORKER_MAX_MEMORY_MB"):
        apply_resource_limits({"GRPO_WORKER_MAX_MEMORY_MB": "lots"})


def test_a_resumed_run_gets_a_fresh_cancel_grace_period(store, settings):
    from grpo_core.training.launcher import Launcher

    launcher = Launcher(store, settings)
    run = _run(store)
    store.claim_run(run.id, worker_pid=os.getpid())
    launcher.cancel(run.id)
    assert run.id in launcher._cancel_seen
    store.finish_run(run.id, RunStatus.CANCELLED)  # it stopped by itself
    launcher.tick()
    assert launcher._cancel_seen == {}  # a later cancel of the resumed run is timed from then, not from now


def test_relative_paths_of_a_run_yaml_are_found_beside_it(tmp_path, monkeypatch):
    from grpo_core.run_config import RunConfig
    from grpo_core.submit.queue import resolve_relative_paths

    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "prompts.jsonl").write_text('{"prompt": "hi"}\n')
    (folder / "my_rewards.py").write_text("def f(completions, **kwargs):\n    return [0.0] * len(completions)\n")
    monkeypatch.chdir(tmp_path)  # neither file is here
    config = RunConfig.model_validate({
        "dataset_path": "prompts.jsonl",
        "rewards": [{"rule": "plugin", "params": {"target": "my_rewards.py:f"}},
                    {"rule": "plugin", "params": {"target": "elsewhere.py:g"}}],
    })
    resolved = resolve_relative_paths(config, folder)
    assert resolved.dataset_path == str(folder / "prompts.jsonl")
    assert resolved.rewards[0].params["target"] == f"{(folder / 'my_rewards.py').resolve()}:f"
    assert resolved.rewards[1].params["target"] == "elsewhere.py:g"  # not beside the YAML either: left as given
