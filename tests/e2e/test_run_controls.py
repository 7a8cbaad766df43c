"""The Runs tab's run controls in headless Chromium: filter the table, save notes and tags, delete a run only after
confirming. The runs are written straight into the served store (finished ones: nothing trains here)."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from storage import RunStatus, Store, sqlite_url
from tests.helpers import pick, set_text

pytestmark = pytest.mark.e2e


def _finished_run(store: Store, name: str, status: RunStatus) -> int:
    run = store.create_run(name=name, config={"max_steps": 3}, dataset_id=None, max_steps=3)
    store.finish_run(run.id, status)  # the launcher may have claimed it meanwhile: its worker then sees it final
    return run.id


def test_filter_tag_and_delete_with_confirmation(page, server):
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        doomed = _finished_run(store, "doomed-run", RunStatus.FAILED)
        _finished_run(store, "keeper-run", RunStatus.CANCELLED)
        folder = server["data_dir"] / "runs" / f"run-{doomed:05d}"
        folder.mkdir(parents=True)
        (folder / "train.log").write_text("log")
        store.update_run(doomed, run_dir=str(folder))
        store.annotate_run(doomed, notes="seen once", tags=["old"])

        page.get_by_role("tab", name="Runs").click()
        table = page.locator("#runs-table")
        expect(table).to_contain_text("doomed-run")

        # filter: by status, then by text
        pick(page, "runs-filter-status", "cancelled")
        expect(table).not_to_contain_text("doomed-run")
        expect(table).to_contain_text("keeper-run")
        pick(page, "runs-filter-status", "all")
        set_text(page, "runs-filter-text", "doomed")
        expect(table).not_to_contain_text("keeper-run")
        expect(table).to_contain_text("doomed-run")

        # tags and notes on the selected run
        pick(page, "runs-select", f"#{doomed} doomed-run (failed)")
        page.get_by_text("Notes and tags").click()
        # the selection loads the run's own notes and tags into the fields: wait for that before typing over them
        expect(page.locator("#runs-notes textarea")).to_have_value("seen once")
        expect(page.locator("#runs-tags textarea, #runs-tags input").first).to_have_value("old")
        set_text(page, "runs-tags", "flaky , Flaky, oom")
        set_text(page, "runs-notes", "died at step 2")
        page.locator("#runs-notes-save").click()
        expect(page.locator("#run-status")).to_contain_text("died at step 2")
        expect(table).to_contain_text("flaky, oom")
        assert store.get_run(doomed).tags == ["flaky", "oom"]

        # delete: nothing happens before the confirmation; "Keep it" keeps it
        page.locator("#runs-delete").click()
        expect(page.locator("#runs-delete-question")).to_contain_text("doomed-run")
        page.locator("#runs-delete-keep").click()
        expect(page.locator("#runs-delete-confirm")).to_be_hidden()
        assert store.get_run(doomed).name == "doomed-run" and folder.exists()
        page.locator("#runs-delete").click()
        page.locator("#runs-delete-confirm").click()
        # the confirmation toast (the status panel beside it shows the next run at the following refresh tick)
        expect(page.get_by_text(f"Run #{doomed} deleted.")).to_be_visible()
        expect(table).not_to_contain_text("doomed-run")
        assert [r.name for r in store.list_runs()] == ["keeper-run"]
        assert not folder.exists()
    finally:
        store.close()
