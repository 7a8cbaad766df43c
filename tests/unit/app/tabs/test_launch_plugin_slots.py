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
from grpo_core.run_config import RunConfig

BUSY = "alice has 2 plugin checks running, the most one login may run at once"


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


def test_launch_with_plugins_is_refused_at_once_while_the_login_holds_its_share(ctx, tab, plugin_configs, children,
                                                                                alice_busy):
    parts, blocks = tab
    launch = _event(blocks, "on_launch")
    assert (launch.concurrency_id, launch.concurrency_limit) == (PLUGIN_CHECK_JOBS["concurrency_id"],
                                                                 PLUGIN_CHECK_JOBS["concurrency_limit"])
    assert PLUGIN_CHECK_JOBS["concurrency_limit"] >= PLUGIN_CHECK_SLOTS.total
    plain, tools, judged = plugin_configs
    alice, bob = gr.Request(username="alice"), gr.Request(username="bob")
    for config in (tools, judged):
        status, *_ = launch.fn(alice, _data(parts, config))
        assert status.startswith("❌ **Not launched.** ") and BUSY in status, status
        assert status.endswith("wait for one to end (a check takes seconds, at most a minute) and try again")
    assert children == [] and ctx.store.list_runs() == []  # no child started, nothing queued

    status, *_ = launch.fn(alice, _data(parts, plain))  # no plugin: no child, no slot
    assert status.startswith("✅ Run **#"), status
    assert children == []
    status, *_ = launch.fn(bob, _data(parts, tools))  # another login is served
    assert status.startswith("✅ Run **#"), status
    assert children == ["grpo_core.tools.worker"]
    assert sorted(run.name for run in ctx.store.list_runs()) == ["plain", "tools"]
    assert PLUGIN_CHECK_SLOTS.running("bob") == 0  # given back when its child ended


def test_the_sweep_with_a_plugin_is_refused_at_once_and_launches_nothing(ctx, tab, plugin_configs, children,
                                                                        alice_busy):
    parts, blocks = tab
    sweep = _event(blocks, "on_launch_sweep")
    assert sweep.concurrency_id == PLUGIN_CHECK_JOBS["concurrency_id"]
    [grid] = [b for b in blocks.blocks.values() if getattr(b, "elem_id", None) == "sweep-grid"]
    _, tools, _ = plugin_configs
    data = {**_data(parts, tools), grid: "learning_rate: 1e-5, 1e-4"}
    status = sweep.fn(gr.Request(username="alice"), data)
    assert status.startswith("❌ **Sweep not launched.** ") and BUSY in status, status
    assert children == [] and ctx.store.list_runs() == []
    assert sweep.fn(gr.Request(username="bob"), data).startswith("✅ Sweep **")
    assert children == ["grpo_core.tools.worker"]  # the two points validate alike: one check


def test_the_estimate_with_a_tool_plugin_says_no_estimate_while_the_login_holds_its_share(
        ctx, tab, plugin_configs, tiny_model_dir, children, alice_busy):
    parts, blocks = tab
    estimate = _event(blocks, "on_estimate")
    assert estimate.concurrency_id == PLUGIN_CHECK_JOBS["concurrency_id"]
    _, tools, _ = plugin_configs
    tools = tools.model_copy(update={"model": str(tiny_model_dir), "device": "cpu"})
    shown = estimate.fn(gr.Request(username="alice"), _data(parts, tools))
    assert shown.startswith("**No estimate:** ") and BUSY in shown, shown
    assert children == []
    plain = estimate.fn(gr.Request(username="alice"), _data(parts, tools.model_copy(update={"tool_plugins": []})))
    assert "weights:" in plain and children == []  # no plugin: estimated, no child
    served = estimate.fn(gr.Request(username="bob"), _data(parts, tools))
    assert "weights:" in served and children == ["grpo_core.tools.worker"]
