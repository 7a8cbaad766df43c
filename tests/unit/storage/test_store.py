"""Tests for storage.store and storage.tables on a real SQLite file and on a real PostgreSQL database: datasets,
the run life cycle, metrics, groups, cascading deletes, concurrent writers and the SQLite pragmas."""

from __future__ import annotations

import math
import threading

import pytest
from sqlalchemy import event, text
from sqlalchemy.exc import IntegrityError

from storage import CompletionRecord, GroupRecord, RunStatus, Store, StoreError
from tests.store_helpers import count_groups, metric_keys, record_metrics

pytestmark = pytest.mark.backends("sqlite", "postgres")


def _add_dataset(store: Store, name: str = "numbers", **overrides):
    fields = {
        "name": name,
        "source_name": f"{name}.jsonl",
        "format": "jsonl",
        "num_rows": 3,
        "columns": ["prompt", "answer"],
        "prompt_kind": "text",
        "path": f"/data/datasets/{name}.jsonl",
    }
    fields.update(overrides)
    return store.add_dataset(**fields)


def _create_run(store: Store, name: str = "run", max_steps: int = 10):
    return store.create_run(
        name=name, config={"model": "m", "max_steps": max_steps}, dataset_id=None, max_steps=max_steps
    )


def _count(store: Store, sql: str, **params) -> int:
    with store.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar_one()


def _group(step: int, row_index: int, advantages: list[float | None], prompt: str | None = None) -> GroupRecord:
    return GroupRecord(
        step=step,
        row_index=row_index,
        prompt=prompt if prompt is not None else f"prompt {row_index}",
        extra={"answer": str(row_index)},
        completions=[
            CompletionRecord(
                index=i,
                text=f"completion {row_index}.{i}",
                rewards={"numeric_answer": float(i), "format_regex": None},
                total_reward=float(i),
                advantage=adv,
                num_tokens=10 + i,
                truncated=i == 0,
            )
            for i, adv in enumerate(advantages)
        ],
    )


# ------------------------------------------------------------------------------------------------- datasets


def test_add_list_find_get_dataset(store):
    first = _add_dataset(store, "first")
    second = _add_dataset(store, "second", columns=["prompt", "tests"], prompt_kind="chat")

    assert [d.name for d in store.list_datasets()] == ["second", "first"]  # newest first
    found = store.find_dataset("second")
    assert found == second
    assert found.columns == ["prompt", "tests"]
    assert found.prompt_kind == "chat"
    assert found.created_at.tzinfo is not None
    assert store.get_dataset(first.id) == first
    assert store.find_dataset("missing") is None


def test_duplicate_dataset_name_is_a_store_error(store):
    _add_dataset(store, "dup")
    with pytest.raises(StoreError, match="dup"):
        _add_dataset(store, "dup", path="/elsewhere.jsonl")
    assert len(store.list_datasets()) == 1


def test_get_unknown_dataset_is_a_store_error(store):
    with pytest.raises(StoreError, match="no dataset with id 99"):
        store.get_dataset(99)


# ------------------------------------------------------------------------------------------------------ runs


def test_create_run_is_queued(store):
    run = _create_run(store, "alpha", max_steps=7)
    assert run.status is RunStatus.QUEUED
    assert run.name == "alpha"
    assert run.config == {"model": "m", "max_steps": 7}
    assert run.max_steps == 7
    assert run.current_step == 0
    assert run.started_at is None and run.finished_at is None
    assert run.cancel_requested is False
    assert store.get_run(run.id) == run


def test_get_unknown_run_is_a_store_error(store):
    with pytest.raises(StoreError):
        store.get_run(12345)


def test_claim_run_is_atomic(store):
    run = _create_run(store)
    assert store.claim_run(run.id, worker_pid=4242) is True
    assert store.claim_run(run.id, worker_pid=1) is False
    claimed = store.get_run(run.id)
    assert claimed.status is RunStatus.RUNNING
    assert claimed.worker_pid == 4242
    assert claimed.started_at is not None and claimed.heartbeat_at is not None


