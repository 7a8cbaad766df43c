"""The Inspect tab's token view: one completion of the shown step as a heatmap of its per-token log-probability, KL
to the reference or entropy (:mod:`app.views.token_heatmap`), beside its advantage. Built by :func:`create_token_view` from
the tab's run and step dropdowns.

A completion opens here from its dropdown, or by a click on its card in the step's groups: each card carries its
reference (``data-ref``, :func:`app.views.runs.groups_html`), and :data:`COMPLETION_CLICK_JS` (installed once per page)
writes a clicked card's reference to a hidden box whose change opens the panel on it."""

from __future__ import annotations

import gradio as gr

from app.context import AppContext
from app.views.inspect import completion_choices, completion_click_ref, completion_label, find_completion
from app.views.token_heatmap import TOKEN_MEASURES, token_heatmap_html

#: Installs, once per page, the click handler of the step's completion cards: a click on one (not on its fold toggle,
#: a link or a button, nor the end of a text selection) writes ``<ref>@<time>`` to the hidden ``#inspect-tokens-click``.
COMPLETION_CLICK_JS = """
() => {
  if (window.__grpoCompletionClick) return;
  window.__grpoCompletionClick = true;
  document.addEventListener('click', (event) => {
    const target = event.target;
    const card = target && target.closest && target.closest('#inspect-groups .grpo-completion[data-ref]');
    if (!card || target.closest('summary, a, button')) return;
    if (window.getSelection && String(window.getSelection()) !== '') return;
    const box = document.querySelector('#inspect-tokens-click textarea, #inspect-tokens-click input');
    if (!box) return;
    box.value = `${card.dataset.ref}@${Date.now()}`;
    box.dispatchEvent(new Event('input', {bubbles: true}));
  });
}
"""
#: Brings the opened token view into sight.
SCROLL_TO_TOKENS_JS = "() => document.querySelector('#inspect-tokens-panel')?.scrollIntoView({block: 'start'})"


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


def create_token_view(ctx: AppContext, run: gr.Dropdown, step: gr.Dropdown,
                      cards: gr.HTML | None = None) -> dict[str, gr.components.Component]:
    """Build the token view's panel inside the current ``gr.Blocks`` and wire it to the Inspect tab's ``run`` and
    ``step`` dropdowns (its completion list follows the shown step). ``cards``: the step's groups (``#inspect-groups``);
    the click handler is installed whenever they are drawn, however the step was reached."""
    with gr.Accordion("Tokens of one completion: log-probability, KL, entropy", open=False,
                      elem_id="inspect-tokens-panel") as panel:
        gr.Markdown("The values TRL computed in its loss at the step the completion was trained on. Red marks a low "
                    "log-probability, a high KL to the reference, a high entropy; hover a token for its value. "
                    "Click a completion above to open it here.")
        with gr.Row():
            completion = gr.Dropdown(label="completion", choices=[], scale=3, elem_id="inspect-tokens-completion")
            measure = gr.Radio(label="colour by", choices=list(TOKEN_MEASURES), value="logprob", scale=2,
                               elem_id="inspect-tokens-measure")
        heatmap = gr.HTML(elem_id="inspect-tokens")
    clicked = gr.Textbox(visible="hidden", elem_id="inspect-tokens-click")

    def on_step(run_id: int | None, step_value: int | None):
        """Inputs: run, step. Outputs: completion dropdown (the step's completions), heatmap."""
        groups = [] if run_id is None or step_value is None else ctx.store.groups_at(int(run_id), int(step_value),
                                                                                      turns=False)
        return gr.update(choices=completion_choices(groups), value=None), ""

    def on_pick(ref: str | None, measure_key: str | None) -> str:
        """Inputs: completion (``group id:index``), measure. Outputs: heatmap."""
        return token_view_html(ctx, ref, measure_key)

    def on_click(value: str | None, measure_key: str | None, run_id: int | None, step_value: int | None):
        """Inputs: the clicked card's reference (``ref@time``), measure, run, step. Outputs: the panel (opened), the
        completion dropdown (on the clicked completion), heatmap."""
        ref = completion_click_ref(value)
        if ref is None:
            return gr.skip(), gr.skip(), gr.skip()
        groups = [] if run_id is None or step_value is None else ctx.store.groups_at(int(run_id), int(step_value),
                                                                                      turns=False)
        choices = completion_choices(groups)
        dropdown = gr.update(choices=choices, value=ref) if ref in {v for _, v in choices} else gr.update(value=None)
        return gr.Accordion(open=True), dropdown, token_view_html(ctx, ref, measure_key)

    step.change(on_step, inputs=[run, step], outputs=[completion, heatmap])
    step.change(None, js=COMPLETION_CLICK_JS)  # the cards come with a step: listen for their clicks from then on
    if cards is not None:
        cards.change(None, js=COMPLETION_CLICK_JS)  # and with every drawing of the cards (installed once a page)
    completion.input(on_pick, inputs=[completion, measure], outputs=heatmap)
    measure.change(on_pick, inputs=[completion, measure], outputs=heatmap)
    clicked.change(on_click, inputs=[clicked, measure, run, step], outputs=[panel, completion, heatmap],
                   show_progress="hidden").then(None, js=SCROLL_TO_TOKENS_JS)
    return {"tokens_completion": completion, "tokens_measure": measure, "tokens": heatmap, "tokens_panel": panel,
            "tokens_click": clicked}
