"""The Launch tab's reward-design tools in headless Chromium: the preflight on the tiny model, the bench's
dataset-row picker, and "start from an existing run" filling the whole form from a stored run.

The server, browser and page fixtures come from ``tests/e2e/conftest.py``, the form helpers from ``tests/helpers.py``;
this module gets a server (and data directory) of its own.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from playwright.sync_api import expect

from grpo_core.datasets.library import ARITHMETIC_EXAMPLE
from grpo_core.run_config import RunConfig
from grpo_core.sandbox.box import sandbox_info
from grpo_core.submit.queue import submit_run
from storage import Store, sqlite_url
from tests.helpers import open_rule_details, pick, set_number, set_text

pytestmark = pytest.mark.e2e

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "arithmetic_sums1.jsonl"


def _example_row(index: int) -> dict:
    """Row ``index`` of the quick start's example, the Launch form's default dataset (the server registers it, rows
    in file order)."""
    return json.loads(EXAMPLE.read_text(encoding="utf-8").splitlines()[index])


def _text_box(page, elem_id: str):
    """The editable field of the Gradio textbox ``#elem_id`` (a textarea or an input)."""
    return page.locator(f"#{elem_id} textarea, #{elem_id} input").first


def _code_value(page, elem_id: str) -> str:
    """The text of the Gradio code editor ``#elem_id`` (CodeMirror lines)."""
    return page.locator(f"#{elem_id} .cm-content").inner_text()


def test_preflight_on_the_tiny_model(page, tiny_model_dir):
    page.get_by_role("tab", name="Launch").click()
    set_text(page, "launch-model", str(tiny_model_dir))
    set_number(page, "hp-max_completion_length", "8")
    page.get_by_text("Preflight: will this run learn?").click()
    set_number(page, "preflight-prompts", "2")
    page.locator("#preflight-button").click()
    verdict = page.locator("#preflight-verdict")
    expect(verdict).to_contain_text("sampling 2 prompts × 4 completions")
    expect(verdict).to_contain_text("groups with all-equal rewards", timeout=240_000)
    text = verdict.inner_text()
    assert "learning signal" in text or "can learn" in text
    assert "numeric_answer never fires" in text  # random weights never write the answer
    table = page.locator("#preflight-table")
    expect(table).to_contain_text("numeric_answer")
    expect(table).to_contain_text("varies in groups")
    assert "format_regex" in table.inner_text()  # the default rules: numeric_answer and the number-only format


def test_bench_picks_a_dataset_row(page):
    expected = _example_row(3)
    page.get_by_role("tab", name="Launch").click()
    page.get_by_text("Try the rules on sample completions").click()
    set_number(page, "bench-row-number", "3")
    page.locator("#bench-row-pick").click()
    expect(page.locator("#bench-prompt textarea")).to_have_value(
        "\n\n".join(f"{m['role']}: {m['content']}" for m in expected["prompt"])
    )
    assert json.loads(_code_value(page, "bench-row")) == {"answer": expected["answer"]}
    page.locator("#bench-button").click()
    expect(page.locator("#bench-table")).to_contain_text("numeric_answer")  # scored (the empty table names its columns)
    # a row past the end is refused with the row count
    set_number(page, "bench-row-number", "50")
    page.locator("#bench-row-pick").click()
    expect(page.get_by_text("the dataset has 50 rows")).to_be_visible()