def test_claim_run_from_another_store_instance_loses(store, settings):
    run = _create_run(store)
    other = Store(settings.db_url)
    try:
        assert other.claim_run(run.id) is True
        assert store.claim_run(run.id) is False
    finally:
        other.close()


def test_finish_run_only_once(store):
    run = _create_run(store)
    store.claim_run(run.id)
    assert store.finish_run(run.id, RunStatus.FAILED, error="boom") is True
    assert store.finish_run(run.id, RunStatus.COMPLETED) is False
    finished = store.get_run(run.id)
    assert finished.status is RunStatus.FAILED
    assert finished.error == "boom"
    assert finished.finished_at is not None


@pytest.mark.parametrize("status", [RunStatus.QUEUED, RunStatus.RUNNING, "running"], ids=["queued", "running", "str"])
def test_finish_run_with_non_final_status_is_a_store_error(store, status):
    run = _create_run(store)
    with pytest.raises(StoreError, match="not a final status"):
        store.finish_run(run.id, status)
    assert store.get_run(run.id).status is RunStatus.QUEUED


def test_status_check_constraint_rejects_bogus_status(store):
    run = _create_run(store)
    with pytest.raises(IntegrityError), store.engine.begin() as conn:
        conn.execute(text("UPDATE runs SET status = 'exploded' WHERE id = :id"), {"id": run.id})
    assert store.get_run(run.id).status is RunStatus.QUEUED


def test_update_run_sets_fields_and_rejects_unknown_run(store):
    run = _create_run(store)
    store.update_run(run.id, run_dir="/runs/1", log_path="/runs/1/train.log", phase="loading model")
    updated = store.get_run(run.id)
    assert (updated.run_dir, updated.log_path, updated.phase) == ("/runs/1", "/runs/1/train.log", "loading model")
    with pytest.raises(StoreError):
        store.update_run(run.id + 100, phase="x")


def test_list_runs_filters_by_status(store):
    queued = _create_run(store, "queued")
    running = _create_run(store, "running")
    store.claim_run(running.id)
    assert [r.id for r in store.list_runs()] == [running.id, queued.id]
    assert [r.id for r in store.list_runs([RunStatus.RUNNING])] == [running.id]
    assert [r.id for r in store.list_runs(["queued"])] == [queued.id]
    assert store.list_runs([RunStatus.FAILED]) == []


def test_request_cancel_on_queued_run_cancels_at_once(store):
    run = _create_run(store)
    cancelled = store.request_cancel(run.id)
    assert cancelled.status is RunStatus.CANCELLED
    assert cancelled.finished_at is not None
    assert store.claim_run(run.id) is False  # a cancelled run can no longer be started


def test_request_cancel_on_running_run_sets_the_flag(store):
    run = _create_run(store)
    store.claim_run(run.id)
    assert store.heartbeat(run.id, step=1) is False
    info = store.request_cancel(run.id)
    assert info.status is RunStatus.RUNNING
    assert info.cancel_requested is True
    assert store.heartbeat(run.id, step=2, phase="training") is True
    after = store.get_run(run.id)
    assert after.current_step == 2
    assert after.phase == "training"


def test_cancel_requested_reads_the_flag_without_writing(store):
    run = _create_run(store)
    store.claim_run(run.id)
    before = store.get_run(run.id).heartbeat_at
    assert store.cancel_requested(run.id) is False
    store.request_cancel(run.id)
    assert store.cancel_requested(run.id) is True
    assert store.get_run(run.id).heartbeat_at == before
    assert store.cancel_requested(run.id + 99) is False


