"""Merging is idempotent: the same run and the same adapter map to one merged folder, which a second merge reuses
without starting a worker; a changed adapter (or base model) maps to a new folder."""

from __future__ import annotations

import pytest

import grpo_core.merge.job as merge_job
from grpo_core.merge.job import REUSED, MergeError, merge_run, merged_folder
from grpo_core.runs.files import adapter_dir


def _run_with_adapter(store, settings, model="base-model"):
    run = store.create_run(name="merged", config={"model": model}, dataset_id=None, max_steps=1)
    folder = settings.runs_dir / "run-merged"
    store.update_run(run.id, run_dir=str(folder))
    adapter = adapter_dir(folder)
    adapter.mkdir(parents=True)
    (adapter / "adapter_config.json").write_text('{"r": 4}')
    (adapter / "adapter_model.safetensors").write_bytes(b"\x00" * 64)
    return store.get_run(run.id), adapter


def test_same_run_and_adapter_reuse_the_merged_folder(store, settings, monkeypatch):
    run, _ = _run_with_adapter(store, settings)
    dest = merged_folder(settings, run)
    assert dest == merged_folder(settings, run)  # deterministic
    dest.mkdir(parents=True)
    (dest / "model.safetensors").write_bytes(b"merged")

    def no_worker(*args, **kwargs):
        raise AssertionError("a merge of an already merged adapter must not start a worker")

    monkeypatch.setattr(merge_job, "start_child", no_worker)
    lines = list(merge_run(settings, run))
    assert lines[-1] == str(dest)
    assert lines[0].startswith(REUSED) and dest.name in lines[0]
    assert [p for p in dest.parent.iterdir() if p.is_dir()] == [dest]


def test_a_changed_adapter_or_base_model_gets_its_own_folder(store, settings):
    run, adapter = _run_with_adapter(store, settings)
    before = merged_folder(settings, run)
    (adapter / "adapter_model.safetensors").write_bytes(b"\x01" + b"\x00" * 63)  # same size, other bytes
    after = merged_folder(settings, run)
    assert after != before and after.name.startswith(f"run-{run.id:05d}-merged-")
    other_model = store.get_run(run.id)
    object.__setattr__(other_model, "config", {"model": "another-base"})
    assert merged_folder(settings, other_model) != after


def test_no_adapter_is_refused(store, settings):
    run = store.create_run(name="untrained", config={"model": "m"}, dataset_id=None, max_steps=1)
    store.update_run(run.id, run_dir=str(settings.runs_dir / "run-untrained"))
    with pytest.raises(MergeError, match="no adapter yet"):
        list(merge_run(settings, store.get_run(run.id)))
