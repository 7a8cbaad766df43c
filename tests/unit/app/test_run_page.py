"""A run's own page (``/run?run=12``, app.run_page), as built (no server): a page of its own whose config holds none
of the dashboard's tabs, whose load draws the linked run's chart in its one answer, and which shows a note, never the
value, for a link naming no run."""

from __future__ import annotations

import time
from types import SimpleNamespace

import plotly.graph_objects as go
import pytest

from app.run_page import NO_SUCH_RUN_HTML, RUN_PAGE_PATH, page_link
from app.views.runs import run_status_html
from grpo_core.run_config import RunConfig
from storage import RunStatus
from tests.store_helpers import record_metrics

#: The run page stays a light page: its first chart is drawn in about the time of the least page Gradio can make
#: (docs/long-runs.md). The dashboard's page has about 560 components.
MAX_RUN_PAGE_COMPONENTS = 60


def _page_load(blocks, page: str):
    loads = [fn for fn in blocks.fns.values() if fn.page == page and (blocks._id, "load") in
             [(target[0], target[1]) for target in fn.targets]]
    assert len(loads) == 1, f"one load event on page {page!r}"
    return loads[0]


def _request(query: dict) -> SimpleNamespace:
    return SimpleNamespace(query_params=query, username=None, session_hash="test-page")


def test_the_run_page_is_a_page_of_its_own_holding_none_of_the_dashboards_tabs(built):
    _ctx, blocks = built
    config = blocks.get_config_file()
    pages = config["page"]
    assert RUN_PAGE_PATH in pages and [p[0] for p in blocks.pages] == ["", RUN_PAGE_PATH]
    run_page, dashboard = set(pages[RUN_PAGE_PATH]["components"]), set(pages[""]["components"])
    assert not run_page & dashboard
    assert len(run_page) <= MAX_RUN_PAGE_COMPONENTS < len(dashboard)
    ids = {c["id"]: c["props"].get("elem_id") for c in config["components"]}
    on_page = {ids[i] for i in run_page}
    assert {"runs-plot", "run-page-head", "runs-section-clip", "runs-smoothing"} <= on_page
    assert not {"runs-table", "inspect-run", "launch-dataset"} & on_page  # the tabs' parts stay on the dashboard
    assert page_link(12) == "run?run=12"


def test_the_load_draws_the_linked_runs_chart_in_its_own_answer(built):
    ctx, blocks = built
    config = RunConfig.model_validate({"name": "<b>bold</b>", "model": "/nonexistent/model",
                                       "dataset_path": "/nonexistent/data.jsonl"}).model_dump(mode="json")
    run = ctx.store.create_run(name="<b>bold</b>", config=config, dataset_id=None, max_steps=5)
    for step in range(1, 4):
        record_metrics(ctx.store, run.id, step, {"reward": 0.1 * step, "kl": 0.01, "grad_norm": 1.0},
                       wall_time=time.time() - 60 + step)
    ctx.store.finish_run(run.id, RunStatus.COMPLETED)
    load = _page_load(blocks, RUN_PAGE_PATH)
    assert [o.elem_id for o in load.outputs][:3] == ["run-page-run", "run-page-head", "runs-plot"]
    defaults = [block.value for block in load.inputs]

    run_id, head, figure, series, body = load.fn(_request({"run": str(run.id)}), *defaults)
    assert body == {"__type__": "update"}  # gr.skip(): the page's body stays shown
    assert run_id == run.id and isinstance(figure, go.Figure)
    assert series.last_step == 3 and "grad_norm" in series.known  # the sections know every key
    assert "&lt;b&gt;bold&lt;/b&gt;" in head and "<b>bold</b>" not in head  # the name shown as text
    assert f'href="./?run={run.id}&amp;tab=runs"' in head and "completed" in head
    assert "grpo-run-link" not in head  # the page does not link itself; the Runs tab's card links the page
    assert f'href="./run?run={run.id}" target="_blank"' in run_status_html(ctx.store.get_run(run.id))
    drawn = {trace.name for trace in figure.data if trace.x is not None and len(trace.x) == 3}
    assert {"reward (weighted total)", "kl"} <= drawn


