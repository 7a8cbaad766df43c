"""Each upload layout of an image dataset (a zipped ``save_to_disk`` folder with ``Image`` features, JSON Lines and
CSV in a zip naming their image files, chat prompts with image blocks carrying their pictures, several pictures a
row; the builders in tests/helpers.py) is added as the Datasets tab adds it and trains the tiny vision-language model
for a step through the training worker (``train_run``, in process); each recorded group keeps its row, so Inspect
shows its pictures. (Parquet with ``Image`` features: tests/integration/test_image_runs.py.)"""

from __future__ import annotations

import pytest

from grpo_core.datasets.library import import_dataset
from grpo_core.run_config import RunConfig
from grpo_core.runs.images import group_images
from grpo_core.submit.queue import submit_run
from grpo_core.training.worker import train_run
from storage import RunStatus
from tests.helpers import IMAGE_ASK as ASK
from tests.helpers import layout_chat_blocks, layout_csv_zip_several, layout_jsonl_zip, layout_save_to_disk


@pytest.mark.parametrize("layout", [layout_save_to_disk, layout_jsonl_zip, layout_csv_zip_several, layout_chat_blocks],
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
