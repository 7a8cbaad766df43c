"""Sweeps in the UI: the Launch tab's "Sweep" accordion (a grid of run config fields, one run per point, launched in
one click) and the Runs tab's sweep view (a table of a sweep's runs with each varied field, status, final and best
reward, and a button that overlays them in Compare). The logic is :mod:`grpo_core.submit.sweeps`'."""

from __future__ import annotations

from collections.abc import Mapping

import gradio as gr
import pandas as pd

from app.catalog_sync import CatalogSync, run_choices
from app.context import AppContext, boundary_of, check_webhooks
from app.tabs.launch.form import form_to_config, read_form
from app.tabs.runs.compare import compare_runs
from grpo_core.runs.config import ConfigError
from grpo_core.submit.sweeps import (
    MAX_SWEEP_POINTS,
    REWARD_KEY,
    check_grid,
    count_points,
    describe_grid,
    parse_grid_text,
    runs_word,
    submit_sweep,
    sweep_table,
)
from storage import StoreError

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
        except (ConfigError, ValueError) as exc:
            return f"❌ **Sweep not launched.** {exc}"
        ctx.launcher.tick()
        note = "".join(f"\n\n⚠️ {w}" for w in launched.warnings)
        first, last = launched.runs[0].id, launched.runs[-1].id
        return (f"✅ Sweep **{launched.sweep.id} {launched.sweep.name}** queued: {runs_word(len(launched.runs))} "
                f"(#{first}–#{last}, tag `sweep:{launched.sweep.id}`). Follow it in the **Runs** tab's Sweeps "
                f"view.{note}")

    grid_box.change(on_grid, inputs=grid_box, outputs=[grid_shape, button], show_progress="hidden")
    launched = button.click(on_launch_sweep, inputs={grid_box, *form.values()}, outputs=status)
    if sync is not None:
        sync.after(launched)
    return {"grid": grid_box, "shape": grid_shape, "button": button, "status": status}


def sweep_choices(ctx: AppContext) -> list[tuple[str, int]]:
    """``(label, sweep id)`` of every sweep with a run left, newest first: ``sweep 3: name (4 runs)``."""
    return [(f"sweep {s.id}: {s.name} ({runs_word(len(s.run_ids))})", s.id) for s in ctx.store.list_sweeps() if s.run_ids]


def sweep_frame(ctx: AppContext, sweep_id: int | None) -> pd.DataFrame:
    """The table of a sweep's runs (:func:`grpo_core.submit.sweeps.sweep_table`); empty for none or an unknown sweep."""
    if sweep_id is None:
        return pd.DataFrame(columns=["run", "status", "step", "final reward", "best reward"])
    try:
        sweep = ctx.store.get_sweep(int(sweep_id))
    except StoreError:
        return pd.DataFrame(columns=["run", "status", "step", "final reward", "best reward"])
    runs = ctx.store.sweep_runs(sweep.id)
    headers, rows = sweep_table(sweep, runs, ctx.store.final_and_best([r.id for r in runs], REWARD_KEY))
    return pd.DataFrame(rows, columns=headers)


def create_sweep_view(
    ctx: AppContext, timer: gr.Timer, compare: dict[str, gr.components.Component], compare_panel: gr.Accordion
) -> dict[str, gr.components.Component]:
    """Build the Runs tab's "Sweeps" view inside the current ``gr.Blocks``: a sweep picker, the table of its runs
    (refreshed on the tab's ``timer``) and "Overlay in Compare", which fills ``compare``'s run picker with the
    sweep's runs, draws them and opens ``compare_panel``."""
    choices = sweep_choices(ctx)
    with gr.Accordion("Sweeps", open=bool(choices), elem_id="sweep-view") as panel:
        with gr.Row():
            picker = gr.Dropdown(label="sweep", choices=choices, value=choices[0][1] if choices else None, scale=3,
                                 elem_id="sweep-select")
            overlay = gr.Button("Overlay in Compare", scale=1, elem_id="sweep-compare")
        table = gr.Dataframe(value=sweep_frame(ctx, choices[0][1] if choices else None), interactive=False,
                             label="the sweep's runs (varied fields, status, reward)", elem_id="sweep-table")
    seen = gr.State(choices)

    def on_refresh(sweep_id: int | None, last: list | None):
        """Inputs: chosen sweep, the choices this page has. Outputs: picker, table, choices, panel."""
        options = sweep_choices(ctx)
        picker_update, panel_update = gr.skip(), gr.skip()
        if [tuple(o) for o in options] != [tuple(o) for o in (last or [])]:
            if sweep_id is None or sweep_id not in {value for _, value in options}:
                sweep_id = options[0][1] if options else None
                picker_update = gr.update(choices=options, value=sweep_id)
            else:
                picker_update = gr.update(choices=options)
            if options and not last:
                panel_update = gr.update(open=True)  # the first sweep: show it
        return picker_update, sweep_frame(ctx, sweep_id), options, panel_update

    def on_pick(sweep_id: int | None):
        """Inputs: sweep. Outputs: its table."""
        return sweep_frame(ctx, sweep_id)

    def on_overlay(sweep_id: int | None, key: str, weight: float, axis: str):
        """Inputs: sweep, Compare's metric, smoothing, x axis. Outputs: Compare's runs, plot, table, panel."""
        if sweep_id is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip()
        run_ids = [run.id for run in ctx.store.sweep_runs(int(sweep_id))]
        figure, differences = compare_runs(ctx, run_ids, key or REWARD_KEY, weight, axis)
        return gr.update(choices=run_choices(ctx), value=run_ids), figure, differences, gr.update(open=True)

    timer.tick(on_refresh, inputs=[picker, seen], outputs=[picker, table, seen, panel], show_progress="hidden")
    picker.input(on_pick, inputs=picker, outputs=table)
    overlay.click(on_overlay, inputs=[picker, compare["metric"], compare["smoothing"], compare["x_axis"]],
                  outputs=[compare["runs"], compare["plot"], compare["config"], compare_panel])
    return {"picker": picker, "table": table, "overlay": overlay, "panel": panel}
