"""The reward-hacking probe on the Launch tab's bench, in headless Chromium: silent for the default rules against a
right answer; against a wordy wrong completion the bare answer wins but is never flagged (the requested form); with a
tolerance that pays a wrong answer, the probe names `numeric_answer`."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.helpers import open_rule_details, set_text

pytestmark = pytest.mark.e2e


def test_bench_probe_flags_only_winning_degenerate_completions(page):
    page.get_by_role("tab", name="Launch").click()
    page.get_by_text("Try the rules on sample completions").click()
    page.locator("#probe-button").click()
    table = page.locator("#bench-table")
    expect(table).to_contain_text("long_padding")
    status = page.locator("#bench-status")
    expect(status).to_contain_text("No degenerate completion earns a task reward or scores at or above the best of "
                                   "these 4 completions")
    assert "⚠️ yes" not in table.inner_text()

    # Against a wordy wrong completion the bare answer wins, but it is the right answer in the requested form: never
    # flagged; the other probes earn nothing on the task.
    set_text(page, "bench-completions", "I really do not know the answer to this one.")
    page.locator("#probe-button").click()
    expect(status).to_contain_text("of these 1 completions")
    expect(table).to_contain_text("answer_only")
    assert "⚠️ yes" not in table.inner_text()

    # A tolerance of 1 pays the answer plus one: the wrong answer wrapped in answer tags is paid for the task.
    open_rule_details(page, 1)
    params = page.locator("#params-1 .cm-content")
    params.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type('{"tolerance": 1')
    page.locator("#probe-button").click()
    expect(status).to_contain_text("Reward hacking:")
    expect(status).to_contain_text("wrong_in_format earns 1 on the task rule numeric_answer")
    assert "empty" not in status.inner_text()  # an empty completion earns nothing: not listed
    expect(table).to_contain_text("⚠️ yes")