def test_request_cancel_racing_a_claim_never_cancels_a_claimed_run(store, settings):
    """The launcher (another connection) claims the run while ``request_cancel`` is under way: right after the
    cancel's first read. Either the claim loses, or the claimed run is asked to stop; never claimed and cancelled."""
    run = _create_run(store)
    launcher = Store(settings.db_url)
    claims: list[bool] = []

    def claim_after_first_read(conn, cursor, statement, parameters, context, executemany):
        if not claims and statement.lstrip().upper().startswith("SELECT"):
            claims.append(launcher.claim_run(run.id, worker_pid=99))

    event.listen(store.engine, "after_cursor_execute", claim_after_first_read)
    try:
        info = store.request_cancel(run.id)
    finally:
        event.remove(store.engine, "after_cursor_execute", claim_after_first_read)
        launcher.close()

    final = store.get_run(run.id)
    assert final == info
    if claims == [True]:
        assert final.status is RunStatus.RUNNING and final.cancel_requested is True
    else:
        assert final.status is RunStatus.CANCELLED and final.worker_pid is None


def test_request_cancel_on_finished_run_changes_nothing(store):
    run = _create_run(store)
    store.claim_run(run.id)
    store.finish_run(run.id, RunStatus.COMPLETED)
    info = store.request_cancel(run.id)
    assert info.status is RunStatus.COMPLETED
    assert info.cancel_requested is False


def test_request_cancel_unknown_run_is_a_store_error(store):
    with pytest.raises(StoreError):
        store.request_cancel(77)


# --------------------------------------------------------------------------------------------------- metrics


def test_record_metrics_stores_nan_and_inf_as_null_and_skips_non_numbers(store):
    run = _create_run(store)
    stored = record_metrics(
        store,
        run.id,
        1,
        {"reward": 0.5, "kl": math.nan, "loss": math.inf, "entropy": -math.inf, "epoch": 1, "note": "hi", "x": [1]},
        wall_time=100.0,
    )
    assert stored == 5
    points = {p.key: p for p in store.metrics_since(run.id)}
    assert set(points) == {"reward", "kl", "loss", "entropy", "epoch"}
    assert points["reward"].value == 0.5
    assert points["kl"].value is None
    assert points["loss"].value is None
    assert points["entropy"].value is None
    assert points["epoch"].value == 1.0
    assert points["reward"].wall_time == 100.0
    assert _count(store, "SELECT count(*) FROM metrics WHERE value IS NULL") == 3


def test_record_metrics_with_nothing_numeric_stores_nothing(store):
    run = _create_run(store)
    assert record_metrics(store, run.id, 1, {"note": "text"}, wall_time=1.0) == 0
    assert store.metrics_since(run.id) == []
    assert store.get_run(run.id).current_step == 0


def test_rerecording_a_step_replaces_its_values(store):
    run = _create_run(store)
    record_metrics(store, run.id, 3, {"reward": 0.1, "kl": 0.2}, wall_time=1.0)
    record_metrics(store, run.id, 3, {"reward": 0.9}, wall_time=2.0)
    assert _count(store, "SELECT count(*) FROM metrics WHERE run_id = :r", r=run.id) == 2
    values = {p.key: p.value for p in store.metrics_since(run.id)}
    assert values == {"reward": 0.9, "kl": 0.2}


def test_record_metrics_advances_current_step_and_never_moves_it_back(store):
    run = _create_run(store)
    record_metrics(store, run.id, 5, {"reward": 1.0}, wall_time=1.0)
    assert store.get_run(run.id).current_step == 5
    record_metrics(store, run.id, 2, {"reward": 1.0}, wall_time=1.0)
    assert store.get_run(run.id).current_step == 5


def test_metrics_since_is_incremental_and_filters_keys(store):
    run = _create_run(store)
    other = _create_run(store, "other")
    for step in range(1, 5):
        record_metrics(store, run.id, step, {"reward": step / 10, "kl": step / 100}, wall_time=float(step))
    record_metrics(store, other.id, 9, {"reward": 9.0}, wall_time=9.0)

    everything = store.metrics_since(run.id)
    assert [(p.step, p.key) for p in everything] == [(s, k) for s in range(1, 5) for k in ("kl", "reward")]
    later = store.metrics_since(run.id, after_step=2)
    assert [(p.step, p.key) for p in later] == [(3, "kl"), (3, "reward"), (4, "kl"), (4, "reward")]
    rewards = store.metrics_since(run.id, after_step=1, keys=["reward"])
    assert [(p.step, p.value) for p in rewards] == [(2, 0.2), (3, 0.3), (4, 0.4)]
    assert store.metrics_since(run.id, after_step=4) == []
    assert metric_keys(store, run.id) == ["kl", "reward"]


