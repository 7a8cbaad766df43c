"""The real dashboard in headless Chromium, on a run of the tiny local model trained one step by the server's own
launcher: the Runs tab's Export panel offers the config YAML, metrics, groups, adapter and bundle for download, and
the Try the model tab samples the base model and the trained adapter side by side, scored by the run's rules.

Reuses the ``server``, ``browser`` and ``page`` fixtures of :mod:`tests.e2e.test_dashboard` (this module gets its
own server and data directory).
"""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from grpo_core.submit.queue import submit_run
from storage import RunStatus, Store, sqlite_url
from tests.helpers import tiny_config

pytestmark = pytest.mark.e2e

RUN_NAME = "try-export-run"


@pytest.fixture(scope="module")
def trained_run(server, tiny_model_dir):
    """A run of the tiny model (1 step, checkpoint at step 1) queued in the server's store and trained by its
    launcher; returns its id once completed."""
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        run = submit_run(store, tiny_config(tiny_model_dir, max_steps=1, save_steps=1, name=RUN_NAME)).run
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            info = store.get_run(run.id)
            if info.status.is_final:
                break
            time.sleep(1)
        assert info.status == RunStatus.COMPLETED, info.error or info.status
        return run.id
    finally:
        store.close()


def test_export_panel_offers_every_file_for_download(page, trained_run):
    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-select input")).to_have_value(f"#{trained_run} {RUN_NAME} (completed)",
                                                             timeout=15_000)
    page.locator("#export-accordion").get_by_text("Export", exact=True).first.click()
    page.locator("#export-button").click()
    status = page.locator("#export-status")
    expect(status).to_contain_text(f"Exported run #{trained_run}", timeout=60_000)
    prefix = f"run-{trained_run:05d}"
    for elem_id, name in [
        ("export-config", f"{prefix}-config.yaml"),
        ("export-config", f"{prefix}-dataset.jsonl"),
        ("export-metrics", f"{prefix}-metrics.csv"),
        ("export-groups", f"{prefix}-groups.parquet"),
        ("export-adapter", f"{prefix}-adapter.zip"),
    ]:
        expect(page.locator(f'#{elem_id} a[href$="/{name}"]')).to_have_count(1)
    # The links serve the files: the YAML is the run config, the bundle a zip archive.
    config_link = page.locator(f'#export-config a[href$="/{prefix}-config.yaml"]')
    body = page.request.get(config_link.get_attribute("href")).text()
    assert "rewards:" in body and f"dataset_path: {prefix}-dataset.jsonl" in body
    bundle_link = page.locator("#export-bundle a").first
    assert page.request.get(bundle_link.get_attribute("href")).body()[:2] == b"PK"
    # Every file name shows whole at 1440 px (five boxes in one row cut them to ".ya", ".js", "r..csv").
    page.set_viewport_size({"width": 1440, "height": 900})
    page.wait_for_timeout(300)
    cut = page.evaluate("""() => [...document.querySelectorAll('[id^="export-"] .filename')].flatMap(cell =>
        [...cell.querySelectorAll('span')].filter(s => s.scrollWidth > s.clientWidth + 1 ||
            s.getBoundingClientRect().right > cell.getBoundingClientRect().right + 1).map(s => cell.innerText))""")
    assert page.locator('[id^="export-"] .filename').count() >= 6
    assert cut == [], cut


def test_merging_twice_reuses_the_merged_folder(page, trained_run, server):
    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-select input")).to_have_value(f"#{trained_run} {RUN_NAME} (completed)",
                                                             timeout=15_000)
    page.locator("#export-accordion").get_by_text("Export", exact=True).first.click()
    status = page.locator("#export-merge-status")
    page.locator("#export-merge").click()
    expect(status).to_contain_text("written to", timeout=240_000)
    page.locator("#export-merge").click()
    expect(status).to_contain_text("Already merged", timeout=60_000)
    merged = [p for p in (server["data_dir"] / "exports").iterdir() if p.is_dir() and "-merged-" in p.name]
    assert len(merged) == 1, merged


def test_try_the_model_samples_base_and_trained_side_by_side(page, trained_run):
    page.get_by_role("tab", name="Try the model").click()
    page.locator("#try-run input").click()
    page.get_by_role("option", name=RUN_NAME).first.click()
    expect(page.locator("#try-weights input")).to_have_value("final adapter (latest)")
    page.locator("#try-weights input").click()
    # this dropdown's own list (the run list just closed may still be on the page for a moment)
    listed = page.locator("#try-weights").get_by_role("option")
    listed.first.wait_for()
    options = [text.replace("✓", "").strip() for text in listed.all_inner_texts()]
    assert options == ["final adapter (latest)", "checkpoint at step 1"], options  # each weights once
    page.get_by_role("option", name="checkpoint at step 1").first.click()
    expect(page.locator("#try-status")).to_contain_text("Row 0 of 400 loaded")
    expect(page.locator("#try-temperature input")).to_have_value("1")  # the run's sampling settings
    expect(page.locator("#try-max-tokens input")).to_have_value("12")
    assert "What is" in page.locator("#try-prompt textarea").input_value()
    page.locator("#try-samples input[type=number]").fill("2")
    page.locator("#try-samples input[type=number]").press("Tab")
    page.locator("#try-button").click()
    status = page.locator("#try-status")
    expect(status).to_contain_text("mean total reward", timeout=240_000)
    assert "numeric_answer" in status.inner_text()
    for side, label in (("try-base", "base:"), ("try-trained", "trained: checkpoint-1")):
        box = page.locator(f"#{side}")
        expect(box).to_contain_text(label)
        completions = box.locator(".try-completion")
        assert completions.count() == 2
        text = completions.first.inner_text()
        assert "numeric_answer" in text and "format_regex" in text and "tokens" in text
