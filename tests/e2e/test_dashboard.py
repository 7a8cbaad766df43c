"""The real dashboard in headless Chromium: upload a dataset, launch a run of a tiny local model, watch it complete
with its charts drawn, and see its groups in the Inspect tab; try the rules on the bench; a bad upload is refused.

Chromium comes from Debian's package (``/usr/bin/chromium``), driven by Playwright; ``.ci/run`` installs it.
"""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.helpers import pick, set_number, set_text

pytestmark = pytest.mark.e2e


def test_upload_launch_watch_and_inspect(page, server, tiny_model_dir, tmp_path):
    rows = [{"prompt": [{"role": "user", "content": f"What is {i} + {i}?"}], "answer": 2 * i} for i in range(12)]
    upload = tmp_path / "doubles.jsonl"
    upload.write_text("\n".join(json.dumps(r) for r in rows) + "\n")

    # Datasets: upload, validated and previewed
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#dataset-file input[type=file]").set_input_files(str(upload))
    page.locator("#dataset-add").click()
    page.locator("#dataset-status").get_by_text("Added doubles").wait_for()
    assert "12 rows" in page.locator("#dataset-status").inner_text()
    expect(page.locator("#dataset-preview")).to_contain_text("What is 3 + 3?")

    # Launch: the tiny model on the uploaded dataset, 2 steps
    page.get_by_role("tab", name="Launch").click()
    pick(page, "launch-dataset", "doubles (12 rows)")  # the upload reached this tab's dropdown by itself
    set_text(page, "launch-model", str(tiny_model_dir))
    set_text(page, "launch-name", "browser-run")
    page.locator("#rule-add").click()
    pick(page, "rule-3", "repetition")
    set_number(page, "hp-max_steps", "2")
    set_number(page, "hp-max_completion_length", "12")
    page.locator("#launch-button").click()
    # Launch shows the Runs tab (its status line stays behind on the Launch tab)
    expect(page.get_by_role("tab", name="Runs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#launch-status")).to_contain_text("queued")
    expect(page.locator("#launch-status")).to_contain_text("browser-run")

    # Runs: the run completes while the chart fills in
    expect(page.locator("#runs-table")).to_contain_text("browser-run")
    page.locator('#run-status[data-status="completed"]').wait_for(timeout=240_000)
    plot = page.locator("#runs-plot .js-plotly-plot")
    plot.wait_for()
    # every panel gets its line (a refresh tick after the completion draws the last step)
    page.wait_for_function(
        "() => document.querySelectorAll('#runs-plot .js-plotly-plot .scatterlayer .trace').length >= 8"
    )
    expect(page.locator("#runs-table")).to_contain_text("2/2")

    # Inspect: the last step's groups with rewards and advantages
    page.get_by_role("tab", name="Inspect").click()
    page.locator("#inspect-run input").click()
    page.get_by_role("option", name="browser-run").first.click()
    page.locator("#inspect-groups .grpo-group").first.wait_for()
    groups = page.locator("#inspect-groups .grpo-group")
    completions = page.locator("#inspect-groups .grpo-completion")
    assert groups.count() == 2
    assert completions.count() == 8
    assert "advantage" in completions.first.inner_text()
    assert "numeric_answer" in completions.first.inner_text()
    advantages = [float(completions.nth(i).get_attribute("data-advantage")) for i in range(4)]
    assert advantages == sorted(advantages, reverse=True)  # sorted by advantage
    summary = page.locator("#inspect-summary").inner_text()
    assert "step 2" in summary and "2 groups" in summary


def test_bad_upload_is_refused_with_its_location(page, tmp_path):
    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"prompt": "fine", "answer": 1}\n{"prompt": "oops" "answer": 2}\n')
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#dataset-file input[type=file]").set_input_files(str(bad))
    page.locator("#dataset-add").click()
    status = page.locator("#dataset-status")
    status.get_by_text("Not added").wait_for()
    text = status.inner_text()
    assert "broken.jsonl" in text and "line 2" in text and "column" in text
    expect(page.locator("#datasets-table")).not_to_contain_text("broken")


def test_try_out_bench_scores_a_group(page):
    page.get_by_role("tab", name="Launch").click()
    page.get_by_text("Try the rules on sample completions").click()
    page.locator("#bench-button").click()
    table = page.locator("#bench-table")
    expect(table).to_contain_text("format_regex")  # the scored table (the empty one already names its columns)
    text = table.inner_text()
    assert "numeric_answer" in text and "format_regex" in text
    # "82" is right and a number alone: full marks from both default rules (1 x 1.0 + 1 x 0.5), the best total and
    # the highest advantage (the row's cells: completion, numeric_answer, format_regex, total, advantage)
    assert re.search(r"\b82\s+1\s+1\s+1\.5\s+1\.16", text), text
