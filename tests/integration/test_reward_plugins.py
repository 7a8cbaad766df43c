"""Reward functions written from TRL's documentation train through the launcher as they do under TRL: the documented
``f(prompts, completions, **kwargs)``, an ``async def`` judge and a function without ``**kwargs`` in one run; a
sequence-classification reward model as a rule; a broken plugin refused at submit, before any model loads."""

from __future__ import annotations

import time

import pytest

from grpo_core.run_config import ConfigError
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import tiny_config

TRL_STYLE = '''
import asyncio


def text(message_or_text):
    return message_or_text if isinstance(message_or_text, str) else message_or_text[-1]["content"]


def documented(prompts, completions, **kwargs):
    assert isinstance(prompts, list) and len(prompts) == len(completions)
    assert "answer" in kwargs and "trainer_state" in kwargs
    return [float(len(text(c)) % 3) for c in completions]


async def judge(completions, **kwargs):
    await asyncio.sleep(0)
    return [1.0 if any(ch.isdigit() for ch in text(c)) else 0.0 for c in completions]


def declared_only(prompts, completions):
    return [0.5 if "What is" in text(p) else 0.0 for p in prompts]
'''


def _metric_keys(store, run_id: int) -> dict[int, set[str]]:
    keys: dict[int, set[str]] = {}
    for point in store.metrics_since(run_id):
        if point.value is not None:
            keys.setdefault(point.step, set()).add(point.key)
    return keys


def test_three_trl_signatures_train_in_one_run(store, settings, tiny_model_dir, tmp_path):
    path = tmp_path / "trl_style.py"
    path.write_text(TRL_STYLE)
    rewards = [{"rule": "plugin", "params": {"target": f"{path}:{name}"}} for name in ("documented", "judge")]
    rewards.append({"rule": "plugin", "weight": 0.5, "params": {"target": f"{path}:declared_only"}})
    run = submit_run(store, tiny_config(tiny_model_dir, rewards=rewards)).run
    assert Launcher(store, settings).wait_idle(timeout_s=240), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    keys = _metric_keys(store, run.id)
    assert sorted(keys) == [1, 2]
    for step in (1, 2):
        for name in ("documented", "judge", "declared_only"):
            assert f"rewards/{name}/mean" in keys[step], f"step {step} lacks rewards/{name}/mean"
    for group in store.groups_at(run.id, 1):
        for completion in group.completions:
            assert completion.rewards["declared_only"] == 0.5  # every prompt of the example starts "What is"


def test_reward_model_rule_trains_two_steps(store, settings, tiny_model_dir, tmp_path):
    from tests.tiny_model import build_tiny_reward_model

    scorer = build_tiny_reward_model(tmp_path / "tiny-reward-model")
    rewards = [
        {"rule": "reward_model", "weight": 1.0, "params": {"model": str(scorer), "max_length": 64}},
        {"rule": "numeric_answer", "weight": 1.0},
    ]
    run = submit_run(store, tiny_config(tiny_model_dir, rewards=rewards)).run
    assert Launcher(store, settings).wait_idle(timeout_s=240), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    keys = _metric_keys(store, run.id)
    assert sorted(keys) == [1, 2]
    for step in (1, 2):
        assert {"rewards/reward_model/mean", "rewards/numeric_answer/mean"} <= keys[step]
    scored = [c.rewards["reward_model"] for g in store.groups_at(run.id, 1) for c in g.completions]
    assert all(isinstance(value, float) for value in scored) and len(set(scored)) > 1  # a real model's logits


@pytest.mark.parametrize(
    ("source", "message"),
    [
        ("import no_such_module_here\n", "could not be loaded: ModuleNotFoundError"),
        ("def reward(completions, reference):\n    return [0.0] * len(completions)\n", "needs the argument 'reference'"),
        ("def reward(completions, **kwargs):\n    return [0.0]\n", "must return a list of 2 numbers or None; got 1"),
    ],
)
def test_broken_plugin_is_refused_at_submit_before_any_model_loads(store, tiny_model_dir, tmp_path, source, message):
    path = tmp_path / "broken.py"
    path.write_text(source)
    config = tiny_config(tiny_model_dir, rewards=[{"rule": "plugin", "params": {"target": f"{path}:reward"}}])
    started = time.monotonic()
    with pytest.raises(ConfigError, match=message):
        submit_run(store, config)
    assert time.monotonic() - started < 30
    assert store.list_runs() == []


def test_preflight_scores_a_reward_model_and_an_async_plugin(settings, tiny_model_dir, tmp_path):
    from grpo_core.preflight.job import preflight_report, start_preflight
    from tests.tiny_model import build_tiny_reward_model

    scorer = build_tiny_reward_model(tmp_path / "tiny-reward-model")
    path = tmp_path / "trl_style.py"
    path.write_text(TRL_STYLE)
    rewards = [
        {"rule": "reward_model", "params": {"model": str(scorer)}},
        {"rule": "plugin", "params": {"target": f"{path}:judge"}},
    ]
    config = tiny_config(tiny_model_dir, rewards=rewards, num_generations=3, per_device_train_batch_size=6)
    job = start_preflight(settings, config, num_prompts=2)
    try:
        deadline = time.monotonic() + 300
        while not job.poll():
            assert time.monotonic() < deadline, job.log_tail()
            time.sleep(0.5)
        report = preflight_report(job)
    finally:
        job.close()
    assert [r.name for r in report.rules] == ["reward_model", "judge"]
    assert all(rule.count == 6 and rule.none_share == 0 for rule in report.rules)
