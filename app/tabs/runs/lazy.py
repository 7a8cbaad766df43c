"""A closed accordion whose contents the page mounts only once it is first opened.

Gradio 6 mounts a closed ``gr.Accordion``'s children with the tab (hidden by CSS), so every panel under the Runs
tab's chart (the log's code view, the export's five file boxes, the notes) costs the page when a link opens the tab,
before its first chart is drawn. Inside :func:`lazy_accordion` they sit in a column that is not rendered
(``visible=False``: Gradio renders it, with the values its components were given meanwhile, when it becomes visible)
until the accordion is first expanded. An accordion an event opens (``gr.update(open=True)``, which fires no
``expand``) must show its body in the same answer (:func:`opened`).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NamedTuple

import gradio as gr


class LazyPanel(NamedTuple):
    """A lazy accordion and the column holding its contents (not rendered until shown)."""

    accordion: gr.Accordion
    body: gr.Column


@contextmanager
def lazy_accordion(label: str, *, elem_id: str, open: bool = False) -> Iterator[LazyPanel]:  # noqa: A002 - Gradio's word
    """``with lazy_accordion(label, elem_id=...) as panel:`` lays out a closed accordion (``elem_id``); what is built
    inside goes in a column (``<elem_id>-body``) shown, so mounted, when the accordion is first expanded. ``open``:
    the accordion starts open, its contents shown (as a plain accordion)."""
    with gr.Accordion(label, open=open, elem_id=elem_id) as accordion:
        with gr.Column(visible=open, elem_id=f"{elem_id}-body") as body:
            yield LazyPanel(accordion, body)
    accordion.expand(lambda: gr.update(visible=True), outputs=body, show_progress="hidden", queue=False)


def opened() -> tuple[dict, dict]:
    """The updates that open a lazy panel from an event, for its ``(accordion, body)`` outputs."""
    return gr.update(open=True), gr.update(visible=True)
