"""Tests of image datasets: each layout (Parquet ``Image`` features, JSON Lines in a zip naming its files, chat
prompts with image blocks, several images a row) stored once with the dataset, and every hostile image (a
decompression bomb, a wrong type, a corrupt file, a path outside the zip) refused with its file, row and column."""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path

import pytest

from grpo_core.datasets.formats import read_normalized
from grpo_core.datasets.images import ImageBudget, image_folder, stored_image_path, thumbnails
from grpo_core.datasets.library import delete_dataset, import_dataset, load_upload
from grpo_core.datasets.prompt_dataset import DatasetError
from tests.helpers import image_parquet, png_bomb, png_bytes

RED, BLUE = png_bytes((220, 20, 20)), png_bytes((20, 20, 220), size=(9, 9))
CHAT_WITH_BLOCK = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": "What colour is it?"}]}]


def make_zip(path: Path, members: dict[str, bytes | str], links: dict[str, str] | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
        for name, target in (links or {}).items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o120777 << 16)
            archive.writestr(info, target)
    return path


def jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def test_parquet_image_features_are_stored_once_with_the_dataset(tmp_path, store, settings):
    upload = image_parquet(tmp_path / "charts.parquet", [
        {"prompt": "What colour?", "images": [{"bytes": RED, "path": None}, {"bytes": BLUE, "path": "b.png"}],
         "answer": "red"},
        {"prompt": "And now?", "images": [{"bytes": RED, "path": None}], "answer": "red"},
    ])
    info = import_dataset(store, settings, upload, source_name="charts.parquet", owner="alice")
    rows = read_normalized(Path(info.path))
    assert info.columns == ["prompt", "answer", "images"] and info.prompt_kind == "chat"
    assert rows[0]["prompt"] == [{"role": "user", "content": "What colour?"}]  # TRL puts the image blocks first
    assert len(rows[0]["images"]) == 2 and rows[1]["images"] == rows[0]["images"][:1]  # the same picture, once
    assert sorted(p.name for p in image_folder(info.path).iterdir()) == sorted(set(rows[0]["images"]))
    from PIL import Image

    with Image.open(stored_image_path(info.path, rows[0]["images"][1])) as image:
        assert image.size == (9, 9) and image.getpixel((4, 4)) == (20, 20, 220)
    shown = thumbnails(rows, lambda name: stored_image_path(info.path, name).read_bytes())
    assert [label for _, label in shown] == ["row 1", "row 1", "row 2"]
    delete_dataset(store, settings, info.id)
    assert not image_folder(info.path).exists()


def test_jsonl_in_a_zip_names_its_image_files_and_chat_blocks_carry_theirs(tmp_path, settings):
    archive = make_zip(tmp_path / "vqa.zip", {
        "vqa/data.jsonl": jsonl({"prompt": CHAT_WITH_BLOCK, "image": "pics/red.png", "answer": "red"},
                                {"prompt": [{"role": "user", "content": [
                                    {"type": "image", "image": "pics/blue.png"}, {"type": "text", "text": "Colour?"},
                                    {"type": "image", "path": "pics/red.png"}]}], "answer": "blue"}),
        "vqa/pics/red.png": RED, "vqa/pics/blue.png": BLUE})
    dataset = load_upload(archive, source_name="vqa.zip", max_upload_mb=settings.max_upload_mb)
    first, second = dataset.rows
    assert first["prompt"] == CHAT_WITH_BLOCK and len(first["images"]) == 1
    assert second["prompt"][0]["content"][0] == {"type": "image"} and len(second["images"]) == 2
    assert second["images"][1] == first["images"][0] and len(dataset.images.files) == 2


def test_csv_in_a_zip_lists_several_images_as_json(tmp_path, settings):
    archive = make_zip(tmp_path / "pairs.zip", {
        "pairs.csv": 'prompt,images,answer\nWhich is red?,"[""a.png"", ""b.png""]",1\n', "a.png": RED, "b.png": BLUE})
    dataset = load_upload(archive, source_name="pairs.zip", max_upload_mb=settings.max_upload_mb)
    assert len(dataset.rows[0]["images"]) == 2 and dataset.rows[0]["answer"] == 1


