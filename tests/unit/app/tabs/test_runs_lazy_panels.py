"""The Runs tab's panels under the chart (log, export, notes) mount in the page only once opened: their contents sit
in a column that is not rendered until the accordion's first expand (app.tabs.runs.lazy)."""

from __future__ import annotations

import gradio as gr
import pytest

from app.server import build_blocks, create_context
from app.tabs.runs.lazy import lazy_accordion


def test_a_lazy_accordion_renders_its_contents_on_expand():
    with gr.Blocks() as blocks:
        with lazy_accordion("Log", elem_id="log-panel") as (accordion, _):
            box = gr.Textbox(elem_id="inside")
    body = next(b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "log-panel-body")
    assert accordion.open is False and body.visible is False
    assert box.parent.parent is body and body.parent is accordion  # (Gradio wraps a textbox in a form)
    shows = [f for f in blocks.fns.values() if (accordion._id, "expand") in [(t[0], t[1]) for t in f.targets]]
    assert len(shows) == 1 and shows[0].outputs == [body]
    assert shows[0].fn() == {"__type__": "update", "visible": True}


@pytest.mark.parametrize("panel", ["export-accordion", "runs-notes-panel", "runs-log-panel", "compare-panel", "sweep-view"])
def test_the_runs_tab_panels_under_the_chart_are_lazy(settings, panel):
    ctx = create_context(settings)
    try:
        blocks = build_blocks(ctx)
    finally:
        ctx.store.close()
    body = next(b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == f"{panel}-body")
    assert body.visible is False and body.parent.elem_id == panel
