"""The Runs tab's "Sweeps" view: a table of a sweep's runs with each varied field, status, final and best reward, and
a button that overlays them in Compare (sweeps are launched from the Launch tab: :mod:`app.tabs.launch.sweep`). The
logic is :mod:`grpo_core.submit.sweeps`'."""

from __future__ import annotations

import gradio as gr
import pandas as pd

from app.catalog_sync import run_choices
from app.context import AppContext, actor_of
from app.tabs.runs.compare import compare_runs
from app.tabs.runs.lazy import LazyPanel, lazy_accordion, opened
from grpo_core.submit.sweeps import REWARD_KEY, runs_word, sweep_table
from storage import StoreError


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


def create_sweeps_panel(
    ctx: AppContext, timer: gr.Timer, compare: dict[str, gr.components.Component], compare_panel: LazyPanel
) -> dict[str, gr.components.Component]:
    """Build the Runs tab's "Sweeps" view inside the current ``gr.Blocks``: a sweep picker, the table of its runs
    (refreshed on the tab's ``timer``) and "Overlay in Compare", which fills ``compare``'s run picker with the
    sweep's runs, draws them and opens ``compare_panel`` (a lazy accordion: its body shown in the same answer)."""
    choices = sweep_choices(ctx)
    # closed while there is no sweep, and then mounted only when opened (lazy_accordion)
    with lazy_accordion("Sweeps", elem_id="sweep-view", open=bool(choices)) as panel:
        with gr.Row():
            picker = gr.Dropdown(label="sweep", choices=choices, value=choices[0][1] if choices else None, scale=3,
                                 elem_id="sweep-select")
            overlay = gr.Button("Overlay in Compare", scale=1, elem_id="sweep-compare")
        table = gr.Dataframe(value=sweep_frame(ctx, choices[0][1] if choices else None), interactive=False,
                             label="the sweep's runs (varied fields, status, reward)", elem_id="sweep-table")
    seen = gr.State(choices)

    def on_refresh(sweep_id: int | None, last: list | None):
        """Inputs: chosen sweep, the choices this page has. Outputs: picker, table, choices, the panel's accordion
        and body."""
        options = sweep_choices(ctx)
        picker_update, panel_update = gr.skip(), (gr.skip(), gr.skip())
        if [tuple(o) for o in options] != [tuple(o) for o in (last or [])]:
            if sweep_id is None or sweep_id not in {value for _, value in options}:
                sweep_id = options[0][1] if options else None
                picker_update = gr.update(choices=options, value=sweep_id)
            else:
                picker_update = gr.update(choices=options)
            if options and not last:
                panel_update = opened()  # the first sweep: show it
        return picker_update, sweep_frame(ctx, sweep_id), options, *panel_update

    def on_pick(sweep_id: int | None):
        """Inputs: sweep. Outputs: its table."""
        return sweep_frame(ctx, sweep_id)

    def on_overlay(sweep_id: int | None, key: str, weight: float, axis: str, request: gr.Request = None):
        """Inputs: sweep, Compare's metric, smoothing, x axis. Outputs: Compare's runs, plot, table, the panel's
        accordion and body."""
        if sweep_id is None:
            return gr.skip(), gr.skip(), gr.skip(), gr.skip(), gr.skip()
        run_ids = [run.id for run in ctx.store.sweep_runs(int(sweep_id))]
        figure, differences = compare_runs(ctx, run_ids, key or REWARD_KEY, weight, axis, actor_of(ctx, request))
        return gr.update(choices=run_choices(ctx), value=run_ids), figure, differences, *opened()

    timer.tick(on_refresh, inputs=[picker, seen], outputs=[picker, table, seen, *panel], show_progress="hidden")
    picker.input(on_pick, inputs=picker, outputs=table)
    overlay.click(on_overlay, inputs=[picker, compare["metric"], compare["smoothing"], compare["x_axis"]],
                  outputs=[compare["runs"], compare["plot"], compare["config"], *compare_panel])
    return {"picker": picker, "table": table, "overlay": overlay, "panel": panel.accordion}