@pytest.mark.parametrize("query", [{}, {"run": "999999"}, {"run": "0"}, {"run": "-1"}, {"run": "1e3"},
                                   {"run": "<script>alert(1)</script>"}, {"run": "9" * 40}, {"run": ["1", "2"]}])
def test_a_link_naming_no_run_shows_the_note_and_never_the_value(built, query):
    ctx, blocks = built
    ctx.store.create_run(name="other", config={}, dataset_id=None, max_steps=1)  # run 1 exists: never shown instead
    load = _page_load(blocks, RUN_PAGE_PATH)
    answer = load.fn(_request(query), *[block.value for block in load.inputs])
    assert answer == (None, NO_SUCH_RUN_HTML, None, None, {"__type__": "update", "visible": False})


@pytest.mark.parametrize("provenance", [{"dataset": "x"}, {"model": [1]}, {"versions": [1, 2]}, {"device": "gpu"},
                                        {"plugins": ["a.py"]}, {"plugins": {"a.py": {"sha256": 1}}},
                                        {"dataset": {"sha256": ["x"]}}, {"model": {"identity": {"a": 1}}}])
def test_a_scripts_provenance_of_another_shape_still_shows_the_runs_page(built, provenance):
    """A provenance is a script's to write (the ingest API stores any JSON object); a part of another shape made the
    status card raise, so neither the run's page nor the Runs tab showed the run to anyone (round six)."""
    ctx, blocks = built
    run = ctx.store.create_run(name="script", config={}, dataset_id=None, max_steps=1, owner="bob")
    ctx.store.update_run(run.id, provenance=provenance)
    load = _page_load(blocks, RUN_PAGE_PATH)
    run_id, head, _figure, _series, _body = load.fn(_request({"run": str(run.id)}),
                                                    *[block.value for block in load.inputs])
    assert run_id == run.id and 'id="run-status"' in head and "grpo-provenance" in head
    assert "grpo-provenance" in run_status_html(ctx.store.get_run(run.id))  # the Runs tab's card


def test_a_new_session_keeps_no_copy_of_every_components_config(built):
    """Gradio's sessions built the config of every component of the app when they began (for deep links, which the
    dashboard does not serve): about 900 kB a session, up to 10,000 sessions, and a session begins at any request
    with a new ``session_hash`` (round six). A session holds its own values only now."""
    import gc
    import tracemalloc

    from gradio.state_holder import SessionState

    _ctx, blocks = built
    gc.collect()
    tracemalloc.start()
    try:
        sessions = [SessionState(blocks) for _ in range(10)]
        gc.collect()
        per_session = tracemalloc.get_traced_memory()[0] / len(sessions)
    finally:
        tracemalloc.stop()
    assert per_session < 200_000, f"{per_session / 1024:.0f} kB a session"  # was about 900 kB
    head = next(block for block in blocks.blocks.values() if getattr(block, "elem_id", None) == "run-page-head")
    sessions[0]._update_value_in_config(head._id, "<b>planted</b>")
    sessions[0][head._id] = head
    assert list(sessions[0].components) == [] and sessions[0][head._id] is head


def test_the_head_reads_the_runs_log_only_for_a_failed_run(built, monkeypatch):
    """The card shows a log's end only for a failed run: a training run's page, ticking every 2 s, never reads it."""
    from app.run_page import head_html

    ctx, _blocks = built
    reads = []
    monkeypatch.setattr(ctx.launcher, "log_tail", lambda run, max_lines=40: reads.append(run.id) or "Traceback: boom")
    running = ctx.store.create_run(name="running", config={}, dataset_id=None, max_steps=3)
    ctx.store.claim_run(running.id, worker_pid=None)
    assert "Traceback" not in head_html(ctx, ctx.store.get_run(running.id)) and reads == []
    failed = ctx.store.create_run(name="failed", config={}, dataset_id=None, max_steps=3)
    ctx.store.finish_run(failed.id, RunStatus.FAILED)
    assert "Traceback: boom" in head_html(ctx, ctx.store.get_run(failed.id)) and reads == [failed.id]
