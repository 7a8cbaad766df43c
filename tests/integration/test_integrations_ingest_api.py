"""The HTTP ingest API (app/api/ingest.py) as a token holder might abuse it: no token, a revoked one, another
token's run, oversized and malformed bodies, invalid values, a config that is not a run config, numbers out of order;
and its exactly-once rule (a resent batch is applied once, a gap applies nothing). In process, on a real store."""

from __future__ import annotations

import json
import math

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.ingest import ingest_routes
from grpo_core.integrations.wire import MAX_BODY_BYTES, MAX_RECORDS
from grpo_core.runs.script_runs import is_script_run, run_config_from_trainer
from storage import RunStatus

CONFIG = run_config_from_trainer({"num_generations": 2, "per_device_train_batch_size": 2, "beta": 0.0},
                                 model="tiny", reward_names=["acc"], reward_weights=[1.0], max_steps=5)


@pytest.fixture
def api(store):
    client = TestClient(FastAPI(routes=ingest_routes(store)))
    alice = store.create_api_token("alice", "cluster")[1]
    bob = store.create_api_token("bob", "laptop")[1]
    return client, {"alice": alice, "bob": bob}


def _auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _create(client, token, key="key-0001", **fields):
    body = {"client_key": key, "name": "r", "config": CONFIG, "max_steps": 5, **fields}
    return client.post("/api/v1/runs", json=body, headers=_auth(token))


def _step(seq: int, step: int, advantage: float = 0.5) -> dict:
    completion = {"index": 0, "text": "4", "rewards": {"acc": 1.0}, "total_reward": 1.0, "advantage": advantage,
                  "num_tokens": 1, "token_stats": {"pieces": ["4"], "logprobs": [-0.1], "kl": None, "entropy": [1.0]}}
    group = {"row_index": -1, "prompt": "2+2?", "extra": {"answer": "4"},
             "completions": [completion, {**completion, "index": 1, "advantage": -advantage, "token_stats": None}]}
    return {"seq": seq, "kind": "step", "step": step, "wall_time": 1.0, "metrics": {"reward": 1.0, "kl": None},
            "groups": [{"split": "train", "groups": [group]}]}


def test_requests_without_a_valid_token_are_refused(api, store):
    client, tokens = api
    assert client.post("/api/v1/runs", json={}).status_code == 401
    assert client.post("/api/v1/runs", json={}, headers={"Authorization": f"Basic {tokens['alice']}"}).status_code == 401
    assert _create(client, "grpo_not-a-token").status_code == 401
    store.revoke_api_token(store.list_api_tokens("bob")[0].id)
    assert _create(client, tokens["bob"]).status_code == 401
    assert store.list_runs() == []


def test_a_token_writes_only_the_runs_it_created(api, store):
    client, tokens = api
    run_id = _create(client, tokens["alice"]).json()["run_id"]
    for method, path, body in (("post", "batches", {"records": [_step(1, 1)]}),
                               ("post", "progress", {"step": 1}), ("get", "control", None)):
        answer = getattr(client, method)(f"/api/v1/runs/{run_id}/{path}", headers=_auth(tokens["bob"]),
                                         **({"json": body} if body is not None else {}))
        assert answer.status_code == 404, (path, answer.text)
    # a run of the dashboard's own (no ingest cursor) cannot be written either
    own = store.create_run(name="dashboard run", config=CONFIG, dataset_id=None, max_steps=5)
    answer = client.post(f"/api/v1/runs/{own.id}/batches", json={"records": [_step(1, 1)]},
                         headers=_auth(tokens["alice"]))
    assert answer.status_code == 404 and store.metrics_since(own.id) == []
    assert store.metrics_since(run_id) == []


def test_create_is_idempotent_owned_by_the_login_and_always_marked_a_script_run(api, store):
    client, tokens = api
    first = _create(client, tokens["alice"], provenance={"recorded_from": {"kind": "dashboard", "host": "h"}})
    again = _create(client, tokens["alice"])
    assert first.status_code == 200 and again.json() == first.json()
    other = _create(client, tokens["bob"])  # the same key under another token: another run
    assert other.json()["run_id"] != first.json()["run_id"]
    run = store.get_run(first.json()["run_id"])
    assert run.owner == "alice" and run.status == RunStatus.RUNNING and is_script_run(run)
    hooked = _create(client, tokens["alice"], key="key-0006", config={**CONFIG, "webhook_url": "http://127.0.0.1:22/"})
    assert store.get_run(hooked.json()["run_id"]).config["webhook_url"] == ""  # the server calls no address of theirs
    assert run.provenance["recorded_from"]["token"] == "cluster"
    assert _create(client, tokens["alice"], key="key-0002", owner="bob").status_code == 422  # no such field
    assert _create(client, tokens["alice"], key="k").status_code == 422  # key too short
    assert _create(client, tokens["alice"], key="../../etc/passwd").status_code == 422
    bad = _create(client, tokens["alice"], key="key-0003", config={**CONFIG, "num_generations": 1})
    assert bad.status_code == 422 and "num_generations" in bad.text
    bad = _create(client, tokens["alice"], key="key-0004", config={**CONFIG, "shell": "rm -rf /"})
    assert bad.status_code == 422
    huge = _create(client, tokens["alice"], key="key-0005", provenance={"x": "a" * 600_000})
    assert huge.status_code == 422
    assert len(store.list_runs()) == 3


