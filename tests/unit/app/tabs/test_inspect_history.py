"""Tests for the Inspect tab's "one prompt across steps" pages on a real store: the first page, earlier/later from
the page shown, the latest page, a page from a step, a move past either end, the "groups N-M of T" line, and the
diff's choices following the page shown."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from app.tabs.inspect import tools as inspect_tools
from app.tabs.inspect.tools import diff_choices, history_page, page_state
from app.views.inspect import prompt_history_html
from storage import CompletionRecord, GroupRecord

pytestmark = pytest.mark.backends("sqlite", "postgres")


def _group(step: int, row: int) -> GroupRecord:
    return GroupRecord(step=step, row_index=row, prompt=f"What is {row} + {row}?", completions=[
        CompletionRecord(index=i, text=f"step {step} #{i}", rewards={}, total_reward=float(i), advantage=i - 0.5,
                         num_tokens=3, truncated=False)
        for i in range(2)
    ])


@pytest.fixture
def ctx(store, monkeypatch):
    """Dataset row 7 sampled at steps 1-12 (twice at step 6), row 2 at step 1; pages of 5 groups."""
    monkeypatch.setattr(inspect_tools, "HISTORY_PAGE_SIZE", 5)
    run = store.create_run(name="r", config={}, dataset_id=None, max_steps=12).id
    for step in range(1, 13):
        store.record_groups(run, step, [_group(step, 7)] * (2 if step == 6 else 1) + [_group(step, 2)] * (step == 1))
    return SimpleNamespace(store=store), run


def _steps(page) -> list[int]:
    return [g.step for g in page.groups]


def test_history_pages_earlier_later_latest_and_from_a_step(ctx):
    context, run = ctx
    first = history_page(context, run, 7)
    assert _steps(first) == [1, 2, 3, 4, 5] and (first.offset, first.total) == (0, 13)
    second = history_page(context, run, 7, "later", page_state(first))
    assert _steps(second) == [6, 6, 7, 8, 9] and second.offset == 5
    third = history_page(context, run, 7, "later", page_state(second))
    assert _steps(third) == [10, 11, 12] and third.offset == 10 and not third.has_later
    assert _steps(history_page(context, run, 7, "later", page_state(third))) == [8, 9, 10, 11, 12]  # past the end
    assert _steps(history_page(context, run, 7, "earlier", page_state(third))) == [6, 6, 7, 8, 9]
    latest = history_page(context, run, 7, "latest", page_state(first))
    assert _steps(latest) == [8, 9, 10, 11, 12] and latest.offset == 8
    assert _steps(history_page(context, run, 7, "earlier", page_state(first))) == [1, 2, 3, 4, 5]  # before the start
    assert _steps(history_page(context, run, 7, from_step=6)) == [6, 6, 7, 8, 9]
    assert _steps(history_page(context, run, 7, from_step=50)) == [8, 9, 10, 11, 12]  # past the end: the latest
    # a move from another row's page starts that row at its first page
    assert _steps(history_page(context, run, 2, "later", page_state(second))) == [1]
    assert history_page(context, None, 7) is None and history_page(context, run, None) is None


def test_history_html_says_which_groups_of_how_many(ctx):
    context, run = ctx
    page = history_page(context, run, 7, from_step=6)
    html = prompt_history_html(page.groups, page)
    assert 'data-offset="5" data-total="13"' in html
    assert "groups 6–10 of 13" in html and "steps 6–9: 4 steps on this page" in html
    assert re.findall(r'class="history-step" data-step="(\d+)"', html) == ["6", "6", "7", "8", "9"]


def test_diff_choices_follow_the_page_shown(ctx):
    context, run = ctx
    shown = page_state(history_page(context, run, 7, from_step=10))
    labels = [label for label, _ in diff_choices(context, run, 1, 7, shown)["choices"]]
    steps = [int(re.match(r"step (\d+)", label).group(1)) for label in labels]
    assert steps == [1, 1, 1, 1, 10, 10, 11, 11, 12, 12]  # step 1's groups (rows 7 and 2), then the page's
    first_page = [label for label, _ in diff_choices(context, run, None, 7, None)["choices"]]
    assert len(first_page) == 10 and first_page[0].startswith("step 1 ")


# ------------------------------------------------------------------------- the tab's bounded reads of a long run


@pytest.mark.parametrize(("clicked", "expected"), [(4, 4), (5, 4), (5.2, 6), (100, 6), (-3, 2), (3, 2)])
def test_nearest_group_step_is_the_recorded_step_nearest_the_click(store, clicked, expected):
    """A click between two recorded steps opens the nearer one, the earlier on a tie."""
    run = store.create_run(name="r", config={}, dataset_id=None, max_steps=6).id
    assert store.nearest_group_step(run, clicked) is None
    for step in (2, 4, 6):
        store.record_groups(run, step, [_group(step, 1)])
    assert store.nearest_group_step(run, clicked) == expected


def test_step_choices_are_the_latest_steps_plus_one_opened_from_a_click(ctx, monkeypatch):
    from app.tabs.inspect import tab as inspect

    context, run = ctx
    monkeypatch.setattr(inspect, "STEP_CHOICES", 4)
    assert context.store.latest_group_steps(run, 4) == [12, 11, 10, 9]
    assert inspect.step_choices(context, run) == [12, 11, 10, 9]
    assert inspect.step_choices(context, run, keep=3) == [12, 11, 10, 9, 3]
    assert inspect.step_choices(context, run, keep=99) == [12, 11, 10, 9]  # not a recorded step
    assert inspect.open_step(context, run, 2.6) == (run, [12, 11, 10, 9, 3], 3)


def test_pass_share_from_best_totals_equals_pass_at_g_per_step(store):
    from app.views.inspect import pass_at_g, pass_share

    run = store.create_run(name="r", config={}, dataset_id=None, max_steps=3).id
    store.record_groups(run, 1, [_group(1, 1), _group(1, 2)])  # best totals 1.0 and 1.0
    empty = GroupRecord(step=2, row_index=3, prompt="p", completions=[])
    store.record_groups(run, 2, [_group(2, 1), empty])
    store.record_groups(run, 3, [_group(3, 1)])
    best = store.best_totals(run, 1, 2)
    assert best == {1: [1.0, 1.0], 2: [1.0, None]}
    for threshold in (0.0, 0.5, 1.0):
        for step in (1, 2):
            assert pass_share(best[step], threshold) == pass_at_g(store.groups_at(run, step), threshold)
    assert pass_share([], 0.5) is None


def test_prompt_rows_of_the_recent_groups_only(ctx):
    context, run = ctx
    every = context.store.prompt_rows(run)
    assert [(r.row_index, r.num_groups, r.first_step, r.last_step) for r in every] == [(7, 13, 1, 12), (2, 1, 1, 1)]
    recent = context.store.prompt_rows(run, recent=5)  # the latest 5 groups: steps 8-12, row 7 only
    assert [(r.row_index, r.num_groups, r.first_step, r.last_step) for r in recent] == [(7, 5, 8, 12)]
    assert context.store.prompt_rows(run, recent=1000) == every


def test_eval_groups_are_not_in_a_training_rows_history(ctx):
    context, run = ctx
    # an evaluation at steps 4 and 8 on another dataset whose row 7 is another prompt
    for step in (4, 8):
        eval_group = GroupRecord(step=step, row_index=7, prompt="What is 4 + 8?", completions=[], split="eval")
        context.store.record_groups(run, step, [eval_group], split="eval")
    store = context.store
    page = store.prompt_page(run, 7, limit=50)
    assert page.total == 13 and len(page.groups) == 13
    assert all(g.prompt == "What is 7 + 7?" and g.split in (None, "train") for g in page.groups)
    assert [g.step for g in store.groups_for_prompt(run, 7, 50, after=(3, None))][:2] == [4, 5]
    assert {r.row_index: r.num_groups for r in store.prompt_rows(run)} == {7: 13, 2: 1}
    assert {r.row_index: r.num_groups for r in store.prompt_rows(run, recent=3)} == {7: 3}
    assert [g.split for g in store.groups_at(run, 8)].count("eval") == 1  # still in the step's view
