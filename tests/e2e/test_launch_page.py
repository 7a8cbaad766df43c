"""The Launch page as a new user meets it at 1440x900 in headless Chromium: compact (rule slots only for chosen rules,
"+ add rule" and "✕ remove", no GPU or vLLM fields on a machine without GPUs), no label cut, the config preview filled
from the start, Launch landing on the new run in the Runs tab, and the quick start buttons filling the whole form.

Reuses the ``server``, ``browser`` and ``page`` fixtures of :mod:`tests.e2e.test_dashboard` (own server and data)."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from grpo_core.submit.quick_starts import quick_start
from grpo_core.training.gpus import machine_gpus
from tests.helpers import pick, set_number, set_text

pytestmark = pytest.mark.e2e

#: Elements whose text the page cuts: a leaf with text, shown, overflowing its box with hidden overflow (ellipsis).
CUT_TEXT_JS = """(root) => [...document.querySelectorAll(root + ' *')].filter(e => e.offsetParent !== null
    && e.children.length === 0 && e.innerText && e.innerText.trim() && e.scrollWidth > e.clientWidth + 1
    && getComputedStyle(e).overflow !== 'visible').map(e => e.innerText.slice(0, 80))"""


def _launch(browser_page):
    browser_page.set_viewport_size({"width": 1440, "height": 900})
    browser_page.get_by_role("tab", name="Launch").click()
    browser_page.locator("#launch-button").wait_for()


def _slot(browser_page, index: int):
    """Rule slot ``index``'s group (Gradio gives a group's wrapper and its box the same id)."""
    return browser_page.locator(f"#rule-group-{index}").first


def test_the_form_shows_what_applies_and_cuts_no_label(page):
    _launch(page)
    for index in (1, 2):
        expect(_slot(page, index)).to_be_visible()
    for index in (3, 4):
        expect(_slot(page, index)).to_be_hidden()  # no empty "(none)" slots
    expect(page.locator("#rule-add")).to_be_visible()
    expect(page.locator("#launch-sandbox")).to_be_hidden()  # no code rule chosen
    if not machine_gpus():
        for field in ("use_vllm", "gpus", "num_processes", "device"):
            expect(page.locator(f"#hp-{field}")).to_be_hidden()
    for field in ("vllm_mode", "vllm_gpu_memory_utilization", "vllm_tensor_parallel_size"):
        expect(page.locator(f"#hp-{field}")).to_be_hidden()  # vLLM generation is off
    page.get_by_text("Sampling, eval split, trackers").click()
    expect(page.locator("#hp-mask_truncated_completions")).to_be_visible()
    page.wait_for_timeout(500)
    assert page.evaluate(CUT_TEXT_JS, "#tab-launch") == []
    height = page.evaluate("() => document.documentElement.scrollHeight")
    page.get_by_text("Sampling, eval split, trackers").click()
    assert height < 2500, height  # the budget includes the closed Tools group's header (about 60 px)


def test_the_preview_is_filled_on_load(page):
    _launch(page)
    page.get_by_text("Run config preview").click()
    preview = page.locator("#config-preview")
    expect(preview).to_contain_text("numeric_answer")  # nothing changed: filled on load
    expect(preview).to_contain_text("max_steps: 60")


def test_a_link_to_the_launch_tab_fills_the_preview(page, server):
    page.goto(f"{server['url']}?tab=launch")  # the tab selected by the page load, not by a click
    page.locator("#launch-button").wait_for()
    page.get_by_text("Run config preview").click()
    expect(page.locator("#config-preview")).to_contain_text("numeric_answer")


def test_add_and_remove_a_rule(page):
    _launch(page)
    page.locator("#rule-add").click()
    expect(_slot(page, 3)).to_be_visible()
    page.locator("#rule-add").click()
    expect(_slot(page, 4)).to_be_visible()
    expect(page.locator("#rule-add")).to_be_hidden()  # every slot shows
    pick(page, "rule-4", "length")
    page.get_by_text("Run config preview").click()
    expect(page.locator("#config-preview")).to_contain_text("rule: length")
    page.locator("#rule-remove-1").click()
    expect(_slot(page, 1)).to_be_hidden()
    expect(page.locator("#rule-add")).to_be_visible()
    expect(page.locator("#config-preview")).not_to_contain_text("numeric_answer")
    expect(page.locator("#config-preview")).to_contain_text("rule: length")
    page.locator("#rule-add").click()  # the first free slot comes back empty
    expect(_slot(page, 1)).to_be_visible()
    expect(page.locator("#rule-1 input")).to_have_value("(none)")


def test_launch_lands_on_the_new_run(page, tiny_model_dir):
    _launch(page)
    set_text(page, "launch-model", str(tiny_model_dir))
    set_text(page, "launch-name", "landing-run")
    set_number(page, "hp-max_steps", "1")
    set_number(page, "hp-max_completion_length", "8")
    page.locator("#launch-button").click()
    expect(page.locator("#launch-status")).to_contain_text("queued")
    run_id = int(page.locator("#launch-run-id input").input_value())
    expect(page.get_by_role("tab", name="Runs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#runs-select input")).to_have_value(re.compile(rf"^#{run_id} landing-run"))
    expect(page.locator("#run-status")).to_contain_text(f"#{run_id} landing-run")


def test_the_code_quick_start_fills_the_form_and_the_arithmetic_one_puts_it_back(page):
    recipe = quick_start("code").recipe()
    _launch(page)
    page.locator("#quick-start-code").click()
    expect(page.locator("#launch-clone-status")).to_contain_text("code quick start")
    for index, spec in enumerate(recipe.rewards, start=1):
        expect(_slot(page, index)).to_be_visible()
        expect(page.locator(f"#rule-{index} input")).to_have_value(spec.rule)
        expect(page.locator(f"#weight-{index} input")).to_have_value(f"{spec.weight:g}")
    expect(page.locator("#launch-dataset input")).to_have_value(re.compile(r"^code tasks \(example\)"))
    expect(page.locator("#launch-sandbox")).to_be_visible()  # a code rule is chosen
    set_number(page, "hp-max_completion_length", "7")  # a hyperparameter the recipe sets, changed by hand
    page.get_by_text("Run config preview").click()
    preview = page.locator("#config-preview")  # (its editor shows the first few dozen lines only)
    expect(preview).to_contain_text(f"name: {recipe.name}")
    expect(preview).to_contain_text("min: 0.01")  # the gates came with the rules
    page.locator("#quick-start-arithmetic").click()
    expect(page.locator("#rule-1 input")).to_have_value("numeric_answer")
    expect(_slot(page, 3)).to_be_hidden()
    expect(page.locator("#launch-dataset input")).to_have_value(re.compile(r"^arithmetic sums1 \(example\)"))
    expect(preview).not_to_contain_text("code_tests")
    page.locator("#quick-start-code").click()  # the whole form: the hand-changed field too
    expect(page.locator("#hp-max_completion_length input")).to_have_value(str(recipe.max_completion_length))


def test_trls_grpo_fields_sit_under_their_headings_with_trls_choices(page):
    _launch(page)
    page.locator("#launch-grpo").get_by_text("GRPO loss, clipping, entropy").first.click()
    grpo = page.locator("#launch-grpo")
    for heading in ("Loss and clipping", "Entropy", "Off-policy masking and KL", "vLLM importance sampling"):
        expect(grpo).to_contain_text(heading)
    expect(page.locator("#hp-top_entropy_quantile")).to_be_visible()
    pick(page, "hp-loss_type", "dr_grpo")  # one of TRL's eight losses, offered as TRL documents them
    pick(page, "hp-importance_sampling_level", "sequence")
    page.get_by_text("Run config preview").click()
    # the whole YAML of the preview: its editor (CodeMirror) draws only the lines in view, so each poll reads what
    # is drawn and scrolls on, until both lines were seen
    page.locator("#config-preview").scroll_into_view_if_needed()
    page.wait_for_function(
        """() => { const c = document.querySelector('#config-preview .cm-content');
          const s = document.querySelector('#config-preview .cm-scroller');
          if (!c || !s) return false;
          window.__seenYaml = (window.__seenYaml || '') + '\\n' + c.innerText;
          const step = Math.max(40, s.clientHeight / 2);
          s.scrollTop = s.scrollTop + s.clientHeight >= s.scrollHeight ? 0 : s.scrollTop + step;
          window.scrollBy(0, 200);
          return window.__seenYaml.includes('loss_type: dr_grpo')
            && window.__seenYaml.includes('importance_sampling_level: sequence'); }""",
        polling=100,
    )
