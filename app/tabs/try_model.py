"""The "Try the model" tab: sample the base model and a run's trained weights (the final adapter or a checkpoint)
on the same prompt, side by side, each completion scored by the run's reward rules.

Sampling happens in a subprocess (``python -m grpo_core.try_model.worker``, started by :mod:`grpo_core.try_model.job`);
this module, like the whole web process, never imports torch. A prompt comes from a row of the run's dataset (its other columns, e.g. ``answer``, feed the rules)
and can be edited, or typed from scratch. A vision-language run's prompt takes pictures: the row's own (its
``images`` column, read from the run's dataset for its owner or an admin) and pictures uploaded beside it, each
checked by decoding under bounds before the child is started (:func:`prompt_pictures`).
"""

from __future__ import annotations

import functools
import html
import json
from pathlib import Path
from typing import Any

import gradio as gr

from app.catalog_sync import CatalogSync, run_choices
from app.context import MODEL_JOBS, AppContext, actor_of, boundary_of, fair_share
from app.views.images import images_html
from app.views.trajectories import turns_html
from grpo_core.access.ownership import Actor, NotOwnerError
from grpo_core.bounded_parse import ParseError, load_json
from grpo_core.child_jobs.slots import MODEL_SLOTS
from grpo_core.datasets.images import ImageBudget, image_folder, image_in_folder, row_image_names
from grpo_core.datasets.prompt_dataset import DatasetError
from grpo_core.datasets.rows import dataset_file, editable_prompt_text, load_rows, prompt_from_text
from grpo_core.run_config import ConfigError
from grpo_core.runs.files import ArtifactError, run_dir, weights_choices
from grpo_core.runs.images import check_may_read_images
from grpo_core.try_model.job import (
    BASE,
    MAX_TRY_IMAGES,
    TRAINED,
    PictureError,
    TryModelError,
    build_request,
    checked_pictures,
    try_in_subprocess,
)
from storage import RunInfo, StoreError

TRY_CSS = """
.try-side h4 { margin: 4px 0; }
.try-completion { border: 1px solid #e5e7eb; border-radius: 6px; padding: 8px; margin-bottom: 8px; }
.try-completion pre { white-space: pre-wrap; word-break: break-word; font-size: 12px; margin: 6px 0;
  max-height: 240px; overflow: auto; }
.try-completion table { font-size: 12px; border-collapse: collapse; width: 100%; }
.try-completion td { padding: 1px 4px; border-top: 1px solid #e5e7eb; }
.try-badge { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; background: #fde68a; }
"""


@functools.lru_cache(maxsize=4)
def _rows_of(store, dataset_id: int | None, dataset_path: str | None, _mtime_ns: int) -> list[dict[str, Any]]:
    """The rows a run's dataset fields name (cached per dataset and file modification time)."""
    return load_rows(store, {"dataset_id": dataset_id, "dataset_path": dataset_path})


def run_rows(ctx: AppContext, run: RunInfo) -> list[dict[str, Any]]:
    """The prompt rows of a run's dataset (empty when the file is gone).

    Raises:
        grpo_core.datasets.prompt_dataset.DatasetError: the file is no longer a valid dataset.
    """
    source = dataset_file(ctx.store, run.config)
    if source is None:
        return []
    config = run.config
    return _rows_of(ctx.store, config.get("dataset_id"), config.get("dataset_path"), source.stat().st_mtime_ns)


def weights_options(folder) -> list[tuple[str, str]]:
    """The trained-weights dropdown's ``(label, value)`` pairs for a run folder, each saved weights once: the newest
    (:data:`grpo_core.runs.files.LATEST`, followed as the run saves more) labelled "<what it is> (latest)", then the
    older checkpoints, newest first (:func:`grpo_core.runs.files.weights_choices` lists the newest twice)."""
    choices = weights_choices(folder)
    if not choices:
        return []
    latest, *others = choices
    return [(f"{others[0].label} (latest)", latest.value)] + [(o.label, o.value) for o in others[1:]]


def side_html(side: dict[str, Any] | None, title: str) -> str:
    """One side of the comparison as HTML: mean total, then each completion with its text (a multi-turn rollout's
    turns as blocks, as Inspect shows them), tokens, truncation, per-rule rewards and weighted total (``side`` as :func:`grpo_core.try_model.worker.try_model` returns it)."""
    if side is None:
        return f'<div class="try-side"><h4>{html.escape(title)}</h4><i>not sampled</i></div>'
    mean = side.get("mean_total")
    parts = [
        f"<style>{TRY_CSS}</style>",
        f'<div class="try-side" data-mean-total="{"" if mean is None else mean}">',
        f"<h4>{html.escape(side.get('label', title))}</h4>",
        f"<div>mean total reward: <b>{'–' if mean is None else f'{mean:.3f}'}</b></div>",
    ]
    for number, completion in enumerate(side.get("completions", []), start=1):
        total = completion.get("total")
        badge = ' <span class="try-badge">truncated</span>' if completion.get("truncated") else ""
        rules = "".join(
            f"<tr><td>{html.escape(name)}</td><td style='text-align:right'>"
            f"{'–' if value is None else f'{value:.3f}'}</td></tr>"
            for name, value in completion.get("rewards", {}).items()
        )
        parts.append(
            f'<div class="try-completion" data-total="{"" if total is None else total}">'
            f"<div>#{number} · total <b>{'–' if total is None else f'{total:.3f}'}</b> · "
            f"{completion.get('num_tokens', 0)} tokens{badge}</div>"
            + (turns_html(completion.get("turns")) or f"<pre>{html.escape(completion.get('text', ''))}</pre>")
            + f"<table>{rules}</table></div>"
        )
    parts.append("</div>")
    return "".join(parts)


