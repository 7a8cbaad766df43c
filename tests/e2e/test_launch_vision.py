"""An image dataset trained from the browser (headless Chromium) on the tiny vision-language model: a zip holding a
JSON Lines file whose ``image`` column names three PNGs of different colours and sizes beside it (and an ``answer``
column) is uploaded in the Datasets tab, launched in the Launch tab with the tiny LLaVA folder as the model for two
steps, and once the Runs table says completed, Inspect shows each recorded group's picture (its row's, at its own
size) under the prompt, beside the group's completions with their advantages.

The server, browser and page fixtures come from ``tests/e2e/conftest.py``, the form helpers from ``tests/helpers.py``.
"""

from __future__ import annotations

import json
import re
import zipfile

import pytest
from playwright.sync_api import expect

from tests.helpers import pick, png_bytes, set_number, set_text

pytestmark = pytest.mark.e2e

ASK = "What colour is the picture?"
# (colour name, RGB, width x height): each row's picture has its own size, so the size shown names the row
PICTURES = [("red", (220, 20, 20), (32, 24)), ("green", (20, 200, 20), (24, 32)), ("blue", (20, 20, 220), (40, 20))]


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
    page.locator("#dataset-file input[type=file]").set_input_files(str(upload))
    page.locator("#dataset-add").click()
    page.locator("#dataset-status").get_by_text("Added colours").wait_for(timeout=120_000)

    page.get_by_role("tab", name="Launch").click()
    pick(page, "launch-dataset", "colours (3 rows)")
    set_text(page, "launch-model", str(tiny_vlm_dir))
    set_number(page, "hp-max_steps", "2")
    set_number(page, "hp-num_generations", "2")
    set_number(page, "hp-per_device_train_batch_size", "2")
    set_number(page, "hp-max_completion_length", "4")
    set_text(page, "launch-name", "vision-launched")
    page.locator("#launch-button").click()
    expect(page.get_by_role("tab", name="Runs")).to_have_attribute("aria-selected", "true", timeout=120_000)
    expect(page.locator("#launch-status")).to_contain_text("vision-launched")

    # Gradio's table draws its body rows as <div role="row">, not <tr> (only its header is a table row)
    row = page.locator("#runs-table").get_by_role("row").filter(has_text="vision-launched").first
    expect(row).to_contain_text("completed", timeout=420_000)

    page.get_by_role("tab", name="Inspect").click(timeout=120_000)
    pick(page, "inspect-run", "vision-launched")
    expect(page.locator("#inspect-summary")).to_contain_text("step 2: 1 groups, 2 completions")  # the newest step
    _expect_the_picture_beside_its_group(page, step=2)
    pick(page, "inspect-step", "1")
    expect(page.locator("#inspect-summary")).to_contain_text("step 1: 1 groups, 2 completions")
    _expect_the_picture_beside_its_group(page, step=1)


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
