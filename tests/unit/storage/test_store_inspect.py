"""Tests for the store's inspection queries on a real SQLite file (and PostgreSQL when configured): one group by
id, one prompt across steps, the rows a run sampled, the latest groups, text search (LIKE, escaping, paging,
per-run), groups after a step, the dataset and run lists' version, and the added index."""

from __future__ import annotations

import pytest
from sqlalchemy import inspect as sql_inspect
from sqlalchemy import text

from storage import CompletionRecord, GroupRecord, Store, StoreError
from tests.store_helpers import record_metrics

pytestmark = pytest.mark.backends("sqlite", "postgres")


def _run(store: Store, name: str = "run") -> int:
    return store.create_run(name=name, config={"model": "m"}, dataset_id=None, max_steps=10).id


def _group(step: int, row: int, texts: list[str], prompt: str | None = None) -> GroupRecord:
    return GroupRecord(
        step=step,
        row_index=row,
        prompt=prompt if prompt is not None else f"Question {row}: what is {row} + {row}?",
        completions=[
            CompletionRecord(
                index=i,
                text=t,
                rewards={"numeric_answer": float(i)},
                total_reward=float(i),
                advantage=i - 0.5,
                num_tokens=len(t),
                truncated=False,
            )
            for i, t in enumerate(texts)
        ],
    )


@pytest.fixture
def filled(store):
    """Run A: rows 3 and 5 at steps 1-3 (row 5 twice at step 2), row 8 at step 3; run B: row 3 at step 1."""
    a, b = _run(store, "a"), _run(store, "b")
    store.record_groups(a, 1, [_group(1, 3, ["six", "6"]), _group(1, 5, ["ten", "10"])])
    store.record_groups(a, 2, [_group(2, 5, ["10", "ten!"]), _group(2, 5, ["100%", "1_0"]), _group(2, 3, ["6", "6"])])
    store.record_groups(a, 3, [_group(3, 3, ["6", "SIX"]), _group(3, 8, ["16", "sixteen"], prompt="Say 100% or 50_50")])
    store.record_groups(b, 1, [_group(1, 3, ["six six", "6"])])
    return store, a, b


def test_groups_for_prompt_in_step_order(filled):
    store, a, b = filled
    history = store.groups_for_prompt(a, 5)
    assert [g.step for g in history] == [1, 2, 2]
    assert [c.text for c in history[1].completions] == ["10", "ten!"]  # recorded order within a step
    assert all(g.row_index == 5 and g.id is not None for g in history)
    assert [g.step for g in store.groups_for_prompt(a, 3)] == [1, 2, 3]
    assert [g.step for g in store.groups_for_prompt(b, 3)] == [1]
    assert store.groups_for_prompt(a, 99) == []
    assert [g.step for g in store.groups_for_prompt(a, 3, limit=2)] == [1, 2]


def test_groups_for_prompt_follows_a_replaced_step(filled):
    store, a, _ = filled
    store.record_groups(a, 2, [_group(2, 8, ["x", "y"])])  # step 2 recorded again without rows 3 and 5
    assert [g.step for g in store.groups_for_prompt(a, 3)] == [1, 3]
    assert [g.step for g in store.groups_for_prompt(a, 8)] == [2, 3]


def test_prompt_rows_most_sampled_first(filled):
    store, a, b = filled
    rows = store.prompt_rows(a)
    assert [(r.row_index, r.num_groups, r.first_step, r.last_step) for r in rows] == [
        (3, 3, 1, 3),
        (5, 3, 1, 2),
        (8, 1, 3, 3),
    ]
    assert [r.row_index for r in store.prompt_rows(b)] == [3]
    assert len(store.prompt_rows(a, limit=1)) == 1


def test_groups_since_reads_only_later_steps_in_order(filled):
    store, a, b = filled
    since = store.groups_since(a, 1)
    assert [(g.step, g.row_index) for g in since] == [(2, 5), (2, 5), (2, 3), (3, 3), (3, 8)]
    assert [c.text for c in since[1].completions] == ["100%", "1_0"]
    assert len(store.groups_since(a)) == 7
    assert [(g.step, g.row_index) for g in store.groups_since(a, -1, limit=2)] == [(1, 3), (1, 5)]
    assert store.groups_since(a, 3) == [] and store.groups_since(a, 0, limit=0) == []
    assert [g.step for g in store.groups_since(b)] == [1]


