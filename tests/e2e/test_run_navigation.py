"""Runs as the app's navigation, in headless Chromium: a click on a row of the runs table selects the run in Runs,
Inspect and Try the model; a checkbox overlays a run on every panel in its own colour; the smoothing slider changes
every panel at once; a link ``?run=N&step=S&tab=inspect`` opens that run's step in Inspect, and the address follows
the view.

Runs "nav-a" and "nav-b" are written straight into the served store (no training): 6 steps of metrics each, groups at
steps 2, 4 and 6 whose prompts name their run and step.
"""

from __future__ import annotations

import re
import time

import pytest
from playwright.sync_api import expect

from grpo_core.run_config import RunConfig
from storage import CompletionRecord, GroupRecord, RunStatus, Store, sqlite_url
from tests.store_helpers import record_metrics

pytestmark = pytest.mark.e2e

#: The Runs chart's traces as plotly holds them: name, panel (x axis), colour, meta (line / raw / smoothed), y.
TRACES = """() => {
  const d = document.querySelector('#runs-plot .js-plotly-plot');
  if (!d || !d._fullData) return [];
  return d._fullData.map(t => ({name: t.name, axis: t.xaxis, colour: t.line && t.line.color, meta: t.meta,
                                  y: Array.from(t.y || []), group: t.legendgroup}));
}"""


def _group(name: str, step: int) -> GroupRecord:
    return GroupRecord(step=step, row_index=0, prompt=f"{name} prompt at step {step}", completions=[
        CompletionRecord(index=i, text=f"answer {i}", rewards={"numeric_answer": float(i)}, total_reward=float(i),
                         advantage=i - 0.5, num_tokens=2, truncated=False)
        for i in range(2)
    ])


@pytest.fixture(scope="module")
def two_runs(server):
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    ids = {}
    try:
        for name, scale in (("nav-a", 1.0), ("nav-b", 2.0)):
            config = RunConfig.model_validate({"name": name, "model": "/nonexistent/model",
                                               "dataset_path": "/nonexistent/data.jsonl"}).model_dump(mode="json")
            run = store.create_run(name=name, config=config, dataset_id=None, max_steps=6)
            store.finish_run(run.id, RunStatus.COMPLETED)
            for step in range(1, 7):
                record_metrics(store, run.id, step, {"reward": scale * (step % 2), "kl": 0.01 * scale * step,
                                                     "loss": 0.1 * (step % 3)}, wall_time=time.time() - 600 + step)
                if step % 2 == 0:
                    store.record_groups(run.id, step, [_group(name, step)])
            ids[name] = run.id
        yield ids
    finally:
        store.close()


def _click_row(tab_page, name: str) -> None:
    """Click the runs table's cell holding ``name`` (the visible one: the table also keeps hidden copies to size
    its columns)."""
    tab_page.locator("#runs-table").get_by_text(name, exact=True).locator("visible=true").first.click()


def _traces(tab_page):
    return tab_page.evaluate(TRACES)


def _chart_of(tab_page, run_name: str):
    tab_page.wait_for_function(
        "(name) => { const d = document.querySelector('#runs-plot .js-plotly-plot');"
        " return d && d.layout && d.layout.title && String(d.layout.title.text || '').includes(name); }",
        arg=run_name,
    )


def test_row_click_selects_the_run_everywhere(page, two_runs):
    page.get_by_role("tab", name="Runs").click()
    table = page.locator("#runs-table")
    expect(table).to_contain_text("nav-a")
    _click_row(page, "nav-a")
    expect(page.locator("#runs-select input")).to_have_value(f"#{two_runs['nav-a']} nav-a (completed)")
    _chart_of(page, "nav-a")
    expect(page).to_have_url(re.compile(rf"[?&]run={two_runs['nav-a']}(&|$)"))
    _click_row(page, "nav-b")
    expect(page.locator("#runs-select input")).to_have_value(f"#{two_runs['nav-b']} nav-b (completed)")
    _chart_of(page, "nav-b")
    page.get_by_role("tab", name="Inspect").click()
    expect(page.locator("#inspect-run input")).to_have_value(f"#{two_runs['nav-b']} nav-b (completed)")
    expect(page.locator("#inspect-summary")).to_contain_text("nav-b")
    expect(page.locator("#inspect-groups")).to_contain_text("nav-b prompt at step 6")
    page.get_by_role("tab", name="Try the model").click()
    expect(page.locator("#try-run input")).to_have_value(f"#{two_runs['nav-b']} nav-b (completed)")
    expect(page).to_have_url(re.compile(r"[?&]tab=try(&|$)"))
    expect(page).to_have_url(re.compile(rf"[?&]run={two_runs['nav-b']}(&|$)"))


