"""A login's plugin checks hold its share of the plugin check slots (grpo_core/child_jobs/slots.py): the Launch
button, the sweep's launch and the "Will it fit?" estimate of a config with plugins are refused at once, in the
panel's own words, while the login holds its share, and start no child; the same login's launch without plugins
still queues (it takes no slot) and another login is still served. Each event shares the plugin check concurrency
group. The children are counted at their start points (``ask_worker`` of the two check jobs)."""

from __future__ import annotations

import gradio as gr
import pytest

from app.context import PLUGIN_CHECK_JOBS
from app.tabs.launch.form import FORM_FIELDS, config_to_form
from app.tabs.launch.tab import create_launch_tab
from grpo_core.child_jobs.slots import PLUGIN_CHECK_SLOTS
from grpo_core.datasets.library import QUICK_START_EXAMPLE
from grpo_core.reward_check import job as reward_check_job
from grpo_core.run_config import RunConfig
from grpo_core.tools import job as tools_job

BUSY = "alice has 2 plugin checks running, the most one login may run at once"


@pytest.fixture
def children(monkeypatch) -> list[str]:
    """The plugin check children started (by job module), each answering that all is well."""
    started: list[str] = []

    def fake_ask_worker(job, request, **kwargs):
        started.append(job.module)
        if request.get("action") == "check":  # reward plugins: one problem (None) a rule
            return {"problems": [None] * len(request["specs"])}
        return {"problems": [], "schemas": []}

    monkeypatch.setattr(tools_job, "ask_worker", fake_ask_worker)
    monkeypatch.setattr(reward_check_job, "ask_worker", fake_ask_worker)
    return started


@pytest.fixture
def alice_busy():
    """alice holds her whole share of the plugin check slots (two checks of hers still running)."""
    for _ in range(PLUGIN_CHECK_SLOTS.per_login):
        PLUGIN_CHECK_SLOTS.acquire("alice")
    try:
        yield
    finally:
        for _ in range(PLUGIN_CHECK_SLOTS.per_login):
            PLUGIN_CHECK_SLOTS.release("alice")
    assert PLUGIN_CHECK_SLOTS.running() == 0  # every slot a handler took was given back


@pytest.fixture
def tab(ctx, monkeypatch):
    """The built Launch tab: ``(parts, blocks)``; the launcher is never started."""
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)
    with gr.Blocks() as blocks:
        parts = create_launch_tab(ctx)
    return parts, blocks


def _event(blocks, name: str):
    [found] = [f for f in blocks.fns.values() if getattr(f.fn, "__name__", "") == name]
    return found


def _data(parts, config: RunConfig) -> dict:
    form = config_to_form(config)
    return {parts[name]: form[name] for name in FORM_FIELDS}


def _configs(ctx, tmp_path) -> tuple[RunConfig, RunConfig, RunConfig]:
    """A config without plugins, one with a tool plugin, one with a reward plugin (the files exist; the children
    that would import them are faked)."""
    (tmp_path / "tools.py").write_text("def weather(city: str) -> str:\n    return 'sunny'\n")
    (tmp_path / "judge.py").write_text("def judge(completions, **kwargs):\n    return [0.0 for _ in completions]\n")
    plain = RunConfig(dataset_id=ctx.store.find_dataset(QUICK_START_EXAMPLE).id, name="plain", max_steps=3)
    tools = plain.model_copy(update={"name": "tools", "tool_plugins": [f"{tmp_path / 'tools.py'}:weather"]})
    judged = RunConfig.model_validate({**plain.model_dump(), "name": "judged", "rewards": [
        *plain.model_dump()["rewards"], {"rule": "plugin", "weight": 1.0,
                                          "params": {"target": f"{tmp_path / 'judge.py'}:judge"}}]})
    return plain, tools, judged


def test_launch_with_plugins_is_refused_at_once_while_the_login_holds_its_share(ctx, tab, tmp_path, children,
                                                                                alice_busy):
    parts, blocks = tab
    launch = _event(blocks, "on_launch")
    assert (launch.concurrency_id, launch.concurrency_limit) == (PLUGIN_CHECK_JOBS["concurrency_id"],
                                                                 PLUGIN_CHECK_JOBS["concurrency_limit"])
    assert PLUGIN_CHECK_JOBS["concurrency_limit"] >= PLUGIN_CHECK_SLOTS.total
    plain, tools, judged = _configs(ctx, tmp_path)
    alice, bob = gr.Request(username="alice"), gr.Request(username="bob")
    for config in (tools, judged):
        status, *_ = launch.fn(alice, _data(parts, config))
        assert status.startswith("❌ **Not launched.** ") and BUSY in status, status
    assert children == [] and ctx.store.list_runs() == []  # no child started, nothing queued

    status, *_ = launch.fn(alice, _data(parts, plain))  # no plugin: no child, no slot
    assert status.startswith("✅ Run **#"), status
    assert children == []
    status, *_ = launch.fn(bob, _data(parts, tools))  # another login is served
    assert status.startswith("✅ Run **#"), status
    assert children == ["grpo_core.tools.worker"]
    assert sorted(run.name for run in ctx.store.list_runs()) == ["plain", "tools"]
    assert PLUGIN_CHECK_SLOTS.running("bob") == 0  # given back when its child ended


def test_the_sweep_with_a_plugin_is_refused_at_once_and_launches_nothing(ctx, tab, tmp_path, children, alice_busy):
    parts, blocks = tab
    sweep = _event(blocks, "on_launch_sweep")
    assert sweep.concurrency_id == PLUGIN_CHECK_JOBS["concurrency_id"]
    [grid] = [b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "sweep-grid"]
    _, tools, _ = _configs(ctx, tmp_path)
    data = {**_data(parts, tools), grid: "learning_rate: 1e-5, 1e-4"}
    status = sweep.fn(gr.Request(username="alice"), data)
    assert status.startswith("❌ **Sweep not launched.** ") and BUSY in status, status
    assert children == [] and ctx.store.list_runs() == []
    assert sweep.fn(gr.Request(username="bob"), data).startswith("✅ Sweep **")
    assert children == ["grpo_core.tools.worker"]  # the two points validate alike: one check


def test_the_estimate_with_a_tool_plugin_says_no_estimate_while_the_login_holds_its_share(
        ctx, tab, tmp_path, tiny_model_dir, children, alice_busy):
    parts, blocks = tab
    estimate = _event(blocks, "on_estimate")
    assert estimate.concurrency_id == PLUGIN_CHECK_JOBS["concurrency_id"]
    _, tools, _ = _configs(ctx, tmp_path)
    tools = tools.model_copy(update={"model": str(tiny_model_dir), "device": "cpu"})
    shown = estimate.fn(gr.Request(username="alice"), _data(parts, tools))
    assert shown.startswith("**No estimate:** ") and BUSY in shown, shown
    assert children == []
    plain = estimate.fn(gr.Request(username="alice"), _data(parts, tools.model_copy(update={"tool_plugins": []})))
    assert "weights:" in plain and children == []  # no plugin: estimated, no child
    served = estimate.fn(gr.Request(username="bob"), _data(parts, tools))
    assert "weights:" in served and children == ["grpo_core.tools.worker"]
