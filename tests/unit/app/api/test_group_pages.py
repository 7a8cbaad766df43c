"""The named API's ``run_groups`` pages (app/api/group_pages.py): bounded by what they carry as well as by ``limit``,
and read to the end through the keyset cursor without losing or repeating a group (a real SQLite store)."""

from __future__ import annotations

from app.api.group_pages import carried_chars, groups_page
from app.api.public import group_dict
from storage import CompletionRecord, GroupRecord


def _group(step: int, row: int, chars: int) -> GroupRecord:
    """A group of two completions; with ``chars`` > 0 each a trajectory whose turns carry about ``chars`` characters."""
    completions = []
    for index in range(2):
        turns = None if not chars else [
            {"kind": "assistant", "text": "t" * (chars // 2)},
            {"kind": "tool_call", "name": "calculator", "arguments": '{"expression": "6 * 7"}', "parsed": True},
            {"kind": "tool_result", "name": "calculator", "text": "r" * (chars // 2), "error": False},
            {"kind": "assistant", "text": "42"},
        ]
        completions.append(CompletionRecord(index=index, text="42", rewards={"numeric_answer": 1.0}, total_reward=1.0,
                                            advantage=0.0, turns=turns))
    return GroupRecord(step=step, row_index=row, prompt=f"row {row}", completions=completions)


def _read_all(store, run_id: int, max_chars: int, **where) -> list[list[dict]]:
    """Every page of a query, each from the cursor of the previous page's last group, until an empty one."""
    pages, after = [], {}
    while page := groups_page(store, run_id, limit=200, to_dict=group_dict, max_chars=max_chars, **where, **after):
        pages.append(page)
        after = {"after_step": page[-1]["step"], "after_group": page[-1]["id"]}
        if "step" in where:
            after = {"after_group": page[-1]["id"]}
        assert len(pages) < 100
    return pages


def _run_with_groups(store):
    run = store.create_run(name="pages", config={}, dataset_id=None, max_steps=10)
    for step in (1, 2, 3):
        store.record_groups(run.id, step, [_group(step, row, 2000 if step != 3 else 0) for row in (0, 1, 2, 1)])
    return run.id


def test_pages_of_long_trajectories_end_at_the_budget_and_the_cursor_reads_every_group_once(store):
    run_id = _run_with_groups(store)
    every = [(g["step"], g["id"]) for g in groups_page(store, run_id, limit=200, to_dict=group_dict,
                                                       max_chars=10**9)]
    assert len(every) == 12 and every == sorted(every)
    one = groups_page(store, run_id, limit=200, to_dict=group_dict, max_chars=10**9)[0]
    assert 4000 < carried_chars(one) < 4200  # two trajectories of ~2,000 characters of turns each

    pages = _read_all(store, run_id, max_chars=9000)
    assert [(g["step"], g["id"]) for page in pages for g in page] == every  # none lost, none twice, in order
    # 3 long groups pass 9,000 characters: the page ends there; the last 2 long and the 4 short ones make one page
    assert [len(page) for page in pages] == [3, 3, 6]
    # a group larger than the budget still makes a page of its own
    assert [len(page) for page in _read_all(store, run_id, max_chars=10)][:8] == [1] * 8
    # the page's limit still holds for short groups
    assert len(groups_page(store, run_id, after_step=2, limit=3, to_dict=group_dict)) == 3


def test_a_steps_page_and_a_rows_page_keep_to_their_step_and_row(store):
    run_id = _run_with_groups(store)
    of_step = [g for page in _read_all(store, run_id, max_chars=5000, step=2) for g in page]
    assert [g["step"] for g in of_step] == [2, 2, 2, 2] and [g["row_index"] for g in of_step] == [0, 1, 2, 1]
    of_step_row = [g for page in _read_all(store, run_id, max_chars=5000, step=2, row_index=1) for g in page]
    assert [(g["step"], g["row_index"]) for g in of_step_row] == [(2, 1), (2, 1)]
    assert len({g["id"] for g in of_step_row}) == 2
    of_row = [g for page in _read_all(store, run_id, max_chars=5000, row_index=1) for g in page]
    assert [(g["step"], g["row_index"]) for g in of_row] == [(1, 1), (1, 1), (2, 1), (2, 1), (3, 1), (3, 1)]
    assert len({g["id"] for g in of_row}) == 6
    assert groups_page(store, run_id, step=9, to_dict=group_dict) == []