def test_clone_fills_the_form_from_a_stored_run(page, server, tiny_model_dir):
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        dataset = store.find_dataset(ARITHMETIC_EXAMPLE)
        config = RunConfig.model_validate(
            {
                "name": "clone-source",
                "model": str(tiny_model_dir),
                "dataset_id": dataset.id,
                "rewards": [
                    {"rule": "numeric_answer", "weight": 0.8, "params": {"tolerance": 0.5}},
                    {"rule": "length", "weight": 0.4, "params": {"min_tokens": 1, "max_tokens": 5}},
                ],
                "num_generations": 2,
                "per_device_train_batch_size": 4,
                "max_steps": 1,
                "max_completion_length": 6,
                "temperature": 1.3,
                "seed": 11,
            }
        )
        run = submit_run(store, config).run
    finally:
        store.close()

    page.get_by_role("tab", name="Launch").click()
    # the run was added behind the open page's back: the page's catalog check brings it into the clone picker
    pick(page, "launch-clone", f"#{run.id} clone-source")
    expect(page.locator("#launch-clone-status")).to_contain_text("Form filled from run", timeout=60_000)
    expect(_text_box(page, "launch-name")).to_have_value("clone-source (clone)")
    expect(_text_box(page, "launch-model")).to_have_value(str(tiny_model_dir))
    expect(page.locator("#launch-dataset input")).to_have_value(f"{ARITHMETIC_EXAMPLE} (400 rows)")
    expect(page.locator("#rule-1 input")).to_have_value("numeric_answer")
    expect(page.locator("#rule-2 input")).to_have_value("length")
    expect(page.locator("#rule-group-3").first).to_be_hidden()  # a slot without a rule stays hidden until added
    expect(page.locator("#rule-group-4").first).to_be_hidden()
    expect(page.locator("#weight-2 input")).to_have_value("0.4")
    open_rule_details(page, 1)
    open_rule_details(page, 2)
    assert json.loads(_code_value(page, "params-1")) == {"tolerance": 0.5}
    assert json.loads(_code_value(page, "params-2"))["max_tokens"] == 5
    expect(page.locator("#hp-num_generations input")).to_have_value("2")
    expect(page.locator("#hp-per_device_train_batch_size input")).to_have_value("4")
    expect(page.locator("#hp-max_completion_length input")).to_have_value("6")
    expect(page.locator("#hp-temperature input")).to_have_value("1.3")
    expect(page.locator("#hp-seed input")).to_have_value("11")
    # choosing a rule by hand still fills its defaults (cloning sets rules and parameters together)
    page.locator("#rule-add").click()
    expect(page.locator("#rule-3 input")).to_have_value("(none)")
    pick(page, "rule-3", "repetition")
    open_rule_details(page, 3)
    expect(page.locator("#params-3 .cm-content")).to_contain_text("ngram_size")
    assert json.loads(_code_value(page, "params-1")) == {"tolerance": 0.5}
    # the preview shows the cloned config, ready to launch
    page.get_by_text("Run config preview").click()
    expect(page.locator("#config-preview")).to_contain_text("clone-source (clone)")
    expect(page.locator("#config-preview")).to_contain_text("tolerance: 0.5")


def test_sandbox_mode_is_shown_with_a_code_rule(page):
    """The Launch tab says which isolation mode the code rules run in (the server resolves it as this host does),
    while a code rule is chosen, and only then."""
    page.get_by_role("tab", name="Launch").click()
    line = page.locator("#launch-sandbox")
    expect(page.locator("#rule-1 input")).to_have_value("numeric_answer")
    expect(line).to_be_hidden()  # the default rules run no code
    page.locator("#rule-add").click()
    pick(page, "rule-3", "code_tests")
    expect(line).to_contain_text("run model-written Python in the sandbox")
    expect(line).to_contain_text(sandbox_info().mode.value)
    page.locator("#rule-remove-3").click()
    expect(page.locator("#rule-group-3").first).to_be_hidden()
    expect(line).to_be_hidden()


def test_other_grpo_config_fields_are_checked_as_typed(page):
    page.get_by_role("tab", name="Launch").click()
    page.get_by_text("Sampling, eval split, trackers").click()
    editor = page.locator("#hp-trl_args .cm-content")
    editor.click()
    page.keyboard.type("mask_truncated_completion: true")
    expect(page.locator("#trl-args-help")).to_contain_text("did you mean mask_truncated_completions", timeout=30_000)
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.type("num_generations_eval: 2")
    expect(page.locator("#trl-args-help")).to_contain_text("Number of generations to sample during evaluation",
                                                           timeout=30_000)
    # the advanced boxes' empty values (sent as 0) make a valid config: the preview shows it, not an error
    page.get_by_text("Run config preview").click()
    # (the editor draws only the lines in view: look for one near the top)
    expect(page.locator("#config-preview")).to_contain_text("model: SmolLM2-135M-Instruct", timeout=30_000)
    expect(page.locator("#config-preview")).not_to_contain_text("invalid")
