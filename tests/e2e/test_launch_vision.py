"""An image dataset trained from the browser (headless Chromium) on the tiny vision-language model: a zip holding a
JSON Lines file whose ``image`` column names three PNGs of different colours and sizes beside it (and an ``answer``
column) is uploaded in the Datasets tab, launched in the Launch tab with the tiny LLaVA folder as the model for two
steps, and once the Runs table says completed, Inspect shows each recorded group's picture (its row's, at its own
size) under the prompt, beside the group's completions with their advantages.

On the same page, the other upload layouts (a zipped ``save_to_disk`` folder with an ``Image`` feature, Parquet whose
``Image`` feature holds bytes, CSV in a zip naming two pictures a row, chat prompts with ``{"type": "image"}``
blocks; built in ``tests/helpers.py``) are each added (with thumbnails in the preview) and
launched for one step, queued back to back behind the first run; each completes, and Inspect shows its group's
pictures at their own sizes.

The server, browser and page fixtures come from ``tests/e2e/conftest.py``, the form helpers from ``tests/helpers.py``.
"""

from __future__ import annotations

import json
import re
import zipfile

import pytest
from playwright.sync_api import expect

from tests.helpers import (
    FIRST_PICTURE_SIZES,
    IMAGE_ASK,
    layout_chat_blocks,
    layout_csv_zip_several,
    layout_parquet,
    layout_save_to_disk,
    pick,
    png_bytes,
    set_number,
    set_text,
)

pytestmark = pytest.mark.e2e

ASK = "What colour is the picture?"
# (colour name, RGB, width x height): each row's picture has its own size, so the size shown names the row
PICTURES = [("red", (220, 20, 20), (32, 24)), ("green", (20, 200, 20), (24, 32)), ("blue", (20, 20, 220), (40, 20))]
# each layout's builder, the dataset name its file gives, and the run launched on it
# (the JSON Lines zip is the first upload's layout)
LAYOUTS = [(layout_save_to_disk, "disk"), (layout_parquet, "charts"), (layout_csv_zip_several, "pairs"),
           (layout_chat_blocks, "chat")]
FINISHED = re.compile("completed|failed|cancelled")


def _upload(path):
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("data.jsonl", "".join(
            json.dumps({"prompt": ASK, "image": f"pics/{name}.png", "answer": name}) + "\n"
            for name, _, _ in PICTURES))
        for name, colour, size in PICTURES:
            archive.writestr(f"pics/{name}.png", png_bytes(colour, size))
    return path


def test_an_image_dataset_uploaded_and_launched_from_the_browser_trains_and_inspect_shows_its_pictures(
        page, tiny_vlm_dir, tmp_path):
    upload = _upload(tmp_path / "colours.zip")
    page.get_by_role("tab", name="Datasets").click()
    _add(page, upload, "colours", pictures=3)
    layouts = []
    for build, name in LAYOUTS:
        folder = tmp_path / name
        folder.mkdir()
        path, per_row = build(folder)
        _add(page, path, name, pictures=2 * per_row)
        layouts.append((name, per_row))

    _launch(page, "colours (3 rows)", tiny_vlm_dir, "vision-launched", steps=2)
    for name, _ in layouts:  # queued behind the first run: only the dataset and the name change
        _launch(page, f"{name} (2 rows)", None, f"layout-{name}", steps=1 if name == layouts[0][0] else None)

    # Gradio's table draws its body rows as <div role="row">, not <tr> (only its header is a table row)
    for run in ["vision-launched", *(f"layout-{name}" for name, _ in layouts)]:
        row = page.locator("#runs-table").get_by_role("row").filter(has_text=run).first
        expect(row).to_contain_text(FINISHED, timeout=420_000)
        expect(row).to_contain_text("completed")

    page.get_by_role("tab", name="Inspect").click(timeout=120_000)
    for name, per_row in layouts:
        _expect_the_layout_pictures(page, f"layout-{name}", per_row)
    pick(page, "inspect-run", "vision-launched")
    pick(page, "inspect-step", "2")  # the step picked stays when the run changes: its newest, here
    expect(page.locator("#inspect-summary")).to_contain_text("vision-launched, step 2: 1 groups, 2 completions")
    _expect_the_picture_beside_its_group(page, step=2)
    pick(page, "inspect-step", "1")
    expect(page.locator("#inspect-summary")).to_contain_text("step 1: 1 groups, 2 completions")
    _expect_the_picture_beside_its_group(page, step=1)


