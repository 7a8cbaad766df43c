"""Inspect's trajectory views (app/views/trajectories.py and where they join the group cards, filters, token view
and chart): a group's G trajectories side by side, turn by turn, each with its per-rule rewards, total and
advantage; hostile text escaped; failed calls marked; tool-result tokens marked as not trained on."""

from __future__ import annotations

import re

import pytest

from app.views.charts import MetricSeries, training_figure
from app.views.inspect import GROUP_FILTERS, filter_groups, prompt_history_html
from app.views.runs import groups_html
from app.views.token_heatmap import token_heatmap_html
from app.views.trajectories import TRAJECTORY_FILTERS, completion_matches, turns_html
from storage import CompletionRecord, GroupRecord, MetricPoint, TokenStats

HOSTILE = "<script>alert(1)</script>"
CALLED = [{"kind": "assistant", "text": "let me " + HOSTILE},
          {"kind": "tool_call", "name": "look<up>", "arguments": '{"q": "' + HOSTILE + '"}', "parsed": True},
          {"kind": "tool_result", "name": "lookup", "text": "42 " + HOSTILE, "error": False},
          {"kind": "assistant", "text": "The answer is 42."},
          {"kind": "reward", "name": "SecretEnv", "value": 1.0}]
FAILED = [{"kind": "tool_call", "name": "lookup", "arguments": "{}", "parsed": True},
          {"kind": "tool_result", "name": "lookup", "text": "KeyError", "error": True},
          {"kind": "assistant", "text": "sorry"}]
UNPARSED = [{"kind": "tool_call", "name": "", "arguments": '{"name": "lookup", "argu', "parsed": False}]
LIMIT = [{"kind": "tool_call", "name": "lookup", "arguments": "{}", "parsed": True},
         {"kind": "tool_result", "name": "lookup", "text": "42", "error": False},
         {"kind": "tool_call", "name": "lookup", "arguments": "{}", "parsed": True}]


def _completion(index, turns, advantage=0.0, text="final"):
    return CompletionRecord(index=index, text=text, rewards={"answer": 1.0, "SecretEnv": 0.5}, total_reward=1.5,
                            advantage=advantage, num_tokens=10, turns=turns)


def _group(*turn_lists, group_id=1):
    return GroupRecord(step=2, row_index=0, prompt="q", id=group_id,
                       completions=[_completion(i, t, advantage=1.0 - i) for i, t in enumerate(turn_lists)])


def test_a_trajectory_is_drawn_turn_by_turn_as_distinct_blocks_all_text_escaped():
    page = turns_html(CALLED)
    kinds = re.findall(r'data-kind="([a-z_]+)"', page)
    assert kinds == ["assistant", "tool_call", "tool_result", "assistant", "reward"]
    assert "<script>" not in page and "&lt;script&gt;" in page and "look&lt;up&gt;" in page
    assert turns_html(None) == "" and turns_html("junk") == ""


def test_failed_and_unparsed_calls_are_marked():
    page = turns_html(FAILED + UNPARSED)
    assert 'data-kind="tool_result" data-error="1"' in page and "tool error" in page
    assert 'data-parsed="0"' in page and "not parsed" in page
    assert page.count("grpo-turn failed") == 2


def test_a_group_shows_its_trajectories_side_by_side_with_rewards_total_and_advantage():
    page = groups_html([_group(CALLED, FAILED, None)])
    cards = page.split('<div class="grpo-completion ')[1:]
    assert len(cards) == 3
    for card in cards[:2]:
        assert 'class="grpo-trajectory"' in card and "SecretEnv" in card and "total 1.500" in card
        assert "advantage" in card
    assert 'class="grpo-trajectory"' not in cards[2] and "final" in cards[2]  # a single-turn completion: its text
    assert "<script>" not in page


