"""A closed accordion whose contents the page mounts only once it is first opened.

Gradio 6 mounts a closed ``gr.Accordion``'s children with the tab (hidden by CSS), so every panel under the Runs
tab's chart (the log's code view, the export's five file boxes, the notes) costs the page when a link opens the tab,
before its first chart is drawn. Inside :func:`lazy_accordion` they sit in a column that is not rendered
(``visible=False``: Gradio renders it, with the values its components were given meanwhile, when it becomes visible)
until the accordion is first expanded. Only for panels that a user opens: an accordion opened by an event
(``gr.update(open=True)``) does not fire ``expand``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import gradio as gr


@contextmanager
def lazy_accordion(label: str, *, elem_id: str) -> Iterator[gr.Accordion]:
    """``with lazy_accordion(label, elem_id=...) as accordion:`` lays out a closed accordion; what is built inside
    goes in a column shown (mounted) when the accordion is first expanded."""
    with gr.Accordion(label, open=False, elem_id=elem_id) as accordion:
        with gr.Column(visible=False, elem_id=f"{elem_id}-body") as body:
            yield accordion
    accordion.expand(lambda: gr.update(visible=True), outputs=body, show_progress="hidden", queue=False)