def _add(page, path, name: str, pictures: int) -> None:
    """Upload ``path`` in the Datasets tab and add it; its preview shows its first rows' ``pictures`` thumbnails."""
    file_input = page.locator("#dataset-file input[type=file]")
    if not file_input.count():  # the last upload's file is shown in its place: clear it
        page.locator("#dataset-file").get_by_role("button", name="Clear").click()
    file_input.set_input_files(str(path))
    page.locator("#dataset-add").click()
    page.locator("#dataset-status").get_by_text(f"Added {name}").wait_for(timeout=120_000)
    thumbnails = page.locator('#dataset-images img[alt^="preview image "]')
    expect(thumbnails).to_have_count(pictures)
    assert thumbnails.first.evaluate("image => image.complete && image.naturalWidth > 0")


def _launch(page, dataset: str, model, name: str, steps: int | None) -> None:
    """Launch ``name`` on ``dataset`` from the Launch tab; with ``model``, first set the tiny VLM and one group of two
    completions of 4 tokens a step (the form keeps them for the next launches), with ``steps``, ``max_steps``."""
    page.get_by_role("tab", name="Launch").click()
    pick(page, "launch-dataset", dataset)
    if model is not None:
        set_text(page, "launch-model", str(model))
        set_number(page, "hp-num_generations", "2")
        set_number(page, "hp-per_device_train_batch_size", "2")
        set_number(page, "hp-max_completion_length", "4")
    if steps is not None:
        set_number(page, "hp-max_steps", str(steps))
    set_text(page, "launch-name", name)
    page.locator("#launch-button").click()
    expect(page.get_by_role("tab", name="Runs")).to_have_attribute("aria-selected", "true", timeout=120_000)
    expect(page.locator("#launch-status")).to_contain_text(name)


def _expect_the_layout_pictures(page, run: str, per_row: int) -> None:
    """Inspect's one group of the one-step run ``run`` shows its row's ``per_row`` pictures, the first at the
    row's size (row 0's 40 x 30, row 1's 30 x 40), beside two completions with their advantages."""
    pick(page, "inspect-run", run)
    expect(page.locator("#inspect-summary")).to_contain_text(run)
    expect(page.locator("#inspect-summary")).to_contain_text("step 1: 1 groups, 2 completions")
    group = page.locator("#inspect-groups .grpo-group")
    expect(group).to_have_count(1)
    pictures = group.locator('img[alt^="dataset row "]')
    expect(pictures).to_have_count(per_row)
    row_index = int(re.fullmatch(r"dataset row (\d+) image 1", pictures.first.get_attribute("alt")).group(1))
    assert pictures.first.evaluate("image => [image.complete, image.naturalWidth, image.naturalHeight]") == [
        True, *FIRST_PICTURE_SIZES[row_index]]
    assert IMAGE_ASK in group.locator(".grpo-prompt").inner_text()
    expect(group.locator(".grpo-adv")).to_have_count(2)


def _expect_the_picture_beside_its_group(page, step: int) -> None:
    """The step's one group shows its row's picture (its size and colour) under the prompt, above its two
    completions with their advantages."""
    group = page.locator("#inspect-groups .grpo-group")
    expect(group).to_have_count(1)
    expect(group.locator(".grpo-meta").first).to_contain_text(f"step {step}")
    picture = group.locator('img[alt^="dataset row "]')
    expect(picture).to_have_count(1)
    expect(picture).to_be_visible()
    row_index = int(re.fullmatch(r"dataset row (\d+) image 1", picture.get_attribute("alt")).group(1))
    expect(group.locator(".grpo-meta").first).to_contain_text(f"dataset row {row_index} ")
    width, height = PICTURES[row_index][2]
    assert picture.evaluate("image => [image.complete, image.naturalWidth, image.naturalHeight]") == [
        True, width, height]
    # its pixels are its row's colour (re-encoded as PNG, shown inline)
    rgb = picture.evaluate("""image => {
        const canvas = document.createElement("canvas");
        canvas.width = image.naturalWidth; canvas.height = image.naturalHeight;
        const context = canvas.getContext("2d");
        context.drawImage(image, 0, 0);
        return Array.from(context.getImageData(1, 1, 1, 1).data.slice(0, 3));
    }""")
    assert rgb == list(PICTURES[row_index][1])
    assert ASK in group.locator(".grpo-prompt").inner_text()
    expect(group.locator(".grpo-completion")).to_have_count(2)
    advantages = group.locator(".grpo-adv")
    expect(advantages).to_have_count(2)
    for i in range(2):
        expect(advantages.nth(i)).to_have_text(re.compile(r"advantage [-+]?\d"))
    box, prompt = picture.bounding_box(), group.locator(".grpo-prompt").bounding_box()
    assert box["y"] >= prompt["y"] + prompt["height"] - 1  # under the prompt, above the completions
    assert box["y"] + box["height"] <= group.locator(".grpo-completions").bounding_box()["y"] + 1
