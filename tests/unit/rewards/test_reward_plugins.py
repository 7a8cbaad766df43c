"""Plugin reward functions called exactly as TRL's GRPOTrainer calls them (keyword arguments, only the declared ones
without ``**kwargs``, ``async def`` awaited), and the check in a child process that refuses a broken plugin before a
run is queued. Real functions in temporary files; the checks run the real child process."""

from __future__ import annotations

import asyncio
import pickle
import sys
import textwrap
import time
from pathlib import Path

import pytest

from grpo_core.reward_check.job import check_plugins, score_group_isolated
from grpo_core.rewards import get_rule
from grpo_core.rewards.plugin import AsyncPluginReward, PluginSignatureError, is_async_function, select_arguments

SOURCE = textwrap.dedent(
    """
    import asyncio

    SEEN = {}

    def trl_documented(prompts, completions, **kwargs):
        SEEN["trl_documented"] = {"prompts": prompts, "keys": sorted(kwargs)}
        return [float(len(c)) for c in completions]

    async def judge(completions, **kwargs):
        await asyncio.sleep(0.01)
        return [1.0 if "42" in c else 0.0 for c in completions]

    def no_kwargs(prompts, completions):
        return [float(p == "P") for p in prompts]

    def wants_answer(completions, answer):
        return [float(c == str(a)) for c, a in zip(completions, answer)]

    def wants_unknown(completions, reference):
        return [0.0 for _ in completions]

    def positional_only(completions, /, **kwargs):
        return [0.0 for _ in completions]

    def short(completions, **kwargs):
        return [1.0]

    def raises(completions, **kwargs):
        raise KeyError("solution")

    def reads_step(completions, trainer_state, **kwargs):
        return [float(trainer_state.global_step) for _ in completions]

    class AsyncScorer:
        async def __call__(self, completions, **kwargs):
            return [0.5 for _ in completions]

    scorer = AsyncScorer()
    """
)

TRL_ARGUMENTS = {
    "prompts": ["P", "P"],
    "completion_ids": [[1], [2, 3]],
    "trainer_state": None,
    "log_extra": print,
    "log_metric": print,
    "answer": ["42", "42"],
}


@pytest.fixture
def plugins(tmp_path: Path) -> Path:
    path = tmp_path / "trl_style_rewards.py"
    path.write_text(SOURCE)
    return path


def plugin(path: Path, function: str):
    return get_rule("plugin").build({"target": f"{path}:{function}"})


# -------------------------------------------------------------------------------------------- calling convention


def test_trl_documented_signature_gets_prompts_by_keyword(plugins: Path) -> None:
    reward = plugin(plugins, "trl_documented")
    assert reward(completions=["ab", "abcd"], **TRL_ARGUMENTS) == [2.0, 4.0]
    seen = reward._fn.__globals__["SEEN"]["trl_documented"]
    assert seen["prompts"] == ["P", "P"]
    assert seen["keys"] == ["answer", "completion_ids", "log_extra", "log_metric", "trainer_state"]


def test_a_plugin_file_imports_a_module_beside_it(tmp_path: Path) -> None:
    folder = tmp_path / "my_rules"
    folder.mkdir()
    (folder / "grpo_test_helper_beside.py").write_text("def score(text):\n    return float(len(text))\n")
    (folder / "rules.py").write_text(
        "from grpo_test_helper_beside import score\n\n"
        "def by_length(completions, **kwargs):\n    return [score(c) for c in completions]\n"
    )
    reward = plugin(folder / "rules.py", "by_length")
    assert reward(completions=["ab", "abcd"], **TRL_ARGUMENTS) == [2.0, 4.0]
    assert sys.path[-1] == str(folder)  # after the installed packages: a file there never shadows one of those


def test_async_function_is_awaited(plugins: Path) -> None:
    reward = plugin(plugins, "judge")
    assert reward.is_async()
    assert reward(completions=["it is 42", "7"], **TRL_ARGUMENTS) == [1.0, 0.0]


def test_async_function_is_awaited_inside_a_running_event_loop(plugins: Path) -> None:
    reward = plugin(plugins, "judge")

    async def from_async_code():
        return reward(completions=["42", "x"], **TRL_ARGUMENTS)

    assert asyncio.run(from_async_code()) == [1.0, 0.0]


def test_async_wrapper_is_what_trl_gathers(plugins: Path) -> None:
    from trl.trainer.utils import is_async_callable

    wrapped = AsyncPluginReward(plugin(plugins, "judge"))
    assert is_async_callable(wrapped)
    assert wrapped.__name__ == "judge"
    clone = pickle.loads(pickle.dumps(wrapped))
    assert asyncio.run(clone(completions=["42", "x"], **TRL_ARGUMENTS)) == [1.0, 0.0]
    assert not is_async_callable(plugin(plugins, "judge"))  # the synchronous wrapper awaits by itself


def test_callable_object_with_async_call_is_async(plugins: Path) -> None:
    reward = plugin(plugins, "scorer")
    assert is_async_function(reward.load())
    assert reward(completions=["a", "b"], **TRL_ARGUMENTS) == [0.5, 0.5]


def test_function_without_kwargs_gets_only_what_it_declares(plugins: Path) -> None:
    assert plugin(plugins, "no_kwargs")(completions=["a", "b"], **TRL_ARGUMENTS) == [1.0, 1.0]
    assert plugin(plugins, "wants_answer")(completions=["42", "4"], **TRL_ARGUMENTS) == [1.0, 0.0]


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("wants_unknown", "needs the argument 'reference', which TRL does not pass .* dataset columns: answer"),
        ("positional_only", "positional-only parameter 'completions'"),
    ],
)
def test_signature_that_trl_cannot_fill_is_refused(plugins: Path, function: str, message: str) -> None:
    with pytest.raises(PluginSignatureError, match=message):
        plugin(plugins, function)(completions=["a", "b"], **TRL_ARGUMENTS)


