"""The dashboard as built (no server): the tabs' dataset and run lists follow the store through one version check,
pushed only when the lists moved; and only the named public endpoints are left public."""

from __future__ import annotations

import json

import gradio as gr

from app.api.public import PUBLIC_ENDPOINTS, run_dict
from app.catalog_sync import dataset_choices, run_choices

SKIP = {"__type__": "update"}


def _sync_handler(blocks):
    handlers = {id(f.fn): f for f in blocks.fns.values() if getattr(f.fn, "__qualname__", "").startswith(
        "CatalogSync.connect.")}
    assert len(handlers) == 1, "one sync handler, shared by the page load, the timer and the events"
    return next(iter(handlers.values()))


def test_lists_are_pushed_only_when_they_moved(built):
    ctx, blocks = built
    handler = _sync_handler(blocks)
    outputs = [block.elem_id for block in handler.outputs]
    assert {"launch-dataset", "dataset-pick", "datasets-table"} <= set(outputs)
    assert {"launch-clone", "compare-runs", "inspect-run", "try-run"} <= set(outputs)
    assert not {"launch-clone-refresh"} & {b.elem_id for b in blocks.blocks.values()}

    first = handler.fn(None)
    version = first[0]
    assert version == ctx.store.catalog_version()
    launch_dataset = first[outputs.index("launch-dataset")]
    assert launch_dataset["choices"] == dataset_choices(ctx) and "value" not in launch_dataset  # the pick is kept
    assert first[outputs.index("inspect-run")] == {"choices": [], "__type__": "update"}

    assert handler.fn(version) == [SKIP] * len(outputs)  # nothing moved: nothing re-read, nothing sent

    run = ctx.store.create_run(name="new-run", config={}, dataset_id=None, max_steps=2)
    moved = handler.fn(version)
    assert moved[0] == ctx.store.catalog_version() != version
    for elem_id in ("launch-clone", "compare-runs", "inspect-run", "try-run"):
        assert moved[outputs.index(elem_id)]["choices"] == run_choices(ctx) == [(f"#{run.id} new-run (queued)", run.id)]
    for elem_id in ("launch-dataset", "dataset-pick", "datasets-table"):
        assert moved[outputs.index(elem_id)] == SKIP

    ctx.store.request_cancel(run.id)  # a status change relabels the runs
    relabelled = handler.fn(moved[0])
    assert relabelled[outputs.index("inspect-run")]["choices"] == [(f"#{run.id} new-run (cancelled)", run.id)]


def test_only_the_named_endpoints_are_public(built):
    _, blocks = built
    public = sorted(f.api_name for f in blocks.fns.values() if f.api_visibility != "private")
    assert public == sorted(PUBLIC_ENDPOINTS)
    assert list(blocks.get_api_info()["named_endpoints"]) == [f"/{name}" for name in PUBLIC_ENDPOINTS]


def test_run_dict_is_plain_json(built):
    ctx, _ = built
    run = ctx.store.create_run(name="r", config={"max_steps": 2}, dataset_id=None, max_steps=2)
    plain = run_dict(ctx.store.get_run(run.id))
    assert json.loads(json.dumps(plain)) == plain
    assert plain["status"] == "queued" and plain["created_at"].endswith("+00:00") and plain["config"] == {"max_steps": 2}



def test_the_page_load_sends_few_events_and_the_page_values_follow_the_first_chart(built):
    """Gradio sends one event per callable ``value=`` at page load; the page's values (the runs table, the quick
    starts' note, the plugin note; the datasets table is a followed list) come in the catalog's answer instead, which
    follows the first view's answer, and the Launch preview is filled when its tab is selected: a link sends one
    event before its first chart (docs/long-runs.md)."""
    ctx, blocks = built
    loads = [f for f in blocks.fns.values() if any(event == "load" for _, event in f.targets) and f.page == ""]
    assert [f.fn.__qualname__ for f in loads] == ["connect_url.<locals>.on_load"]  # the dashboard's first view only
    [preview] = [f for f in blocks.fns.values() if getattr(f.fn, "__name__", "") == "on_preview"]
    launch_tab = next(b for b in blocks.blocks.values() if isinstance(b, gr.Tab) and b.id == "launch")
    assert (launch_tab._id, "select") in preview.targets  # the Launch preview: filled when its tab is selected
    handler = _sync_handler(blocks)
    first_view = next(f for f in loads if f.fn.__qualname__ == "connect_url.<locals>.on_load")
    assert any(f.fn is handler.fn and f.trigger_after == first_view._id for f in blocks.fns.values())
    outputs = [block.elem_id for block in handler.outputs]
    ctx.store.create_run(name="listed", config={}, dataset_id=None, max_steps=2)
    first = handler.fn(None)
    table = first[outputs.index("runs-table")]
    assert list(table["name"]) == ["listed"]
    assert "quick start" in first[outputs.index("launch-quick-start")].lower()
    assert isinstance(first[outputs.index("launch-tool-plugins-note")], str)
    again = handler.fn(first[0])
    assert [again[outputs.index(i)] for i in ("runs-table", "launch-quick-start", "launch-tool-plugins-note")] == \
        [SKIP] * 3  # read at the page load only
