"""The store keeps the same values on SQLite and PostgreSQL where PostgreSQL is stricter: NUL characters in text,
NaN inside JSON, strings longer than their column, times in another session time zone, and several processes
creating the tables of a new store at once."""

from __future__ import annotations

import math
import multiprocessing
from datetime import timedelta

import pytest
from sqlalchemy.engine import make_url

from storage import CompletionRecord, GroupRecord, RunStatus, Store
from storage.types import NUL_REPLACEMENT, json_safe
from tests.store_helpers import record_metrics

pytestmark = pytest.mark.backends("sqlite", "postgres")


def _run(store: Store, **overrides):
    fields = {"name": "run", "config": {"model": "m"}, "dataset_id": None, "max_steps": 3}
    fields.update(overrides)
    return store.create_run(**fields)


def test_nul_characters_in_text_are_stored_as_replacement_characters(store):
    run = _run(store, name="a\x00b")
    group = GroupRecord(
        step=1,
        row_index=0,
        prompt="prompt\x00",
        completions=[CompletionRecord(0, "x\x00y", {"r": 1.0}, 1.0, 0.0)],
        extra={"answer": "4\x00"},
    )
    store.record_groups(run.id, 1, [group])
    store.update_run(run.id, phase="loading\x00")
    store.claim_run(run.id)
    store.finish_run(run.id, RunStatus.FAILED, error="Traceback\x00 boom")

    back = store.groups_at(run.id, 1)[0]
    assert back.prompt == f"prompt{NUL_REPLACEMENT}"
    assert back.completions[0].text == f"x{NUL_REPLACEMENT}y"
    assert back.extra["answer"] in ("4\x00", f"4{NUL_REPLACEMENT}")  # JSON keeps it escaped as \u0000
    info = store.get_run(run.id)
    assert info.name == f"a{NUL_REPLACEMENT}b"
    assert info.error == f"Traceback{NUL_REPLACEMENT} boom"


def test_nan_and_infinity_inside_json_are_stored_as_null(store):
    run = _run(store, config={"model": "m", "beta": math.nan, "nested": {"values": [1.0, math.inf, -math.inf]}})
    assert store.get_run(run.id).config == {"model": "m", "beta": None, "nested": {"values": [1.0, None, None]}}
    group = GroupRecord(
        step=1,
        row_index=0,
        prompt="p",
        completions=[CompletionRecord(0, "c", {}, None, None)],
        extra={"answer": math.nan, "scores": [0.5, math.nan]},
    )
    store.record_groups(run.id, 1, [group])
    assert store.groups_at(run.id, 1)[0].extra == {"answer": None, "scores": [0.5, None]}


def test_strings_longer_than_their_column_keep_their_start(store):
    run = _run(store, name="n" * 500)
    store.update_run(run.id, phase="p" * 500)
    info = store.get_run(run.id)
    assert info.name == "n" * 200
    assert info.phase == "p" * 200
    long_key = "rewards/" + "k" * 300 + "/mean"
    assert record_metrics(store, run.id, 1, {long_key: 1.0}, wall_time=1.0) == 1
    assert [p.value for p in store.metrics_since(run.id, keys=[long_key])] == [1.0]


def test_times_come_back_in_utc_whatever_the_session_time_zone(store, store_url):
    run = _run(store)
    store.claim_run(run.id)
    url = make_url(store_url)
    if url.get_backend_name() == "postgresql":
        url = url.update_query_dict({"options": "-c TimeZone=Asia/Tokyo"})
    other = Store(url.render_as_string(hide_password=False))
    try:
        info = other.get_run(run.id)
    finally:
        other.close()
    for moment in (info.created_at, info.started_at, info.heartbeat_at):
        assert moment.utcoffset() == timedelta(0)
    assert info.created_at == store.get_run(run.id).created_at


def _open_store(url: str, results) -> None:
    try:
        Store(url).close()
        results.put("ok")
    except Exception as exc:  # noqa: BLE001 - reported to the parent
        results.put(f"{type(exc).__name__}: {exc}")


def test_several_processes_can_create_a_new_store_at_once(settings):
    """Each loser of the race to create a table tries again (storage.store.create_schema)."""
    context = multiprocessing.get_context("fork")
    results = context.Queue()
    processes = [context.Process(target=_open_store, args=(settings.db_url, results)) for _ in range(4)]
    for process in processes:
        process.start()
    for process in processes:
        process.join(timeout=120)
    assert [results.get(timeout=5) for _ in processes] == ["ok"] * 4


def test_json_safe_replaces_non_finite_floats_at_any_depth():
    value = {"a": math.nan, "b": [1, math.inf, {"c": -math.inf, "d": "text"}], "e": (2.5, None)}
    assert json_safe(value) == {"a": None, "b": [1, None, {"c": None, "d": "text"}], "e": [2.5, None]}


def test_json_read_back_is_cut_past_the_read_depth_and_kept_whole_within_it(store):
    from storage.types import MAX_READ_DEPTH, TOO_DEEP

    deep: list = []
    inner = deep
    for _ in range(MAX_READ_DEPTH + 8):
        inner.append([])
        inner = inner[0]
    turns = [{"kind": "assistant", "text": "hi"}, {"kind": "tool_call", "name": "f", "arguments": "{}",
                                                    "parsed": True}]
    run = _run(store)
    store.record_groups(run.id, 1, [GroupRecord(1, 0, "p", [CompletionRecord(0, "x", {}, 1.0, 0.0, turns=turns,
                                                                              tool_mask=[[1, 3], [0, 2]])],
                                                extra={"deep": deep, "flat": {"a": [1, 2]}})])
    back = store.groups_at(run.id, 1)[0]
    assert back.completions[0].turns == turns and back.completions[0].tool_mask == [[1, 3], [0, 2]]
    assert back.extra["flat"] == {"a": [1, 2]}
    value, depth = back.extra["deep"], 2  # the group's extra is depth 0, "deep" depth 1, its first item depth 2
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    assert value == TOO_DEEP and depth == MAX_READ_DEPTH + 1