def prompt_pictures(ctx: AppContext, run: RunInfo, row: dict[str, Any], files: list[Any] | None,
                    actor: Actor) -> list[str]:
    """The pictures to send with the prompt, as :func:`grpo_core.try_model.job.checked_pictures` gives them: the
    row's stored pictures (its ``images`` column: names of the run's dataset's images, read only for the run's owner
    or an admin; any other value is never a path) then the uploaded ``files`` (Gradio's upload paths), at most
    :data:`~grpo_core.try_model.job.MAX_TRY_IMAGES` together, each checked by decoding.

    Raises:
        PictureError: a picture is refused, too many are given, or the row names a picture its dataset lacks.
        NotOwnerError: the row names pictures and ``actor`` may not read the run's images.
    """
    uploads: list[tuple[str, bytes]] = []
    names = row_image_names(row)
    if names:
        check_may_read_images(actor, run)
        source = dataset_file(ctx.store, run.config)
        if source is None:
            raise PictureError("the row names pictures but the run's dataset file is gone; remove its 'images'")
        for name in names[:MAX_TRY_IMAGES + 1]:
            try:
                uploads.append((f"dataset picture {name[:12]}", image_in_folder(image_folder(source), name).read_bytes()))
            except OSError:
                raise PictureError(f"the row's picture {name[:16]}... is not in the run's dataset") from None
    limit = ImageBudget().max_file_bytes
    for upload in list(files or [])[:MAX_TRY_IMAGES + 1]:
        path = Path(getattr(upload, "name", upload))
        if path.stat().st_size > limit:
            raise PictureError(f"picture {path.name}: over {limit:,} bytes")
        uploads.append((path.name, path.read_bytes()))
    return checked_pictures(uploads)


