"""Assembles the dashboard: the store, the launcher and the Gradio Blocks with one tab per task.

The web process never imports torch or transformers: training happens in worker processes.
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

import gradio as gr
from starlette.middleware import Middleware

from app.api.ingest import ingest_routes  # scripts recording over HTTP (grpo_core.integrations)
from app.api.public import create_public_api, hide_internal_endpoints
from app.catalog_sync import CatalogSync
from app.context import AppContext, boundary_of
from app.gradio_routes import GradioRoutesGuard, keep_no_deep_link_values
from app.inert_outputs import install as install_inert_outputs
from app.run_page import RUN_PAGE_PATH, create_run_page
from app.served_files import OfferedFilesGuard, confine_gradio
from app.tabs.api_tokens import create_api_tokens_tab
from app.tabs.datasets import create_datasets_tab
from app.tabs.inspect.tab import create_inspect_tab
from app.tabs.launch.tab import create_launch_tab
from app.tabs.navigation import connect_url, create_url_view, follow_selection, land_on_new_run
from app.tabs.runs.tab import create_chart_warmup, create_runs_tab
from app.tabs.try_model import create_try_model_tab
from app.tabs.workbench.tab import create_workbench_tab
from grpo_core.access.auth_file import LoginRegistry
from grpo_core.access.logins import exposure_warnings, max_upload_bytes
from grpo_core.alerts.webhooks import Notifier
from grpo_core.datasets.library import register_examples
from grpo_core.settings import Settings
from grpo_core.training.launcher import Launcher
from storage import Store

log = logging.getLogger(__name__)

TITLE = "GRPO dashboard"
#: The page list Gradio draws above a multipage app (the dashboard and the run page link each other in their own
#: words instead): hidden, since ``gr.Navbar(visible=False)`` does not hide it in Gradio 6 (gradio-app/gradio#12532).
PAGE_CSS = ".nav-holder { display: none !important; }"
#: Gradio sessions (one a page load, or a request with a new ``session_hash``) whose values the server keeps, the
#: least recently used dropped beyond (Gradio's default 10,000): each holds the series of the run it shows (about
#: 1.3 MB for a long run's first view), so a login's requests could otherwise hold gigabytes (docs/security.md).
SESSION_CAPACITY = 500


def create_context(settings: Settings, *, worker_env: dict[str, str] | None = None) -> AppContext:
    """Open the store (creating tables and data folders), register the example datasets, make the launcher."""
    settings.ensure_dirs()
    store = Store(settings.db_url)
    try:
        register_examples(store, settings)
    except Exception:  # noqa: BLE001 - a broken example must not keep the dashboard from starting
        log.exception("could not register the example datasets")
    return AppContext(store=store, settings=settings, launcher=Launcher(store, settings, env=worker_env),
                      notifier=Notifier(store, settings), logins=LoginRegistry.from_settings(settings))


def build_blocks(ctx: AppContext) -> gr.Blocks:
    """The dashboard's ``gr.Blocks``: Datasets, Launch, Runs, Inspect and Try the model tabs, whose dataset and run
    lists follow the store (:class:`app.catalog_sync.CatalogSync`), a run's own page (``/run?run=12``,
    :mod:`app.run_page`), and the public API
    (:mod:`app.api.public`): only its named endpoints are listed and callable by name. No value becomes a file to
    Gradio but a file component's own (:mod:`app.inert_outputs`)."""
    install_inert_outputs()
    keep_no_deep_link_values()  # a session keeps no copy of every component's config (deep links are not served)
    with gr.Blocks(title=TITLE) as blocks:
        sync = CatalogSync(ctx)
        gr.Markdown(f"## {TITLE}\nLaunch, watch and inspect GRPO fine-tuning runs (TRL engine).")
        url_view = create_url_view()  # navigation: the view a link names, read at page load
        create_chart_warmup()  # the chart library loads with the page, before the Runs tab opens
        with gr.Tabs() as tabs:
            with gr.Tab("Datasets", id="datasets", elem_id="tab-datasets"):
                create_datasets_tab(ctx, sync)
            with gr.Tab("Launch", id="launch", elem_id="tab-launch"):
                launch_tab = create_launch_tab(ctx, sync, tabs=tabs)
            with gr.Tab("Runs", id="runs", elem_id="tab-runs"):
                runs_tab = create_runs_tab(ctx, sync)
            with gr.Tab("Inspect", id="inspect", elem_id="tab-inspect") as inspect_tab:
                inspect = create_inspect_tab(ctx, inspect_tab, sync, runs=runs_tab, tabs=tabs, view=url_view)
            with gr.Tab("Try the model", id="try", elem_id="tab-try"):
                try_tab = create_try_model_tab(ctx, sync)
            with gr.Tab("API tokens", id="tokens", elem_id="tab-tokens") as tokens_tab:  # scripts over HTTP
                create_api_tokens_tab(ctx, tokens_tab)
            with gr.Tab("Reward workbench", id="workbench", elem_id="tab-workbench") as workbench_tab:  # re-score
                workbench = create_workbench_tab(ctx, sync, inspect=inspect, tabs=tabs, tab=workbench_tab)
        # --- navigation: the Runs tab's selection followed by the other tabs, the view in the URL ---
        follow_selection(runs_tab["selected"], try_tab["run"], workbench["run"])  # a link's run=, a Runs pick
        land_on_new_run(ctx, launch_tab["launched_run"], runs_tab["selected"])  # a launch lands on its new run
        loaded = connect_url(blocks, tabs, url_view, runs_tab["selected"], inspect["step"],
                             first_view=runs_tab["first_view"])
        # --- end navigation ---
        sync.connect(blocks, page_loaded=loaded)  # the lists and page values follow the first chart's answer
        create_public_api(ctx)
    with blocks.route("Run", RUN_PAGE_PATH, show_in_navbar=False):  # /run?run=12: one run's charts, a light page
        create_run_page(ctx, blocks)
    hide_internal_endpoints(blocks)
    return blocks