def test_catalog_version_moves_with_datasets_and_runs_not_with_metrics(store):
    first = store.catalog_version()
    assert first[:9] == (0, 0, 0, 0, 0, 0, 0, 0, 0)
    dataset = store.add_dataset(name="d", source_name="d.jsonl", format="jsonl", num_rows=1, columns=["prompt"],
                                prompt_kind="text", path="/nowhere/d.jsonl")
    with_dataset = store.catalog_version()
    assert with_dataset[:2] == (1, dataset.id) and with_dataset[2:-1] == first[2:-1]
    run = _run(store)
    queued = store.catalog_version()
    assert queued[:2] == with_dataset[:2] and queued[2:5] == (1, run, 1)
    record_metrics(store, run, 1, {"reward": 0.5}, wall_time=1.0)
    store.record_groups(run, 1, [_group(1, 0, ["a", "b"])])
    assert store.catalog_version() == queued  # training progress does not move it
    store.request_cancel(run)
    cancelled = store.catalog_version()
    assert cancelled != queued and cancelled[2:4] == (1, run) and sum(cancelled[4:-1]) == 1
    store.delete_run(run)
    assert store.catalog_version()[2:4] == (0, 0)


def test_catalog_version_moves_when_a_dataset_is_renamed_or_replaced(store):
    def add(name: str):
        return store.add_dataset(name=name, source_name=f"{name}.jsonl", format="jsonl", num_rows=1,
                                 columns=["prompt"], prompt_kind="text", path=f"/nowhere/{name}.jsonl")

    first = add("a")
    before = store.catalog_version()
    store.rename_dataset(first.id, "b")
    renamed = store.catalog_version()
    assert renamed != before and renamed[:-1] == before[:-1]  # same count and ids: only the names moved
    store.delete_dataset(first.id)
    second = add("c")
    assert second.id != first.id  # a deleted dataset's id is not given again (SQLite AUTOINCREMENT)
    assert store.catalog_version() != renamed


def test_get_group_and_recent_groups(filled):
    store, a, _ = filled
    recent = store.recent_groups(a, limit=3)
    assert [(g.step, g.row_index) for g in recent] == [(3, 3), (3, 8), (2, 5)]
    again = store.get_group(recent[1].id)
    assert again == recent[1]
    assert [c.text for c in again.completions] == ["16", "sixteen"]
    with pytest.raises(StoreError, match="no group with id 999999"):
        store.get_group(999_999)


def test_search_matches_prompts_and_completions_case_insensitively(filled):
    store, a, b = filled
    page = store.search_groups(a, "six")
    # step 1 row 3 ("six"), step 3 row 3 ("SIX"), step 3 row 8 ("sixteen"); run B's "six six" is not in run A
    assert page.total == 3
    assert [(h.group.step, h.group.row_index) for h in page.hits] == [(1, 3), (3, 3), (3, 8)]
    assert [h.completion_indexes for h in page.hits] == [[0], [1], [1]]
    assert not any(h.prompt_matched for h in page.hits)
    prompt_hit = store.search_groups(a, "question 5")
    assert prompt_hit.total == 3 and all(h.prompt_matched and h.completion_indexes == [] for h in prompt_hit.hits)
    assert store.search_groups(b, "six").total == 1


@pytest.mark.parametrize(("needle", "expected"), [("100%", [(2, 5), (3, 8)]), ("1_0", [(2, 5)]), ("50_50", [(3, 8)])])
def test_search_takes_like_wildcards_literally(filled, needle, expected):
    store, a, _ = filled
    page = store.search_groups(a, needle)
    assert [(h.group.step, h.group.row_index) for h in page.hits] == expected


def test_search_pages(filled):
    store, a, _ = filled
    first = store.search_groups(a, "6", limit=2)
    assert first.total == 4
    assert [(h.group.step, h.group.row_index) for h in first.hits] == [(1, 3), (2, 3)]
    second = store.search_groups(a, "6", limit=2, offset=2)
    assert [(h.group.step, h.group.row_index) for h in second.hits] == [(3, 3), (3, 8)]
    assert second.offset == 2 and second.limit == 2 and second.total == 4
    assert store.search_groups(a, "6", limit=2, offset=10).hits == []


@pytest.mark.parametrize("blank", ["", "   "])
def test_search_for_nothing_finds_nothing(filled, blank):
    store, a, _ = filled
    page = store.search_groups(a, blank)
    assert page.total == 0 and page.hits == []


@pytest.mark.backends("sqlite")  # EXPLAIN QUERY PLAN is SQLite's
def test_row_index_exists_and_is_added_to_an_old_store(settings):
    store = Store(settings.db_url)
    names = {ix["name"] for ix in sql_inspect(store.engine).get_indexes("groups")}
    assert "ix_groups_run_row" in names
    with store.engine.begin() as conn:  # a store made before the index existed
        conn.execute(text("DROP INDEX ix_groups_run_row"))
    store.close()
    reopened = Store(settings.db_url)
    try:
        assert "ix_groups_run_row" in {ix["name"] for ix in sql_inspect(reopened.engine).get_indexes("groups")}
        with reopened.engine.connect() as conn:
            plan = " ".join(
                str(row[-1])
                for row in conn.execute(
                    text("EXPLAIN QUERY PLAN SELECT * FROM groups WHERE run_id = 1 AND row_index = 3 ORDER BY step")
                )
            )
        assert "ix_groups_run_row" in plan
    finally:
        reopened.close()