# ---------------------------------------------------------------------------------------------------- groups


def test_record_groups_and_groups_at_round_trip(store):
    run = _create_run(store)
    groups = [_group(2, 7, [1.5, None, -0.5, 0.0]), _group(2, 3, [0.1, -0.1])]
    assert store.record_groups(run.id, 2, groups) == 2

    back = store.groups_at(run.id, 2)
    assert [g.row_index for g in back] == [7, 3]
    assert all(g.id is not None for g in back)
    first = back[0]
    assert first.prompt == "prompt 7"
    assert first.extra == {"answer": "7"}
    assert [c.index for c in first.completions] == [0, 1, 2, 3]
    assert [c.text for c in first.completions] == [f"completion 7.{i}" for i in range(4)]
    assert [c.advantage for c in first.completions] == [1.5, None, -0.5, 0.0]
    assert first.completions[2].rewards == {"numeric_answer": 2.0, "format_regex": None}
    assert [c.truncated for c in first.completions] == [True, False, False, False]
    assert [c.num_tokens for c in first.completions] == [10, 11, 12, 13]
    # Apart from the id the store assigns, a group comes back as it went in.
    assert [g.__class__(**{**g.__dict__, "id": None}) for g in back] == groups


def test_record_groups_stores_nan_rewards_as_none(store):
    run = _create_run(store)
    group = GroupRecord(
        step=1,
        row_index=0,
        prompt="p",
        completions=[CompletionRecord(0, "c", {"r": math.nan}, total_reward=math.nan, advantage=math.inf)],
    )
    store.record_groups(run.id, 1, [group])
    completion = store.groups_at(run.id, 1)[0].completions[0]
    assert completion.rewards == {"r": None}
    assert completion.total_reward is None
    assert completion.advantage is None


def test_completions_come_back_in_index_order_whatever_the_insert_order(store):
    run = _create_run(store)
    shuffled = [CompletionRecord(i, f"c{i}", {}, None, None) for i in (2, 0, 1)]
    store.record_groups(run.id, 1, [GroupRecord(step=1, row_index=0, prompt="p", completions=shuffled)])
    assert [c.text for c in store.groups_at(run.id, 1)[0].completions] == ["c0", "c1", "c2"]


def test_record_groups_replaces_groups_of_the_same_step(store):
    run = _create_run(store)
    store.record_groups(run.id, 1, [_group(1, 0, [1.0, -1.0]), _group(1, 1, [1.0, -1.0])])
    store.record_groups(run.id, 2, [_group(2, 5, [0.0, 0.0])])
    store.record_groups(run.id, 1, [_group(1, 9, [0.5, -0.5, 0.0])])

    assert [g.row_index for g in store.groups_at(run.id, 1)] == [9]
    assert [g.row_index for g in store.groups_at(run.id, 2)] == [5]
    assert count_groups(store, run.id) == 2
    assert _count(store, "SELECT count(*) FROM completions") == 3 + 2  # the old step-1 completions are gone


