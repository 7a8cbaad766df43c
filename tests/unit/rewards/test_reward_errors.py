"""A reward function that raises is its own outcome: None rewards (NaN for TRL), a per-rule error count, a mark per
completion; never a 0 and never a crash of the trainer."""

from __future__ import annotations

import pickle

from grpo_core.rewards.compose import GuardedReward, build_reward_funcs, guard_reward_funcs


def _broken(completions, **kwargs):
    raise RuntimeError("the grader is down")


_broken.__name__ = "grader"


def test_a_raising_rule_gives_none_and_logs_its_errors():
    metrics, extras = [], []
    guarded = GuardedReward(_broken)
    out = guarded(["a", "b", "c"], log_metric=lambda n, v: metrics.append((n, v)),
                  log_extra=lambda c, v: extras.append((c, v)))
    assert out == [None, None, None]
    assert metrics == [("rewards/grader/errors", 3.0)]
    assert extras == [("reward_errors/grader", ["RuntimeError: the grader is down"] * 3)]
    extras.clear()
    GuardedReward(lambda completions, **kw: [1.0] * len(completions))(["a"], log_extra=lambda c, v: extras.append(v))
    assert extras == [[""]]  # logged on every call: TRL's per-completion buffers stay aligned


def test_a_working_rule_logs_zero_errors_and_passes_its_rewards_through():
    (func,), _, _ = build_reward_funcs([{"rule": "length", "params": {"min_tokens": 0, "max_tokens": 8}}])
    metrics = []
    out = GuardedReward(func)(["one two"], log_metric=lambda n, v: metrics.append((n, v)))
    assert out == func(["one two"])
    assert metrics == [(f"rewards/{func.__name__}/errors", 0.0)]


def test_a_wrong_length_is_an_error_and_the_guard_pickles():
    guarded = GuardedReward(lambda completions, **kw: [1.0])
    assert guarded(["a", "b"]) == [None, None]
    funcs, _, _ = build_reward_funcs([{"rule": "length"}])
    wrapped = guard_reward_funcs(funcs)
    assert isinstance(wrapped[0], GuardedReward)
    assert guard_reward_funcs(wrapped)[0] is wrapped[0]
    assert pickle.loads(pickle.dumps(wrapped[0])).__name__ == wrapped[0].__name__


def test_errors_reach_the_recorded_group_and_inspect_badges_them():
    import pytest

    pytest.importorskip("transformers")
    from app.views.runs import groups_html, reward_error_map
    from grpo_core.engine.group_capture import groups_from_trl_logs

    logs = {
        "prompt": ["p", "p"],
        "completion": ["ok", "boom"],
        "advantages": [0.0, 0.0],
        "rewards": {"grader": [float("nan"), float("nan")], "length": [1.0, 1.0]},
        "extra": {"reward_errors/grader": ["", "RuntimeError: the grader is down"]},
    }
    (group,) = groups_from_trl_logs(logs, step=1, num_generations=2, reward_names=["grader", "length"],
                                    reward_weights=[1.0, 1.0])
    assert group.extra["reward_errors"] == {"1": {"grader": "RuntimeError: the grader is down"}}
    assert group.completions[1].rewards["grader"] is None
    assert group.completions[1].total_reward == 1.0  # the error is left out of the sum, as TRL's nansum does
    assert reward_error_map(group) == {"1": {"grader": "RuntimeError: the grader is down"}}
    page = groups_html([group])
    assert page.count("reward error: grader") == 1
    assert "the grader is down" in page
    assert "reward_errors=" not in page  # not listed as a dataset column


def test_a_rule_over_its_time_limit_is_an_error_and_runs_in_the_callers_thread():
    import threading
    import time

    threads = []

    def slow(completions, **kwargs):
        threads.append(threading.current_thread())
        time.sleep(0.3)
        return [1.0] * len(completions)

    slow.__name__ = "slow"
    metrics = []
    out = GuardedReward(slow, timeout_s=0.1)(["a", "b"], log_metric=lambda n, v: metrics.append((n, v)))
    assert out == [None, None]
    assert metrics == [("rewards/slow/errors", 2.0)]
    assert threads == [threading.current_thread()]  # signal-based timeouts inside rules (math-verify) keep working
    assert GuardedReward(slow, timeout_s=None)(["a"]) == [1.0]


def _out_of_memory(completions, **kwargs):
    raise MemoryError


def test_out_of_memory_is_the_workers_failure_not_the_rules():
    metrics = []
    try:
        GuardedReward(_out_of_memory)(["a"], log_metric=lambda n, v: metrics.append((n, v)))
    except MemoryError:
        pass
    else:
        raise AssertionError("a MemoryError was turned into a reward error")
    assert metrics == []  # nothing logged as the rule's error: the run fails as out of memory
