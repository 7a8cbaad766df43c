"""The Reward workbench's "recorded" line is read when it is shown: a run chosen before it recorded groups does not
keep saying it has none once it has them (the tab opening and a re-score read it again)."""

from __future__ import annotations

from app.tabs.workbench import handlers
from storage import CompletionRecord, GroupRecord


def _group(step: int) -> GroupRecord:
    return GroupRecord(step=step, row_index=0, prompt="What is 1 + 1?", completions=[
        CompletionRecord(index=i, text=str(i), rewards={"r": float(i)}, total_reward=float(i), advantage=i - 0.5,
                         num_tokens=1, truncated=False)
        for i in range(2)
    ])


def test_the_recorded_line_is_read_again_once_the_run_has_groups(ctx):
    run = ctx.store.create_run(name="live", config={"rewards": []}, dataset_id=None, max_steps=4).id
    assert handlers.rules_for_run(ctx, run)[1] == "This run has no recorded groups yet."
    for step in (1, 3):
        ctx.store.record_groups(run, step, [_group(step)])
    assert handlers.recorded_line(ctx, run) == "Recorded groups at 2 steps (1–3)."
    assert handlers.recorded_line(ctx, None) == ""


def test_the_workbench_tab_reads_the_recorded_line_when_opened(settings):
    from app.server import build_blocks, create_context

    ctx = create_context(settings)
    try:
        blocks = build_blocks(ctx)
        recorded = [b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "workbench-recorded"]
        tab = [b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "tab-workbench"]
        assert recorded and tab
        writers = [f for f in blocks.fns.values()
                   if any(o._id == recorded[0]._id for o in f.outputs)
                   and (tab[0]._id, "select") in [tuple(t) for t in f.targets]]
        assert writers, "selecting the tab does not read the recorded line again"
    finally:
        ctx.store.close()
