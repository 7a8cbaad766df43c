"""The Launch tab's "Will it fit?" panel: the estimated peak memory of the form's run config beside the chosen
device's free memory (:mod:`grpo_core.models.memory_estimate`; arithmetic only, no model is loaded), sized with the
longest prompt as the run's model gets it (:func:`grpo_core.models.prompt_tokens.longest_prompt_tokens`: the run's
chat template, its tools' schemas, earlier turns' tool calls), and saying how that length was had."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import gradio as gr

from app.context import PLUGIN_CHECK_JOBS, AppContext, boundary_of
from app.tabs.launch.form import form_to_config, read_form
from grpo_core.child_jobs.slots import SlotsBusy
from grpo_core.datasets.formats import read_normalized
from grpo_core.models.memory_estimate import (
    CHAT_TEMPLATE_TOKENS,
    ESTIMATE_ERROR,
    MemoryEstimateError,
    estimate_peak_memory,
    fit_verdict,
    format_bytes,
    free_memory,
    model_shape,
    resolve_device,
)
from grpo_core.models.prompt_lengths import model_text_folder
from grpo_core.models.prompt_tokens import longest_prompt_tokens, plain_phrase, run_tool_schemas
from grpo_core.models.source import ModelSourceError
from grpo_core.models.vision import DEFAULT_IMAGE_TOKENS, image_tokens, most_images
from grpo_core.run_config import ConfigError, RunConfig
from grpo_core.tools.job import check_tool_plugins
from storage import StoreError


def _tool_schemas(config: RunConfig, login: str | None = None) -> tuple[list[dict] | None, str]:
    """The run's tool schemas (library tools; tool plugins' and the environment's from the child that imports them,
    holding one of ``login``'s plugin check slots), and a note when some could not be had (then they are not counted).

    Raises:
        grpo_core.child_jobs.slots.SlotsBusy: ``login`` holds its share of the plugin check slots (or all are taken);
            no child was started.
    """
    dump = config.model_dump(mode="json")
    try:
        plugins = check_tool_plugins(config.tool_plugins, config.environment, login=login)
    except ValueError as exc:
        return run_tool_schemas(dump), f"; the tool plugins' schemas are not counted ({plain_phrase(str(exc), 300)})"
    return run_tool_schemas(dump, plugins), ""


def fit_markdown(ctx: AppContext, config: RunConfig, login: str | None = None) -> str:
    """The panel's text for ``config``: the verdict, then each part of the estimate. Never raises: an estimate that
    cannot be made says why (``login`` over its share of the plugin check slots its tool plugins need too)."""
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
    try:
        tools, tool_note = _tool_schemas(config, login)
    except SlotsBusy as exc:
        return f"**No estimate:** {exc}"
    longest = longest_prompt_tokens(rows, config.model_dump(mode="json"), ctx.settings.model_cache_dir, tools=tools)
    prompt_tokens = longest.tokens if rows else CHAT_TEMPLATE_TOKENS
    images = most_images(rows)
    pictures = ""
    if images:  # images are prompt tokens (counted in the prompt); the vision tower's weights are in the parameters
        folder = model_text_folder(config.model, ctx.settings.model_cache_dir)
        per_image = image_tokens(folder) if folder is not None and longest.counted else DEFAULT_IMAGE_TOKENS
        pictures = f", up to {images} images a prompt at ~{per_image} tokens each, vision tower included"
    device = resolve_device(config.device)
    estimate = estimate_peak_memory(shape, config.model_dump(mode="json"), device=device, prompt_tokens=prompt_tokens)
    how = longest.how if rows else "no dataset chosen: a short prompt assumed"
    lines = [f"**{fit_verdict(estimate, free_memory(device))}** ({device}, {shape.num_params:,} parameters, "
             f"per process)", "",
             f"Sized with the longest prompt: **{prompt_tokens:,} tokens** ({how}{tool_note}{pictures}) plus "
             f"{config.max_completion_length} completion tokens a sequence.", ""]
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
        return fit_markdown(ctx, config, getattr(request, "username", None))

    button.click(on_estimate, inputs=set(form.values()), outputs=result, **PLUGIN_CHECK_JOBS)
    return {"button": button, "result": result}
