"""The Datasets tab's "Add from the hub" holds one of the login's hub load slots while its child runs
(grpo_core/child_jobs/slots.py's ``HUB_LOAD_SLOTS``): a login already loading one is refused at once in the tab's
words and starts no child, another login is served, and the event's concurrency group is the pool's total."""

from __future__ import annotations

import gradio as gr

from app.tabs import datasets as datasets_tab
from app.tabs.datasets import HUB_LOADS, create_datasets_tab
from grpo_core.child_jobs.slots import HUB_LOAD_SLOTS
from grpo_core.datasets.prompt_dataset import DatasetError


def test_a_login_loading_from_the_hub_is_refused_a_second_load_and_another_is_served(ctx, monkeypatch):
    loads = []

    def fake_load(store, settings, dataset_id, **kwargs):  # the child's start point, faked: it needs the network
        loads.append((dataset_id, kwargs["owner"]))
        raise DatasetError(dataset_id, "cannot load it from the hub (offline)")

    monkeypatch.setattr(datasets_tab, "import_hub_dataset", fake_load)
    with gr.Blocks() as blocks:
        create_datasets_tab(ctx)
    [event] = [f for f in blocks.fns.values() if f.name == "on_hub_add"]
    assert (event.concurrency_id, event.concurrency_limit) == (HUB_LOADS["concurrency_id"], HUB_LOAD_SLOTS.total)
    form = ("openai/gsm8k", "main", "train", "", "", "", "", "")
    HUB_LOAD_SLOTS.acquire("alice")  # alice's first load is still running
    try:
        status, *_ = event.fn(*form, request=gr.Request(username="alice"))
        assert status == ("❌ **Not added.** alice has 1 hub dataset loads running, the most one login may run at "
                          "once; wait for it to end and try again"), status
        assert loads == []
        status, *_ = event.fn(*form, request=gr.Request(username="bob"))
        assert "offline" in status and loads == [("openai/gsm8k", "bob")]
    finally:
        HUB_LOAD_SLOTS.release("alice")
    assert HUB_LOAD_SLOTS.running() == 0  # bob's slot was given back when his load ended
