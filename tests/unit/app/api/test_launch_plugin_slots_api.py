"""The other paths to a plugin check's child hold the login's plugin check slots too: the named API's
``launch_run`` and ``launch_sweep`` (a script driving the API) and the reward workbench's launch refuse a config
with plugins at once while the login holds its share, start no child, and serve another login; a config without
plugins still queues."""

from __future__ import annotations

import gradio as gr
import pytest

from app.api.public import create_public_api
from app.context import PLUGIN_CHECK_JOBS
from app.tabs.workbench import handlers as workbench
from grpo_core.child_jobs.slots import PLUGIN_CHECK_SLOTS

BUSY = "alice has 2 plugin checks running, the most one login may run at once"


def test_the_api_launches_refuse_a_login_over_its_plugin_check_share(ctx, monkeypatch, plugin_configs, children,
                                                                    alice_busy):
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)
    with gr.Blocks() as blocks:
        create_public_api(ctx)
    events = {f.name: f for f in blocks.fns.values() if f.name in ("launch_run", "launch_sweep")}
    assert {f.concurrency_id for f in events.values()} == {PLUGIN_CHECK_JOBS["concurrency_id"]}
    plain, tools, judged = plugin_configs
    alice, bob = gr.Request(username="alice"), gr.Request(username="bob")
    calls = [("launch_run", (tools.to_yaml(),)), ("launch_run", (judged.to_yaml(),)),
             ("launch_sweep", (tools.to_yaml(), "learning_rate: 1e-5, 1e-4"))]
    for name, args in calls:
        with pytest.raises(gr.Error) as refused:
            events[name].fn(*args, request=alice)
        assert refused.value.message.startswith(f"{name}: {BUSY}"), refused.value.message
    assert children == [] and ctx.store.list_runs() == []
    assert events["launch_run"].fn(plain.to_yaml(), alice)["run"]["owner"] == "alice"  # no plugin, no slot
    assert events["launch_run"].fn(judged.to_yaml(), bob)["run"]["owner"] == "bob"
    assert children == ["grpo_core.reward_check.worker"]


def test_the_workbench_launch_refuses_a_login_over_its_plugin_check_share(ctx, monkeypatch, plugin_configs, children,
                                                                         alice_busy):
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)
    plain, _, judged = plugin_configs
    run = ctx.store.create_run(name="base", config=plain.model_dump(mode="json"), dataset_id=plain.dataset_id,
                               max_steps=3, owner="alice")
    rules = judged.model_dump(mode="json")["rewards"]
    form = {"run": run.id, "rules": gr.utils.json.dumps(rules), "launch_name": "judged again"}
    line = workbench.launch(ctx, form, gr.Request(username="alice"))
    assert line.startswith("Not launched: ") and BUSY in line, line
    assert children == [] and [r.id for r in ctx.store.list_runs()] == [run.id]
    assert workbench.launch(ctx, form, gr.Request(username="bob")).startswith("Launched run #")
    assert children == ["grpo_core.reward_check.worker"]


def test_every_event_that_may_check_plugins_shares_the_plugin_check_group(ctx):
    """Launch, Launch sweep, the estimate, the workbench's launch and the API's launches: one group of at least the
    pool's total (so the slots, not Gradio's queue, decide who waits)."""
    from app.server import build_blocks

    blocks = build_blocks(ctx)
    grouped = [fn for fn in blocks.fns.values() if fn.concurrency_id == PLUGIN_CHECK_JOBS["concurrency_id"]]
    qualnames = {fn.fn.__qualname__.split(".<locals>.")[0] + "." + fn.name for fn in grouped}
    assert qualnames == {"create_launch_tab.on_launch", "create_sweep_panel.on_launch_sweep",
                         "create_memory_panel.on_estimate", "create_workbench_tab.on_launch",
                         "create_public_api.launch_run", "create_public_api.launch_sweep"}, qualnames
    assert {fn.concurrency_limit for fn in grouped} == {PLUGIN_CHECK_JOBS["concurrency_limit"]}
    assert PLUGIN_CHECK_JOBS["concurrency_limit"] >= PLUGIN_CHECK_SLOTS.total
