"""Vision-language models seen without torch: whether a model folder has a vision tower, and how many prompt tokens
one image becomes, from its ``config.json`` and its processor's config.

An image dataset (:mod:`grpo_core.datasets.images`) trains only a vision-language model: a launch with a text-only
model is refused before it is queued (:func:`check_model_reads_images`), and the memory estimate and the prompt
lengths count each image's tokens (:func:`image_tokens`). The sizes follow the architectures' processors: LLaVA's
``(image_size / patch_size)**2`` patches, Gemma 3's ``mm_tokens_per_image``, Qwen2-VL's ``max_pixels / (patch_size
* merge_size)**2`` at most; :data:`DEFAULT_IMAGE_TOKENS` where none is given.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

#: Tokens counted for one image when the model's files do not say (a 448 x 448 image in 28 x 28 patches).
DEFAULT_IMAGE_TOKENS = 256


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in ``path``; ``{}`` when it is missing, unreadable or not an object."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def is_vision_model(folder: str | Path) -> bool | None:
    """Whether the model folder holds a vision-language model (its ``config.json`` has a ``vision_config``); ``None``
    when there is no readable ``config.json`` (a hub id not on disk, a GGUF file)."""
    config = read_json_object(Path(folder) / "config.json")
    if not config:
        return None
    return isinstance(config.get("vision_config"), dict)


def image_tokens(folder: str | Path) -> int:
    """Prompt tokens one image becomes for the model in ``folder`` (see the module's docstring)."""
    folder = Path(folder)
    config = read_json_object(folder / "config.json")
    if isinstance(config.get("mm_tokens_per_image"), int):
        return int(config["mm_tokens_per_image"])
    processor = read_json_object(folder / "processor_config.json") or read_json_object(folder / "preprocessor_config.json")
    processor = processor.get("image_processor", processor) if isinstance(processor, dict) else {}
    if isinstance(processor.get("max_pixels"), int) and isinstance(processor.get("patch_size"), int):
        merge = int(processor.get("merge_size") or 2)
        return max(1, processor["max_pixels"] // (processor["patch_size"] * merge) ** 2)
    vision = config.get("vision_config") if isinstance(config.get("vision_config"), dict) else {}
    size, patch = vision.get("image_size"), vision.get("patch_size")
    if isinstance(size, int) and isinstance(patch, int) and patch > 0:
        return max(1, (size // patch) ** 2)
    return DEFAULT_IMAGE_TOKENS


def most_images(rows: Sequence[Mapping[str, Any]]) -> int:
    """The most images one row has (its ``images`` list), 0 for a dataset without images."""
    return max((len(row["images"]) for row in rows if isinstance(row.get("images"), list)), default=0)


def check_model_reads_images(model: str, folder: str | Path | None, rows: Sequence[Mapping[str, Any]]) -> str | None:
    """For a dataset with images: ``ValueError`` when the model is known to be text-only; a warning line when its
    files are not on disk to tell; ``None`` when it reads images or the dataset has none.

    Raises:
        ValueError: ``folder`` holds a model without a vision tower (the message says what to choose).
    """
    count = most_images(rows)
    if count == 0:
        return None
    vision = is_vision_model(folder) if folder is not None else None
    if vision is False:
        raise ValueError(f"the dataset has images (up to {count} a row) but {model} is a text-only model (its "
                         "config.json has no vision_config); choose a vision-language model (e.g. a Qwen2-VL, "
                         "Gemma 3 or LLaVA folder) or a dataset without images")
    if vision is None:
        return (f"the dataset has images; {model} could not be checked for a vision tower before it is loaded "
                "(the run fails at loading if it has none)")
    return None
