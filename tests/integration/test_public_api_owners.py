"""The public API with two logins and an admin from ``--auth-file``: each run records who launched it, and only its
owner or an admin may cancel, resume or delete it; everyone may list it. Scripted with ``gradio_client`` against
``python -m app serve --auth-file users.txt`` (one run of the tiny model may train for a few seconds)."""

from __future__ import annotations

import json
import time

import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from tests.integration.test_public_api import FINISHED
from tests.servers import serving

USERS = "alice:a-pw\nbob:b-pw\n[admin] carol:c-pw\n"


@pytest.fixture(scope="module")
def auth_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("auth") / "users.txt"
    path.write_text(USERS, encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def served(tmp_path_factory, auth_file):
    """The base URL of the dashboard served with ``--auth-file`` (three logins, one admin)."""
    with serving(tmp_path_factory.mktemp("owners-data"), "--auth-file", str(auth_file)) as app:
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