def test_select_arguments_keeps_defaults_and_drops_the_rest() -> None:
    def reward(completions, answer=None, *, scale=2.0):
        return completions

    chosen = select_arguments(reward, {"completions": ["a"], "prompts": ["p"], "scale": 3.0})
    assert chosen == {"completions": ["a"], "scale": 3.0}


# ------------------------------------------------------------------------------------ the check in a child process


def test_check_accepts_the_three_trl_signatures(plugins: Path) -> None:
    specs = [{"rule": "plugin", "params": {"target": f"{plugins}:{name}"}} for name in ("trl_documented", "judge")]
    specs += [{"rule": "plugin", "params": {"target": f"{plugins}:no_kwargs"}}, {"rule": "length"}]
    check_plugins(specs, {"prompt": "P", "answer": "42"})


@pytest.mark.parametrize(
    ("function", "message"),
    [
        ("wants_unknown", r"reward rule 2 \(plugin\): reward plugin .* needs the argument 'reference'"),
        ("short", r"reward rule 2 \(plugin\): .* must return a list of 2 numbers or None; got 1 values"),
        ("raises", r"reward rule 2 \(plugin\): .* raised KeyError: 'solution'"),
        ("missing", r"reward rule 2 \(plugin\): .* could not be loaded: AttributeError"),
    ],
)
def test_check_refuses_a_broken_plugin_in_seconds(plugins: Path, function: str, message: str) -> None:
    specs = [{"rule": "length"}, {"rule": "plugin", "params": {"target": f"{plugins}:{function}"}}]
    started = time.monotonic()
    with pytest.raises(ValueError, match=message):
        check_plugins(specs, {"prompt": "P", "answer": "42"})
    assert time.monotonic() - started < 30


def test_check_refuses_a_plugin_that_does_not_import(tmp_path: Path) -> None:
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n\ndef reward(completions, **kwargs):\n    return []\n")
    with pytest.raises(ValueError, match="could not be loaded: ModuleNotFoundError: No module named"):
        check_plugins([{"rule": "plugin", "params": {"target": f"{broken}:reward"}}], {"prompt": "P"})


def test_check_gives_a_trainer_state_to_a_plugin_that_reads_one(plugins: Path) -> None:
    check_plugins([{"rule": "plugin", "params": {"target": f"{plugins}:reads_step"}}], {"prompt": "P"})


def test_check_without_plugins_starts_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("grpo_core.reward_check.job.ask_reward_check", lambda *a, **k: pytest.fail("no child expected"))
    check_plugins([{"rule": "length"}], {"prompt": "P"})


def test_check_tries_chat_rows_with_message_completions(tmp_path: Path) -> None:
    path = tmp_path / "chat.py"
    path.write_text(
        "def reward(completions, **kwargs):\n"
        "    return [float(len(c[0]['content'])) for c in completions]\n"  # fails on plain strings
    )
    check_plugins([{"rule": "plugin", "params": {"target": f"{path}:reward"}}], {"prompt": [{"role": "user", "content": "hi"}]})


def test_check_stops_a_plugin_that_hangs(tmp_path: Path) -> None:
    path = tmp_path / "slow.py"
    path.write_text("import time\ntime.sleep(60)\n\ndef reward(completions, **kwargs):\n    return []\n")
    started = time.monotonic()
    with pytest.raises(ValueError, match="did not answer within 2 s"):
        check_plugins([{"rule": "plugin", "params": {"target": f"{path}:reward"}}], {"prompt": "P"}, timeout_s=2)
    assert time.monotonic() - started < 15


def test_bench_scores_plugins_in_a_child_process(plugins: Path) -> None:
    specs = [
        {"rule": "plugin", "params": {"target": f"{plugins}:judge"}},
        {"rule": "plugin", "weight": 0.5, "params": {"target": f"{plugins}:no_kwargs"}},
    ]
    score = score_group_isolated(specs, ["it is 42", "no"], {"prompt": "P"})
    assert score.names == ["judge", "no_kwargs"]
    assert score.rewards == [[1.0, 0.0], [1.0, 1.0]]
    assert score.total == [1.5, 0.5]
    std = 0.5**0.5  # unbiased std of [1.5, 0.5]
    assert score.advantages == pytest.approx([0.5 / (std + 1e-4), -0.5 / (std + 1e-4)])


def test_bench_reports_a_plugin_error(plugins: Path) -> None:
    with pytest.raises(ValueError, match="must return a list of 2 numbers"):
        score_group_isolated([{"rule": "plugin", "params": {"target": f"{plugins}:short"}}], ["a", "b"], {})


def test_reward_model_is_never_scored_in_the_web_process(tmp_path: Path, monkeypatch) -> None:
    from grpo_core.rewards import reward_model as reward_model_rule
    from grpo_core.rewards import score_group

    # as in a web process: no worker enabled scoring (a worker-side test of this pytest process, e.g. the real
    # model's run, may have)
    monkeypatch.setattr(reward_model_rule, "_model_scorer", None)

    (tmp_path / "rm").mkdir()
    (tmp_path / "rm" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match="only the training worker loads and scores it"):
        score_group([{"rule": "reward_model", "params": {"model": str(tmp_path / "rm")}}], ["a"], {})
    with pytest.raises(ValueError, match="is not a model folder"):
        get_rule("reward_model").build({"model": str(tmp_path)})
    assert get_rule("reward_model").build({"model": "org/reward-model"}).model == "org/reward-model"
