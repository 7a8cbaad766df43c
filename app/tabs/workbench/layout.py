"""The workbench's components, by name (laid out only; :mod:`app.tabs.workbench.tab` connects them)."""

from __future__ import annotations

import gradio as gr

from app.catalog_sync import run_choices
from app.context import AppContext
from grpo_core.rescore.composition import SHARED, list_presets
from grpo_core.rescore.request import MAX_GROUPS


def layout_workbench(ctx: AppContext) -> dict[str, gr.components.Component]:
    """Lay the tab out; returns its components keyed by field name."""
    gr.Markdown("Re-score what a run's policy actually wrote with changed rules (weights, parameters, gates, "
                "plugins) and see the effect on the learning signal before launching. The run's own records are "
                "never changed.")
    c: dict[str, gr.components.Component] = {}
    with gr.Row():
        c["run"] = gr.Dropdown(label="run", choices=run_choices(ctx), scale=3, elem_id="workbench-run")
        # the shared presets only: a login's own are filled in for it when it opens the list (presets have owners)
        shared = [n for n in list_presets(ctx.settings.data_dir, "") if n.startswith(f"{SHARED}/")]
        c["preset"] = gr.Dropdown(label="preset", choices=shared, scale=2, elem_id="workbench-preset",
                                  allow_custom_value=True)  # the check is the handlers' (owner or shared)
        c["load_preset"] = gr.Button("Load preset", scale=0, elem_id="workbench-load-preset")
        c["delete_preset"] = gr.Button("Delete preset", scale=0, elem_id="workbench-delete-preset")
    c["recorded"] = gr.Markdown(elem_id="workbench-recorded")
    c["rules"] = gr.Code(label="reward rules (YAML: rule, weight, params, name, gate — as in a run config's "
                               "rewards)", language="yaml", lines=10, interactive=True, elem_id="workbench-rules")
    with gr.Row():
        c["first_step"] = gr.Textbox(label="first step (empty: first)", elem_id="workbench-first")
        c["last_step"] = gr.Textbox(label="last step (empty: last)", elem_id="workbench-last")
        c["sample"] = gr.Number(label=f"sample groups (0: all, at most {MAX_GROUPS})", value=0, precision=0,
                                minimum=0, elem_id="workbench-sample")
        c["scale_rewards"] = gr.Dropdown(label="scale_rewards", choices=["run's", "group", "batch", "none"],
                                         value="run's", elem_id="workbench-scale")
    with gr.Row():
        c["rescore"] = gr.Button("Re-score", variant="primary", elem_id="workbench-rescore")
        c["cancel"] = gr.Button("Cancel", variant="stop", elem_id="workbench-cancel")
    c["rescoring"] = gr.State(None)
    c["progress"] = gr.HTML(elem_id="workbench-progress")
    c["summary"] = gr.HTML(elem_id="workbench-summary")
    c["plot"] = gr.LinePlot(x="step", y="value", color="series", label="reward and frac_reward_zero_std per step",
                            elem_id="workbench-plot")
    c["steps"] = gr.HTML(elem_id="workbench-steps")
    c["probe"] = gr.HTML(elem_id="workbench-probe")
    with gr.Row():
        c["group"] = gr.Dropdown(label="changed group", choices=[], scale=3, elem_id="workbench-group")
        c["open_inspect"] = gr.Button("Open this step in Inspect", scale=1, elem_id="workbench-open-inspect")
    c["changed"] = gr.HTML(elem_id="workbench-changed")
    with gr.Row():
        c["launch_name"] = gr.Textbox(label="new run's name (empty: <run>-rescored)", scale=2,
                                      elem_id="workbench-launch-name")
        c["launch"] = gr.Button("Launch with these rules", scale=1, elem_id="workbench-launch")
        c["preset_name"] = gr.Textbox(label="preset name", scale=2, elem_id="workbench-preset-name")
        c["preset_shared"] = gr.Checkbox(label="publish as shared (admins)", value=False, scale=1,
                                         elem_id="workbench-preset-shared")
        c["save_preset"] = gr.Button("Save as preset", scale=1, elem_id="workbench-save-preset")
    c["launched"] = gr.Markdown(elem_id="workbench-launched")
    return c
