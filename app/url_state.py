"""The dashboard's view in the page's URL: ``?run=12&step=30&tab=inspect`` opens run 12's step 30 in the Inspect tab,
so a view can be linked (pure parsing; the page load reads it, a browser script writes it back).

The query string is user input: anything not understood (an unknown tab, a run id that is not a small positive
integer, a repeated or oversized value, markup) is ignored, never echoed into the page or a query.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

#: The tabs a link may open (the ids :func:`app.server.build_blocks` gives them).
TABS = ("datasets", "launch", "runs", "inspect", "try", "tokens", "workbench")
#: Run ids and steps are decimal integers of at most this many digits (a 64-bit id has 19).
MAX_DIGITS = 12
_INTEGER = re.compile(rf"[0-9]{{1,{MAX_DIGITS}}}")

#: Browser code that writes the view into the address bar without reloading (``history.replaceState``): given the
#: run and the step, it reads the open tab from the page (the selected tab button's panel id, ``tab-<id>``), keeps
#: any other query parameter and drops the empty ones. It runs a moment later, once a tab switch has been drawn.
WRITE_URL_JS = """
(run, step) => {
  setTimeout(() => {
    try {
      const url = new URL(window.location.href);
      const put = (name, value) => {
        if (value === null || value === undefined || value === '') url.searchParams.delete(name);
        else url.searchParams.set(name, String(value));
      };
      const button = document.querySelector('button[role="tab"][aria-selected="true"]');
      const panel = button ? (button.getAttribute('aria-controls') || '') : '';
      put('run', run); put('step', step); put('tab', panel.startsWith('tab-') ? panel.slice(4) : '');
      window.history.replaceState(window.history.state, '', url.toString());
    } catch (error) { /* a URL the browser cannot rewrite: leave it */ }
  }, 50);
  return [];
}
"""


@dataclass(frozen=True)
class UrlView:
    """What a link asks to show: a run id, a step and a tab, each ``None`` when absent or not understood."""

    run: int | None = None
    step: int | None = None
    tab: str | None = None


def _integer(value: object) -> int | None:
    """A non-negative decimal integer of at most :data:`MAX_DIGITS` digits, else ``None`` (``"1e3"``, ``"-1"``,
    ``" 4"``, ``"٣"`` and lists are refused)."""
    if not isinstance(value, str) or not _INTEGER.fullmatch(value):
        return None
    return int(value)


def parse_view(params: Mapping[str, object] | None) -> UrlView:
    """The view a page's query parameters ask for (``request.query_params``, or any mapping of name -> string).

    ``run`` and ``step`` must be decimal integers (``run`` at least 1), ``tab`` one of :data:`TABS`
    (case-insensitive); any other value of one is ignored on its own, the rest still applies.
    """
    if not params:
        return UrlView()
    try:
        run, step, tab = params.get("run"), params.get("step"), params.get("tab")
    except Exception:  # noqa: BLE001 - a mapping that fails to read is no view
        return UrlView()
    run_id = _integer(run)
    tab_id = tab.strip().lower() if isinstance(tab, str) and len(tab) <= 20 else None
    return UrlView(
        run=run_id if run_id else None,
        step=_integer(step),
        tab=tab_id if tab_id in TABS else None,
    )
