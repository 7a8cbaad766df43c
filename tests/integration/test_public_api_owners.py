"""The public API with two logins and an admin from ``--auth-file``: each run and dataset records who created it, and
only its owner or an admin may cancel, resume or delete a run, or rename or delete a dataset; everyone may list them
and merge a finished run's adapter into its base model. Scripted with ``gradio_client`` against
``python -m app serve --auth-file users.txt`` (one run of the tiny model may train for a few seconds)."""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from tests.helpers import FINISHED
from tests.servers import serving

USERS = "alice:a-pw\nbob:b-pw\n[admin] carol:c-pw\n"


@pytest.fixture(scope="module")
def auth_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "users.txt"
    path.write_text(USERS, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory, auth_file, tiny_model_dir):
    """The base URL of the dashboard served with ``--auth-file`` (three logins, one admin); the tiny model's folder is
    a ``--model-root`` (with logins, local models load only from the data dir and such roots)."""
    with serving(tmp_path_factory.mktemp("owners-data"), "--auth-file", str(auth_file),
                 "--model-root", str(tiny_model_dir)) as app:
        yield app.url


def _client(base, user, password, tmp_path_factory):
    return Client(base, auth=(user, password), verbose=False, analytics_enabled=False,
                  download_files=str(tmp_path_factory.mktemp(f"dl-{user}")))


def _wait_final(client, run_id, timeout_s=240.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = next(r for r in client.predict(api_name="/list_runs") if r["id"] == run_id)
        if run["status"] in FINISHED:
            return run
        time.sleep(1.0)
    raise AssertionError(f"run {run_id} did not finish within {timeout_s} s")


def _delete_when_exited(client, run_id, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return client.predict(run_id=run_id, api_name="/delete_run")
        except AppError as exc:
            if "still exiting" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1.0)


def test_one_login_cannot_cancel_resume_or_delete_anothers_run(served, tiny_model_dir, tmp_path, tmp_path_factory):
    alice = _client(served, "alice", "a-pw", tmp_path_factory)
    bob = _client(served, "bob", "b-pw", tmp_path_factory)
    carol = _client(served, "carol", "c-pw", tmp_path_factory)

    upload = tmp_path / "doubles.jsonl"
    upload.write_text("".join(json.dumps({"prompt": f"What is {i} + {i}?", "answer": 2 * i}) + "\n"
                              for i in range(8)))
    dataset = alice.predict(file=handle_file(str(upload)), name="alices", api_name="/add_dataset")
    assert dataset["owner"] == "alice"
    config = {"name": "alices-run", "model": str(tiny_model_dir), "dataset_id": dataset["id"],
              "rewards": [{"rule": "numeric_answer"}], "max_steps": 1, "max_completion_length": 8,
              "num_generations": 4, "per_device_train_batch_size": 4}
    run = alice.predict(config=json.dumps(config), api_name="/launch_run")["run"]
    assert run["owner"] == "alice"
    assert any(r["id"] == run["id"] for r in bob.predict(api_name="/list_runs"))  # everyone may view

    with pytest.raises(AppError, match="cancel_run: bob may not cancel run .* belongs to alice"):
        bob.predict(run_id=run["id"], api_name="/cancel_run")
    with pytest.raises(AppError, match="delete_run: bob may not delete run .* belongs to alice"):
        bob.predict(run_id=run["id"], api_name="/delete_run")
    assert alice.predict(run_id=run["id"], api_name="/cancel_run")["owner"] == "alice"
    _wait_final(alice, run["id"])

    with pytest.raises(AppError, match="resume_run: bob may not resume"):
        bob.predict(run_id=run["id"], api_name="/resume_run")
    with pytest.raises(AppError, match="delete_run: bob may not delete"):
        bob.predict(run_id=run["id"], api_name="/delete_run")
    assert any(r["id"] == run["id"] for r in alice.predict(api_name="/list_runs"))

    # the admin may delete anyone's run (once its worker has exited)
    deadline = time.monotonic() + 60
    while True:
        try:
            deleted = carol.predict(run_id=run["id"], api_name="/delete_run")
            break
        except AppError as exc:
            if "still exiting" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1.0)
    assert deleted == {"run_id": run["id"], "deleted": True}
    assert not any(r["id"] == run["id"] for r in alice.predict(api_name="/list_runs"))


