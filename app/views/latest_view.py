"""One step per view, whatever order updates land in: a handler that draws a view asks for a ticket before it reads
and drops its answer if a newer request for the same page's view came meanwhile (pure; no Gradio).

A page fires several events that redraw Inspect (a chart click, the run and step changing, the tab opening); Gradio
runs them concurrently, so a slow answer for step 6 could land after a quick one for step 4. Each view is drawn by
one handler whose outputs (summary, groups, reward histogram) come from one step value, and that handler answers only
while its ticket is the page's latest: an older answer arriving late is replaced by "no change".
"""

from __future__ import annotations

import threading
from collections import OrderedDict

#: Pages remembered at most (the oldest forgotten first): a page forgotten simply has every answer kept.
MAX_PAGES = 10_000


class LatestOnly:
    """Tickets per page (Gradio's ``session_hash``): :meth:`begin` hands out increasing tickets and
    :meth:`is_latest` says whether a ticket is still the newest of its page. Thread-safe."""

    def __init__(self, max_pages: int = MAX_PAGES) -> None:
        self._latest: OrderedDict[str, int] = OrderedDict()
        self._counter = 0
        self._lock = threading.Lock()
        self._max_pages = max_pages

    def begin(self, page: str | None) -> int:
        """A new ticket for ``page`` (``None``: a caller without a page, whose tickets never go stale)."""
        with self._lock:
            self._counter += 1
            if page is not None:
                self._latest[page] = self._counter
                self._latest.move_to_end(page)
                while len(self._latest) > self._max_pages:
                    self._latest.popitem(last=False)
            return self._counter

    def is_latest(self, page: str | None, ticket: int) -> bool:
        """Whether no ticket was handed to ``page`` after ``ticket``."""
        if page is None:
            return True
        with self._lock:
            return self._latest.get(page, ticket) <= ticket
