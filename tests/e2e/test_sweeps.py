"""A sweep from the browser: the Launch tab's Sweep accordion shows how many runs a grid makes and refuses a bad one;
a 4-point sweep of the tiny local model (learning_rate × beta, one step each) is launched in one click, completes
two runs at a time (``--max-concurrent-runs 2``), shows as a 4-row table in the Runs tab's Sweeps view, and its runs
overlay in Compare.

The browser and page fixtures and the form helpers come from ``tests/e2e/test_dashboard.py``; the server is served
through ``tests/servers.py`` with its own data folder. The form, launch and table steps are helpers that
``tests/e2e/test_sweeps_ray.py`` repeats with the runs trained as Ray jobs.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from storage import RunInfo, RunStatus, Store, SweepInfo, sqlite_url
from tests.e2e import test_dashboard as dashboard
from tests.e2e.test_dashboard import set_number, set_text
from tests.servers import serving

browser = dashboard.browser
page = dashboard.page

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The dashboard on its own data folder, training two runs at once."""
    data_dir = tmp_path_factory.mktemp("e2e-sweeps")
    with serving(data_dir, "--max-concurrent-runs", "2") as served:
        yield {"url": served.url, "data_dir": data_dir}


GRID = "learning_rate: 1e-3, 1e-2\nbeta: 0.0, 0.04"  # 4 points


def fill_the_launch_form(page, tiny_model_dir, name: str) -> None:
    """The Launch tab's form for one-step runs of the tiny model, with its Sweep accordion open."""
    page.get_by_role("tab", name="Launch").click()
    set_text(page, "launch-model", str(tiny_model_dir))  # the dataset is the arithmetic example, chosen already
    set_text(page, "launch-name", name)
    set_number(page, "hp-max_steps", "1")
    set_number(page, "hp-max_completion_length", "12")
    page.get_by_text("Sweep: one run per point of a grid of fields").click()


def launch_the_sweep(page, store: Store) -> SweepInfo:
    """Launch the 4-point :data:`GRID` from the open Sweep accordion; the sweep the store then holds."""
    set_text(page, "sweep-grid", GRID)
    button = page.locator("#sweep-button")
    expect(button).to_have_text("Launch sweep (4 runs)")
    expect(page.locator("#sweep-shape")).to_contain_text("4 runs: learning_rate (2) × beta (2)")
    button.click()
    expect(page.locator("#sweep-status")).to_contain_text("4 runs")
    (sweep,) = store.list_sweeps()
    assert len(sweep.run_ids) == 4
    expect(page.locator("#sweep-status")).to_contain_text(f"sweep:{sweep.id}")
    return sweep


def expect_the_sweep_table_completed(page, store: Store, sweep: SweepInfo) -> list[RunInfo]:
    """In the Runs tab's Sweeps view, wait for the sweep's 4 rows to read ``completed``; its runs from the store."""
    page.get_by_role("tab", name="Runs").click()
    rows = page.locator("#sweep-table [role=row].virtual-row")  # the body rows of gradio's virtual table
    expect(rows).to_have_count(4)
    for index in range(4):
        expect(rows.nth(index)).to_contain_text("completed", timeout=480_000)
    header = page.locator("#sweep-table thead").inner_text()
    assert "learning_rate" in header and "beta" in header and "final reward" in header
    runs = store.sweep_runs(sweep.id)
    assert [r.status for r in runs] == [RunStatus.COMPLETED] * 4
    table = page.locator("#sweep-table").inner_text()
    assert "0.001" in table and "0.01" in table and "0.04" in table
    return runs


def test_a_four_point_sweep_from_the_launch_tab(page, server, tiny_model_dir):
    fill_the_launch_form(page, tiny_model_dir, "browser-sweep")
    button = page.locator("#sweep-button")

    # a field that does not exist: named, with the real one, and nothing is queued
    set_text(page, "sweep-grid", "learnig_rate: 1e-3, 1e-2")
    expect(page.locator("#sweep-shape")).to_contain_text("did you mean learning_rate?")
    button.click()
    expect(page.locator("#sweep-status")).to_contain_text("Sweep not launched")
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        assert store.list_runs() == [] and store.list_sweeps() == []

        sweep = launch_the_sweep(page, store)
        # Runs: the sweep's table fills in as its runs complete, two at a time
        runs = expect_the_sweep_table_completed(page, store, sweep)
        assert all(r.ray_submission_id is None for r in runs)  # trained here, by the local executor

        # Overlay in Compare: one line per run, and the varied fields in the differences table
        page.locator("#sweep-compare").click()
        page.wait_for_function(
            "() => document.querySelectorAll('#compare-plot .js-plotly-plot .scatterlayer .trace').length === 4"
        )
        expect(page.locator("#compare-config")).to_contain_text("learning_rate")
        expect(page.locator("#compare-config")).to_contain_text("beta")
    finally:
        store.close()
