"""Inspect shows one step per view, whatever order its redraws finish in: a redraw of step 6 that finishes after a
later-started redraw of step 4 is dropped (no change), so the summary, the groups and the reward histogram on screen
all stay at step 4. The redraws are forced out of order: step 6's read of its groups is held until step 4's redraw
has answered."""

from __future__ import annotations

import threading
from types import SimpleNamespace

import pytest

from app.server import build_blocks, create_context
from app.tabs.inspect.tab import step_view
from app.views.latest_view import LatestOnly
from storage import CompletionRecord, GroupRecord

SKIP = {"__type__": "update"}


def _group(step: int) -> GroupRecord:
    return GroupRecord(step=step, row_index=0, prompt=f"prompt of step {step}", completions=[
        CompletionRecord(index=i, text=f"answer {i}", rewards={"r": float(i)}, total_reward=float(i),
                         advantage=i - 0.5, num_tokens=2, truncated=False)
        for i in range(2)
    ])


@pytest.fixture
def built(settings):
    ctx = create_context(settings)
    blocks = build_blocks(ctx)
    run = ctx.store.create_run(name="order", config={}, dataset_id=None, max_steps=6).id
    for step in (2, 4, 6):
        ctx.store.record_groups(run, step, [_group(step)])
    try:
        yield ctx, blocks, run
    finally:
        ctx.store.close()


def _handler(blocks, name: str):
    [fn] = [f.fn for f in blocks.fns.values() if getattr(f.fn, "__qualname__", "") == f"create_inspect_tab.<locals>.{name}"][:1]
    return fn


def _steps_shown(outputs) -> set[str]:
    """The step each output of a redraw shows: the summary's "step N", the groups' prompts, the histogram title."""
    summary, groups, figure = outputs
    shown = {summary.split("step ", 1)[1].split(":", 1)[0], groups.split("prompt of step ", 1)[1][0]}
    shown.add(figure.layout.annotations[0].text.split("step ", 1)[1].split(" ", 1)[0])
    return shown


def test_a_redraw_that_finishes_late_is_dropped(built, monkeypatch):
    ctx, blocks, run = built
    on_show = _handler(blocks, "on_show")
    entered, release = threading.Event(), threading.Event()
    read = ctx.store.groups_at

    def held_groups_at(run_id, step, *args, **kwargs):
        if step == 6:
            entered.set()
            assert release.wait(30)
        return read(run_id, step, *args, **kwargs)

    monkeypatch.setattr(ctx.store, "groups_at", held_groups_at)
    page = SimpleNamespace(session_hash="page-1")
    late: dict = {}
    thread = threading.Thread(target=lambda: late.update(out=on_show(run, 6, True, "all", 3, 0.5, page)))
    thread.start()
    assert entered.wait(30)
    first = on_show(run, 4, True, "all", 3, 0.5, page)  # started after step 6's redraw, answers before it
    release.set()
    thread.join(30)
    assert _steps_shown(first) == {"4"}
    assert late["out"] == (SKIP, SKIP, SKIP)  # step 6 landing late changes nothing on screen


def test_redraws_of_other_pages_are_kept(built, monkeypatch):
    ctx, blocks, run = built
    on_show = _handler(blocks, "on_show")
    assert _steps_shown(on_show(run, 6, True, "all", 3, 0.5, SimpleNamespace(session_hash="a"))) == {"6"}
    assert _steps_shown(on_show(run, 4, True, "all", 3, 0.5, SimpleNamespace(session_hash="b"))) == {"4"}
    assert _steps_shown(on_show(run, 2, True, "all", 3, 0.5, None)) == {"2"}


def test_opening_the_tab_on_a_preselected_run_lists_its_steps_at_the_latest(built):
    """A run selected before it recorded groups (after Launch, from a link) has no steps listed: opening the tab lists
    them and chooses the latest, so the view is drawn without pressing "↻ steps"."""
    _ctx, blocks, run = built
    on_tab = _handler(blocks, "on_tab")
    update = on_tab(run, None)
    assert [c[0] if isinstance(c, tuple) else c for c in update["choices"]] == [6, 4, 2]
    assert update["value"] == 6
    assert "value" not in on_tab(run, 4)  # a chosen step is kept


@pytest.mark.parametrize("step", [2, 4, 6])
def test_every_part_of_a_view_shows_the_one_step(built, step):
    ctx, _blocks, run = built
    assert _steps_shown(step_view(ctx, run, step)) == {str(step)}


def test_latest_only_tickets():
    guard = LatestOnly(max_pages=2)
    first = guard.begin("a")
    second = guard.begin("a")
    assert not guard.is_latest("a", first) and guard.is_latest("a", second)
    assert guard.is_latest(None, guard.begin(None))
    guard.begin("b")
    guard.begin("c")  # "a" is forgotten: its answers are kept, never wrongly dropped
    assert guard.is_latest("a", first)
