"""The dashboard's tabs, one module (or folder) per tab, all built one way.

- A tab is built by one call, ``create_<tab>_tab(ctx, sync, ...) -> dict[str, Component]``, made by
  :func:`app.server.build_blocks` inside the tab's ``gr.Tab``: it lays the tab out, connects the tab's events to their
  handlers, and returns by name the components others need.
- A part of a tab (a panel: the Launch tab's memory estimate and sweep, the Runs tab's filters, controls, doctor,
  compare, export and sweeps, the Inspect tab's token view and tools) is built the same way by
  ``create_<part>(ctx, ..., <the tab's components it reads or writes>) -> dict[str, Component]``: it lays out and
  connects its own events in one call. A component a panel acts on but that sits below it on the page is made first
  with ``render=False`` and placed later with ``.render()``; a panel that needs components made after its place goes
  in an empty ``gr.Column()`` left there and filled later (``with column: create_<part>(...)``).
- Nothing is laid out in one call and connected in another. A link between two tabs is connected by the tab built
  later, which takes the earlier tab's components as arguments (Inspect follows the Runs chart's clicks).
- A tab too large for one module splits inside its folder, as LLaMA-Factory's web UI does: ``layout.py`` only lays
  out and returns the components by name, ``handlers.py`` holds plain functions that receive the form keyed by field
  name (never sliced by position; Gradio's set inputs give a dict by component, turned into one by name), and
  ``tab.py``'s ``create_<tab>_tab`` connects the two (:mod:`app.tabs.launch`).
- Handlers' docstrings say ``Inputs:`` and ``Outputs:``; they return what a user should read, never raise for bad input.
"""