def test_dataset_owners_and_a_merged_model_any_login_may_take(served, tiny_model_dir, tmp_path, tmp_path_factory):
    alice = _client(served, "alice", "a-pw", tmp_path_factory)
    bob = _client(served, "bob", "b-pw", tmp_path_factory)
    carol = _client(served, "carol", "c-pw", tmp_path_factory)

    upload = tmp_path / "triples.jsonl"
    upload.write_text("".join(json.dumps({"prompt": f"What is 3 x {i}?", "answer": 3 * i}) + "\n"
                              for i in range(8)))
    dataset = alice.predict(file=handle_file(str(upload)), name="triples", api_name="/add_dataset")
    listed = {d["id"]: d for d in bob.predict(api_name="/list_datasets")}
    assert listed[dataset["id"]]["owner"] == "alice" and listed[dataset["id"]]["name"] == "triples"
    with pytest.raises(AppError, match="rename_dataset: bob may not rename dataset .* belongs to alice"):
        bob.predict(dataset_id=dataset["id"], name="bobs", api_name="/rename_dataset")
    with pytest.raises(AppError, match="delete_dataset: bob may not delete dataset .* belongs to alice"):
        bob.predict(dataset_id=dataset["id"], api_name="/delete_dataset")
    renamed = alice.predict(dataset_id=dataset["id"], name="triples v2", api_name="/rename_dataset")
    assert renamed["name"] == "triples v2" and renamed["owner"] == "alice"

    config = {"name": "triples-run", "model": str(tiny_model_dir), "dataset_id": dataset["id"],
              "rewards": [{"rule": "numeric_answer"}], "max_steps": 1, "max_completion_length": 8,
              "num_generations": 4, "per_device_train_batch_size": 4}
    run = alice.predict(config=json.dumps(config), api_name="/launch_run")["run"]
    with pytest.raises(AppError, match=rf"delete_dataset: dataset #{dataset['id']} .* used by #{run['id']} "
                                       r"triples-run \((queued|running)\)"):
        alice.predict(dataset_id=dataset["id"], api_name="/delete_dataset")
    finished = _wait_final(alice, run["id"])
    assert finished["status"] == "completed", finished["error"]

    # anyone may take the merged model of a finished run, as anyone may export it
    summary, merged_zip = bob.predict(run_id=run["id"], download=True, api_name="/merge_run")
    assert summary["run_id"] == run["id"] and f"run-{run['id']:05d}-merged-" in summary["folder"]
    assert {"config.json", "model.safetensors", "generation_config.json"} <= set(summary["files"])
    with zipfile.ZipFile(merged_zip) as archive:
        names = archive.namelist()
        folder = Path(summary["folder"]).name
        assert {f"{folder}/{name}" for name in summary["files"]} == set(names)
        assert archive.getinfo(f"{folder}/model.safetensors").compress_type == zipfile.ZIP_STORED
        merged_config = json.loads(archive.read(f"{folder}/config.json"))
    assert merged_config["hidden_size"] == json.loads((tiny_model_dir / "config.json").read_text())["hidden_size"]
    path_only, no_zip = carol.predict(run_id=run["id"], download=False, api_name="/merge_run")
    # the same run and adapter merged again: the folder made first is reused, nothing is written twice
    assert no_zip is None and path_only["folder"] == summary["folder"] and path_only["files"] == summary["files"]
    with pytest.raises(AppError, match="merge_run: no run with id 999"):
        bob.predict(run_id=999, download=False, api_name="/merge_run")

    # the run keeps its dataset: hidden from the lists, kept until the run goes
    deleted = alice.predict(dataset_id=dataset["id"], api_name="/delete_dataset")
    assert deleted == {"dataset_id": dataset["id"], "deleted": True, "kept_for_runs": [run["id"]]}
    assert dataset["id"] not in [d["id"] for d in alice.predict(api_name="/list_datasets")]
    again = {**config, "name": "after-delete"}
    with pytest.raises(AppError, match=f"dataset #{dataset['id']} was deleted"):
        alice.predict(config=json.dumps(again), api_name="/launch_run")
    assert next(r for r in bob.predict(api_name="/list_runs") if r["id"] == run["id"])["config"]["dataset_id"] \
        == dataset["id"]
    _delete_when_exited(carol, run["id"])
    with pytest.raises(AppError, match=f"no dataset with id {dataset['id']}"):
        alice.predict(dataset_id=dataset["id"], api_name="/delete_dataset")

    bobs = bob.predict(file=handle_file(str(upload)), name="bobs", api_name="/add_dataset")
    assert bob.predict(dataset_id=bobs["id"], api_name="/delete_dataset")["kept_for_runs"] == []