def test_overlay_and_smoothing_change_every_panel(page, two_runs):
    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-table")).to_contain_text("nav-a")
    _click_row(page, "nav-a")
    _chart_of(page, "nav-a")
    raw_panels = {t["axis"] for t in _traces(page)}
    assert {"x", "x3", "x4"} <= raw_panels  # reward, kl, loss

    page.locator("#runs-overlay").get_by_label(f"#{two_runs['nav-b']} nav-b (completed)").check()
    page.wait_for_function("() => document.querySelector('#runs-plot .js-plotly-plot')._fullData"
                           ".some(t => String(t.legendgroup).startsWith('#" + str(two_runs["nav-b"]) + " '))")
    traces = _traces(page)
    by_run: dict[str, set] = {}
    for trace in traces:
        by_run.setdefault(trace["group"].split(" ")[0], set()).add((trace["axis"], trace["colour"]))
    a, b = f"#{two_runs['nav-a']}", f"#{two_runs['nav-b']}"
    assert {axis for axis, _ in by_run[b]} == {axis for axis, _ in by_run[a]} == raw_panels  # on every panel
    assert len({c for _, c in by_run[a]}) == 1 and len({c for _, c in by_run[b]}) == 1  # one colour a run
    assert {c for _, c in by_run[a]} != {c for _, c in by_run[b]}
    expect(page.locator("#runs-overlay-key")).to_contain_text("nav-b")

    slider = page.locator("#runs-smoothing input[type=number]")
    slider.fill("0.8")
    slider.press("Enter")
    page.locator("#runs-smoothing input[type=range]").dispatch_event("pointerup")
    page.wait_for_function("() => document.querySelector('#runs-plot .js-plotly-plot')._fullData"
                           ".some(t => t.meta === 'smoothed')")
    smoothed = [t for t in _traces(page) if t["meta"] == "smoothed"]
    raw = [t for t in _traces(page) if t["meta"] == "raw"]
    assert {t["axis"] for t in smoothed} == raw_panels  # every panel smoothed at once, both runs
    assert {t["group"].split(" ")[0] for t in smoothed} == {a, b}
    pairs = {(t["group"], t["axis"]): t["y"] for t in raw}
    assert all(t["y"] != pairs[(t["group"], t["axis"])] for t in smoothed if max(pairs[(t["group"], t["axis"])])
               != min(pairs[(t["group"], t["axis"])]))


def test_a_link_opens_the_run_and_step(page, server, two_runs):
    run = two_runs["nav-a"]
    page.goto(f"{server['url']}?run={run}&step=3&tab=inspect")
    expect(page.get_by_role("tab", name="Inspect")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#inspect-run input")).to_have_value(f"#{run} nav-a (completed)")
    # step 3 has no groups: the recorded step nearest it (2 or 4), every part of the view at that one step
    summary = page.locator("#inspect-summary")
    expect(summary).to_contain_text("nav-a")
    text = summary.inner_text()
    step = 2 if "step 2:" in text else 4
    assert f"step {step}:" in text
    expect(page.locator("#inspect-groups")).to_contain_text(f"nav-a prompt at step {step}")
    expect(page.locator("#inspect-stats .js-plotly-plot")).to_contain_text(f"total reward at step {step}")
    expect(page).to_have_url(re.compile(rf"[?&]step={step}(&|$)"))
    page.get_by_role("tab", name="Runs").click()
    _chart_of(page, "nav-a")


@pytest.mark.parametrize("query", ["?run=99999&tab=runs", "?run=<b>x</b>&step=-4&tab=admin",
                                   "?run=1e9&step=1%27%3B--&tab=inspect%00"])
def test_a_bad_link_is_ignored(page, server, two_runs, query):
    page.goto(server["url"] + query)
    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-table")).to_contain_text("nav-b")
    page.wait_for_function("() => { const d = document.querySelector('#runs-plot .js-plotly-plot');"
                           " return d && d._fullData && d._fullData.length > 0; }")
    expect(page.locator("body")).not_to_contain_text("Error")
