"""The dataset and run lists every tab offers, in one place, and how they stay current across tabs and pages.

Every run dropdown (Launch's clone picker, Compare, Inspect, Try the model) and every dataset list (Launch's
dataset dropdown, the Datasets tab's table and picker) is registered with one :class:`CatalogSync` per page build.
After an action that adds or removes a dataset or run in this page (an upload, a launch, a delete) the sync pushes
the new lists at once; other open pages see them on the next tick of a timer that compares
:meth:`storage.Store.catalog_version` (three aggregate queries) with the version the page last saw and re-reads the
lists only when it moved.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gradio as gr

from app.context import AppContext
from app.views.runs import run_label

#: Seconds between two version checks of an open page.
SYNC_SECONDS = 3.0

#: How many leading fields of :meth:`storage.Store.catalog_version` describe the datasets (the rest: the runs).
_DATASET_FIELDS = 2


def run_choices(ctx: AppContext) -> list[tuple[str, int]]:
    """``(label, run id)`` of every run, newest first; the label is ``#id name (status)``."""
    return [(run_label(run), run.id) for run in ctx.store.list_runs()]


def dataset_choices(ctx: AppContext) -> list[tuple[str, int]]:
    """``(label, dataset id)`` of every dataset, newest first; the label is ``name (N rows)``."""
    return [(f"{d.name} ({d.num_rows} rows)", d.id) for d in ctx.store.list_datasets()]


def _updates(followers: list[tuple[Any, Callable[[], Any] | None]], moved: bool, choices: Callable[[], list]) -> list:
    """One update per follower: ``gr.skip()`` when the list did not move, else its own ``update()`` or the new
    choices (read once for all the dropdowns)."""
    if not moved:
        return [gr.skip()] * len(followers)
    shared: list | None = None
    out = []
    for _, update in followers:
        if update is None:
            shared = choices() if shared is None else shared
            out.append(gr.update(choices=shared))
        else:
            out.append(update())
    return out


class CatalogSync:
    """Keeps one page's run and dataset components in step with the store.

    Tabs register components with :meth:`follow_runs` / :meth:`follow_datasets` and the events that change the
    lists with :meth:`after`; :func:`app.server.build_blocks` calls :meth:`connect` once every tab is built.
    """

    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx
        self._runs: list[tuple[gr.components.Component, Callable[[], Any] | None]] = []
        self._datasets: list[tuple[gr.components.Component, Callable[[], Any] | None]] = []
        self._after: list[Any] = []
        self._page_values: list[tuple[gr.components.Component, Callable[[], Any]]] = []

    def follow_runs(self, component: gr.components.Component, update: Callable[[], Any] | None = None) -> None:
        """Refresh ``component`` when the runs change: with ``update()`` (default: new run choices, value kept)."""
        self._runs.append((component, update))

    def follow_datasets(self, component: gr.components.Component, update: Callable[[], Any] | None = None) -> None:
        """Refresh ``component`` when the datasets change: with ``update()`` (default: new dataset choices)."""
        self._datasets.append((component, update))

    def page_value(self, component: gr.components.Component, value: Callable[[], Any]) -> None:
        """Give ``component`` ``value()`` at each page load, in the catalog's own page-load answer: one event for
        every such value, where a callable ``value=`` makes Gradio send one event per component at page load
        (docs/long-runs.md: the page load's events compete with its first chart)."""
        self._page_values.append((component, value))

    def after(self, dependency: Any) -> None:
        """Push the lists right after the event ``dependency`` (what ``.click(...)`` returned) finishes."""
        self._after.append(dependency)

    def connect(self, blocks: gr.Blocks, *, page_loaded: Any = None) -> gr.Timer:
        """Wire the page load, the registered events and a :data:`SYNC_SECONDS` timer to the refresh.

        Call inside ``blocks`` after every tab is built. The page's lists and its :meth:`page_value` values come in
        one answer at page load, or, with ``page_loaded`` (the page load's event that draws the first chart,
        :func:`app.tabs.navigation.connect_url`), right after it, so that the chart's answer does not share the
        server with them. Returns the timer.
        """
        seen = gr.State(None)
        timer = gr.Timer(SYNC_SECONDS)
        outputs = [seen, *(c for c, _ in self._datasets), *(c for c, _ in self._runs),
                   *(c for c, _ in self._page_values)]

        def on_change(last: tuple[int, ...] | None):
            """Inputs: the version this page last saw (``None``: none yet, the page load). Outputs: the version, then
            each followed component, then each page value (only when the page saw no version yet)."""
            version = self.ctx.store.catalog_version()
            page_values = [value() if last is None else gr.skip() for _, value in self._page_values]
            if version == last:
                return [gr.skip()] * (len(outputs) - len(page_values)) + page_values
            datasets_moved = last is None or version[:_DATASET_FIELDS] != last[:_DATASET_FIELDS]
            runs_moved = last is None or version[_DATASET_FIELDS:] != last[_DATASET_FIELDS:]
            return [
                version,
                *_updates(self._datasets, datasets_moved, lambda: dataset_choices(self.ctx)),
                *_updates(self._runs, runs_moved, lambda: run_choices(self.ctx)),
                *page_values,
            ]

        options = {"inputs": seen, "outputs": outputs, "show_progress": "hidden"}
        (page_loaded.then if page_loaded is not None else blocks.load)(on_change, **options)
        timer.tick(on_change, **options)
        for dependency in self._after:
            dependency.then(on_change, **options)
        return timer
