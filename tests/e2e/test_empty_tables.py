"""Tables that have nothing to show yet name their columns (Gradio shows "1 2 3" over an empty value): the Datasets
preview, the Launch tab's bench and preflight tables, in headless Chromium."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

pytestmark = pytest.mark.e2e


def _headers(page, elem_id: str) -> list[str]:
    table = page.locator(f"#{elem_id}")
    table.locator("thead th").first.wait_for(state="attached")
    return [text.strip() for text in table.locator("thead th").all_inner_texts() if text.strip()]


def test_empty_tables_name_their_columns(page):
    page.get_by_role("tab", name="Datasets").click()
    expect(page.locator("#dataset-preview")).to_be_visible()
    assert _headers(page, "dataset-preview") == ["prompt"]
    page.get_by_role("tab", name="Launch").click()
    page.get_by_text("Try the rules on sample completions").click()
    page.get_by_text("Preflight: will this run learn?").click()
    expect(page.locator("#bench-table")).to_be_visible()
    expect(page.locator("#preflight-table")).to_be_visible()
    for elem_id, first in (("bench-table", "completion"), ("preflight-table", "rule")):
        headers = _headers(page, elem_id)
        assert headers and headers[0] == first, (elem_id, headers)
        assert not {"1", "2", "3"} & set(headers), (elem_id, headers)
