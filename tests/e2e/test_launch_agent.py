"""Agentic runs launched from the browser (headless Chromium) on the tiny tool-calling model: one with the library's
calculator ticked in the Launch tab's Tools group, one with a plugin environment class (TRL's
``environment_factory``) named there. The form says the model's chat template carries tools; both runs train a
step and Inspect shows each completion's tool call with its arguments, the tool's result as its own turn and, for
the environment, its reward.

The server, browser and page fixtures come from ``tests/e2e/conftest.py`` (served without a login: the single user
may name any plugin file), the form helpers from ``tests/helpers.py``.
"""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import expect

from tests.helpers import pick, set_number, set_text
from tests.tiny_model import TOOL_QUESTION, TOOL_SYSTEM

pytestmark = pytest.mark.e2e

ENVIRONMENT = '''
from grpo_core.tools.library import calculator as _calculator


class CalculatorEnv:
    def reset(self, **kwargs):
        self.calls = 0

    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression.

        Args:
            expression: numbers with + - * / // % ** and parentheses, e.g. "(12 + 30) * 2".
        """
        self.calls += 1
        return _calculator(expression)

    def get_reward(self) -> float:
        return float(self.calls > 0)
'''


def _launch(page, name: str) -> None:
    set_text(page, "launch-name", name)
    page.locator("#launch-button").click()
    expect(page.get_by_role("tab", name="Runs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#launch-status")).to_contain_text(name)
    expect(page.locator("#launch-status")).to_contain_text("queued")
    # Launch shows the Runs tab, which draws the run's charts; on a loaded 2-core machine, with the first run training
    # beside the browser, the page answered this click after 15 to 40 s (docs/agents.md has the phases' times)
    page.get_by_role("tab", name="Launch").click(timeout=120_000)


def _inspect_turns(page, name: str, kinds: tuple[str, ...]) -> None:
    page.get_by_role("tab", name="Inspect").click()
    pick(page, "inspect-run", name)
    called = page.locator("#inspect-groups .grpo-completion").filter(
        has=page.locator('.grpo-turn[data-kind="tool_result"]')).first
    for kind in kinds:
        expect(called.locator(f'.grpo-turn[data-kind="{kind}"]').first).to_be_visible()
    expect(called.locator('.grpo-turn[data-kind="tool_call"]').first).to_contain_text('"expression"')
    expect(called.locator('.grpo-turn[data-kind="tool_result"]').first).to_contain_text("42")


def test_runs_launched_with_a_library_tool_and_a_plugin_environment_train_and_show_turns(
        page, tiny_tool_model_dir, tmp_path):
    rows = [{"prompt": [{"role": "system", "content": TOOL_SYSTEM}, {"role": "user", "content": TOOL_QUESTION}],
             "answer": "42"} for _ in range(4)]
    upload = tmp_path / "agent_sums.jsonl"
    upload.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    plugin = tmp_path / "agent_env.py"
    plugin.write_text(ENVIRONMENT)
    page.get_by_role("tab", name="Datasets").click()
    page.locator("#dataset-file input[type=file]").set_input_files(str(upload))
    page.locator("#dataset-add").click()
    page.locator("#dataset-status").get_by_text("Added agent_sums").wait_for()

    page.get_by_role("tab", name="Launch").click()
    pick(page, "launch-dataset", "agent_sums (4 rows)")
    set_text(page, "launch-model", str(tiny_tool_model_dir))
    set_number(page, "hp-max_steps", "1")
    set_number(page, "hp-num_generations", "2")
    set_number(page, "hp-per_device_train_batch_size", "2")
    set_number(page, "hp-max_completion_length", "64")
    set_number(page, "hp-temperature", "1")
    page.locator("#launch-tools").get_by_text("Tools and environment").first.click()
    page.locator("#hp-tools").get_by_text("calculator: Evaluate an arithmetic expression.").click()
    set_number(page, "hp-max_tool_calling_iterations", "1")
    # the preflight's check, in a child: Qwen2.5's template renders tool calls and TRL parses them
    expect(page.locator("#launch-tool-template")).to_contain_text("renders tool calls", timeout=120_000)
    _launch(page, "agent-library")  # the config preview shows only its first lines: the runs' turns prove the tools

    page.locator("#hp-tools").get_by_text("calculator: Evaluate an arithmetic expression.").click()  # untick
    set_text(page, "hp-environment", f"{plugin}:CalculatorEnv")
    _launch(page, "agent-environment")

    page.get_by_role("tab", name="Runs").click()
    for name in ("agent-library", "agent-environment"):
        # Gradio's table draws its body rows as <div role="row">, not <tr> (only its header is a table row)
        row = page.locator("#runs-table").get_by_role("row").filter(has_text=name).first
        expect(row).to_contain_text("completed", timeout=420_000)
    _inspect_turns(page, "agent-library", ("tool_call", "tool_result", "assistant"))
    _inspect_turns(page, "agent-environment", ("tool_call", "tool_result", "reward"))
    expect(page.locator('#inspect-groups .grpo-turn[data-kind="reward"]').first).to_contain_text("CalculatorEnv")
