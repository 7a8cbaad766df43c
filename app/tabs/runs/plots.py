"""The Runs tab's plots: a ``gr.Plot`` that sends plotly figures compact (:func:`app.views.plot_payload.figure_json`:
typed arrays, no customdata repeating x), drawn in the page by Gradio's own plot component.

Not a ``gr.Plot`` subclass: Gradio writes a ``.pyi`` stub beside the module of every component class it sees."""

from __future__ import annotations

from typing import Any

import gradio as gr
import plotly.graph_objects as go
from gradio.components.plot import PlotData

from app.views.plot_payload import figure_json


def compact_plot(**kwargs: Any) -> gr.Plot:
    """A ``gr.Plot(**kwargs)`` whose plotly figures travel as :func:`figure_json` (a third of the bytes of plotly's
    own JSON for a long run's chart); any other value as ``gr.Plot`` sends it."""
    plot = gr.Plot(**kwargs)
    plain = plot.postprocess

    def postprocess(value: Any) -> PlotData | None:
        if isinstance(value, go.Figure):
            return PlotData(type="plotly", plot=figure_json(value))
        return plain(value)

    plot.postprocess = postprocess  # type: ignore[method-assign]
    return plot
