"""A run trained twice from one config (same seed) on the tiny local Llama reproduces itself: the same reward at
every step, and the same provenance (dataset sha256, model hash, library versions, device) recorded by both
workers. Each run trains in its own worker subprocess, one after the other, as the launcher starts them."""

from __future__ import annotations

from grpo_core.models.identity import file_sha256
from grpo_core.runs.provenance import library_versions, provenance_differences
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import EXAMPLE, tiny_config


def _train(store, settings, config):
    run = submit_run(store, config).run
    assert Launcher(store, settings).wait_idle(timeout_s=300), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    rewards = {p.step: p.value for p in store.metrics_since(run.id, keys=["reward"])}
    return final, rewards


def test_same_config_and_seed_train_the_same_rewards_and_record_the_same_provenance(store, settings, tiny_model_dir):
    config = tiny_config(tiny_model_dir, max_steps=3, seed=7)
    first, first_rewards = _train(store, settings, config)
    second, second_rewards = _train(store, settings, config)

    assert sorted(first_rewards) == [1, 2, 3]
    assert first_rewards == second_rewards  # exactly equal, not approximately: same seed, same sampling

    for run in (first, second):
        record = run.provenance
        assert record is not None
        assert record["dataset"]["sha256"] == file_sha256(EXAMPLE)
        assert record["model"]["kind"] == "folder"
        assert record["model"]["identity"].startswith("sha256:") and len(record["model"]["identity"]) == 71
        assert record["versions"] == library_versions()
        assert record["device"]["type"] in ("cpu", "cuda")
    assert provenance_differences(first.provenance, second.provenance) == []
    assert first.provenance == second.provenance
