"""Each upload layout of an image dataset (a zipped ``save_to_disk`` folder with ``Image`` features, JSON Lines and
CSV in a zip naming their image files, chat prompts with image blocks carrying their pictures, several pictures a
row) is added as the Datasets tab adds it and trains the tiny vision-language model for a step through the
training worker (``train_run``, in process); each recorded group keeps its row, so Inspect shows its pictures.
(Parquet with ``Image`` features: tests/integration/test_image_runs.py.)"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from grpo_core.datasets.library import import_dataset
from grpo_core.run_config import RunConfig
from grpo_core.runs.images import group_images
from grpo_core.submit.queue import submit_run
from grpo_core.training.worker import train_run
from storage import RunStatus
from tests.helpers import png_bytes

RED, BLUE = png_bytes((220, 20, 20), (40, 30)), png_bytes((20, 20, 220), (30, 40))
ASK = "What colour is the picture?"


def _zip(path: Path, members: dict[str, bytes | str]) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _jsonl(*rows: dict) -> str:
    return "".join(json.dumps(row) + "\n" for row in rows)


def _save_to_disk(tmp_path: Path) -> tuple[Path, int]:
    import io

    from datasets import Dataset, Image
    from PIL import Image as PILImage

    pictures = [PILImage.open(io.BytesIO(data)) for data in (RED, BLUE)]
    folder = tmp_path / "colours"
    Dataset.from_dict({"prompt": [ASK, ASK], "image": pictures, "answer": ["red", "blue"]}) \
        .cast_column("image", Image()).save_to_disk(str(folder))
    members = {str(p.relative_to(tmp_path)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    return _zip(tmp_path / "colours.zip", members), 1


def _jsonl_zip(tmp_path: Path) -> tuple[Path, int]:
    rows = _jsonl({"prompt": ASK, "image": "pics/red.png", "answer": "red"},
                  {"prompt": ASK, "image": "pics/blue.png", "answer": "blue"})
    return _zip(tmp_path / "vqa.zip", {"vqa/data.jsonl": rows, "vqa/pics/red.png": RED, "vqa/pics/blue.png": BLUE}), 1


def _csv_zip_several(tmp_path: Path) -> tuple[Path, int]:
    text = f'prompt,images,answer\n{ASK},"[""a.png"", ""b.png""]",red\n{ASK},"[""b.png"", ""a.png""]",blue\n'
    return _zip(tmp_path / "pairs.zip", {"pairs.csv": text, "a.png": RED, "b.png": BLUE}), 2


def _chat_blocks(tmp_path: Path) -> tuple[Path, int]:
    def chat(first: str) -> list[dict]:
        return [{"role": "user", "content": [{"type": "image", "path": first}, {"type": "text", "text": ASK}]}]

    rows = _jsonl({"prompt": chat("red.png"), "answer": "red"}, {"prompt": chat("blue.png"), "answer": "blue"})
    return _zip(tmp_path / "chat.zip", {"data.jsonl": rows, "red.png": RED, "blue.png": BLUE}), 1


@pytest.mark.parametrize("layout", [_save_to_disk, _jsonl_zip, _csv_zip_several, _chat_blocks],
                         ids=["save_to_disk-zip", "jsonl-zip", "csv-zip-several", "chat-image-blocks"])
def test_each_image_layout_trains_the_tiny_vlm_for_a_step(store, settings, tiny_vlm_dir, tmp_path, layout):
    upload, per_row = layout(tmp_path)
    info = import_dataset(store, settings, upload, source_name=upload.name)
    config = RunConfig.model_validate({
        "model": str(tiny_vlm_dir), "dataset_id": info.id, "max_steps": 1, "max_completion_length": 4,
        "num_generations": 2, "per_device_train_batch_size": 2, "learning_rate": 1e-3,
        "rewards": [{"rule": "length", "weight": 1.0, "params": {"min_tokens": 1, "max_tokens": 3}}],
    })
    run = submit_run(store, config, model_cache_dir=settings.model_cache_dir).run
    assert train_run(store, settings, run.id) == RunStatus.COMPLETED, store.get_run(run.id).error
    run = store.get_run(run.id)
    [group] = store.groups_at(run.id, 1)
    assert ASK in group.prompt and len(group.completions) == 2
    assert len(group_images(store, run, group.row_index)) == per_row
