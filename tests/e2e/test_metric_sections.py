"""Every recorded key as a chart in its section, in headless Chromium: a run that logged what TRL 1.16's GRPO logs on
the CPU (``grad_norm``, ``clip_ratio/*``, ``completions/*``...), a reward function's ``log_metric`` scalar and a key
of the user's own shows each in its section once the section is opened; a key recorded after the page was opened
appears in its section; the search over metric names opens the sections it finds.

Run "all-keys" is written straight into the served store (no training): 6 steps of metrics.
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from grpo_core.run_config import RunConfig
from storage import CompletionRecord, GroupRecord, RunStatus, Store, sqlite_url
from tests.helpers import pick
from tests.store_helpers import record_metrics

pytestmark = pytest.mark.e2e

#: section id -> keys recorded that are charted in it.
SECTION_KEYS = {
    "policy": ["grad_norm", "learning_rate", "num_tokens"],
    "clip": ["clip_ratio/high_mean", "clip_ratio/low_min", "clip_ratio/region_mean"],
    "completions": ["completions/max_length", "completions/mean_terminated_length"],
    "rewards": ["rewards/numeric_answer/std"],
    "reward_logs": ["reward_logs/format_share"],
    "custom": ["my_accuracy"],
}


@pytest.fixture(scope="module")
def keys_run(server):
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        config = RunConfig.model_validate({"name": "all-keys", "model": "/nonexistent/model",
                                           "dataset_path": "/nonexistent/data.jsonl"}).model_dump(mode="json")
        run = store.create_run(name="all-keys", config=config, dataset_id=None, max_steps=20)
        for step in range(1, 7):
            values = {"reward": 0.1 * step, "kl": 0.01, "loss": 0.02}
            values.update({key: 0.05 * step for keys in SECTION_KEYS.values() for key in keys})
            record_metrics(store, run.id, step, values, wall_time=time.time() - 600 + step)
        # step 2's group as the recorder stores a plugin's log_extra column (grpo_core.engine.group_capture)
        completions = [CompletionRecord(index=i, text=f"answer {i}", rewards={"judge": float(i % 2)},
                                        total_reward=float(i % 2), advantage=i % 2 - 0.5) for i in range(2)]
        store.record_groups(run.id, 2, [GroupRecord(step=2, row_index=0, prompt="judged prompt", completions=completions,
                                                    extra={"reward_columns": {"0": {"verdict": "<i>too short</i>"},
                                                                              "1": {"verdict": "fine"}}})])
        yield store, run.id
    finally:
        store.close()


def _section_panels(page, section: str) -> list[str]:
    return page.evaluate(
        f"""() => {{ const d = document.querySelector('#runs-section-plot-{section} .js-plotly-plot');
        return d && d.layout && d.layout.meta ? d.layout.meta.panels : null; }}"""
    )


def _open(page, section: str) -> None:
    page.locator(f"#runs-section-{section} button").first.click()


def test_every_key_is_charted_in_its_section(page, keys_run):
    store, run_id = keys_run
    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-table")).to_contain_text("all-keys")
    pick(page, "runs-select", "all-keys")
    page.wait_for_function("() => { const d = document.querySelector('#runs-plot .js-plotly-plot');"
                           " return d && d._fullData && d._fullData.some(t => t.x && t.x.length === 6); }")
    for section, keys in SECTION_KEYS.items():
        expect(page.locator(f"#runs-section-{section}")).to_be_visible()
        expect(page.locator(f"#runs-section-{section}")).to_contain_text(f"{len(keys)} chart")
    expect(page.locator("#runs-section-tools")).to_be_hidden()  # no tools/ key yet
    assert _section_panels(page, "clip") is None  # not drawn before it is opened

    for section, keys in SECTION_KEYS.items():
        _open(page, section)
        page.wait_for_function(
            f"() => {{ const d = document.querySelector('#runs-section-plot-{section} .js-plotly-plot');"
            f" return d && d.layout && d.layout.meta && d.layout.meta.panels.length === {len(keys)}; }}"
        )
        assert sorted(_section_panels(page, section)) == sorted(keys)
        traces = page.evaluate(
            f"""() => document.querySelector('#runs-section-plot-{section} .js-plotly-plot')._fullData
                .filter(t => t.x && t.x.length === 6).map(t => t.name)"""
        )
        assert sorted(traces) == sorted(keys)  # each key drawn with its 6 points
    page.wait_for_function(  # a click on a point of a section's chart opens Inspect, as on the overview
        "() => { const d = document.querySelector('#runs-section-plot-clip .js-plotly-plot');"
        " return d && d._ev && d._ev.__grpoClick; }"
    )

    # a key recorded while the page is open appears in its section (the timer's refresh)
    record_metrics(store, run_id, 7, {"tools/call_frequency": 0.5, "grad_norm": 2.0}, wall_time=time.time())
    expect(page.locator("#runs-section-tools")).to_be_visible()
    expect(page.locator("#runs-section-tools")).to_contain_text("1 chart")
    page.wait_for_function(  # the open policy section redrawn with the new step
        "() => { const d = document.querySelector('#runs-section-plot-policy .js-plotly-plot');"
        " return d && d._fullData.some(t => t.name === 'grad_norm' && t.x.length === 7); }"
    )

    # the search narrows every section to the keys it names
    page.locator("#runs-panel-filter textarea, #runs-panel-filter input").first.fill("high")
    page.locator("#runs-panel-filter textarea, #runs-panel-filter input").first.press("Enter")
    expect(page.locator("#runs-section-clip")).to_contain_text("1 of 3 match")
    page.wait_for_function(
        "() => { const d = document.querySelector('#runs-section-plot-clip .js-plotly-plot');"
        " return d && d.layout.meta.panels.length === 1 && d.layout.meta.panels[0] === 'clip_ratio/high_mean'; }"
    )
    store.finish_run(run_id, RunStatus.COMPLETED)


def test_the_runs_own_page_charts_every_key_in_its_section(browser, server, keys_run):
    _store, run_id = keys_run
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    try:
        page.goto(f"{server['url']}run?run={run_id}")
        expect(page.locator("#run-page-head")).to_contain_text("all-keys")
        for section, keys in SECTION_KEYS.items():
            expect(page.locator(f"#runs-section-{section}")).to_contain_text(f"{len(keys)} chart")
        _open(page, "clip")
        page.wait_for_function(
            "() => { const d = document.querySelector('#runs-section-plot-clip .js-plotly-plot');"
            " return d && d.layout && d.layout.meta && d.layout.meta.panels.length === 3; }"
        )
        assert sorted(_section_panels(page, "clip")) == sorted(SECTION_KEYS["clip"])
        page.wait_for_function(  # a section drawn after the page's last chart update still opens Inspect on a click
            "() => { const d = document.querySelector('#runs-section-plot-clip .js-plotly-plot');"
            " return d && d._ev && d._ev.__grpoClick; }", timeout=5000
        )
    finally:
        context.close()


def test_a_plugins_log_extra_column_is_shown_on_its_completion_in_inspect(page, server, keys_run):
    _store, run_id = keys_run
    page.goto(f"{server['url']}?run={run_id}&step=2&tab=inspect")
    expect(page.get_by_role("tab", name="Inspect")).to_have_attribute("aria-selected", "true")
    groups = page.locator("#inspect-groups")
    expect(groups).to_contain_text("judged prompt")
    rows = groups.locator("tr.grpo-logged")
    expect(rows).to_have_count(2)
    expect(groups).to_contain_text("<i>too short</i>")  # shown as text, never as markup
    assert groups.locator("i", has_text="too short").count() == 0
