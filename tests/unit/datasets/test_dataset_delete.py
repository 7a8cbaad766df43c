"""Renaming and deleting datasets with several logins: only the owner or an admin; a dataset a queued or running run
uses is not deleted; one that finished runs used is hidden but kept (file included) until the last such run is
deleted; one no run used goes with its file. The same refusals in the Datasets tab's handlers of the built
dashboard (a ``gr.Request`` carrying the login)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import gradio as gr
import pytest

from app.server import build_blocks, create_context
from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.datasets.library import (
    ARITHMETIC_EXAMPLE,
    DatasetInUseError,
    delete_dataset,
    import_dataset,
    purge_deleted_dataset,
    register_examples,
    rename_dataset,
    runs_using_dataset,
)
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.datasets.rows import load_rows
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.runs.actions import delete_run, resume_run
from grpo_core.submit.validate import validate_run_config
from storage import RunStatus, Store, StoreError
from tests.helpers import old_store

ALICE, BOB, CAROL = Actor("alice"), Actor("bob"), Actor("carol", is_admin=True)


def _dataset(store, settings, tmp_path, name, owner="alice"):
    upload = tmp_path / f"{name}.jsonl"
    upload.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}?", "answer": 2 * i}) + "\n"
                              for i in range(4)), encoding="utf-8")
    return import_dataset(store, settings, upload, source_name=upload.name, name=name, owner=owner)


def _run(store, dataset_id, *, eval_dataset_id=None, status=RunStatus.CANCELLED, owner="bob"):
    config = {"dataset_id": dataset_id, "eval_dataset_id": eval_dataset_id}
    run = store.create_run(name="r", config=config, dataset_id=dataset_id, max_steps=2, owner=owner)
    if status != RunStatus.QUEUED:
        store.update_run(run.id, status=status)
    return store.get_run(run.id)


def test_only_the_owner_or_an_admin_renames_or_deletes(store, settings, tmp_path):
    info = _dataset(store, settings, tmp_path, "alices")
    with pytest.raises(NotOwnerError, match="bob may not rename dataset #.* alices: it belongs to alice"):
        rename_dataset(store, info.id, "bobs", BOB)
    with pytest.raises(NotOwnerError, match="bob may not delete dataset #.* belongs to alice"):
        delete_dataset(store, settings, info.id, BOB)
    assert store.get_dataset(info.id).name == "alices" and Path(info.path).is_file()

    assert rename_dataset(store, info.id, "alices v2", ALICE).name == "alices v2"
    assert rename_dataset(store, info.id, "by carol", CAROL).name == "by carol"
    other = _dataset(store, settings, tmp_path, "taken")
    with pytest.raises(StoreError, match="'taken' already exists"):
        rename_dataset(store, info.id, "taken", ALICE)
    with pytest.raises(DatasetError, match="may use letters"):
        rename_dataset(store, info.id, "a/b", ALICE)
    with pytest.raises(DatasetError, match="is 300 characters long; the limit is 120"):
        rename_dataset(store, info.id, "x" * 300, ALICE)
    with pytest.raises(DatasetError, match="give the new name"):
        rename_dataset(store, info.id, "  ", ALICE)
    assert store.get_dataset(info.id).name == "by carol"

    done = delete_dataset(store, settings, info.id, CAROL)  # an admin; no run used it: row and file go
    assert done.kept_for_runs == () and "and its file" in done.message()
    with pytest.raises(StoreError):
        store.get_dataset(info.id)
    assert not Path(info.path).exists()
    assert [d.id for d in store.list_datasets()] == [other.id]
    # a dataset added before logins (no owner) is open to every login, as runs are
    legacy = _dataset(store, settings, tmp_path, "legacy", owner=None)
    delete_dataset(store, settings, legacy.id, BOB)
    with pytest.raises(StoreError):
        store.get_dataset(legacy.id)


def test_a_dataset_in_use_is_refused_then_kept_for_its_finished_runs(store, settings, tmp_path, tiny_model_dir):
    info = _dataset(store, settings, tmp_path, "shared")
    trains = _run(store, info.id, status=RunStatus.RUNNING)
    evaluates = _run(store, _dataset(store, settings, tmp_path, "other").id, eval_dataset_id=info.id,
                     status=RunStatus.QUEUED)
    assert [r.id for r in runs_using_dataset(store, info.id)] == [evaluates.id, trains.id]
    with pytest.raises(DatasetInUseError, match=rf"used by #{evaluates.id} r \(queued\), #{trains.id} r \(running\)"):
        delete_dataset(store, settings, info.id, ALICE)
    store.request_cancel(evaluates.id)  # a queued run is cancelled at once
    with pytest.raises(DatasetInUseError, match=rf"#{trains.id} r \(running\)"):
        delete_dataset(store, settings, info.id, ALICE)
    store.update_run(trains.id, status=RunStatus.COMPLETED)

    done = delete_dataset(store, settings, info.id, ALICE)
    assert done.kept_for_runs == (trains.id, evaluates.id) and "kept for runs" in done.message()
    hidden = store.get_dataset(info.id)  # the runs still read it
    assert hidden.deleted_at is not None and hidden.name == f"shared (deleted #{info.id})"
    assert info.id not in [d.id for d in store.list_datasets()]
    assert info.id in [d.id for d in store.list_datasets(include_deleted=True)]
    assert Path(info.path).is_file() and len(load_rows(store, trains.config)) == 4
    assert store.get_run(trains.id).config["dataset_id"] == info.id  # the stored config is untouched
    with pytest.raises(StoreError, match="already deleted"):
        delete_dataset(store, settings, info.id, ALICE)
    with pytest.raises(StoreError, match="is deleted"):
        rename_dataset(store, info.id, "back", ALICE)
    # the name is free again, and a new run may not pick the deleted dataset
    assert _dataset(store, settings, tmp_path, "shared").id != info.id
    with pytest.raises(ConfigError, match=f"dataset: dataset #{info.id} was deleted"):
        validate_run_config(store, RunConfig(model=str(tiny_model_dir), dataset_id=info.id))
    # an old run that used it still resumes
    assert resume_run(store, settings, evaluates.id, BOB).status == RunStatus.QUEUED
    store.request_cancel(evaluates.id)

    delete_run(store, settings, trains.id, BOB)
    assert store.get_dataset(info.id).deleted_at is not None  # still kept for the other run
    assert not purge_deleted_dataset(store, settings, info.id)
    delete_run(store, settings, evaluates.id, BOB)  # the last run that used it: it goes, with its file
    with pytest.raises(StoreError):
        store.get_dataset(info.id)
    assert not Path(info.path).exists()


def test_only_files_of_the_datasets_folder_are_removed(store, settings, tmp_path):
    outside = tmp_path / "mine.jsonl"
    outside.write_text(json.dumps({"prompt": "hi"}) + "\n", encoding="utf-8")
    info = store.add_dataset(name="outside", source_name="mine.jsonl", format="jsonl", num_rows=1,
                             columns=["prompt"], prompt_kind="text", path=str(outside))
    delete_dataset(store, settings, info.id)
    assert outside.is_file()


def test_a_store_of_the_previous_version_gains_deleted_at(tmp_path):
    store = Store(old_store(tmp_path / "old.db"))
    try:
        assert all(d.deleted_at is None for d in store.list_datasets(include_deleted=True))
        info = store.add_dataset(name="d", source_name="d.jsonl", format="jsonl", num_rows=1, columns=["prompt"],
                                 prompt_kind="text", path="/nowhere.jsonl")
        assert store.mark_dataset_deleted(info.id).deleted_at is not None
    finally:
        store.close()


def _handler(blocks, name, output_id):
    found = [f.fn for f in blocks.fns.values() if getattr(f.fn, "__name__", "") == name
             and output_id in [getattr(o, "elem_id", None) for o in f.outputs]]
    assert len(found) == 1, name
    return found[0]


def test_the_datasets_tab_refuses_another_logins_dataset(settings, tmp_path):
    ctx = create_context(settings.with_overrides(admins=frozenset({"carol"})))
    try:
        blocks = build_blocks(ctx)
        info = _dataset(ctx.store, ctx.settings, tmp_path, "alices")
        ask = _handler(blocks, "on_dataset_delete_ask", "dataset-delete-question")
        confirm = _handler(blocks, "on_dataset_delete_confirm", "dataset-manage-status")
        rename = _handler(blocks, "on_dataset_rename", "dataset-manage-status")
        bob = gr.Request(username="bob")

        with pytest.warns(UserWarning, match="Not deleted: bob may not delete dataset .* belongs to alice"):
            row, _, pending, status = ask(info.id, bob)
        assert row["visible"] is False and pending is None and "belongs to alice" in status
        with pytest.warns(UserWarning, match="Not deleted: bob may not delete"):
            confirm(info.id, bob)
        with pytest.warns(UserWarning, match="Not renamed: bob may not rename dataset"):
            rename(info.id, "bobs", bob)
        assert ctx.store.get_dataset(info.id).name == "alices"

        with warnings.catch_warnings():
            warnings.simplefilter("error")  # no refusal for the owner or an admin
            status, table, _ = rename(info.id, "alices v2", gr.Request(username="alice"))
            assert "now **alices v2**" in status and "alices v2" in list(table["name"])
            row, question, pending, _ = ask(info.id, gr.Request(username="carol"))
            assert row["visible"] is True and pending == info.id and "alices v2" in question
            _, _, status, table, _ = confirm(pending, gr.Request(username="carol"))
        assert "Deleted dataset" in status and info.id not in list(table["id"])
        with pytest.raises(StoreError):
            ctx.store.get_dataset(info.id)
    finally:
        ctx.store.close()


def test_a_shipped_example_is_renamed_or_deleted_by_an_admin_only(store, settings):
    added = {info.name: info for info in register_examples(store, settings)}
    example = added[ARITHMETIC_EXAMPLE]
    assert example.owner is None
    with pytest.raises(NotOwnerError, match="bob may not rename dataset #.* arithmetic .example.: it is a shipped "
                                            "example, shared by every login; only an admin may"):
        rename_dataset(store, example.id, "mine", BOB)
    with pytest.raises(NotOwnerError, match="alice may not delete .* shipped example"):
        delete_dataset(store, settings, example.id, ALICE)
    assert store.get_dataset(example.id).name == ARITHMETIC_EXAMPLE and Path(example.path).is_file()
    assert rename_dataset(store, example.id, ARITHMETIC_EXAMPLE, CAROL).name == ARITHMETIC_EXAMPLE  # an admin may
    delete_dataset(store, settings, example.id, CAROL)
    assert store.find_dataset(ARITHMETIC_EXAMPLE) is None
