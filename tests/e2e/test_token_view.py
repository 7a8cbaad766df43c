"""The Inspect tab's token view in headless Chromium, on a run written straight into the served store (no
training): a completion opens as a heatmap of its tokens beside its advantage, the selector switches between
log-probability, KL and entropy, token text is shown as text, and a completion without recorded values says so."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from storage import CompletionRecord, GroupRecord, RunStatus, Store, TokenStats, sqlite_url
from tests.helpers import pick

pytestmark = pytest.mark.e2e

PIECES = ["The", " answer", " is", " <b>42</b>", "<|im_end|>"]
STATS = TokenStats(
    pieces=PIECES,
    logprobs=[-0.25, -1.5, -0.125, -6.0, -0.5],
    kl=[0.0, 0.5, 0.03125, 2.0, 0.25],
    entropy=[0.5, 1.0, 0.25, 3.0, 0.75],
)


@pytest.fixture(scope="module")
def token_run(server):
    """Run "token-demo": one group at step 4; completion #0 has per-token values, #1 has none."""
    store = Store(sqlite_url(server["data_dir"] / "grpo.db"))
    try:
        run = store.create_run(name="token-demo", config={"model": "m", "beta": 0.04}, dataset_id=None, max_steps=4)
        store.finish_run(run.id, RunStatus.COMPLETED)
        completions = [
            CompletionRecord(index=0, text="The answer is <b>42</b>", rewards={"numeric_answer": 1.0},
                             total_reward=1.0, advantage=0.87, num_tokens=5, token_stats=STATS),
            CompletionRecord(index=1, text="no idea", rewards={"numeric_answer": 0.0}, total_reward=0.0,
                             advantage=-0.87, num_tokens=2),
        ]
        store.record_groups(run.id, 4, [GroupRecord(step=4, row_index=3, prompt="What is 21 + 21?",
                                                    completions=completions)])
        yield run.id
    finally:
        store.close()


def test_a_completion_opens_as_a_token_heatmap(page, token_run):
    page.get_by_role("tab", name="Inspect").click()
    pick(page, "inspect-run", "token-demo")
    expect(page.locator("#inspect-summary")).to_contain_text("step 4")
    page.locator("#inspect-tokens-panel").get_by_text(
        "Tokens of one completion: log-probability, KL, entropy", exact=True).first.click()
    pick(page, "inspect-tokens-completion", "step 4 · row 3 · #0")

    heatmap = page.locator("#inspect-tokens .token-heatmap")
    expect(heatmap).to_have_attribute("data-measure", "logprob")
    tokens = heatmap.locator(".tok")
    expect(tokens).to_have_count(len(PIECES))
    assert [tokens.nth(i).inner_text() for i in range(len(PIECES))] == PIECES  # shown as text, not markup
    assert heatmap.locator("b").count() == 0
    # the least likely token is the reddest: deep red, the most likely stays white
    assert tokens.nth(3).evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(185, 28, 28)"
    assert tokens.nth(2).evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 255, 255)"
    expect(page.locator("#inspect-tokens .token-adv")).to_contain_text("advantage +0.87")
    legend = page.locator("#inspect-tokens .token-legend")
    expect(legend).to_contain_text("log-probability")
    assert legend.get_attribute("data-low") == "-6" and legend.get_attribute("data-high") == "-0.125"

    page.locator("#inspect-tokens-measure").get_by_text("KL to the reference").click()
    expect(heatmap).to_have_attribute("data-measure", "kl")
    assert tokens.nth(3).get_attribute("data-value") == "2"
    assert tokens.nth(3).evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(185, 28, 28)"
    assert tokens.nth(0).evaluate("e => getComputedStyle(e).backgroundColor") == "rgb(255, 255, 255)"
    page.locator("#inspect-tokens-measure").get_by_text("entropy", exact=True).click()
    expect(heatmap).to_have_attribute("data-measure", "entropy")

    pick(page, "inspect-tokens-completion", "step 4 · row 3 · #1")
    expect(page.locator("#inspect-tokens")).to_contain_text("No per-token values were recorded")


def test_clicking_a_completion_opens_its_tokens_readably(page, token_run):
    page.get_by_role("tab", name="Inspect").click()
    pick(page, "inspect-run", "token-demo")
    expect(page.locator("#inspect-summary")).to_contain_text("step 4")
    cards = page.locator("#inspect-groups .grpo-completion")
    expect(cards).to_have_count(2)
    cards.nth(1).locator("pre").first.click()  # the card of #1 (sorted by advantage): no recorded values
    expect(page.locator("#inspect-tokens")).to_contain_text("No per-token values were recorded")
    expect(page.locator("#inspect-tokens-completion input")).to_have_value(re.compile(r"#1 "))
    cards.nth(0).click()  # #0, with values: the panel opens on it
    heatmap = page.locator("#inspect-tokens .token-heatmap")
    expect(heatmap).to_be_visible()
    expect(page.locator("#inspect-tokens .token-adv")).to_contain_text("advantage +0.87")
    expect(page.locator("#inspect-tokens-completion input")).to_have_value(re.compile(r"#0 "))
    tokens = heatmap.locator(".tok")
    expect(tokens).to_have_count(len(PIECES))
    # readable on every colour: white text on the deep red token, black on the white one (WCAG contrast >= 4.5)
    assert tokens.nth(3).evaluate("e => getComputedStyle(e).color") == "rgb(255, 255, 255)"
    assert tokens.nth(2).evaluate("e => getComputedStyle(e).color") == "rgb(0, 0, 0)"
    # the same card clicked again (after another) opens again
    cards.nth(1).click()
    expect(page.locator("#inspect-tokens")).to_contain_text("No per-token values were recorded")
    cards.nth(0).click()
    expect(tokens).to_have_count(len(PIECES))