def test_one_prompt_across_steps_shows_each_trajectory_as_a_summary_line_and_its_final_answer():
    page = prompt_history_html([_group(CALLED, FAILED + LIMIT, None)])
    cards = page.split('<div class="grpo-completion ')[1:]
    assert len(cards) == 3 and 'class="grpo-turn ' not in page  # no turn blocks: their texts are not drawn
    assert "42 &lt;script&gt;" not in page and "let me" not in page  # the tool's output, the earlier turns
    assert 'data-calls="1" data-failures="0"' in cards[0] and "look&lt;up&gt; ×1" in cards[0]
    assert "The answer is 42." not in cards[0] and "final" in cards[0]  # the record's text: its final answer
    assert 'grpo-turn-summary failed' in cards[1] and 'data-calls="3" data-failures="1"' in cards[1]
    assert 'data-ended-on-call="1"' in cards[1] and "lookup ×3" in cards[1]
    assert "grpo-turn-summary" not in cards[2] and "final" in cards[2]
    assert 'id="prompt-history-turns-note"' in page and "<script>" not in page
    assert 'prompt-history-turns-note' not in prompt_history_html([_group(None, None)])


@pytest.mark.parametrize("key, expected", [
    ("called_tool", [True, True, True, True, False]),
    ("tool_failed", [False, True, True, False, False]),
    ("no_tool_call", [False, False, False, False, True]),
    ("iteration_limit", [False, False, False, True, False]),
])
def test_trajectory_filters(key, expected):
    completions = [_completion(i, t) for i, t in enumerate([CALLED, FAILED, UNPARSED, LIMIT, None])]
    assert [completion_matches(c, key) for c in completions] == expected


def test_the_group_filters_include_the_trajectory_filters():
    assert set(TRAJECTORY_FILTERS) <= set(GROUP_FILTERS)
    groups = [_group(CALLED, group_id=1), _group(None, group_id=2), _group(LIMIT, FAILED, group_id=3)]
    assert [g.id for g in filter_groups(groups, "called_tool")] == [1, 3]
    assert [g.id for g in filter_groups(groups, "tool_failed")] == [3]
    assert [g.id for g in filter_groups(groups, "no_tool_call")] == [2]
    assert [g.id for g in filter_groups(groups, "iteration_limit")] == [3]


def test_the_token_view_marks_tool_result_tokens_as_not_trained_on():
    stats = TokenStats(pieces=["a", "b", "<r>", "42", "c"], logprobs=[-1.0, -2.0, -0.5, -0.1, -3.0])
    completion = CompletionRecord(index=0, text="c", rewards={}, total_reward=None, advantage=0.5, turns=FAILED,
                                  tool_mask=[[1, 2], [0, 2], [1, 1]])
    page = token_heatmap_html(stats, "logprob", completion=completion)
    classes = re.findall(r'<span class="(tok[a-z ]*)"', page)
    assert classes == ["tok", "tok", "tok untrained", "tok untrained", "tok"]
    assert "not trained on" in page and "&lt;r&gt;" in page
    hostile_mask = CompletionRecord(index=0, text="c", rewards={}, total_reward=None, advantage=0.5,
                                    tool_mask=[[5, "x"]])
    assert "untrained" not in token_heatmap_html(stats, "logprob", completion=hostile_mask).split("</style>")[1]


def test_tool_metrics_get_their_own_chart_panel_only_when_recorded():
    series = MetricSeries()
    series.extend([MetricPoint(1, "reward", 1.0, 1.0), MetricPoint(1, "tools/call_frequency", 0.75, 1.0),
                   MetricPoint(1, "tools/failure_frequency", 0.25, 1.0), MetricPoint(1, "rewards/SecretEnv/mean", 0.5,
                                                                                      1.0)])
    figure = training_figure(series, title="agent")
    names = {trace.name for trace in figure.data}
    assert {"tools/call_frequency", "tools/failure_frequency", "rewards/SecretEnv/mean"} <= names
    titles = [a.text for a in figure.layout.annotations]
    assert any(t.startswith("tools") for t in titles)
    plain = MetricSeries()
    plain.extend([MetricPoint(1, "reward", 1.0, 1.0)])
    assert not any(a.text.startswith("tools") for a in training_figure(plain, title="x").layout.annotations)


def test_two_trajectories_diff_turn_by_turn():
    from app.views.inspect import completion_diff_html
    from app.views.trajectories import trajectory_text

    left, right = trajectory_text(_completion(0, CALLED)), trajectory_text(_completion(1, FAILED))
    assert left.splitlines()[1].startswith("[tool call look<up>] ") and "[tool error lookup] KeyError" in right
    assert trajectory_text(_completion(2, None, text="plain")) == "plain"
    page = completion_diff_html(("a", left), ("b", right))
    assert "<script>" not in page and "KeyError" in page and "&lt;script&gt;" in page
