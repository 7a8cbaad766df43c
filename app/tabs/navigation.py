"""The app's navigation across tabs: the view a link names (``?run=12&step=30&tab=inspect``) opened at page load,
the view on screen written back to the address bar, and the Runs tab's selected run followed by the other tabs.

:func:`create_url_view` makes the ``gr.State`` the page load fills (the tabs built after it read it: the Runs tab
selects the run and draws its chart at once, Inspect opens the step); :func:`connect_url` wires the load and the
address bar once the tabs exist; :func:`follow_selection` makes other tabs' run dropdowns follow the selection;
:func:`land_on_new_run` selects the run a launch queued.
The parsing is :mod:`app.url_state`'s.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import gradio as gr

from app.catalog_sync import run_choices
from app.context import AppContext
from app.url_state import WRITE_URL_JS, parse_view


def create_url_view() -> gr.State:
    """The page's URL view: ``None`` until the page loads, then ``{"run", "step", "tab"}`` (each ``None`` when the
    link does not give it, or gives something not understood; see :func:`app.url_state.parse_view`)."""
    return gr.State(None)


def url_view_of(request: gr.Request | None) -> dict:
    """The view the page's query string asks for, as a plain dict (``request.query_params``)."""
    params = getattr(request, "query_params", None) if request is not None else None
    try:
        mapping = dict(params) if params is not None else {}
    except Exception:  # noqa: BLE001 - a query the server cannot read is no view
        mapping = {}
    return dataclasses.asdict(parse_view(mapping))


def connect_url(blocks: gr.Blocks, tabs: gr.Tabs, view: gr.State, selected: gr.components.Component,
                step: gr.components.Component, *, first_view: dict | None = None) -> Any:
    """At page load, read the URL into ``view`` and open its tab in ``tabs``; whenever the ``selected`` run, the
    Inspect ``step`` or the tab changes, write them into the address bar (``history.replaceState``, no reload), so
    the address can be copied as a link to this view. Call inside ``blocks`` after the tabs are built.

    ``first_view`` (the Runs tab's, :func:`app.tabs.runs.tab.create_runs_tab`) is drawn by the same load, in the
    same answer: ``fn(url_view, *inputs, request=request)`` returns its ``outputs``, then each of ``then`` is given the load event to
    chain on. A link's first chart so takes one round trip, not a load and then a change of ``view`` (bench_web.py).
    Returns the load event (what else the page loads can follow it, :meth:`app.catalog_sync.CatalogSync.connect`).
    """
    extra_inputs = list(first_view["inputs"]) if first_view else []
    extra_outputs = list(first_view["outputs"]) if first_view else []

    def on_load(request: gr.Request, *values):
        """Inputs: the page's request, then ``first_view``'s inputs. Outputs: the URL view, the tabs (the link's
        tab, if any), then ``first_view``'s outputs."""
        url_view = url_view_of(request)
        head = (url_view, gr.Tabs(selected=url_view["tab"]) if url_view["tab"] else gr.skip())
        return (*head, *first_view["fn"](url_view, *values, request=request)) if first_view else head

    loaded = blocks.load(on_load, inputs=extra_inputs or None, outputs=[view, tabs, *extra_outputs],
                         show_progress="hidden")
    for follow in (first_view or {}).get("then", ()):
        follow(loaded)
    for event in (selected.change, step.change, tabs.change, tabs.select):
        event(None, inputs=[selected, step], js=WRITE_URL_JS, show_progress="hidden")
    return loaded


def follow_selection(selected: gr.components.Component, *followers: gr.components.Component) -> None:
    """Set each of ``followers`` (run dropdowns of other tabs) to the ``selected`` run whenever it changes."""

    def on_selected(run_id: int | None):
        """Inputs: the selected run. Outputs: the same run in each follower (no change without one)."""
        if run_id is None:
            return tuple(gr.skip() for _ in followers) if len(followers) > 1 else gr.skip()
        return tuple(run_id for _ in followers) if len(followers) > 1 else run_id

    selected.change(on_selected, inputs=selected, outputs=list(followers), show_progress="hidden")


def land_on_new_run(ctx: AppContext, launched: gr.components.Component, selected: gr.Dropdown) -> None:
    """Select in ``selected`` (the Runs tab's run, the app's selection) the run a launch just queued, its id in
    ``launched``; the run list is re-read first, since the new run is not among the choices the page was built with."""

    def on_launched(run_id: float | None):
        """Inputs: the queued run's id. Outputs: the selection, with the current run choices."""
        if run_id is None:
            return gr.skip()
        return gr.update(choices=run_choices(ctx), value=int(run_id))

    launched.change(on_launched, inputs=launched, outputs=selected, show_progress="hidden")