HOSTILE = [
    pytest.param({"a.png": png_bomb(10000, 10000)}, "a.png", "10000 x 10000 pixels", id="decompression-bomb"),
    pytest.param({"a.png": b"<svg xmlns='http://www.w3.org/2000/svg'/>"}, "a.png", "not an image", id="wrong-type"),
    pytest.param({"a.png": RED[:-30]}, "a.png", "does not decode", id="truncated"),
    pytest.param({}, "a.png", "is not in the zip", id="missing"),
    pytest.param({}, "../outside.png", "not a plain relative name", id="zip-slip"),
    pytest.param({}, "/etc/hostname", "not a plain relative name", id="absolute"),
    pytest.param({}, "https://example.com/a.png", "not a plain relative name", id="url"),
    pytest.param({}, 7, "expected an image file name", id="number"),
]


@pytest.mark.parametrize(("members", "named", "reason"), HOSTILE)
def test_a_hostile_image_is_refused_with_its_row_and_column(tmp_path, settings, members, named, reason):
    rows = jsonl({"prompt": "Colour?", "image": "ok.png"}, {"prompt": "Colour?", "image": named})
    archive = make_zip(tmp_path / "up.zip", {"data.jsonl": rows, "ok.png": RED, **members})
    with pytest.raises(DatasetError) as caught:
        load_upload(archive, source_name="up.zip", max_upload_mb=settings.max_upload_mb)
    assert str(caught.value).startswith("up.zip/data.jsonl, row 2, column 'image': ")
    assert reason in str(caught.value)


def test_links_and_embedded_bombs_are_refused(tmp_path, settings, store):
    linked = make_zip(tmp_path / "link.zip", {"data.jsonl": jsonl({"prompt": "x", "image": "a.png"})},
                      links={"a.png": "/etc/passwd"})
    with pytest.raises(DatasetError, match="symbolic link"):
        load_upload(linked, source_name="link.zip", max_upload_mb=settings.max_upload_mb)
    folder = tmp_path / "saved"
    folder.mkdir()
    os.symlink("/etc/hostname", folder / "a.png")
    from grpo_core.datasets.formats import load_prompt_dataset
    from grpo_core.datasets.images import attach_images

    dataset = load_prompt_dataset(_write(tmp_path / "d.jsonl", jsonl({"prompt": "x", "images": ["a.png"]})))
    with pytest.raises(DatasetError, match=r"d.jsonl, row 1, column 'images': .*symbolic link"):
        attach_images(dataset, folder)
    bomb = image_parquet(tmp_path / "bomb.parquet", [{"prompt": "x", "image": {"bytes": png_bomb(), "path": None}}],
                         image_column="image")
    with pytest.raises(DatasetError, match=r"bomb.parquet, row 1, column 'image': .*decompression bomb"):
        import_dataset(store, settings, bomb, source_name="bomb.parquet")
    assert store.list_datasets() == [] and not any(settings.datasets_dir.glob("*"))
    small = ImageBudget(max_file_bytes=len(RED) - 1)
    with pytest.raises(DatasetError, match=r"row 1, column 'images': the image file 'a.png' is .* MB; the limit"):
        attach_images(load_prompt_dataset(tmp_path / "d.jsonl"), _real(tmp_path / "real"), small)


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def _real(folder: Path) -> Path:
    folder.mkdir()
    (folder / "a.png").write_bytes(RED)
    return folder


def test_the_datasets_pixels_are_bounded_together_and_equal_bytes_decode_once(tmp_path):
    from grpo_core.datasets.formats import load_prompt_dataset
    from grpo_core.datasets.images import attach_images

    folder = tmp_path / "pics"
    folder.mkdir()
    for name, data in (("a.png", RED), ("a-again.png", RED), ("b.png", BLUE)):
        (folder / name).write_bytes(data)
    rows = jsonl({"prompt": "x", "images": ["a.png", "a-again.png"]}, {"prompt": "y", "images": ["b.png"]})
    dataset = load_prompt_dataset(_write(tmp_path / "d.jsonl", rows))
    _, staged = attach_images(dataset, folder, ImageBudget(max_total_pixels=12 * 8 + 9 * 9))
    assert staged.total_pixels == 12 * 8 + 9 * 9 and len(staged.files) == 2
    with pytest.raises(DatasetError, match=r"d.jsonl, row 2, column 'images': .*pixels together"):
        attach_images(dataset, folder, ImageBudget(max_total_pixels=12 * 8 + 9 * 9 - 1))
