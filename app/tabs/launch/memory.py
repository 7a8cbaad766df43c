"""The Launch tab's "Will it fit?" panel: the estimated peak memory of the form's run config beside the chosen
device's free memory (:mod:`grpo_core.models.memory_estimate`; arithmetic only, no model is loaded)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import gradio as gr

from app.context import AppContext, boundary_of
from app.tabs.launch.form import form_to_config, read_form
from grpo_core.datasets.formats import read_normalized
from grpo_core.models.memory_estimate import (
    ESTIMATE_ERROR,
    MemoryEstimateError,
    estimate_peak_memory,
    fit_verdict,
    format_bytes,
    free_memory,
    longest_prompt_chars,
    model_shape,
    prompt_tokens_from_chars,
    resolve_device,
)
from grpo_core.models.prompt_lengths import model_text_folder
from grpo_core.models.source import ModelSourceError
from grpo_core.models.vision import DEFAULT_IMAGE_TOKENS, image_tokens, most_images
from grpo_core.run_config import ConfigError, RunConfig
from storage import StoreError


def fit_markdown(ctx: AppContext, config: RunConfig) -> str:
    """The panel's text for ``config``: the verdict, then each part of the estimate. Never raises: an estimate that
    cannot be made says why."""
    try:
        shape = model_shape(config.model)
    except (MemoryEstimateError, ModelSourceError) as exc:
        return f"**No estimate:** {exc}"
    rows: list[dict] = []
    if config.dataset_id is not None:
        try:
            rows = read_normalized(Path(ctx.store.get_dataset(config.dataset_id).path))
        except (StoreError, OSError, ValueError):
            rows = []
    prompt_tokens = prompt_tokens_from_chars(longest_prompt_chars(rows))
    images = most_images(rows)
    pictures = ""
    if images:  # each image becomes prompt tokens; the vision tower's weights are in the parameter count
        folder = model_text_folder(config.model, ctx.settings.model_cache_dir)
        per_image = image_tokens(folder) if folder is not None else DEFAULT_IMAGE_TOKENS
        prompt_tokens += images * per_image
        pictures = f", up to {images} images a prompt at ~{per_image} tokens each, vision tower included"
    device = resolve_device(config.device)
    estimate = estimate_peak_memory(shape, config.model_dump(mode="json"), device=device, prompt_tokens=prompt_tokens)
    lines = [f"**{fit_verdict(estimate, free_memory(device))}** ({device}, {shape.num_params:,} parameters, "
             f"prompts up to ~{prompt_tokens} tokens{pictures}, per process)", ""]
    lines += [f"- {label}: {format_bytes(value)}" for label, value in estimate.parts() if value]
    lines += ["", f"The estimate {ESTIMATE_ERROR}."]
    return "\n".join(lines)


def create_memory_panel(
    ctx: AppContext, form: Mapping[str, gr.components.Component]
) -> dict[str, gr.components.Component]:
    """Build the Launch tab's "Will it fit?" accordion inside the current ``gr.Blocks``: an "Estimate memory" button
    that estimates the run of the Launch ``form`` (field name -> component). Returns ``button`` and ``result``."""
    with gr.Accordion("Will it fit? Estimated peak memory", open=False):
        button = gr.Button("Estimate memory", elem_id="memory-estimate-button")
        result = gr.Markdown(elem_id="memory-estimate")

    def on_estimate(request: gr.Request, data: dict):
        """Inputs: the form (the login first, from Gradio). Outputs: the memory estimate."""
        try:
            config = boundary_of(ctx, request).check_config(form_to_config(read_form(form, data)))
        except (ConfigError, ValueError) as exc:
            return f"**No estimate:** {exc}"
        return fit_markdown(ctx, config)

    button.click(on_estimate, inputs=set(form.values()), outputs=result)
    return {"button": button, "result": result}