def test_each_record_is_applied_once_in_order(api, store):
    client, tokens = api
    run_id = _create(client, tokens["alice"]).json()["run_id"]
    url, headers = f"/api/v1/runs/{run_id}/batches", _auth(tokens["alice"])
    assert client.post(url, json={"records": [_step(1, 1), _step(2, 2)]}, headers=headers).json()["last_seq"] == 2
    # the answer was lost: the sender resends 1..2 with 3
    answer = client.post(url, json={"records": [_step(1, 1, 9.0), _step(2, 2, 9.0), _step(3, 3)]}, headers=headers)
    assert answer.json() == {"last_seq": 3, "cancel_requested": False, "status": "running"}
    assert [g.completions[0].advantage for s in (1, 2, 3) for g in store.groups_at(run_id, s)] == [0.5, 0.5, 0.5]
    # a gap: nothing applied, the answer says where to resend from
    assert client.post(url, json={"records": [_step(5, 5)]}, headers=headers).json()["last_seq"] == 3
    assert store.group_steps(run_id) == [1, 2, 3]
    [group] = store.groups_at(run_id, 3)
    assert group.extra == {"answer": "4"} and store.token_stats(group.id, 0).pieces == ["4"]
    store.request_cancel(run_id)
    finish = {"seq": 4, "kind": "finish", "status": "cancelled", "error": None}
    answer = client.post(url, json={"records": [finish]}, headers=headers).json()
    assert answer["cancel_requested"] is True and answer["status"] == "cancelled"


@pytest.mark.parametrize("records", [
    [],
    [{**_step(1, 1), "extra_field": 1}],
    [_step(1, 1, advantage=math.inf)],
    [_step(2, 1), _step(1, 2)],
    [_step(1, 1), _step(3, 3)],
    [{**_step(1, 1), "step": -1}],
    [{**_step(1, 1), "groups": [{"split": "test", "groups": []}]}],
    [{"seq": 1, "kind": "finish", "status": "running"}],
    [{"seq": 1, "kind": "shell", "command": "id"}],
    [_step(i, i) for i in range(1, MAX_RECORDS + 2)],
])
def test_invalid_batches_are_refused_whole(api, store, records):
    client, tokens = api
    run_id = _create(client, tokens["alice"]).json()["run_id"]
    answer = client.post(f"/api/v1/runs/{run_id}/batches", content=json.dumps({"records": records}),  # NaN, inf too
                         headers=_auth(tokens["alice"]))
    assert answer.status_code == 422, answer.text
    assert store.ingest_cursor(run_id).last_seq == 0 and store.metrics_since(run_id) == []


def test_token_values_of_another_length_than_the_pieces_are_refused(api, store):
    client, tokens = api
    run_id = _create(client, tokens["alice"]).json()["run_id"]
    record = _step(1, 1)
    record["groups"][0]["groups"][0]["completions"][0]["token_stats"]["logprobs"] = [-0.1, -0.2]
    answer = client.post(f"/api/v1/runs/{run_id}/batches", json={"records": [record]}, headers=_auth(tokens["alice"]))
    assert answer.status_code == 422 and store.ingest_cursor(run_id).last_seq == 0


def test_oversized_and_malformed_bodies_are_refused(api, store):
    client, tokens = api
    run_id = _create(client, tokens["alice"]).json()["run_id"]
    url, headers = f"/api/v1/runs/{run_id}/batches", _auth(tokens["alice"])
    big = {"records": [{**_step(1, 1), "metrics": {"x": 1.0}, "pad": "a" * (MAX_BODY_BYTES + 10)}]}
    assert client.post(url, content=json.dumps(big), headers=headers).status_code == 413

    def chunks():  # no Content-Length: the limit holds while reading
        for _ in range(MAX_BODY_BYTES // (1 << 20) + 2):
            yield b" " * (1 << 20)

    assert client.post(url, content=chunks(), headers=headers).status_code == 413
    assert client.post(url, content=b"{not json", headers=headers).status_code == 400
    assert client.post(url, content=b"[" * 100_000 + b"]" * 100_000, headers=headers).status_code in (400, 422)
    assert client.post(f"/api/v1/runs/{run_id}/progress", json={"phase": "x" * 10_000},
                       headers=headers).status_code == 413
    assert store.metrics_since(run_id) == []
