"""Inspect shows agentic rollouts in headless Chromium, on a run written straight into the served store (no
training): each completion's turns as distinct blocks (the tool call with its arguments, the tool's result as its
own turn, the final answer apart), a failed call marked, hostile text shown as text, the trajectory filters, and the
token view marking a tool result's tokens as not trained on."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from storage import CompletionRecord, GroupRecord, RunStatus, Store, TokenStats, sqlite_url
from tests.helpers import pick

pytestmark = pytest.mark.e2e

HOSTILE = '<img src=x onerror="window.__pwned=1">'
CALLED = [{"kind": "assistant", "text": "Let me compute. " + HOSTILE},
          {"kind": "tool_call", "name": "calculator", "arguments": '{"expression": "6 * 7"}', "parsed": True},
          {"kind": "tool_result", "name": "calculator", "text": "42", "error": False},
          {"kind": "assistant", "text": "The answer is 42."},
          {"kind": "reward", "name": "CalculatorEnv", "value": 1.0}]
FAILED = [{"kind": "tool_call", "name": "calculator", "arguments": '{"expression": "x"}', "parsed": True},
          {"kind": "tool_result", "name": "calculator", "text": "only numbers are allowed", "error": True},
          {"kind": "assistant", "text": "I cannot tell."}]
STATS = TokenStats(pieces=["<tool_call>", "6*7", "</tool_call>", "42", "The answer is 42."],
                   logprobs=[-0.5, -1.0, -0.25, -0.1, -2.0])


@pytest.fixture(scope="module")
def agent_run(server):
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        run = store.create_run(name="agent-demo", config={"model": "m"}, dataset_id=None, max_steps=1)
        store.finish_run(run.id, RunStatus.COMPLETED)
        completions = [
            CompletionRecord(index=0, text="The answer is 42.", rewards={"numeric_answer": 1.0, "CalculatorEnv": 1.0},
                             total_reward=2.0, advantage=1.1, num_tokens=5, turns=CALLED,
                             tool_mask=[[1, 3], [0, 1], [1, 1]], token_stats=STATS),
            CompletionRecord(index=1, text="I cannot tell.", rewards={"numeric_answer": 0.0, "CalculatorEnv": 0.0},
                             total_reward=0.0, advantage=-0.5, num_tokens=4, turns=FAILED),
            CompletionRecord(index=2, text="42 " + HOSTILE, rewards={"numeric_answer": 1.0, "CalculatorEnv": 0.0},
                             total_reward=1.0, advantage=-0.6, num_tokens=3),
        ]
        store.record_groups(run.id, 1, [GroupRecord(step=1, row_index=0, prompt="What is 6 * 7?",
                                                    completions=completions)])
        yield run.id
    finally:
        store.close()


def test_inspect_shows_trajectories_turn_by_turn(page, agent_run):
    page.get_by_role("tab", name="Inspect").click()
    pick(page, "inspect-run", "agent-demo")
    cards = page.locator("#inspect-groups .grpo-completion")
    expect(cards).to_have_count(3)
    first = cards.nth(0)  # sorted by advantage: the trajectory that called the calculator
    kinds = first.locator(".grpo-turn")
    expect(kinds).to_have_count(5)
    assert [kinds.nth(i).get_attribute("data-kind") for i in range(5)] == [
        "assistant", "tool_call", "tool_result", "assistant", "reward"]
    expect(kinds.nth(1)).to_contain_text('{"expression": "6 * 7"}')
    expect(kinds.nth(2)).to_contain_text("42")
    expect(kinds.nth(3)).to_contain_text("The answer is 42.")
    expect(first).to_contain_text("advantage 1.100")
    expect(first).to_contain_text("CalculatorEnv")
    failed = page.locator('#inspect-groups .grpo-turn.failed[data-kind="tool_result"]')
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("tool error")
    assert page.locator("#inspect-groups img").count() == 0  # hostile text stays text
    assert page.evaluate("window.__pwned") is None
    expect(first).to_contain_text('onerror="window.__pwned=1"')

    pick(page, "inspect-filter", "with a failed tool call")
    expect(page.locator("#inspect-groups .grpo-group")).to_have_count(1)
    pick(page, "inspect-filter", "stopped at the tool-calling limit")
    expect(page.locator("#inspect-groups .grpo-group")).to_have_count(0)
    pick(page, "inspect-filter", "all groups")

    page.locator("#inspect-tokens-panel").get_by_text(
        "Tokens of one completion: log-probability, KL, entropy", exact=True).first.click()
    pick(page, "inspect-tokens-completion", "step 1 · row 0 · #0")
    tokens = page.locator("#inspect-tokens .token-heatmap .tok")
    expect(tokens).to_have_count(5)
    assert [("untrained" in (tokens.nth(i).get_attribute("class") or "")) for i in range(5)] == [
        False, False, False, True, False]
    assert "not trained on" in tokens.nth(3).get_attribute("title")
