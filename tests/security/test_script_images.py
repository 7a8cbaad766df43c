"""Pictures a token holder's script sends with its groups (grpo_core/integrations/wire.py) are hostile: each is
decoded under bounds and named anew by the dashboard, a group shows only pictures it carried itself (never a file,
never another run's picture), and a bomb, a non-PNG, bad base64 or too many pictures refuse the batch with its
place. In process, on the real ingest routes and a real store."""

from __future__ import annotations

import base64
import hashlib

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient

from app.api.ingest import ingest_routes
from grpo_core.access.ownership import Actor
from grpo_core.runs.images import group_images
from grpo_core.runs.script_images import MAX_GROUP_IMAGES
from grpo_core.runs.script_runs import run_config_from_trainer
from storage.run_images import GROUP_IMAGES_KEY
from tests.helpers import png_bomb, png_bytes

CONFIG = run_config_from_trainer({"num_generations": 2, "per_device_train_batch_size": 2}, model="tiny",
                                 reward_names=["acc"], reward_weights=[1.0], max_steps=5)
FAKE_NAME = "0" * 64 + ".png"


def _record(seq: int, images: list[dict], names: list[str] | None = None) -> dict:
    completion = {"index": 0, "text": "red", "rewards": {"acc": 1.0}, "total_reward": 1.0, "advantage": 0.0}
    extra = {GROUP_IMAGES_KEY: names if names is not None else [i["name"] for i in images]}
    group = {"row_index": 2**30 + seq, "prompt": "Colour?", "extra": extra, "completions": [completion],
             "images": images}
    return {"seq": seq, "kind": "step", "step": seq, "wall_time": 1.0, "metrics": {"reward": 1.0},
            "groups": [{"split": "train", "groups": [group]}]}


def _image(data: bytes, name: str = FAKE_NAME) -> dict:
    return {"name": name, "png": base64.b64encode(data).decode("ascii")}


@pytest.fixture
def runs(store):
    """``post(user, records)`` into a run of that login's created for the test; returns the answer."""
    client = TestClient(FastAPI(routes=ingest_routes(store)))
    tokens = {user: store.create_api_token(user, "cluster")[1] for user in ("alice", "bob")}
    run_ids = {}

    def post(user: str, records: list[dict]):
        headers = {"Authorization": f"Bearer {tokens[user]}"}
        if user not in run_ids:
            body = {"client_key": f"key-{user}-0001", "name": user, "config": CONFIG, "max_steps": 5}
            run_ids[user] = client.post("/api/v1/runs", json=body, headers=headers).json()["run_id"]
        return client.post(f"/api/v1/runs/{run_ids[user]}/batches", json={"records": records}, headers=headers)

    post.run_ids = run_ids
    return post


@pytest.mark.parametrize("image, reason", [
    (_image(png_bomb()), "image 1: the image has too many pixels (a decompression bomb)"),
    (_image(b"%PDF-1.4\n" + b"x" * 100), "image 1: an image is not a PNG"),
    (_image(png_bytes(size=(1100, 1000))), "image 1: the image is 1100 x 1000 pixels"),
    ({"name": FAKE_NAME, "png": "not base64 at all!"}, "image 1: "),
    ({"name": "../../etc/passwd", "png": _image(png_bytes())["png"]}, "name"),
])
def test_hostile_pictures_refuse_the_batch_with_their_place(runs, store, image, reason):
    answer = runs("alice", [_record(1, [image])])
    assert answer.status_code == 422 and reason in answer.text, answer.text
    run_id = runs.run_ids["alice"]
    assert store.ingest_cursor(run_id).last_seq == 0 and store.group_steps(run_id) == []


def test_more_pictures_than_a_group_keeps_are_refused(runs):
    answer = runs("alice", [_record(1, [_image(png_bytes((i, 0, 0))) for i in range(MAX_GROUP_IMAGES + 1)])])
    assert answer.status_code == 422


def test_a_picture_is_named_by_its_checked_bytes_and_a_group_shows_only_those_it_carried(runs, store):
    red = png_bytes((220, 20, 20))
    assert runs("alice", [_record(1, [_image(red)])]).status_code == 200
    alice = store.get_run(runs.run_ids["alice"])
    [group] = store.groups_at(alice.id, 1)
    [name] = group.extra[GROUP_IMAGES_KEY]
    assert name != FAKE_NAME and store.run_image(alice.id, FAKE_NAME) is None  # the sent name is not kept
    [shown] = group_images(store, alice, group.row_index, actor=Actor("alice"))
    assert shown.name == name == hashlib.sha256(shown.data).hexdigest() + ".png"
    # bob's script names alice's picture (and a path) without carrying them: its group shows nothing
    assert runs("bob", [_record(1, [], names=[name, "/etc/passwd", "../grpo.db"])]).status_code == 200
    bob = store.get_run(runs.run_ids["bob"])
    [group] = store.groups_at(bob.id, 1)
    assert GROUP_IMAGES_KEY not in group.extra and group_images(store, bob, group.row_index, actor=Actor("bob")) == []
    assert store.run_image(bob.id, name) is None


def test_a_steps_pictures_are_held_to_a_budget_so_the_step_fits_in_a_request(monkeypatch):
    from grpo_core.integrations import wire
    from storage import CompletionRecord, GroupRecord

    red, blue = png_bytes((220, 20, 20)), png_bytes((20, 20, 220))
    monkeypatch.setattr(wire, "MAX_STEP_IMAGE_BYTES", len(red) + len(blue) // 2)
    completion = CompletionRecord(index=0, text="red", rewards={}, total_reward=None, advantage=0.0)
    groups = [GroupRecord(step=1, row_index=2**30 + n, prompt="Colour?", completions=[completion],
                          extra={GROUP_IMAGES_KEY: [f"{n}" * 64 + ".png"], "answer": "red"},
                          images={f"{n}" * 64 + ".png": data}) for n, data in ((1, red), (2, blue))]
    sent = wire.step_record(1, 1, metrics={}, wall_time=1.0, groups=[("train", groups)])["groups"][0]["groups"]
    assert len(sent[0]["images"]) == 1 and sent[0]["extra"][GROUP_IMAGES_KEY]
    assert "images" not in sent[1] and sent[1]["extra"] == {"answer": "red"}
