"""Try the model, the web half: build the request for a run and run :mod:`grpo_core.try_model.worker` in a
subprocess (:mod:`grpo_core.child_jobs.request`, the child-job protocol). Imports no torch.

The child samples the run's base model and its trained weights (the final adapter or a checkpoint, see
:mod:`grpo_core.runs.files`) on the same prompt, side by side, and scores both with the run's reward rules.

A vision-language run's prompt may come with pictures (:func:`checked_pictures`): each upload is decoded here under
the datasets' bounds (:class:`grpo_core.datasets.images.ImageBudget`: bytes, and pixels read from the header before
any is decoded), re-encoded as PNG and sent to the child in the request, which decodes it again under the same
bounds; a run whose model is known to be text-only refuses them before any process starts.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo_core.child_jobs.request import ChildJob, ask_worker
from grpo_core.datasets.images import ImageBudget, decode_image
from grpo_core.models.source import ModelSourceError, describe_model
from grpo_core.models.vision import is_vision_model
from grpo_core.rewards.registry import first_missing_column
from grpo_core.run_config import parse_run_config
from grpo_core.runs.files import resolve_weights, run_dir
from grpo_core.settings import Settings
from storage import RunInfo

TRY_TIMEOUT_S = 600.0
BASE = "base"
TRAINED = "trained"
#: Most pictures given with one prompt, and most bytes of their PNGs together (the request carries them).
MAX_TRY_IMAGES = 4
MAX_TRY_IMAGE_BYTES = 32 << 20


class TryModelError(RuntimeError):
    """Sampling failed; the message carries the reason (the end of the subprocess's output)."""


TRY_JOB = ChildJob(
    module="grpo_core.try_model.worker",
    error=TryModelError,
    failed="trying the model failed",
    timed_out="trying the model took longer than {timeout_s} s and was stopped",
    answered="trying the model failed: {error}",
    tail_lines=60,
)


class TryRequest(BaseModel):
    """What to sample: the model, the trained weights, the prompt and its dataset row, the rules, the settings.

    Lengths are in tokens. ``prompt`` is text or a list of chat messages (``{"role", "content"}``); ``row`` holds
    the dataset row's other columns (``answer``, ``tests``, ...) that the reward rules read.
    """

    model_config = ConfigDict(extra="forbid")

    model: str = Field(description="The run's model field: 'SmolLM2-135M-Instruct', a folder, a .gguf or a hub id.")
    weights: str | None = Field(None, description="Folder of the trained adapter or checkpoint; None: base only.")
    prompt: str | list[dict[str, Any]]
    row: dict[str, Any] = Field(default_factory=dict)
    rewards: list[dict[str, Any]] = Field(default_factory=list, description="The run's RewardSpec dumps.")
    num_samples: int = Field(2, ge=1, le=16)
    max_new_tokens: int = Field(64, ge=1, le=4096)
    temperature: float = Field(0.9, ge=0)
    top_p: float = Field(1.0, gt=0, le=1)
    seed: int = 0
    device: Literal["auto", "cpu", "cuda"] = "auto"
    model_cache_dir: str = Field(description="Where GGUF models are converted to safetensors (the data dir's).")
    tools: list[str] = Field(default_factory=list, description="The run's library tools (multi-turn rollouts).")
    tool_plugins: list[str] = Field(default_factory=list, description="The run's tool plugins, as checked at launch.")
    environment: str = Field("", description="The run's environment class (TRL's environment_factory), or ''.")
    max_tool_calling_iterations: int | None = Field(None, ge=1, le=100)
    images: list[str] = Field(default_factory=list, max_length=MAX_TRY_IMAGES,
                              description="The prompt's pictures: base64 PNGs, checked (checked_pictures).")


class PictureError(Exception):
    """A picture given with a prompt is refused; the message names it and says why. (Not a ``ValueError``, which
    :func:`~grpo_core.datasets.images.decode_image` reads as a picture that does not decode.)"""


def checked_pictures(uploads: Sequence[tuple[str, bytes]], budget: ImageBudget | None = None) -> list[str]:
    """The pictures given with a prompt, ``(name, encoded bytes)`` each, as the base64 PNGs a :class:`TryRequest`
    carries: at most :data:`MAX_TRY_IMAGES`, each of at most ``budget.max_file_bytes`` bytes and
    ``budget.max_pixels`` pixels (read from the header first: a bomb is refused undecoded), PNG, JPEG, GIF, WebP or
    BMP that decodes; their PNGs at most :data:`MAX_TRY_IMAGE_BYTES` together.

    Raises:
        PictureError: the message names the picture (its upload name) and the reason.
    """
    budget = budget or ImageBudget()
    if len(uploads) > MAX_TRY_IMAGES:
        raise PictureError(f"{len(uploads)} pictures given; at most {MAX_TRY_IMAGES} go with one prompt")
    pictures, total = [], 0
    for name, data in uploads:
        label = str(name)[:120]
        if len(data) > budget.max_file_bytes:
            raise PictureError(f"picture {label}: {len(data):,} bytes; the limit is {budget.max_file_bytes:,}")
        png, _ = decode_image(bytes(data), budget.max_pixels, lambda reason, at=label: PictureError(
            f"picture {at}: {reason}"))
        total += len(png)
        if total > MAX_TRY_IMAGE_BYTES:
            raise PictureError(f"the pictures are over {MAX_TRY_IMAGE_BYTES:,} bytes together as PNG; give "
                               "fewer or smaller ones")
        pictures.append(base64.b64encode(png).decode("ascii"))
    return pictures


def model_reads_images(model: str) -> bool | None:
    """Whether the run's ``model`` field names a vision-language model: ``False`` for a GGUF file (the shipped
    SmolLM2 too) or a folder whose ``config.json`` has no ``vision_config``; ``None`` when it cannot be told without
    loading it (a hub id; the worker then checks the loaded model)."""
    try:
        source = describe_model(model)
    except ModelSourceError:
        return None
    if source.kind == "gguf":
        return False
    if source.kind == "folder":
        return is_vision_model(source.location)
    return None


def build_request(
    settings: Settings,
    run: RunInfo,
    *,
    prompt: str | list[dict[str, Any]],
    row: Mapping[str, Any] | None = None,
    weights: str | None = "latest",
    num_samples: int = 2,
    max_new_tokens: int | None = None,
    temperature: float | None = None,
    seed: int = 0,
    images: Sequence[str] = (),
) -> TryRequest:
    """A :class:`TryRequest` for ``run``: its model, the chosen weights in its folder, its reward rules and its tools
    (a run with tools samples multi-turn rollouts; the caller checks the stored config against the login's boundary).

    Args:
        weights: ``latest``, ``adapter`` or ``checkpoint-<step>`` (see :func:`grpo_core.runs.files.resolve_weights`);
            ``None`` samples the base model only.
        max_new_tokens, temperature: default the run's ``max_completion_length`` and ``temperature``.
        images: the prompt's pictures as :func:`checked_pictures` gives them (a text prompt then becomes one user
            message: TRL trains a vision-language model on chat prompts only).

    Raises:
        ValueError: a reward rule reads a column ``row`` lacks (the message names both); pictures for a run whose
            model is text-only, or for a run with tools.
        grpo_core.runs.files.ArtifactError: the run has no such weights.
        grpo_core.run_config.ConfigError: the run's stored config does not validate.
    """
    config = parse_run_config(run.config, source=f"run {run.id} config")
    row = {k: v for k, v in dict(row or {}).items() if k != "prompt"}
    if (gap := first_missing_column([spec.rule for spec in config.rewards], row)) is not None:
        raise ValueError(
            f"reward rule {gap.rule} reads the column {gap.column!r}; give it in the row's columns "
            f"(load a dataset row, or add it to the JSON)"
        )
    if images:
        if model_reads_images(config.model) is False:
            raise ValueError(f"{config.model} is a text-only model (no vision tower): it cannot read a picture; "
                             "remove the picture, or try a run of a vision-language model")
        if config.tools or config.tool_plugins or config.environment:
            raise ValueError("pictures with tools are not tried here; remove the picture")
        if isinstance(prompt, str):
            prompt = [{"role": "user", "content": prompt}]
    folder = None if weights is None else resolve_weights(run_dir(settings, run), weights)
    return TryRequest(
        model=config.model,
        weights=None if folder is None else str(folder),
        prompt=prompt,
        row=row,
        rewards=[spec.model_dump(mode="json") for spec in config.rewards],
        num_samples=num_samples,
        max_new_tokens=max_new_tokens or config.max_completion_length,
        temperature=config.temperature if temperature is None else temperature,
        top_p=config.top_p,
        seed=seed,
        device=config.device,
        model_cache_dir=str(settings.model_cache_dir),
        tools=list(config.tools),
        tool_plugins=list(config.tool_plugins),
        environment=config.environment,
        max_tool_calling_iterations=config.max_tool_calling_iterations,
        images=list(images),
    )


def try_in_subprocess(
    request: TryRequest,
    *,
    timeout_s: float = TRY_TIMEOUT_S,
    env: Mapping[str, str] | None = None,
    workdir: Path | None = None,
) -> dict[str, Any]:
    """Run ``python -m grpo_core.try_model.worker`` on ``request`` in its own process group and return its result
    (:func:`grpo_core.child_jobs.request.ask_worker`).

    The web process stays free of torch; the child is killed (its whole group) after ``timeout_s`` seconds.

    Returns:
        The result mapping described in :func:`grpo_core.try_model.worker.try_model`.

    Raises:
        TryModelError: the child failed (the reason it gave, else the end of its output), timed out or wrote no
            result.
    """
    return ask_worker(TRY_JOB, request, timeout_s=timeout_s, env=env, workdir=workdir)
