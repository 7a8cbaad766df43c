"""Tests for Store.record_step, the recorder's one transaction per training step, on SQLite and PostgreSQL: the rows
it stores (metrics, groups, completions, per-token values, heartbeat and step), the downsampled history it keeps from
its StepCache equal to a recompute from the raw points, a replayed step replacing rather than adding, the cancel flag
it reads, and a failing statement that leaves nothing of the step and a cleared cache."""

from __future__ import annotations

import pytest
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError

from storage import CompletionRecord, GroupRecord, StepCache, Store, TokenStats
from tests.store_helpers import metric_keys, record_metrics

pytestmark = pytest.mark.backends("sqlite", "postgres")


def _create_run(store: Store, max_steps: int = 100):
    return store.create_run(name="run", config={"model": "m", "max_steps": max_steps}, dataset_id=None,
                            max_steps=max_steps)


def _count(store: Store, sql: str, **params) -> int:
    with store.engine.connect() as conn:
        return conn.execute(text(sql), params).scalar_one()


def _groups(step: int, *, tokens: bool = True, count: int = 2) -> list[GroupRecord]:
    """``count`` groups of two completions; the first completion of each carries token values when ``tokens``."""
    def completion(index: int, row: int) -> CompletionRecord:
        stats = TokenStats(pieces=["4", "2\x00"], logprobs=[-0.5, -1.25], kl=[0.0, 0.125], entropy=[1.0, 2.0])
        return CompletionRecord(index=index, text=f"{step}-{row}-{index}", rewards={"r": float(index)},
                                total_reward=float(index), advantage=index - 0.5, num_tokens=2, truncated=False,
                                token_stats=stats if tokens and index == 0 else None)

    return [GroupRecord(step=step, row_index=row, prompt=f"p{row}", completions=[completion(0, row), completion(1, row)],
                        extra={"answer": str(row)}) for row in range(count)]


def _value(step: int, key: str) -> float | None:
    """A curve per key with NaN gaps and a spike, in binary fractions (sums are exact in any order)."""
    if step % 11 == 0:
        return float("nan")
    return 64.0 if (key == "reward" and step == 37) else step / 4 + (0.5 if key == "kl" else 0.0)


def _summaries(store: Store, run_id: int):
    return {s.key: s for s in store.metric_summary(run_id)}


def test_steps_with_a_cache_store_every_row_and_a_history_equal_to_a_recompute(store):
    store.summary_buckets = 8  # the level rises several times over 120 steps: the cache meets each case
    run = _create_run(store, 120)
    cache = StepCache()
    for step in range(1, 121):
        keys = ["reward", "kl"] if step % 5 else ["reward", "kl", "grad_norm"]  # a key logged every 5th step
        cancel = store.record_step(run.id, step, metrics={k: _value(step, k) for k in keys} | {"note": "text"},
                                   wall_time=1000.0 + step, groups=[("train", _groups(step))], cache=cache)
        assert cancel is False
    points = store.metrics_since(run.id, keys=["reward"])
    assert [p.step for p in points] == list(range(1, 121))  # each step once; the non-number "note" skipped
    assert points[36].value == 64.0 and points[10].value is None
    assert metric_keys(store, run.id) == ["grad_norm", "kl", "reward"]
    recorded = _summaries(store, run.id)
    assert recorded["reward"].last_steps[-1] == 120 and max(recorded["reward"].maxs) == 64.0
    assert len(recorded["reward"]) <= 8
    store.rebuild_metric_summary(run.id)
    assert _summaries(store, run.id) == recorded  # the cached buckets are what the raw points give
    assert store.group_steps(run.id) == list(range(1, 121))
    last = store.groups_at(run.id, 120)
    assert [(g.row_index, g.prompt, g.extra) for g in last] == [(0, "p0", {"answer": "0"}), (1, "p1", {"answer": "1"})]
    assert [c.text for c in last[1].completions] == ["120-1-0", "120-1-1"]
    assert [c.advantage for c in last[0].completions] == [-0.5, 0.5]
    stats = store.token_stats(last[1].id, 0)
    assert stats.pieces == ["4", "2\ufffd"] and stats.logprobs == [-0.5, -1.25] and stats.kl == [0.0, 0.125]
    assert store.token_stats(last[1].id, 1) is None
    assert _count(store, "SELECT COUNT(*) FROM completion_tokens") == 120 * 2
    info = store.get_run(run.id)
    assert info.current_step == 120 and info.heartbeat_at is not None


