"""A sweep from the browser: the Launch tab's Sweep accordion shows how many runs a grid makes and refuses a bad one;
a 4-point sweep of the tiny local model (learning_rate × beta, one step each) is launched in one click, completes
two runs at a time (``--max-concurrent-runs 2``), shows as a 4-row table in the Runs tab's Sweeps view, and its runs
overlay in Compare.

The browser and page fixtures come from ``tests/e2e/conftest.py``; the server is served through ``tests/servers.py``
with its own data folder. The form, launch and table steps are helpers in ``tests/helpers.py`` that
``tests/e2e/test_sweeps_ray.py`` repeats with the runs trained as Ray jobs.
"""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from storage import Store, sqlite_url
from tests.helpers import expect_the_sweep_table_completed, fill_the_launch_form, launch_the_sweep, set_text
from tests.servers import serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The dashboard on its own data folder, training two runs at once."""
    data_dir = tmp_path_factory.mktemp("e2e-sweeps")
    with serving(data_dir, "--max-concurrent-runs", "2") as served:
        yield {"url": served.url, "data_dir": data_dir}


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
