"""The Launch tab's "Sweep" accordion: a grid of run config fields, one run per point, launched in one click (the
Runs tab shows them: :mod:`app.tabs.runs.sweeps`). The logic is :mod:`grpo_core.submit.sweeps`'."""

from __future__ import annotations

from collections.abc import Mapping

import gradio as gr

from app.catalog_sync import CatalogSync
from app.context import PLUGIN_CHECK_JOBS, AppContext, boundary_of, check_webhooks
from app.tabs.launch.form import form_to_config, read_form
from app.views.runs import md_text
from grpo_core.child_jobs.slots import SlotsBusy
from grpo_core.run_config import ConfigError
from grpo_core.submit.sweeps import (
    MAX_SWEEP_POINTS,
    check_grid,
    count_points,
    describe_grid,
    parse_grid_text,
    runs_word,
    submit_sweep,
)

DEFAULT_GRID = "learning_rate: 1e-5, 1e-4\nbeta: 0.0, 0.04"


def sweep_shape(text: str) -> tuple[str, str]:
    """``(shape markdown, button label)`` for the grid ``text``: its runs and fields, or why it is refused."""
    try:
        grid = check_grid(parse_grid_text(text))
    except ConfigError as exc:
        return f"❌ {exc}", "Launch sweep"
    return f"{describe_grid(grid)} (at most {MAX_SWEEP_POINTS})", f"Launch sweep ({runs_word(count_points(grid))})"


def create_sweep_panel(
    ctx: AppContext, form: Mapping[str, gr.components.Component], sync: CatalogSync | None = None
) -> dict[str, gr.components.Component]:
    """Build the Launch tab's "Sweep" accordion inside the current ``gr.Blocks``: a grid of fields over the run of
    the Launch ``form`` (field name -> component; :func:`app.tabs.launch.form.form_to_config` gives the base config
    every point shares), and "Launch sweep". ``sync`` hears of a launch. Returns ``grid``, ``shape``, ``button``,
    ``status``.
    """
    shape, label = sweep_shape(DEFAULT_GRID)
    with gr.Accordion("Sweep: one run per point of a grid of fields", open=False, elem_id="sweep-panel"):
        gr.Markdown(
            "One `field: value, value, ...` a line (or a YAML mapping `field: [values]`), any run config field; the "
            "form above gives every other field. **Launch sweep** queues one run per point of the grid (every "
            "combination), tagged `sweep:<id>`, or none if any point is invalid; they start as the dashboard's "
            "`max_concurrent_runs` allows. Follow them in the Runs tab's **Sweeps** view."
        )
        grid_box = gr.Textbox(label="grid", value=DEFAULT_GRID, lines=4, max_lines=16, elem_id="sweep-grid")
        grid_shape = gr.Markdown(shape, elem_id="sweep-shape")
        button = gr.Button(label, variant="primary", elem_id="sweep-button")
        status = gr.Markdown(elem_id="sweep-status")

    def on_grid(text: str):
        """Inputs: grid text. Outputs: its shape, the button's label."""
        message, button_label = sweep_shape(text)
        return message, gr.update(value=button_label)

    def on_launch_sweep(request: gr.Request, data: dict):
        """Inputs: grid text, the Launch form (the login comes first, from Gradio). Outputs: status."""
        try:
            base, grid = form_to_config(read_form(form, data)), parse_grid_text(data[grid_box])
            check_webhooks(ctx, request, [base.webhook_url, *grid.get("webhook_url", [])])
            launched = submit_sweep(ctx.store, base, grid, boundary=boundary_of(ctx, request),
                                    model_cache_dir=ctx.settings.model_cache_dir,
                                    owner=getattr(request, "username", None))
        except (ConfigError, ValueError, SlotsBusy) as exc:  # SlotsBusy: the login's plugin checks
            return f"❌ **Sweep not launched.** {exc}"
        ctx.launcher.tick()
        note = "".join(f"\n\n⚠️ {w}" for w in launched.warnings)
        first, last = launched.runs[0].id, launched.runs[-1].id
        return (f"✅ Sweep **{launched.sweep.id} {md_text(launched.sweep.name)}** queued: {runs_word(len(launched.runs))} "
                f"(#{first}–#{last}, tag `sweep:{launched.sweep.id}`). Follow it in the **Runs** tab's Sweeps "
                f"view.{note}")

    grid_box.change(on_grid, inputs=grid_box, outputs=[grid_shape, button], show_progress="hidden")
    launched = button.click(on_launch_sweep, inputs={grid_box, *form.values()}, outputs=status, **PLUGIN_CHECK_JOBS)
    if sync is not None:
        sync.after(launched)
    return {"grid": grid_box, "shape": grid_shape, "button": button, "status": status}
