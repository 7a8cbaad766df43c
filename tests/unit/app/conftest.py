"""Fixtures of the web side's tests: ``built`` (the dashboard's context and Blocks as served, no server); and of
the fair-share tests: ``children`` (the plugin check children started, faked) and
``alice_busy`` (the login ``alice`` holding her whole share of the plugin check slots), ``plugin_configs`` (run
configs without plugins, with a tool plugin, with a reward plugin)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from app.server import build_blocks, create_context
from grpo_core.child_jobs.slots import PLUGIN_CHECK_SLOTS
from grpo_core.datasets.library import QUICK_START_EXAMPLE
from grpo_core.reward_check import job as reward_check_job
from grpo_core.run_config import RunConfig
from grpo_core.tools import job as tools_job


@pytest.fixture
def built(settings):
    """``(context, blocks)``: the dashboard built on ``settings``' store (closed after the test)."""
    ctx = create_context(settings)
    blocks = build_blocks(ctx)
    try:
        yield ctx, blocks
    finally:
        ctx.store.close()


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
def alice_busy() -> Iterator[None]:
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
def plugin_configs(ctx, tmp_path) -> tuple[RunConfig, RunConfig, RunConfig]:
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
