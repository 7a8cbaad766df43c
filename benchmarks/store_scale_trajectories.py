"""The long-trajectory mode of ``bench_store_scale.py`` (``--trajectories``): every completion a multi-turn rollout
with tool calls, and the page reads that draw such rollouts, timed beside the others.

Each trajectory has :data:`TURNS` assistant turns and about :data:`TOKENS` tokens (about 4 characters a token): seven
rounds of assistant text (~250 tokens), a tool call with JSON arguments and the tool's result (~250 tokens), then the
final answer and an environment reward, built from TRL's messages by :func:`grpo_core.tools.turns.turns_of_completion`
(the recorder's own path), with TRL's tool mask as run-length spans (:func:`grpo_core.tools.turns.mask_spans`). The
pool mixes what the Inspect filters look for: 10% without a tool call (single-turn, no turns: stored as text), 10%
with a failed call (a tool error), 10% stopped at the tool-calling limit (the last call got no result). The
completions of every :data:`TOKEN_STATS_EVERY`-th group also get per-token values (``completion_tokens``:
4,096 pieces, log-probabilities, KL, entropy as float16), which the token view reads.

What it leaves out: the browser's own drawing of a page of trajectories (the HTML is built and timed, not rendered).
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable
from types import SimpleNamespace

from sqlalchemy import func, select

from app.api.group_pages import groups_page
from app.api.public import group_dict
from app.tabs.inspect.tab import step_view
from app.tabs.inspect.tokens import token_view_html
from app.tabs.inspect.tools import diff_choices, history_page
from app.views.inspect import completion_diff_html, completion_label, find_completion, prompt_history_html
from app.views.trajectories import trajectory_text
from grpo_core.tools.turns import mask_spans, turns_of_completion
from storage.float16 import pack_float16
from storage.tables import CompletionRow, GroupRow, TokenStatsRow

#: Assistant turns of one trajectory (the last one the final answer).
TURNS = 8
#: About this many tokens a trajectory (assistant text, calls, results).
TOKENS = 4096
#: Distinct trajectories drawn once and cycled (prime: no period shared with the group size).
TRAJECTORY_POOL = 1031
#: The completions of every this many groups get per-token values (the token view's read).
TOKEN_STATS_EVERY = 100
#: The metric keys an agentic run logs beside the others (TRL 1.16, an environment's reward).
TOOL_KEYS = ["tools/call_frequency", "tools/failure_frequency", "rewards/CalculatorEnv/mean"]
#: The named API's default page (``run_groups``' ``limit``).
API_PAGE = 200
VOCABULARY = ("the tool says the value is 42 so we add seven and three then subtract one check result again "
              "compute step answer total lookup table row column reads first second final because").split()


def _words(rng: random.Random, tokens: int) -> str:
    return " ".join(rng.choices(VOCABULARY, k=tokens))


def _trajectory(rng: random.Random) -> tuple[str, list | None, list | None, int, bool]:
    """One drawn rollout: ``(final assistant text, turns, mask spans, num_tokens, truncated)``."""
    kind = rng.random()
    if kind < 0.1:  # no tool call: a single-turn completion, recorded as its text
        return _words(rng, TOKENS // 4), None, None, TOKENS // 4, False
    failed, at_limit = kind < 0.2, 0.2 <= kind < 0.3
    rounds, text_tokens, result_tokens, call_tokens = TURNS - 1, 250, 250, 30
    messages, mask = [], []
    for turn in range(rounds):
        arguments = {"expression": f"{rng.randrange(1000)} * {rng.randrange(1000)}", "note": _words(rng, 20)}
        messages.append({"role": "assistant", "content": _words(rng, text_tokens),
                         "tool_calls": [{"type": "function",
                                         "function": {"name": "calculator", "arguments": arguments}}]})
        mask += [1] * (text_tokens + call_tokens)
        if at_limit and turn == rounds - 1:
            break  # the rollout ends on a call that got no result
        result = (str({"error": "division by zero"}) if failed and turn == rounds // 2
                  else _words(rng, result_tokens))
        messages.append({"role": "tool", "name": "calculator", "content": result})
        mask += [0] * result_tokens
    if not at_limit:
        messages.append({"role": "assistant", "content": f"{_words(rng, text_tokens)} The answer is 42."})
        mask += [1] * text_tokens
    turns = turns_of_completion(messages, {"CalculatorEnv": float(rng.random() < 0.5)})
    final = next((t["text"] for t in reversed(turns) if t["kind"] == "assistant"), "")
    return final, turns, mask_spans(mask), len(mask), at_limit


def trajectory_pool(rules: list[str], size: int = TRAJECTORY_POOL) -> list[tuple]:
    """``size`` distinct completions as the ``completions`` columns ``(text, rewards JSON, total reward, advantage,
    num_tokens, truncated, turns JSON, tool_mask JSON)``, cycled through by the generation."""
    rng = random.Random(3)
    pool = []
    for _ in range(size):
        text, turns, spans, num_tokens, truncated = _trajectory(rng)
        rewards = {name: rng.choice([0.0, 0.5, 1.0]) for name in rules}
        pool.append((text, json.dumps(rewards), sum(rewards.values()), rng.gauss(0, 1), num_tokens, truncated,
                     None if turns is None else json.dumps(turns), None if spans is None else json.dumps(spans)))
    return pool


def token_stats_pool(size: int = 7) -> list[tuple]:
    """``size`` drawn per-token values of a :data:`TOKENS`-token completion as the ``completion_tokens`` columns
    after the id: ``(num_tokens, pieces JSON, logprobs, kl, entropy)`` (float16 bytes)."""
    rng = random.Random(4)
    pool = []
    for _ in range(size):
        pieces = [f" {w}" for w in rng.choices(VOCABULARY, k=TOKENS)]
        pool.append((TOKENS, json.dumps(pieces), pack_float16([-rng.expovariate(2) for _ in range(TOKENS)]),
                     pack_float16([rng.expovariate(50) for _ in range(TOKENS)]),
                     pack_float16([rng.expovariate(1) for _ in range(TOKENS)])))
    return pool


def trajectory_queries(ctx: SimpleNamespace, run_id: int, a_step: Callable[[], int], a_row: Callable[[], int],
                       rng: random.Random) -> list[tuple[str, Callable[[], object]]]:
    """The page reads that draw trajectories, as ``(label, function)`` for the benchmark's table: Inspect's step
    view (groups with their turns, filters), one prompt across steps drawn, the diff's choices and a diff of two
    trajectories, the token view, and the named API's ``run_groups`` (one step, a page of :data:`API_PAGE`, one
    dataset row, through :func:`app.api.group_pages.groups_page`: the endpoint's read, pages bounded by what they
    carry). The completions they open are drawn first, untimed (a click on a card names one)."""
    store = ctx.store

    def nearest(step: int) -> int:
        return store.nearest_group_step(run_id, step) or 1

    def refs(step: int, count: int) -> list[str]:
        groups = store.groups_at(run_id, step)
        return [f"{g.id}:{c.index}" for g in rng.sample(groups, min(count, len(groups))) for c in g.completions[:1]]

    # The completions to open, drawn before the timing (a click on a card names one): pairs of one step for the
    # diff, and completions of steps with per-token values for the token view.
    pairs = [refs(nearest(a_step()), 2) for _ in range(40)]
    pairs = [pair for pair in pairs if len(pair) == 2] or [refs(nearest(a_step()), 1) * 2]
    with store.engine.connect() as conn:
        token_refs = [f"{group_id}:{index}" for group_id, index in conn.execute(
            select(CompletionRow.group_id, CompletionRow.index)
            .join(TokenStatsRow, TokenStatsRow.completion_id == CompletionRow.id)
            .join(GroupRow, GroupRow.id == CompletionRow.group_id).where(GroupRow.run_id == run_id)
            .order_by(func.random()).limit(40))]

    def diff() -> str:
        sides = []
        for ref in rng.choice(pairs):
            group, completion = find_completion(store, ref)
            sides.append((completion_label(group, completion), trajectory_text(completion)))
        return completion_diff_html(sides[0], sides[1])

    def history_drawn() -> str:
        page = history_page(ctx, run_id, a_row())
        return prompt_history_html(page.groups, page)

    queries = [
        ("trajectories: Inspect step view (groups_at, turns drawn, figure): step_view",
         lambda: step_view(ctx, run_id, nearest(a_step()))[1]),
        ("trajectories: step view, filter 'with a failed tool call'",
         lambda: step_view(ctx, run_id, nearest(a_step()), mode="tool_failed")[1]),
        ("trajectories: step view, filter 'stopped at the tool-calling limit'",
         lambda: step_view(ctx, run_id, nearest(a_step()), mode="iteration_limit")[1]),
        ("trajectories: prompt across steps, first page drawn (50 groups)", history_drawn),
        ("trajectories: diff choices (the step's and the row's page)",
         lambda: diff_choices(ctx, run_id, nearest(a_step()), a_row(), None)["choices"]),
        ("trajectories: diff of two trajectories (turn by turn)", diff),
        ("named API: run_groups(step)",
         lambda: groups_page(store, run_id, step=nearest(a_step()), to_dict=group_dict)),
        (f"named API: run_groups(after_step, limit={API_PAGE})",
         lambda: groups_page(store, run_id, after_step=a_step(), limit=API_PAGE, to_dict=group_dict)),
        (f"named API: run_groups(row_index, limit={API_PAGE})",
         lambda: groups_page(store, run_id, row_index=a_row(), limit=API_PAGE, to_dict=group_dict)),
    ]
    if token_refs:
        queries.append(("trajectories: token view (4,096 tokens, tool results marked)",
                        lambda: token_view_html(ctx, rng.choice(token_refs), "logprob")))
    return queries
