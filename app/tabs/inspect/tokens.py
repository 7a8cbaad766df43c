"""The Inspect tab's token view: one completion of the shown step as a heatmap of its per-token log-probability, KL
to the reference or entropy (:mod:`app.views.token_heatmap`), beside its advantage. Built by :func:`create_token_view` from
the tab's run and step dropdowns."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from app.views.inspect import completion_choices, completion_label, find_completion
from app.views.token_heatmap import TOKEN_MEASURES, token_heatmap_html


def token_view_html(ctx: AppContext, ref: str | None, measure: str | None) -> str:
    """The heatmap of the completion ``ref`` (``"<group id>:<index>"``) for ``measure`` (default log-probability),
    or a note when none is chosen or it no longer exists."""
    if not ref:
        return "Pick a completion."
    found = find_completion(ctx.store, ref)
    if found is None:
        return f"Completion {ref!r} no longer exists."
    group, completion = found
    stats = ctx.store.token_stats(group.id, completion.index)
    return token_heatmap_html(stats, measure or "logprob", completion=completion,
                              label=completion_label(group, completion))


def create_token_view(ctx: AppContext, run: gr.Dropdown, step: gr.Dropdown) -> dict[str, gr.components.Component]:
    """Build the token view's panel inside the current ``gr.Blocks`` and wire it to the Inspect tab's ``run`` and
    ``step`` dropdowns (its completion list follows the shown step)."""
    with gr.Accordion("Tokens of one completion: log-probability, KL, entropy", open=False,
                      elem_id="inspect-tokens-panel"):
        gr.Markdown("The values TRL computed in its loss at the step the completion was trained on. Red marks a low "
                    "log-probability, a high KL to the reference, a high entropy; hover a token for its value.")
        with gr.Row():
            completion = gr.Dropdown(label="completion", choices=[], scale=3, elem_id="inspect-tokens-completion")
            measure = gr.Radio(label="colour by", choices=list(TOKEN_MEASURES), value="logprob", scale=2,
                               elem_id="inspect-tokens-measure")
        heatmap = gr.HTML(elem_id="inspect-tokens")

    def on_step(run_id: int | None, step_value: int | None):
        """Inputs: run, step. Outputs: completion dropdown (the step's completions), heatmap."""
        groups = [] if run_id is None or step_value is None else ctx.store.groups_at(int(run_id), int(step_value))
        return gr.update(choices=completion_choices(groups), value=None), ""

    def on_pick(ref: str | None, measure_key: str | None) -> str:
        """Inputs: completion (``group id:index``), measure. Outputs: heatmap."""
        return token_view_html(ctx, ref, measure_key)

    step.change(on_step, inputs=[run, step], outputs=[completion, heatmap])
    completion.change(on_pick, inputs=[completion, measure], outputs=heatmap)
    measure.change(on_pick, inputs=[completion, measure], outputs=heatmap)
    return {"tokens_completion": completion, "tokens_measure": measure, "tokens": heatmap}
