"""The pictures of an image dataset in the dashboard's views: Inspect shows a group's images under its prompt, beside
its G completions with their advantages, to the run's owner and admins only; the Datasets tab's thumbnails follow
the same rule; both inline (``data:`` URLs), never as files Gradio would serve."""

from __future__ import annotations

import zipfile
from types import SimpleNamespace

from app.tabs.datasets import stored_thumbnails
from app.tabs.inspect.tab import step_view
from grpo_core.access.ownership import Actor
from grpo_core.datasets.formats import read_normalized
from grpo_core.datasets.library import import_dataset
from storage import CompletionRecord, GroupRecord
from tests.helpers import png_bytes


def _dataset(ctx, tmp_path):
    upload = tmp_path / "pictures.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        archive.writestr("data.jsonl", '{"prompt": "Colour?", "image": "red.png"}\n{"prompt": "Plain?", '
                                       '"image": "red.png"}\n')
        archive.writestr("red.png", png_bytes((220, 20, 20)))
    return import_dataset(ctx.store, ctx.settings, upload, source_name="pictures.zip", owner="alice")


def test_inspect_shows_the_groups_images_to_the_owner_and_admins_only(ctx, tmp_path):
    info = _dataset(ctx, tmp_path)
    run = ctx.store.create_run(name="vlm", config={"dataset_id": info.id}, dataset_id=info.id, max_steps=1,
                               owner="alice").id
    ctx.store.record_groups(run, 1, [GroupRecord(step=1, row_index=1, prompt="user: Plain?", completions=[
        CompletionRecord(index=i, text=f"answer {i}", rewards={"r": float(i)}, total_reward=float(i),
                         advantage=i - 0.5, num_tokens=2, truncated=False) for i in range(2)])])
    for actor, shown in ((Actor("alice"), True), (Actor("root", is_admin=True), True), (Actor("bob"), False),
                         (None, False)):
        _, html, _ = step_view(ctx, run, 1, actor=actor)
        assert ("data:image/png;base64," in html) is shown, actor
        assert "advantage 0.50" in html and "advantage -0.50" in html
        if shown:  # under the prompt, before its completions
            assert html.index("user: Plain?") < html.index('alt="dataset row 1 image 1"') < html.index("answer 0")
    rows = read_normalized(info.path)
    assert "data:image/png;base64," in stored_thumbnails(ctx, info, rows, SimpleNamespace(username="alice"))
    assert stored_thumbnails(ctx, info, rows, SimpleNamespace(username="bob")) == ""