def test_eval_groups_of_a_step_live_beside_its_train_groups(store):
    from dataclasses import replace

    run = _create_run(store)
    store.record_groups(run.id, 2, [_group(2, 0, [1.0, -1.0])])
    store.record_groups(run.id, 2, [replace(_group(2, 7, [0.5, -0.5]), split="eval")], split="eval")
    assert [(g.row_index, g.split) for g in store.groups_at(run.id, 2)] == [(0, "train"), (7, "eval")]
    store.record_groups(run.id, 2, [_group(2, 3, [1.0, -1.0])])  # a train re-record keeps the eval groups
    assert sorted((g.row_index, g.split) for g in store.groups_at(run.id, 2)) == [(3, "train"), (7, "eval")]
    store.record_groups(run.id, 2, [], split="eval")
    assert [(g.row_index, g.split) for g in store.groups_at(run.id, 2)] == [(3, "train")]
    assert _count(store, "SELECT count(*) FROM groups WHERE split IS NULL") == 1  # train rows as older stores hold them


def test_group_steps_are_distinct_and_ascending(store):
    run = _create_run(store)
    other = _create_run(store, "other")
    for step in (4, 1, 2):
        store.record_groups(run.id, step, [_group(step, 0, [1.0, 0.0]), _group(step, 1, [1.0, 0.0])])
    store.record_groups(other.id, 3, [_group(3, 0, [1.0, 0.0])])
    assert store.group_steps(run.id) == [1, 2, 4]
    assert store.group_steps(other.id) == [3]
    assert store.groups_at(run.id, 3) == []


# ---------------------------------------------------------------------------------------------------- delete


def test_delete_run_cascades_to_metrics_groups_and_completions(store):
    doomed = _create_run(store, "doomed")
    kept = _create_run(store, "kept")
    for run in (doomed, kept):
        record_metrics(store, run.id, 1, {"reward": 1.0, "kl": 0.0}, wall_time=1.0)
        store.record_groups(run.id, 1, [_group(1, 0, [1.0, -1.0]), _group(1, 1, [0.5, -0.5])])

    store.delete_run(doomed.id)

    with pytest.raises(StoreError):
        store.get_run(doomed.id)
    assert _count(store, "SELECT count(*) FROM metrics WHERE run_id = :r", r=doomed.id) == 0
    assert _count(store, "SELECT count(*) FROM groups WHERE run_id = :r", r=doomed.id) == 0
    orphans = "SELECT count(*) FROM completions WHERE group_id NOT IN (SELECT id FROM groups)"
    assert _count(store, orphans) == 0
    # The other run is untouched.
    assert _count(store, "SELECT count(*) FROM metrics WHERE run_id = :r", r=kept.id) == 2
    assert count_groups(store, kept.id) == 2
    assert _count(store, "SELECT count(*) FROM completions") == 4


def test_foreign_keys_cascade_a_raw_sql_delete(store):
    """The schema's ON DELETE CASCADE works too (it needs ``PRAGMA foreign_keys=ON`` on every connection)."""
    run = _create_run(store)
    record_metrics(store, run.id, 1, {"reward": 1.0}, wall_time=1.0)
    store.record_groups(run.id, 1, [_group(1, 0, [1.0, -1.0])])
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM runs WHERE id = :id"), {"id": run.id})
    assert _count(store, "SELECT count(*) FROM metrics") == 0
    assert _count(store, "SELECT count(*) FROM groups") == 0
    assert _count(store, "SELECT count(*) FROM completions") == 0


# --------------------------------------------------------------------------------------------- SQLite setup


@pytest.mark.backends("sqlite")
def test_sqlite_runs_in_wal_mode_with_foreign_keys(store):
    with store.engine.connect() as conn:
        assert conn.execute(text("PRAGMA journal_mode")).scalar_one().lower() == "wal"
        assert conn.execute(text("PRAGMA foreign_keys")).scalar_one() == 1
        assert conn.execute(text("PRAGMA busy_timeout")).scalar_one() > 0