# ------------------------------------------------------------------------------------ one prompt, paged


@pytest.fixture
def long_row(store):
    """Run A: dataset row 4 sampled 24 times over steps 1-20 (twice at steps 5, 10, 15 and 20), row 9 at every step;
    run B: row 4 once. Returns the store, run A and row 4's (step, id) keys in step order."""
    a, b = _run(store, "a"), _run(store, "b")
    for step in range(1, 21):
        groups = [_group(step, 4, [f"s{step}"])] * (2 if step % 5 == 0 else 1) + [_group(step, 9, ["x"])]
        store.record_groups(a, step, groups)
    store.record_groups(b, 1, [_group(1, 4, ["other run"])])
    keys = [(g.step, g.id) for g in store.groups_for_prompt(a, 4)]
    return store, a, keys


def test_prompt_pages_walk_forward_without_gaps_or_duplicates(long_row):
    store, a, keys = long_row
    assert len(keys) == 24 and keys == sorted(keys)
    seen, offsets, page = [], [], store.prompt_page(a, 4, limit=5)
    while True:
        assert page.total == 24 and page.row_index == 4 and len(page.groups) <= 5
        offsets.append(page.offset)
        seen += [(g.step, g.id) for g in page.groups]
        assert all(g.row_index == 4 for g in page.groups)
        if not page.has_later:
            break
        page = store.prompt_page(a, 4, limit=5, after=(page.groups[-1].step, page.groups[-1].id))
    assert seen == keys  # every group once, in step order, across the pages
    assert offsets == [0, 5, 10, 15, 20]
    assert not store.prompt_page(a, 4, limit=5).has_earlier and page.has_earlier


def test_prompt_pages_walk_backward_from_the_latest(long_row):
    store, a, keys = long_row
    page = store.prompt_page(a, 4, limit=5, last=True)
    assert [(g.step, g.id) for g in page.groups] == keys[-5:] and page.offset == 19 and not page.has_later
    seen = []
    while True:
        seen = [(g.step, g.id) for g in page.groups] + seen
        if not page.has_earlier:
            break
        page = store.prompt_page(a, 4, limit=5, before=(page.groups[0].step, page.groups[0].id))
    assert seen == keys and page.offset == 0 and len(page.groups) == 4


def test_prompt_page_splits_a_step_sampled_twice_without_losing_a_group(long_row):
    store, a, keys = long_row
    fifth = keys.index((5, keys[4][1]))  # row 4's first group of step 5 ends the first page of 5
    assert keys[fifth][0] == 5 and keys[fifth + 1][0] == 5
    first = store.prompt_page(a, 4, limit=5)
    second = store.prompt_page(a, 4, limit=5, after=(first.groups[-1].step, first.groups[-1].id))
    assert [g.step for g in first.groups] == [1, 2, 3, 4, 5] and [g.step for g in second.groups] == [5, 6, 7, 8, 9]
    assert store.groups_for_prompt(a, 4, 3, after=(5, None))[0].step == 6  # (step, None): all of step 5 seen


def test_prompt_page_from_a_step_and_past_the_end(long_row):
    store, a, keys = long_row
    page = store.prompt_page(a, 4, limit=4, from_step=10)
    assert [g.step for g in page.groups] == [10, 10, 11, 12] and page.offset == keys.index((10, page.groups[0].id))
    assert page.offset == 10  # steps 1-9: 10 groups (two at step 5)
    end = store.prompt_page(a, 4, limit=4, after=keys[-1])
    assert end.groups == [] and end.offset == end.total == 24 and not end.has_later
    start = store.prompt_page(a, 4, limit=4, before=keys[0])
    assert start.groups == [] and start.offset == 0
    none = store.prompt_page(a, 99, limit=4)
    assert (none.groups, none.total, none.offset) == ([], 0, 0)
    other = store.prompt_page(a + 1, 4)  # run B
    assert other.total == 1 and [g.completions[0].text for g in other.groups] == ["other run"]


def test_groups_since_goes_on_inside_a_step_with_after_group(long_row):
    store, a, _ = long_row
    everything = [(g.step, g.id) for g in store.groups_since(a, limit=1000)]
    pages, after = [], (-1, None)
    while True:
        page = store.groups_since(a, after[0], limit=7, after_group=after[1])
        if not page:
            break
        pages += [(g.step, g.id) for g in page]
        after = (page[-1].step, page[-1].id)
    assert pages == everything and len(everything) == 44
    assert [g.step for g in store.groups_since(a, 19)] == [20, 20, 20]  # without after_group: all of step 19 seen
