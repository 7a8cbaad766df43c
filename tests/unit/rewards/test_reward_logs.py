"""What a reward function logs through TRL 1.16's ``log_extra`` / ``log_metric`` (grpo_core.rewards.logged): its
columns passed on to TRL only when they hold one value per completion and kept aligned across calls, its scalars
under ``reward_logs/<fn>/``; the recorder storing each completion's columns with its group, Inspect showing them."""

from __future__ import annotations

import pickle

import pytest

from grpo_core.rewards.compose import GuardedReward
from grpo_core.rewards.logged import REWARD_COLUMNS_KEY, is_reward_column


def judge(completions, log_extra=None, log_metric=None, **kwargs):
    """A plugin as TRL 1.16 documents one: a verdict column per completion and a share as a scalar."""
    verdicts = ["long" if len(c) > 3 else "short" for c in completions]
    log_extra("verdict", verdicts)
    log_metric("long_share", verdicts.count("long") / len(completions))
    return [1.0 if v == "long" else 0.0 for v in verdicts]


def _hooks():
    metrics, extras = [], []
    return metrics, extras, {"log_metric": lambda n, v: metrics.append((n, v)),
                             "log_extra": lambda c, v: extras.append((c, list(v)))}


def test_a_plugins_columns_and_scalars_reach_trl():
    metrics, extras, hooks = _hooks()
    out = GuardedReward(judge)(["a", "abcd"], **hooks)
    assert out == [0.0, 1.0]
    assert metrics == [("rewards/judge/errors", 0.0), ("reward_logs/judge/long_share", 0.5)]
    assert extras == [("reward_errors/judge", ["", ""]), ("verdict", ["short", "long"])]


@pytest.mark.parametrize(
    ("column", "values"),
    [("verdict", ["only one"]), ("verdict", "ab"), ("_row_index", [1, 2]), ("reward_errors/x", ["", ""]),
     ("x" * 101, ["a", "b"]), (3, ["a", "b"])],
)
def test_a_malformed_column_is_dropped_not_passed_on(column, values):
    def plugin(completions, log_extra=None, **kwargs):
        log_extra(column, values)
        return [0.0] * len(completions)

    plugin.__name__ = "bad"
    metrics, extras, hooks = _hooks()
    assert GuardedReward(plugin)(["a", "b"], **hooks) == [0.0, 0.0]
    assert extras == [("reward_errors/bad", ["", ""])]  # TRL's buffers stay one value per completion


@pytest.mark.parametrize(("name", "value"), [("share", float("nan")), ("share", "high"), ("", 1.0), (None, 1.0)])
def test_a_malformed_scalar_is_dropped(name, value):
    def plugin(completions, log_metric=None, **kwargs):
        log_metric(name, value)
        return [0.0] * len(completions)

    plugin.__name__ = "bad"
    metrics, _extras, hooks = _hooks()
    GuardedReward(plugin)(["a"], **hooks)
    assert metrics == [("rewards/bad/errors", 0.0)]


def test_a_column_logged_once_stays_aligned_on_later_calls_and_failures():
    calls = []

    def plugin(completions, log_extra=None, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            log_extra("note", ["x"] * len(completions))
        if len(calls) == 3:
            raise RuntimeError("down")
        return [0.0] * len(completions)

    plugin.__name__ = "p"
    guarded = GuardedReward(plugin)
    for _ in range(3):
        _metrics, extras, hooks = _hooks()
        guarded(["a", "b"], **hooks)
    assert ("note", [None, None]) in extras  # the failed third call still logs the column
    assert guarded.logs.columns == {"note": None}
    judged = GuardedReward(judge)
    judged(["abcd"], **_hooks()[2])
    assert pickle.loads(pickle.dumps(judged)).logs.columns == {"verdict": None}  # the guard still pickles


def test_the_recorder_keeps_each_completions_columns_and_inspect_shows_them():
    pytest.importorskip("transformers")
    from app.views.runs import groups_html, reward_column_map
    from grpo_core.engine.group_capture import groups_from_trl_logs

    logs = {
        "prompt": ["p", "p"],
        "completion": ["a", "abcd"],
        "advantages": [-1.0, 1.0],
        "rewards": {"judge": [0.0, 1.0]},
        "extra": {"_row_index": [3, 3], "_num_tokens": [1, 4], "reward_errors/judge": ["", ""],
                  "verdict": ["short", "<b>long</b>"], "score": [float("nan"), 0.25], "skipped": [None, None]},
    }
    (group,) = groups_from_trl_logs(logs, step=1, num_generations=2, reward_names=["judge"], reward_weights=[1.0])
    assert group.extra[REWARD_COLUMNS_KEY] == {"0": {"verdict": "short", "score": "NaN"},
                                               "1": {"verdict": "<b>long</b>", "score": 0.25}}
    assert reward_column_map(group)["1"] == {"verdict": "<b>long</b>", "score": 0.25}
    page = groups_html([group])
    assert "<td>verdict</td>" in page and "&lt;b&gt;long&lt;/b&gt;" in page and "<b>long</b>" not in page
    assert "reward_columns=" not in page  # not listed as a dataset column
    assert [is_reward_column(c) for c in logs["extra"]] == [False, False, False, True, True, True]