def create_try_model_tab(ctx: AppContext, sync: CatalogSync | None = None) -> dict[str, gr.components.Component]:
    """Build the Try the model tab inside the current ``gr.Blocks``; ``sync`` keeps its run list current, "↻ weights"
    re-reads the chosen run's checkpoints (a live run saves new ones)."""
    gr.Markdown(
        "Sample the **base model** and the run's **trained weights** on the same prompt with the same seed, "
        "scored by the run's reward rules. Runs in a separate process (loading the model takes a few seconds)."
    )
    with gr.Row():
        run = gr.Dropdown(label="run", choices=run_choices(ctx), scale=3, elem_id="try-run")
        weights = gr.Dropdown(label="trained weights", choices=[], scale=2, elem_id="try-weights")
        reload = gr.Button("↻ weights", scale=0, elem_id="try-refresh")
    with gr.Row():
        row_index = gr.Number(label="dataset row", value=0, precision=0, minimum=0, scale=1, elem_id="try-row")
        load_row = gr.Button("Load row", scale=0, elem_id="try-load-row")
        chat = gr.Checkbox(label="chat prompt (plain text becomes one user message)", value=True, scale=2,
                           elem_id="try-chat")
    prompt = gr.Textbox(label="prompt (text, or a JSON list of chat messages)", lines=4, elem_id="try-prompt")
    pictures = gr.File(label=f"pictures for a vision-language model (at most {MAX_TRY_IMAGES}, with the row's own)",
                       file_count="multiple", file_types=["image"], type="filepath", elem_id="try-pictures")
    columns = gr.Code(label="the row's other columns, as JSON (read by the reward rules)", language="json",
                      value="{}", lines=3, interactive=True, elem_id="try-columns")
    with gr.Row():
        num_samples = gr.Slider(label="samples per side", minimum=1, maximum=8, value=2, step=1,
                                elem_id="try-samples")
        max_tokens = gr.Number(label="max new tokens (the run's max_completion_length)", value=64, precision=0,
                               minimum=1, elem_id="try-max-tokens")
        temperature = gr.Number(label="temperature (the run's; 0 = greedy)", value=0.9, minimum=0,
                                elem_id="try-temperature")
        seed = gr.Number(label="seed", value=0, precision=0, elem_id="try-seed")
    button = gr.Button("Sample both", variant="primary", elem_id="try-button")
    status = gr.Markdown(elem_id="try-status")
    with gr.Row():
        base_box = gr.HTML(elem_id="try-base")
        trained_box = gr.HTML(elem_id="try-trained")

    def _run(run_id: int | None) -> RunInfo | None:
        if run_id is None:
            return None
        try:
            return ctx.store.get_run(int(run_id))
        except StoreError:
            return None

    def on_load_row(run_id: int | None, index: float | None, request: gr.Request = None):
        """Inputs: run, row number. Outputs: prompt, columns JSON, chat checkbox, status."""
        info = _run(run_id)
        if info is None:
            return gr.skip(), gr.skip(), gr.skip(), "Choose a run."
        try:
            boundary_of(ctx, request).check_stored(info.config or {}, "read the dataset of")
            rows = run_rows(ctx, info)
        except (DatasetError, ConfigError) as exc:
            return gr.skip(), gr.skip(), gr.skip(), f"Cannot read the run's dataset: {exc}"
        if not rows:
            return gr.skip(), gr.skip(), gr.skip(), "The run's dataset file is gone; type a prompt."
        number = min(max(int(index or 0), 0), len(rows) - 1)
        row = rows[number]
        others = {k: v for k, v in row.items() if k != "prompt"}
        return (
            editable_prompt_text(row["prompt"]),
            json.dumps(others, ensure_ascii=False, indent=1),
            isinstance(row["prompt"], list),
            f"Row {number} of {len(rows)} loaded.",
        )

    def on_run(run_id: int | None, index: float | None, request: gr.Request = None):
        """Inputs: run, row number. Outputs: weights dropdown, max tokens, temperature (the run's), prompt,
        columns, chat, status."""
        info = _run(run_id)
        if info is None:
            return gr.update(choices=[], value=None), gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip(), ""
        options = weights_options(run_dir(ctx.settings, info))
        dropdown = gr.update(choices=options, value=options[0][1] if options else None)
        tokens = info.config.get("max_completion_length", gr.skip())
        temp = info.config.get("temperature", gr.skip())
        return (dropdown, tokens, temp, *on_load_row(run_id, index, request))

    def on_reload(run_id: int | None, current: str | None):
        """Inputs: run, weights. Outputs: weights choices (the current pick kept when it still exists)."""
        info = _run(run_id)
        options = [] if info is None else weights_options(run_dir(ctx.settings, info))
        values = [v for _, v in options]
        value = current if current in values else (values[0] if values else None)
        return gr.update(choices=options, value=value)

    def on_sample(run_id, weights_value, prompt_text, columns_text, is_chat, samples, tokens, temp, seed_value,
                  files=None, login: gr.Request = None):
        """Inputs: run, weights, prompt, columns JSON, chat, samples, max tokens, temperature, seed, pictures.
        Outputs: status, base HTML, trained HTML."""
        info = _run(run_id)
        if info is None:
            return "Choose a run.", "", ""
        try:
            row = load_json(columns_text or "{}", source="The columns")
        except ParseError as exc:
            return f"{exc}.", "", ""
        if not isinstance(row, dict):
            return "The columns must be a JSON object, like {\"answer\": 42}.", "", ""
        try:
            boundary_of(ctx, login).check_stored(info.config or {}, "sample from")
            images = prompt_pictures(ctx, info, row, files, actor_of(ctx, login))
            request = build_request(
                ctx.settings,
                info,
                prompt=prompt_from_text(prompt_text or "", bool(is_chat)),
                row=row,
                weights=weights_value or "latest",
                num_samples=int(samples or 1),
                max_new_tokens=int(tokens or 0) or None,
                temperature=None if temp is None else max(0.0, float(temp)),
                seed=int(seed_value or 0),
                images=images,
            )
        except (ValueError, ArtifactError, ConfigError, PictureError, NotOwnerError, OSError) as exc:
            return f"Cannot sample: {exc}", "", ""
        try:
            result = try_in_subprocess(request, env=ctx.launcher.env)
        except TryModelError as exc:
            return f"Sampling failed:\n\n```\n{exc}\n```", "", ""
        sides = result.get("sides", {})
        base, trained = sides.get(BASE), sides.get(TRAINED)

        def mean(side):
            value = (side or {}).get("mean_total")
            return "–" if value is None else f"{value:.3f}"

        text = (
            f"Sampled on {result.get('device')} in {result.get('seconds', 0):.1f} s · mean total reward: base "
            f"**{mean(base)}**, trained **{mean(trained)}** · rules: {', '.join(result.get('names', [])) or 'none'}"
        )
        shown = images_html(["data:image/png;base64," + picture for picture in images], "prompt")
        return text, shown + side_html(base, "base model"), side_html(trained, "trained weights")

    run.change(on_run, inputs=[run, row_index],
               outputs=[weights, max_tokens, temperature, prompt, columns, chat, status])
    if sync is not None:
        sync.follow_runs(run)
    reload.click(on_reload, inputs=[run, weights], outputs=weights)
    load_row.click(on_load_row, inputs=[run, row_index], outputs=[prompt, columns, chat, status])
    button.click(
        fair_share(MODEL_SLOTS, on_sample),
        inputs=[run, weights, prompt, columns, chat, num_samples, max_tokens, temperature, seed, pictures],
        outputs=[status, base_box, trained_box],
        **MODEL_JOBS,
    )
    return {"run": run, "weights": weights, "row": row_index, "prompt": prompt, "columns": columns, "pictures": pictures,
            "button": button, "status": status, "base": base_box, "trained": trained_box}
