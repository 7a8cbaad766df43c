"""Gradio routes the dashboard does not serve as Gradio would: its deep links, and a page's address with a trailing
slash.

**Deep links** (Gradio 5+, on in every app): ``GET /gradio_api/deep_link?session_hash=S`` writes every value of
session ``S``'s components (what its client sent as inputs included, unchecked: a text in a number box) into a file
of Gradio's upload folder, and any page opened with ``?deep_link=<name>`` (``/?deep_link=...``,
``/run?run=12&deep_link=...``, ``/config?deep_link=...``) starts with those values. So one login could hand another a
link that opens the dashboard with its own run config, plugin targets and ``webhook_url`` already in the Launch form
(one click from launching them as that login), write a file to the server's disk at every request, and anyone who
learnt another login's session hash could save and read that session's values (an API token the tab shows once).
The dashboard has no ``gr.DeepLinkButton``: the route answers 404 and the ``deep_link`` parameter is dropped from
every request before Gradio reads it.

**A page with a trailing slash** (``/run/?run=12``): Gradio answers ``301 /run``, an address from the server's root
(out of a reverse proxy's path prefix) and without the query (the run). It is answered with a relative
``../run?run=12`` instead, which a browser resolves under whatever prefix the page was reached by.

**What a session keeps** (:func:`keep_no_deep_link_values`): for deep links, Gradio's ``SessionState`` built the
config of every component of the app when a session began (about 900 kB for the dashboard's 600 components, and
~0.05 s) and kept each value an event sent or answered; it keeps up to ``state_session_capacity`` sessions
(Gradio's default 10,000), and a session begins at any request with a new ``session_hash``. So any login could
hold about 9 GB of the web process with 10,000 requests, and ordinary page loads grew it for days. Without deep
links that copy serves nothing: it is not made.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import parse_qsl, urlencode

from gradio.state_holder import SessionState
from starlette.responses import PlainTextResponse, RedirectResponse

#: The query parameter Gradio reads a deep link from (``gradio/routes.py``'s page, ``/config`` and ``/`` routes).
DEEP_LINK_PARAM = "deep_link"
#: Gradio's route that saves a session's values as a deep link.
DEEP_LINK_ROUTE = "/gradio_api/deep_link"


def _without_deep_link(query: bytes) -> bytes:
    """``query`` (a raw query string) without any ``deep_link`` parameter, however its name is encoded
    (``deep%5Flink``); unchanged when it has none."""
    if not query:
        return query
    pairs = parse_qsl(query.decode("latin-1"), keep_blank_values=True)
    if all(key != DEEP_LINK_PARAM for key, _ in pairs):
        return query
    return urlencode([(k, v) for k, v in pairs if k != DEEP_LINK_PARAM]).encode("latin-1")


class GradioRoutesGuard:
    """ASGI middleware (see the module docstring): ``/gradio_api/deep_link`` answers 404, a ``deep_link`` query
    parameter is dropped, and ``/<page>/`` of the pages in ``pages`` (``"run"``) redirects relatively with its
    query."""

    def __init__(self, app: Any, pages: Iterable[str] = ()) -> None:
        self.app = app
        self.slashed = {f"/{page.strip('/')}/": page.strip("/") for page in pages if page.strip("/")}

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            path = scope.get("path", "")
            if path.rstrip("/").endswith(DEEP_LINK_ROUTE):
                await PlainTextResponse("Not Found", status_code=404)(scope, receive, send)
                return
            query = _without_deep_link(scope.get("query_string", b""))
            if query != scope.get("query_string", b""):
                scope = {**scope, "query_string": query}
            page = self.slashed.get(path)
            if page is not None and scope.get("method") in ("GET", "HEAD"):
                target = f"../{page}" + (f"?{query.decode('latin-1')}" if query else "")
                await RedirectResponse(target, status_code=307)(scope, receive, send)
                return
        await self.app(scope, receive, send)


class _NoValues(dict):
    """A session's deep-link copy of its components' configs that holds nothing: every component reads as kept (so
    Gradio computes none) with no props (so it writes none)."""

    def __setitem__(self, key: Any, value: Any) -> None:
        pass

    def __contains__(self, key: object) -> bool:
        return True

    def __getitem__(self, key: Any) -> dict:
        return {}


class _WithoutComponents:
    """What ``SessionState.__init__`` reads of the Blocks (``default_config``, ``blocks``), with no components to
    copy the configs of."""

    def __init__(self, blocks: Any) -> None:
        self.default_config = blocks.default_config
        self.blocks: dict = {}


def keep_no_deep_link_values() -> None:
    """Make Gradio's sessions keep no copy of their components' configs (see the module docstring); idempotent.

    Only Gradio's deep-link route reads that copy (``SessionState.components``), and the dashboard does not serve it
    (:class:`GradioRoutesGuard`). Call before serving.
    """
    if getattr(SessionState, "_grpo_no_deep_link_values", False):
        return
    original = SessionState.__init__

    def __init__(self: SessionState, blocks: Any) -> None:
        try:
            original(self, _WithoutComponents(blocks))
        except AttributeError:  # a Gradio 6 whose sessions read more of the Blocks: its own copy, as before
            original(self, blocks)
            return
        self.config_values = _NoValues()

    SessionState.__init__ = __init__
    SessionState._grpo_no_deep_link_values = True
