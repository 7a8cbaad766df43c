"""A launch checks the login's boundary once, in submit_run (the one place every path to a queued run passes): the
Launch tab, the reward workbench's launch and the public API hand the config to it unchecked, and submit_run's
validation does not check it again."""

from __future__ import annotations

import pytest

from app.tabs.launch import handlers
from app.tabs.launch.form import config_to_form
from grpo_core.access import boundary as boundary_module
from grpo_core.access.boundary import Boundary, BoundaryError
from grpo_core.datasets.library import QUICK_START_EXAMPLE
from grpo_core.run_config import RunConfig
from grpo_core.submit.queue import submit_run


@pytest.fixture
def checks(monkeypatch):
    """Every config :meth:`Boundary.check_config` sees, in order."""
    seen: list[RunConfig] = []
    real = Boundary.check_config

    def counting(self, config):
        seen.append(config)
        return real(self, config)

    monkeypatch.setattr(boundary_module.Boundary, "check_config", counting)
    return seen


def test_the_launch_tab_checks_the_boundary_once(ctx, checks, monkeypatch):
    monkeypatch.setattr(ctx.launcher, "tick", lambda: None)  # queued, no worker started here
    form = config_to_form(RunConfig(dataset_id=ctx.store.find_dataset(QUICK_START_EXAMPLE).id, name="once"))
    status, run_id = handlers.launch(ctx, None, form)
    assert status.startswith("✅"), status
    assert len(checks) == 1 and checks[0].name == "once"
    assert ctx.store.get_run(run_id).name == "once"


def test_submit_run_checks_once_and_refuses_before_storing(ctx, checks, tmp_path):
    dataset = ctx.store.find_dataset(QUICK_START_EXAMPLE)
    submit_run(ctx.store, RunConfig(dataset_id=dataset.id, name="a"))
    assert len(checks) == 1
    outside = tmp_path / "outside.jsonl"
    outside.write_text('{"prompt": "p", "answer": 1}\n')
    enforced = Boundary(enforced=True, dataset_roots=(ctx.settings.data_dir.resolve(),),
                        model_roots=(ctx.settings.data_dir.resolve(),))
    with pytest.raises(BoundaryError, match="dataset_path"):
        submit_run(ctx.store, RunConfig(dataset_path=str(outside), name="b"), boundary=enforced)
    assert len(checks) == 2 and [r.name for r in ctx.store.list_runs()] == ["a"]
