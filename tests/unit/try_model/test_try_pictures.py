"""Pictures given with a prompt in Try the model (grpo_core/try_model/job.py, app/tabs/try_model.py): checked by
decoding under bounds before any child starts (a bomb, a non-image, too many, too large are refused with the
picture's name), refused for a run whose model is text-only, and read from the run's dataset only for its owner;
the child decodes them again (grpo_core/try_model/worker.py)."""

from __future__ import annotations

import base64
import io
import json

import pytest
from PIL import Image

from app.tabs.try_model import prompt_pictures
from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.datasets.images import ImageBudget
from grpo_core.try_model.job import MAX_TRY_IMAGES, PictureError, build_request, checked_pictures
from tests.helpers import png_bomb, png_bytes, tiny_config


def _jpeg(colour=(10, 200, 30), size=(30, 20)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, colour).save(out, format="JPEG")
    return out.getvalue()


def test_pictures_are_checked_by_decoding_and_sent_as_png():
    [sent] = checked_pictures([("cat.jpg", _jpeg())])
    with Image.open(io.BytesIO(base64.b64decode(sent)), formats=["PNG"]) as picture:
        assert picture.size == (30, 20)
    cases = [([("bomb.png", png_bomb())], "picture bomb.png: the image has too many pixels"),
             ([("notes.pdf", b"%PDF-1.4\n" + b"x" * 200)], "picture notes.pdf: not an image of an accepted format"),
             ([("cut.png", png_bytes(size=(200, 200))[:-30])], "picture cut.png: the image does not decode"),
             ([(f"{i}.png", png_bytes()) for i in range(MAX_TRY_IMAGES + 1)], f"at most {MAX_TRY_IMAGES} go")]
    for uploads, reason in cases:
        with pytest.raises(PictureError, match=reason.replace("(", r"\(")):
            checked_pictures(uploads)
    with pytest.raises(PictureError, match="picture big.jpg: .* the limit is 100"):
        checked_pictures([("big.jpg", _jpeg())], ImageBudget(max_file_bytes=100))


def _model_folder(path, vision: bool):
    path.mkdir()
    config = {"model_type": "llava", "vision_config": {"image_size": 28}} if vision else {"model_type": "llama"}
    (path / "config.json").write_text(json.dumps(config))
    return path


def test_a_text_only_model_refuses_a_picture_and_a_vision_model_gets_a_chat_prompt(store, settings, tmp_path):
    pictures = checked_pictures([("cat.jpg", _jpeg())])
    text_only = store.create_run(name="text", config=tiny_config(_model_folder(tmp_path / "llama", False)).model_dump(),
                                 dataset_id=None, max_steps=2)
    with pytest.raises(ValueError, match="is a text-only model .* cannot read a picture"):
        build_request(settings, text_only, prompt="Colour?", row={"answer": "4"}, weights=None, images=pictures)
    assert build_request(settings, text_only, prompt="Colour?", row={"answer": "4"}, weights=None).images == []  # text alone: as before
    vision = store.create_run(name="vlm", config=tiny_config(_model_folder(tmp_path / "llava", True)).model_dump(),
                              dataset_id=None, max_steps=2)
    request = build_request(settings, vision, prompt="Colour?", row={"answer": "4"}, weights=None, images=pictures)
    assert request.images == pictures and request.prompt == [{"role": "user", "content": "Colour?"}]


def test_a_rows_pictures_are_read_from_its_dataset_for_the_runs_owner_only(store, settings, tmp_path):
    from types import SimpleNamespace

    run = SimpleNamespace(id=7, owner="alice", config={"dataset_path": str(tmp_path / "gone.jsonl")})
    ctx = SimpleNamespace(store=store)
    upload = tmp_path / "cat.jpg"
    upload.write_bytes(_jpeg())
    assert len(prompt_pictures(ctx, run, {"images": ["../../etc/passwd"]}, [str(upload)], Actor("bob"))) == 1
    stored = {"images": ["a" * 64 + ".png"]}
    with pytest.raises(NotOwnerError, match="bob may not see the images of run #7"):
        prompt_pictures(ctx, run, stored, [], Actor("bob"))
    with pytest.raises(PictureError, match="dataset file is gone"):
        prompt_pictures(ctx, run, stored, [], Actor("alice"))
