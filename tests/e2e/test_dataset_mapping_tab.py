"""The Datasets tab in headless Chromium: a GSM8K-layout file is checked with a column mapping (its ``question``
as the prompt, a system prompt), shows its prompts exactly as the model gets them (the tiny model's chat
template), and is added; an unknown prompt column is refused with the file's columns."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.helpers import set_text

pytestmark = pytest.mark.e2e

SYSTEM = "Solve the problem. End with '#### <number>'."


def test_gsm8k_layout_mapped_checked_and_added(page, tiny_model_dir, tmp_path):
    upload = tmp_path / "gsm8k-mini.jsonl"
    rows = [{"question": f"Tom has {a} apples and buys {a} more. How many?", "answer": f"#### {2 * a}"}
            for a in range(1, 6)]
    upload.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#dataset-file input[type=file]").set_input_files(str(upload))

    set_text(page, "dataset-prompt-column", "problem")
    page.locator("#dataset-check").click()
    status = page.locator("#dataset-status")
    status.get_by_text("Not valid").wait_for()
    assert "names column 'problem', which the file lacks; columns are question, answer" in status.inner_text()

    set_text(page, "dataset-prompt-column", "question")
    set_text(page, "dataset-system-prompt", SYSTEM)
    set_text(page, "dataset-preview-model", str(tiny_model_dir))
    page.locator("#dataset-check").click()
    status.get_by_text("Valid: 5 rows").wait_for()
    # chat prompts read as role: content lines, not as a Python list of dicts
    preview = page.locator("#dataset-preview")
    expect(preview).to_contain_text(f"system: {SYSTEM}")
    expect(preview).to_contain_text("user: Tom has 1 apples and buys 1 more. How many?")
    assert "{'role'" not in preview.inner_text() and "[{" not in preview.inner_text()
    view = page.locator("#dataset-model-view textarea")
    expect(view).to_have_value(
        f"──── row 0 ────\n<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n"
        f"Tom has 1 apples and buys 1 more. How many?<|im_end|>\n<|im_start|>assistant\n"
        f"\n──── row 1 ────\n<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n"
        f"Tom has 2 apples and buys 2 more. How many?<|im_end|>\n<|im_start|>assistant\n"
        f"\n──── row 2 ────\n<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n"
        f"Tom has 3 apples and buys 3 more. How many?<|im_end|>\n<|im_start|>assistant\n"
    )
    expect(page.locator("#datasets-table")).not_to_contain_text("gsm8k-mini")

    page.locator("#dataset-add").click()
    status.get_by_text("Added gsm8k-mini").wait_for()
    assert "columns prompt, answer" in status.inner_text()
    expect(page.locator("#datasets-table")).to_contain_text("gsm8k-mini")
    expect(page.locator("#datasets-table")).to_contain_text("chat")
