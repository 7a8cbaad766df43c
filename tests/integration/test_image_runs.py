"""An image dataset trains the tiny vision-language model for two steps through the launcher and its worker (TRL's
VLM path: the processor, the pictures from the dataset's stored images, LoRA on the language model), each recorded
group keeps its row (and so its images); a text-only model with the same dataset is refused before launch."""

from __future__ import annotations

import pytest

from grpo_core.datasets.library import import_dataset
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import image_parquet, png_bytes

REWARDS = [{"rule": "length", "weight": 1.0, "params": {"min_tokens": 1, "max_tokens": 6}}]


def _image_dataset(store, settings, tmp_path, owner=None):
    colours = [(220, 20, 20), (20, 200, 20), (20, 20, 220), (200, 200, 20)]
    rows = [{"prompt": "What colour is the picture?", "images": [{"bytes": png_bytes(c, (40, 30)), "path": None}],
             "answer": name} for c, name in zip(colours, ["red", "green", "blue", "yellow"], strict=True)]
    upload = image_parquet(tmp_path / "colours.parquet", rows)
    return import_dataset(store, settings, upload, source_name="colours.parquet", owner=owner)


def _config(model, dataset_id) -> RunConfig:
    return RunConfig.model_validate({
        "model": str(model), "dataset_id": dataset_id, "rewards": REWARDS, "max_steps": 2,
        "max_completion_length": 8, "num_generations": 4, "per_device_train_batch_size": 4,
        "temperature": 1.0, "learning_rate": 1e-3,
    })


def test_an_image_dataset_trains_the_tiny_vlm_through_the_worker(store, settings, tiny_vlm_dir, tmp_path):
    info = _image_dataset(store, settings, tmp_path)
    run = submit_run(store, _config(tiny_vlm_dir, info.id), model_cache_dir=settings.model_cache_dir).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=300), "the run did not finish"
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    assert final.current_step == 2
    groups = store.groups_since(run.id)
    assert groups and all(0 <= g.row_index < 4 and len(g.completions) == 4 for g in groups)
    assert all(g.prompt == "user: What colour is the picture?" for g in groups)


def test_a_text_only_model_is_refused_with_an_image_dataset(store, settings, tiny_model_dir, tmp_path):
    info = _image_dataset(store, settings, tmp_path)
    with pytest.raises(ConfigError, match=r"model: the dataset has images \(up to 1 a row\) but .* is a text-only"):
        submit_run(store, _config(tiny_model_dir, info.id), model_cache_dir=settings.model_cache_dir)
    assert store.list_runs() == []


def test_the_preflight_samples_the_tiny_vlm_with_the_rows_pictures(store, settings, tiny_vlm_dir, tmp_path):
    from grpo_core.datasets.images import rows_images_folder
    from grpo_core.datasets.rows import load_rows
    from grpo_core.preflight.worker import sample_groups

    info = _image_dataset(store, settings, tmp_path)
    config = _config(tiny_vlm_dir, info.id)
    rows = load_rows(store, config)
    folder = rows_images_folder(store, config, rows)
    assert folder is not None and len(list(folder.iterdir())) == 4
    groups = sample_groups(config, rows, str(tiny_vlm_dir), num_prompts=1, progress=lambda _: None, images=folder)
    assert len(groups) == 1 and len(groups[0].texts) == 4


def test_a_dataset_file_with_images_is_refused_by_path(store, settings, tiny_vlm_dir, tmp_path):
    upload = image_parquet(tmp_path / "colours.parquet",
                           [{"prompt": "Colour?", "images": [{"bytes": png_bytes(), "path": None}]}])
    config = _config(tiny_vlm_dir, None).model_copy(update={"dataset_path": str(upload)})
    with pytest.raises(ConfigError, match="dataset_path: a file with images trains only as a stored dataset"):
        submit_run(store, config, model_cache_dir=settings.model_cache_dir)


def test_try_the_model_samples_the_tiny_vlm_with_a_picture_and_a_text_model_refuses_it(settings, tiny_vlm_dir):
    from grpo_core.try_model.job import TryRequest, checked_pictures
    from grpo_core.try_model.worker import try_model

    pictures = checked_pictures([("red.png", png_bytes((220, 20, 20), (40, 30)))])
    request = TryRequest(model=str(tiny_vlm_dir), prompt=[{"role": "user", "content": "Colour?"}], images=pictures,
                         rewards=REWARDS, num_samples=2, max_new_tokens=4, device="cpu",
                         model_cache_dir=str(settings.model_cache_dir))
    result = try_model(request, progress=lambda _: None)
    assert result["prompt_text"].count("<image>") == 4  # the picture's 4 image tokens, as TRL builds the prompt
    assert len(result["sides"]["base"]["completions"]) == 2
    text_only = request.model_copy(update={"model": str(tiny_vlm_dir.parent / "text")})
    with pytest.raises(ValueError, match="the model is text-only .* cannot read a picture"):
        try_model(text_only, progress=lambda _: None)
