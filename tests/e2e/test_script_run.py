"""A run recorded from a user's own TRL script, end to end in headless Chromium: a login creates an API token in
the API tokens tab, the script (tests/integration/scripts/trl_grpo_script.py) trains the tiny model and records over
HTTP with it, and the run shows like a dashboard run: its origin, the charts, the doctor, and in Inspect its groups
with TRL's advantages and the kept dataset column."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.helpers import pick
from tests.integration.scripts.runner import run_script

pytestmark = pytest.mark.e2e


def test_a_script_records_with_a_token_made_in_the_dashboard(page, server, tiny_model_dir, tmp_path):
    page.get_by_role("tab", name="API tokens").click()
    page.locator("#token-create").click()
    shown = page.locator("#token-value")
    shown.wait_for()
    token = shown.inner_text().strip()
    assert token.startswith("grpo_")
    expect(page.locator("#token-table")).to_contain_text("active")

    run_script(tiny_model_dir, tmp_path / "out", tmp_path / "log.txt", target=server["url"], token=token, steps=2)

    page.get_by_role("tab", name="Runs").click()
    expect(page.locator("#runs-table")).to_contain_text("my script run")
    pick(page, "runs-select", "my script run")
    page.locator('#run-status[data-status="completed"]').wait_for()
    expect(page.locator("#run-status .grpo-script-run")).to_contain_text("recorded from a script on")
    expect(page.locator("#run-status")).to_contain_text("owner local")
    page.locator("#runs-plot .js-plotly-plot").wait_for()
    page.wait_for_function(
        "() => document.querySelectorAll('#runs-plot .js-plotly-plot .scatterlayer .trace').length >= 4")
    page.locator("#run-doctor .doctor-finding, #run-doctor :text('No problem found')").first.wait_for()

    page.get_by_role("tab", name="Inspect").click()
    pick(page, "inspect-run", "my script run")
    page.locator("#inspect-groups .grpo-group").first.wait_for()
    completions = page.locator("#inspect-groups .grpo-completion")
    assert completions.count() == 4
    assert "correct_answer" in completions.first.inner_text()
    advantages = [float(completions.nth(i).get_attribute("data-advantage")) for i in range(4)]
    assert abs(sum(advantages)) < 1e-3 and advantages == sorted(advantages, reverse=True)
    expect(page.locator("#inspect-groups")).to_contain_text("answer")
