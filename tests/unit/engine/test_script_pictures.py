"""A user's script's prompt pictures, as the callback's tap hands them on (grpo_core/engine/group_capture.py) and a
local store keeps them (storage/run_images.py): copied bounded by the writer thread, kept once per run, the group's
prompt key counting its picture, a path never read, read back by the run's owner only."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.engine.group_capture import RolloutTap, groups_from_trl_logs
from grpo_core.engine.policy_model import EndOfSequence
from grpo_core.runs.images import group_images
from grpo_core.runs.script_images import MAX_SIDE, recorded_copy
from storage.run_images import GROUP_IMAGES_KEY


def _score_and_log(tap: RolloutTap, prompts, pictures) -> dict:
    """TRL's buffers after one scoring: two completions a prompt, the tap's ``log_extra`` columns in ``extra``."""
    extra: dict[str, list] = {}
    completions = [c for p in prompts for c in (p + " a", p + " b")]
    cells = [c for cell in pictures for c in (cell, cell)]
    tap(completions, completion_ids=[[1, 0]] * len(completions), image=cells,
        log_extra=lambda column, values: extra.setdefault(column, []).extend(values))
    return {"prompt": [p for p in prompts for _ in range(2)], "completion": completions,
            "advantages": [1.0, -1.0] * len(prompts), "rewards": {"r": [1.0, 0.0] * len(prompts)}, "extra": extra}


def test_the_pictures_of_a_scripts_groups_are_stored_once_and_read_by_their_owner_only(store, tmp_path):
    tap = RolloutTap(lambda completions, **_: [0.0] * len(completions), EndOfSequence(ids=(0,), pad_id=None), 8,
                     record_images=True)
    red, blue = Image.new("RGB", (40, 30), (255, 0, 0)), Image.new("RGB", (3000, 20), (0, 0, 255))
    secret = tmp_path / "secret.png"
    secret.write_bytes(b"not to be read")
    logs = _score_and_log(tap, ["Colour?", "Colour?", "Colour?", "Colour?"],
                          [red, [blue, red], str(secret), {"path": str(secret)}])
    groups = groups_from_trl_logs(logs, step=1, num_generations=2, reward_names=["r"], reward_weights=[1.0],
                                  pictures=tap.pictures.copy)
    first, second, by_path, by_dict = groups
    assert len(first.extra[GROUP_IMAGES_KEY]) == 1 and len(second.extra[GROUP_IMAGES_KEY]) == 2
    assert second.extra[GROUP_IMAGES_KEY][1] == first.extra[GROUP_IMAGES_KEY][0]  # the same picture, one name
    # the same question about other pictures is another prompt; a path is never read, so no picture
    assert first.row_index != second.row_index and by_path.row_index == by_dict.row_index
    assert GROUP_IMAGES_KEY not in by_path.extra and not by_path.images
    store_run = store.create_script_run(name="vlm", config={"model": "tiny"}, max_steps=1, owner="alice",
                                        provenance={})
    store.record_step(store_run.id, 1, metrics={"reward": 0.5}, groups=[("train", groups)])
    store.record_step(store_run.id, 1, metrics={"reward": 0.5}, groups=[("train", groups)])  # replayed: stored once
    run = store.get_run(store_run.id)
    [shown] = group_images(store, run, first.row_index, actor=Actor("alice"))
    wide = group_images(store, run, second.row_index, actor=Actor("alice"))
    assert [i.name for i in wide] == second.extra[GROUP_IMAGES_KEY] and wide[1] == shown
    with Image.open(io.BytesIO(wide[0].data), formats=["PNG"]) as picture:
        assert max(picture.size) == MAX_SIDE  # 3000 x 20 recorded at most MAX_SIDE a side
    with pytest.raises(NotOwnerError, match="bob may not see the images"):
        group_images(store, run, first.row_index, actor=Actor("bob"))
    store.delete_run(run.id)  # its pictures go with it
    assert store.run_image(run.id, shown.name) is None
    # the next training scoring empties the shelf: the previous generation was recorded before it
    [token] = logs["extra"]["_images"][0]
    assert tap.pictures.copy(token) is not None
    again = _score_and_log(tap, ["Again?"], [red])
    assert tap.pictures.copy(token) is None
    # another process's tap (accelerate) never names this one's pictures: its tokens are its own
    other = RolloutTap(lambda completions, **_: [0.0] * len(completions), EndOfSequence(ids=(0,), pad_id=None), 8,
                       record_images=True)
    [other_token] = _score_and_log(other, ["Again?"], [blue])["extra"]["_images"][0]
    assert tap.pictures.copy(other_token) is None and other_token != again["extra"]["_images"][0][0]


def test_only_pictures_in_memory_are_copied():
    assert recorded_copy("/etc/passwd") is None and recorded_copy({"path": "/etc/passwd"}) is None
    assert recorded_copy(b"%PDF-1.4 not a picture") is None and recorded_copy(None) is None
    out = io.BytesIO()
    Image.new("RGB", (5, 5), (1, 2, 3)).save(out, format="JPEG")
    name, png = recorded_copy({"bytes": out.getvalue()})
    assert name.endswith(".png") and png.startswith(b"\x89PNG")