class _Login:
    """A login as :func:`app.context.boundary_of` reads one (``username``), for the ingest API's tokens."""

    def __init__(self, username: str) -> None:
        self.username = username


def _login_check(logins: LoginRegistry):
    """Gradio's ``auth`` callable: the password checked against the hash the auth file holds now, on a worker
    thread (scrypt takes about 50 ms; the event loop serves others meanwhile), through a
    :class:`~grpo_core.access.login_throttle.LoginThrottle` (10 wrong passwords a name in 5 minutes, 2 checks at once)."""
    import anyio.to_thread

    from grpo_core.access.login_throttle import LoginThrottle

    throttle = LoginThrottle(logins.verify)

    async def check(user: str, password: str) -> bool:
        return await anyio.to_thread.run_sync(throttle.check, user, password)

    return check


def _end_sessions(app, users: frozenset[str]) -> None:
    """Forget Gradio's session cookies of ``users`` (logins removed from the auth file)."""
    tokens = getattr(app, "tokens", None) or {}
    for cookie, user in list(tokens.items()):
        if user in users:
            tokens.pop(cookie, None)


def serve(settings: Settings, *, auth: Sequence[tuple[str, str]] | None = None, block: bool = True,
          private_files: Sequence[str | Path | None] = ()):
    """Start the launcher and serve the dashboard on ``settings.host:settings.port``.

    ``auth`` (default ``settings.auth``) turns on Gradio's login: every page, API call and upload then needs one of
    the ``(user, password)`` pairs. Uploads over ``settings.max_upload_mb`` are refused by Gradio itself. On an
    address other than loopback a warning goes to standard error (no login, or a login over plain HTTP).

    Gradio may serve only the dashboard's own downloads (:func:`app.served_files.confine_gradio`): never the working
    directory, the data directory, the store, the auth file and ``private_files``, nor the system's temp folder.

    Returns the ``(blocks, context)`` pair when ``block`` is False (tests), else returns when the server stops.
    """
    credentials = [tuple(pair) for pair in (settings.auth if auth is None else auth)]
    for message in exposure_warnings(settings.host, settings.port, has_auth=bool(credentials)):
        print(f"WARNING: {message}", file=sys.stderr, flush=True)
    ctx = create_context(settings if auth is None else settings.with_overrides(auth=tuple(credentials)))
    served = confine_gradio(settings, private_files)  # before any component is made: they read GRADIO_TEMP_DIR
    ctx = dataclasses.replace(ctx, served=served)
    ctx.launcher.start()
    ctx.notifier.start()  # webhook alerts: an APScheduler job of its own, deliveries on a background thread
    blocks = build_blocks(ctx)
    blocks.queue(default_concurrency_limit=8)
    # The objects made so far (modules, the UI: ~200,000) live as long as the process: kept out of the garbage
    # collector's full passes, which a page read of many rows (a first chart load, the doctor's first read)
    # otherwise triggers, each ~100 ms at that heap size (benchmarks/bench_store_scale.py).
    gc.collect()
    gc.freeze()
    if ctx.logins is not None:  # a login removed from the auth file: its open sessions end now (launch blocks)
        ctx.logins.on_removed(lambda users: _end_sessions(getattr(blocks, "server_app", None), users))
        ctx.logins.watch()
    blocks.launch(
        server_name=settings.host,
        server_port=settings.port,
        auth=_login_check(ctx.logins) if ctx.logins is not None else None,
        max_file_size=max_upload_bytes(settings.max_upload_mb),
        prevent_thread_lock=not block,
        show_error=True,
        quiet=False,
        css=PAGE_CSS,
        state_session_capacity=SESSION_CAPACITY,
        footer_links=["api", "settings"],
        # Gradio's run history records every event's inputs and outputs (an API token shown once included) and
        # serves /gradio_api/run-history/* without a login, acting on the hub with the server's own HF token for
        # any client that reaches it over loopback (a proxy on the same host): off (docs/security.md)
        run_history=False,
        allowed_paths=[],  # downloads are offered from the private upload folder (ServedFiles.offer)
        blocked_paths=[str(path) for path in served.blocked],
        # /api/v1: runs recorded from scripts, by API token, their configs held to the token's login's boundary
        app_kwargs={"routes": ingest_routes(ctx.store, lambda login: boundary_of(ctx, _Login(login)),
                                            logins=ctx.logins, max_runs=settings.ingest_max_runs),
                    # an offered download answers only the login it was offered to
                    "middleware": [Middleware(OfferedFilesGuard, served=served),
                                   # no deep links; /run/?run=12 redirects relatively, with its run
                                   Middleware(GradioRoutesGuard, pages=[page[0] for page in blocks.pages])]},
    )
    if not block:
        return blocks, ctx
    ctx.launcher.shutdown()
    ctx.notifier.shutdown()
    return None