def test_two_store_instances_write_concurrently(settings):
    """Two threads, each with its own Store on the same file, write 200 metric steps each; none is lost."""
    setup = Store(settings.db_url)
    runs = [_create_run(setup, f"writer-{i}").id for i in range(2)]
    steps = 200
    errors: list[BaseException] = []
    start = threading.Barrier(2)

    def write(run_id: int) -> None:
        writer = Store(settings.db_url)
        try:
            start.wait()
            for step in range(1, steps + 1):
                record_metrics(writer, run_id, step, {"reward": step * 0.5, "kl": 0.01}, wall_time=float(step))
                writer.heartbeat(run_id, step=step)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)
        finally:
            writer.close()

    threads = [threading.Thread(target=write, args=(run_id,)) for run_id in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    try:
        assert errors == []
        for run_id in runs:
            points = setup.metrics_since(run_id)
            assert len(points) == 2 * steps
            assert [p.step for p in points if p.key == "reward"] == list(range(1, steps + 1))
            assert setup.get_run(run_id).current_step == steps
    finally:
        setup.close()


def test_a_deleted_runs_id_is_never_given_to_a_new_run(store):
    """Scripts, exports and run folders name runs by id: a new run after a delete gets a fresh one."""
    first = store.create_run(name="a", config={}, dataset_id=None, max_steps=1)
    second = store.create_run(name="b", config={}, dataset_id=None, max_steps=1)
    store.delete_run(second.id)
    third = store.create_run(name="c", config={}, dataset_id=None, max_steps=1)
    assert third.id > second.id > first.id


# ------------------------------------------------------------------------------- downsampled metric history
def _reward(step: int) -> float | None:
    """A reward curve with a spike, a dip and NaN gaps, in binary fractions (sums are exact in any order)."""
    if step == 137:
        return 100.0
    if step == 201:
        return -50.0
    if step % 13 == 0:
        return float("nan")
    return (step % 32) / 8


def _record_curve(store: Store, run_id: int, steps: range) -> None:
    for step in steps:
        record_metrics(store, run_id, step, {"reward": _reward(step), "kl": step / 4}, wall_time=1000.0 + step)


def _summary_rows(store: Store, run_id: int) -> int:
    return _count(store, "SELECT COUNT(*) FROM metric_buckets WHERE run_id = :run", run=run_id)


def test_metric_summary_is_bounded_and_keeps_the_true_last_point_and_the_extremes(store):
    """The first chart load reads at most summary_buckets buckets a key however long the run; the last bucket ends
    on the last recorded point and the buckets' min/max keep the spike and the dip."""
    store.summary_buckets = 16
    run = _create_run(store, max_steps=300)
    _record_curve(store, run.id, range(1, 301))
    summaries = {s.key: s for s in store.metric_summary(run.id, keys=["reward", "kl"])}
    reward = summaries["reward"]
    assert 8 <= len(reward) <= 16
    assert _summary_rows(store, run.id) <= 2 * 16  # stored: bounded too, not only what is returned
    assert (reward.last_steps[-1], reward.last_values[-1]) == (300, _reward(300))
    assert reward.first_steps[0] == 1
    assert max(v for v in reward.maxs if v is not None) == 100.0
    assert min(v for v in reward.mins if v is not None) == -50.0
    assert sum(reward.counts) == sum(1 for s in range(1, 301) if s % 13 != 0)  # NaN is no value
    # Buckets tile the steps in order, each ending on a recorded point.
    assert all(a < b for a, b in zip(reward.last_steps, reward.first_steps[1:], strict=False))
    assert summaries["kl"].last_values[-1] == 75.0
    assert all(m is not None for m in summaries["kl"].means)
    fewer = {s.key: s for s in store.metric_summary(run.id, keys=["reward"], max_points=4)}["reward"]
    assert len(fewer) <= 4 and fewer.last_steps[-1] == 300 and max(fewer.maxs) == 100.0
    # Patterns, and the keys nobody asked for stay out.
    record_metrics(store, run.id, 301, {"rewards/numeric_answer/mean": 0.5, "grad_norm": 1.0}, wall_time=1.0)
    keys = [s.key for s in store.metric_summary(run.id, keys=["reward"], key_patterns=["rewards/%/mean"])]
    assert keys == ["reward", "rewards/numeric_answer/mean"]
    assert store.metric_summary(_create_run(store, "empty").id, keys=["reward"]) == []


def test_metric_summary_backfilled_from_raw_points_equals_the_incremental_one(store):
    """A store written before the history existed (raw points only) gets it computed once, on the first read, and
    it is the same as the one recorded step by step; rebuild_metric_summary gives the same again."""
    store.summary_buckets = 8
    run = _create_run(store, max_steps=150)
    _record_curve(store, run.id, range(5, 151))
    store.record_metric_steps(run.id, [(151, {"reward": 1.0}, 2.0), (152, {"reward": 0.25, "kl": 0.0}, 3.0)])
    incremental = store.metric_summary(run.id)
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM metric_buckets"))
        conn.execute(text("DELETE FROM metric_series"))
    assert store.metric_summary(run.id) == incremental
    assert _count(store, "SELECT COUNT(*) FROM metric_series WHERE run_id = :run", run=run.id) == 2  # kept: once
    assert store.rebuild_metric_summary(run.id) == 2
    assert store.metric_summary(run.id) == incremental
    # A run written by an earlier version and then resumed: its worker's first write backfills the key.
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM metric_buckets"))
        conn.execute(text("DELETE FROM metric_series"))
    record_metrics(store, run.id, 153, {"reward": 0.5}, wall_time=4.0)
    reward = store.metric_summary(run.id, keys=["reward"])[0]
    assert reward.first_steps[0] == 5 and reward.last_steps[-1] == 153
    assert max(reward.maxs) == 100.0


def test_metric_summary_follows_a_replayed_step_a_resume_and_a_delete(store):
    store.summary_buckets = 8
    run = _create_run(store, max_steps=100)
    _record_curve(store, run.id, range(1, 101))
    record_metrics(store, run.id, 50, {"reward": 999.0}, wall_time=1.0)  # the same step again, another value
    summary = store.metric_summary(run.id, keys=["reward"])[0]
    assert max(summary.maxs) == 999.0
    store.rebuild_metric_summary(run.id)
    assert store.metric_summary(run.id, keys=["reward"])[0] == summary
    store.finish_run(run.id, RunStatus.CANCELLED)
    store.requeue_run(run.id, resume_from=None, from_step=40)
    reward = store.metric_summary(run.id, keys=["reward"])[0]
    assert (reward.last_steps[-1], reward.last_values[-1]) == (40, _reward(40))
    assert max(reward.maxs) < 999.0  # step 50 was dropped with the resume
    _record_curve(store, run.id, range(41, 61))
    reward = store.metric_summary(run.id, keys=["reward"])[0]
    assert reward.last_steps[-1] == 60
    store.delete_run(run.id)
    assert _summary_rows(store, run.id) == 0
    assert _count(store, "SELECT COUNT(*) FROM metric_series WHERE run_id = :run", run=run.id) == 0


def test_a_login_holds_a_bounded_number_of_api_tokens(store, monkeypatch):
    import storage.api_tokens as api_tokens

    monkeypatch.setattr(api_tokens, "MAX_LIVE_TOKENS", 3)
    monkeypatch.setattr(api_tokens, "MAX_TOKEN_ROWS", 6)
    first = [store.create_api_token("alice", f"t{i}")[0] for i in range(3)]
    with pytest.raises(StoreError, match="already holds 3 live API tokens"):
        store.create_api_token("alice", "one too many")
    store.create_api_token("bob", "bob's own")  # each login has its own bound
    store.revoke_api_token(first[0].id, login="alice")
    store.create_api_token("alice", "after a revoke")
    for token in first[1:]:
        store.revoke_api_token(token.id, login="alice")
    store.create_api_token("alice", "t5")
    store.create_api_token("alice", "t6")  # 2 live of 3, 6 in all
    with pytest.raises(StoreError, match="has had 6 API tokens"):  # revoked ones count towards the store's bound
        store.create_api_token("alice", "t7")
    assert len(store.list_api_tokens("alice")) == 6