def test_a_replayed_step_and_a_fresh_cache_replace_rows_instead_of_adding(store):
    store.summary_buckets = 8
    run = _create_run(store)
    cache = StepCache()
    for step in range(1, 31):
        store.record_step(run.id, step, metrics={"reward": step / 2}, wall_time=float(step),
                          groups=[("train", _groups(step)), ("eval", _groups(step, tokens=False, count=1))],
                          cache=cache)
    # The same step again (a resumed worker trains it anew): with the old cache, then with a new one.
    store.record_step(run.id, 20, metrics={"reward": 99.0}, wall_time=50.0, groups=[("train", _groups(20))],
                      cache=cache)
    fresh = StepCache()
    store.record_step(run.id, 25, metrics={"reward": -9.0}, wall_time=51.0, groups=[("train", _groups(25))],
                      cache=fresh)
    store.record_step(run.id, 31, metrics={"reward": 1.0}, wall_time=52.0, groups=[("train", _groups(31))],
                      cache=fresh)
    values = {p.step: p.value for p in store.metrics_since(run.id, keys=["reward"])}
    assert len(values) == 31 and values[20] == 99.0 and values[25] == -9.0 and values[31] == 1.0
    assert _count(store, "SELECT COUNT(*) FROM metrics WHERE run_id = :run", run=run.id) == 31
    assert len(store.groups_at(run.id, 20)) == 3  # two train groups, one eval group: not doubled
    assert _count(store, "SELECT COUNT(*) FROM groups WHERE run_id = :run", run=run.id) == 30 * 3 + 2
    assert _count(store, "SELECT COUNT(*) FROM completion_tokens") == 31 * 2
    recorded = _summaries(store, run.id)
    assert max(recorded["reward"].maxs) == 99.0 and min(recorded["reward"].mins) == -9.0
    store.rebuild_metric_summary(run.id)
    assert _summaries(store, run.id) == recorded


def test_the_step_transaction_reads_the_cancel_flag_and_beats_without_metrics(store):
    run = _create_run(store)
    assert store.claim_run(run.id, 1)
    assert store.record_step(run.id, 1) is False  # a heartbeat with its step only
    assert store.get_run(run.id).current_step == 1
    store.request_cancel(run.id)
    assert store.record_step(run.id, 2, metrics={"reward": 0.5}, cache=StepCache()) is True
    assert store.cancel_requested(run.id)
    assert store.get_run(run.id).current_step == 2


def test_a_failing_statement_leaves_nothing_of_the_step_and_clears_the_cache(store):
    run = _create_run(store)
    cache = StepCache()
    for step in (1, 2):
        store.record_step(run.id, step, metrics={"reward": float(step)}, wall_time=float(step),
                          groups=[("train", _groups(step))], cache=cache)
    before = _summaries(store, run.id)
    broken = _groups(3)
    broken[1].completions[1] = CompletionRecord(index=None, text="no index", rewards={}, total_reward=None,
                                            advantage=None)  # NOT NULL refuses it
    with pytest.raises(IntegrityError):
        store.record_step(run.id, 3, metrics={"reward": 3.0, "kl": 0.25}, wall_time=3.0,
                          groups=[("train", broken)], cache=cache)
    assert cache.series == {} and cache.group_steps == {}
    assert [p.step for p in store.metrics_since(run.id)] == [1, 2]  # the metrics of step 3 went with the groups
    assert store.group_steps(run.id) == [1, 2]
    assert store.get_run(run.id).current_step == 2
    assert _summaries(store, run.id) == before
    # The next attempt reads the store again and records the step whole.
    store.record_step(run.id, 3, metrics={"reward": 3.0, "kl": 0.25}, wall_time=3.0,
                      groups=[("train", _groups(3))], cache=cache)
    assert [p.step for p in store.metrics_since(run.id, keys=["reward"])] == [1, 2, 3]
    assert store.group_steps(run.id) == [1, 2, 3]
    recorded = _summaries(store, run.id)
    store.rebuild_metric_summary(run.id)
    assert _summaries(store, run.id) == recorded


def test_record_groups_still_replaces_a_steps_groups_with_their_token_values(store):
    run = _create_run(store)
    assert store.record_groups(run.id, 1, _groups(1, count=3)) == 3
    assert store.record_groups(run.id, 1, _groups(1, count=1)) == 1
    assert len(store.groups_at(run.id, 1)) == 1
    assert _count(store, "SELECT COUNT(*) FROM completions") == 2
    assert _count(store, "SELECT COUNT(*) FROM completion_tokens") == 1


def test_a_key_with_raw_points_but_no_history_gets_its_history_from_them(store):
    """A run recorded before the history existed, resumed by a worker with a fresh cache: its keys' history is
    built from every raw point, not started at the new step."""
    store.summary_buckets = 8
    run = _create_run(store)
    for step in range(1, 21):
        record_metrics(store, run.id, step, {"reward": step / 4}, wall_time=float(step))
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM metric_buckets"))
        conn.execute(text("DELETE FROM metric_series"))
    cache = StepCache()
    for step in (21, 22):
        store.record_step(run.id, step, metrics={"reward": step / 4, "kl": 0.5}, wall_time=float(step), cache=cache)
    reward = _summaries(store, run.id)["reward"]
    assert reward.first_steps[0] == 1 and reward.last_steps[-1] == 22 and sum(reward.counts) == 22
    recorded = _summaries(store, run.id)
    store.rebuild_metric_summary(run.id)
    assert _summaries(store, run.id) == recorded
