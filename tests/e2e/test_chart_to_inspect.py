"""From a chart to the groups, in headless Chromium: a click on a point of the Runs chart opens the Inspect tab at
that step, with the step's groups, the histogram of its total rewards and pass@G per step.

Run "chart-demo" is written straight into the served store (no training): 6 steps of metrics, groups recorded at
steps 2, 4 and 6 with prompts that name their step.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from grpo_core.run_config import RunConfig
from storage import CompletionRecord, GroupRecord, RunStatus, Store, sqlite_url
from tests.helpers import click_chart_point, pick
from tests.store_helpers import record_metrics

pytestmark = pytest.mark.e2e

GROUP_STEPS = (2, 4, 6)


def _group(step: int, row: int) -> GroupRecord:
    totals = [1.0, 0.0, 0.5, 0.0] if row == 0 else [0.0, 0.0, 0.0, 0.0]
    return GroupRecord(
        step=step,
        row_index=row,
        prompt=f"prompt of step {step}, row {row}",
        completions=[
            CompletionRecord(index=i, text=f"answer {i}", rewards={"numeric_answer": t}, total_reward=t,
                             advantage=t - 0.375, num_tokens=2, truncated=False)
            for i, t in enumerate(totals)
        ],
    )


@pytest.fixture(scope="module")
def chart_run(server):
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        config = RunConfig.model_validate({"name": "chart-demo", "model": "/nonexistent/model",
                                           "dataset_path": "/nonexistent/data.jsonl"}).model_dump(mode="json")
        run = store.create_run(name="chart-demo", config=config, dataset_id=None, max_steps=6)
        store.finish_run(run.id, RunStatus.COMPLETED)
        for step in range(1, 7):
            record_metrics(store, run.id, step, {"reward": 0.1 * step, "reward_std": 0.2, "kl": 0.001 * step,
                                                 "loss": 0.01, "rewards/numeric_answer/mean": 0.1 * step},
                           wall_time=time.time() - 600 + step)
            if step in GROUP_STEPS:
                store.record_groups(run.id, step, [_group(step, 0), _group(step, 1)])
        yield run.id
    finally:
        store.close()


def test_clicking_a_chart_point_opens_that_steps_groups(page, chart_run):
    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-table")).to_contain_text("chart-demo")
    pick(page, "runs-select", "chart-demo")
    page.wait_for_function(
        "() => { const d = document.querySelector('#runs-plot .js-plotly-plot');"
        " return d && d._fullData && d._fullData.some(t => t.x && t.x.length === 6) && d._ev && d._ev.__grpoClick; }"
    )
    # the doctor panel above the chart may still be filling in: click_chart_point clicks again when it missed
    inspect_tab = page.get_by_role("tab", name="Inspect")
    click_chart_point(page, "#runs-plot", 4,
                      lambda: expect(inspect_tab).to_have_attribute("aria-selected", "true", timeout=5000))

    expect(page.get_by_role("tab", name="Inspect")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#inspect-summary")).to_contain_text("step 4")
    expect(page.locator("#inspect-groups")).to_contain_text("prompt of step 4, row 0")
    summary = page.locator("#inspect-summary").inner_text()
    assert "chart-demo" in summary and "2 groups" in summary
    assert "pass@G (a completion above 0.5): 50% of groups" in summary
    stats = page.locator("#inspect-stats .js-plotly-plot")
    stats.wait_for()
    expect(stats).to_contain_text("total reward at step 4 (8 completions)")
    expect(stats).to_contain_text("pass@G")


def test_a_runs_own_page_draws_it_and_a_click_opens_that_step_in_the_dashboard(browser, server, chart_run):
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{server['url']}run?run={chart_run}")
        head = page.locator("#run-page-head")
        expect(head).to_contain_text("chart-demo")
        expect(head).to_contain_text("completed")
        page.wait_for_function(
            "() => { const d = document.querySelector('#runs-plot .js-plotly-plot');"
            " return d && d._fullData && d._fullData.some(t => t.x && t.x.length === 6) && d._ev && d._ev.__grpoClick; }"
        )
        assert page.get_by_role("tab").count() == 0  # none of the dashboard's tabs on this page
        expect(page).to_have_title(f"#{chart_run} chart-demo · GRPO dashboard")
        assert page.locator(".nav-holder").is_hidden()  # nor Gradio's page list
        assert head.get_by_role("link", name="Open in the dashboard").get_attribute("href") == \
            f"./?run={chart_run}&tab=runs"

        click_chart_point(page, "#runs-plot", 4, lambda: page.wait_for_url("**/?run=*&step=4&tab=inspect",
                                                                           timeout=5000))
        assert page.url == f"{server['url']}?run={chart_run}&step=4&tab=inspect"
        expect(page.get_by_role("tab", name="Inspect")).to_have_attribute("aria-selected", "true")
        expect(page.locator("#inspect-groups")).to_contain_text("prompt of step 4, row 0")

        for hostile in ("999999", "%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E", "1e3"):
            page.goto(f"{server['url']}run?run={hostile}")
            expect(page.locator("#run-page-missing")).to_contain_text("No run to show")
            expect(page.locator("#run-page-body")).to_be_hidden()  # no empty controls and chart under the note
            assert page.locator("img[src=x]").count() == 0 and "chart-demo" not in head.inner_text()
    finally:
        context.close()
