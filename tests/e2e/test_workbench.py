"""The reward workbench in headless Chromium: a finished tiny-model run's recorded groups re-scored with a changed
weight and a gate, the comparison and the changed groups shown with both scorings, a changed group opened in
Inspect, the composition saved as a preset, and a run launched with it that trains to completion (the gate reaches
the trainer)."""

from __future__ import annotations

import time

import pytest
from playwright.sync_api import expect

from grpo_core.bounded_parse import dump_yaml
from storage import RunStatus, Store, sqlite_url
from tests.helpers import pick, set_text
from tests.rescore_fixtures import NEW_RULES, seed_run

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def tiny_run(server, tiny_model_dir):
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    folder = server["data_dir"] / "workbench-data"
    folder.mkdir()
    run_id = seed_run(store, folder, model=str(tiny_model_dir), name="workbench-demo")
    # one training step is enough to show the launched run trains with the new rules
    store.close()
    yield run_id


def _set_code(page, elem_id: str, text: str) -> None:
    editor = page.locator(f"#{elem_id} .cm-content")
    editor.click()
    page.keyboard.press("Control+A")
    page.keyboard.press("Delete")
    editor.fill(text)
    expect(editor).to_contain_text("numeric_answer")


def test_rescore_compare_open_in_inspect_save_and_launch(page, server, tiny_run):
    page.get_by_role("tab", name="Reward workbench").click()
    pick(page, "workbench-run", "workbench-demo")
    expect(page.locator("#workbench-rules")).to_contain_text("format_regex")  # the run's own rules, to edit
    expect(page.locator("#workbench-recorded")).to_contain_text("4 steps")
    _set_code(page, "workbench-rules", dump_yaml(NEW_RULES))
    page.locator("#workbench-rescore").click()

    expect(page.locator("#workbench-progress [data-status='completed']")).to_be_visible(timeout=120_000)
    summary = page.locator("#workbench-summary")
    expect(summary).to_contain_text("12 groups, 48 completions")
    expect(summary).to_contain_text("12 groups change")
    steps = page.locator("#workbench-steps")
    expect(steps).to_contain_text("1.000 → 0.625")  # mean reward per step: the run's, then under the gate
    expect(steps).to_contain_text("rewards/format_regex/mean")
    expect(steps).to_contain_text("0.500 → 0.250")
    changed = page.locator("#workbench-changed .rescore-group")
    expect(changed).to_have_count(12)
    first = changed.first
    expect(first).to_contain_text("new rules: total / advantage")
    expect(first).to_contain_text("format_regex 0.00")  # the wrong-but-tagged answer loses its format reward
    expect(page.locator("#workbench-probe")).to_contain_text("Hacking probe")
    page.set_viewport_size({"width": 1440, "height": 900})  # the "new rules" column inside the panel, not cut
    panel = page.locator("#workbench-changed").bounding_box()
    last_column = first.locator("th").last.bounding_box()
    assert last_column["x"] + last_column["width"] <= panel["x"] + panel["width"] + 1, (last_column, panel)

    page.locator("#workbench-open-inspect").click()
    expect(page.locator("#inspect-run input")).to_have_value(f"#{tiny_run} workbench-demo (completed)")
    expect(page.locator("#inspect-groups")).to_contain_text("What is")
    page.get_by_role("tab", name="Reward workbench").click()

    set_text(page, "workbench-preset-name", "gated-format")
    page.locator("#workbench-save-preset").click()
    expect(page.locator("#workbench-launched")).to_contain_text("Saved preset gated-format")
    assert (server["data_dir"] / "reward_presets" / "gated-format.yaml").is_file()

    set_text(page, "workbench-launch-name", "gated-relaunch")
    page.locator("#workbench-launch").click()
    expect(page.locator("#workbench-launched")).to_contain_text("Launched run #")
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        launched = next(r for r in store.list_runs() if r.name == "gated-relaunch")
        assert [s["rule"] for s in launched.config["rewards"]] == ["numeric_answer", "format_regex"]
        assert launched.config["rewards"][1]["gate"] == {"rule": "numeric_answer", "min": 1.0}
        assert launched.config["rewards"][1]["weight"] == 0.5
        deadline = time.monotonic() + 420
        while not store.get_run(launched.id).status.is_final and time.monotonic() < deadline:
            time.sleep(2)
        final = store.get_run(launched.id)
        assert final.status == RunStatus.COMPLETED, final.error
        assert store.group_steps(launched.id)  # it recorded groups under the new rules
    finally:
        store.close()


def test_a_workbench_link_reloads_to_the_workbench_on_its_run(page, server, tiny_run):  # noqa: F811
    page.goto(f"{server['url']}?tab=workbench&run={tiny_run}")
    expect(page.get_by_role("tab", name="Reward workbench")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#workbench-run input")).to_have_value(f"#{tiny_run} workbench-demo (completed)")
    page.reload()  # what the address bar says is what a reload opens
    expect(page.get_by_role("tab", name="Reward workbench")).to_have_attribute("aria-selected", "true")
