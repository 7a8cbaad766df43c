"""What every tab's handlers share: the store, the settings and the launcher; :func:`fair_share`, the per-login cap
of costly handlers."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.access.auth_file import LoginRegistry
from grpo_core.access.boundary import Boundary, boundary_for
from grpo_core.access.ownership import Actor
from grpo_core.alerts.targets import WebhookPolicy, check_launch_webhooks
from grpo_core.alerts.webhooks import Notifier
from grpo_core.child_jobs.slots import MODEL_SLOTS, PLUGIN_CHECK_SLOTS, JobSlots, SlotsBusy
from grpo_core.settings import Settings
from grpo_core.training.launcher import Launcher
from storage import Store

#: Handlers that load a model in a child process (preflight, Try the model, merge) share one Gradio concurrency group
#: of this many at once, whichever login asks: each may take a GPU's memory, so a login clicking them over and over
#: (or several logins at once) queues instead of starving the runs (``event.click(..., **MODEL_JOBS)``). Each such
#: handler is also wrapped in ``fair_share(MODEL_SLOTS, ...)``: one of them a login, so another login is served.
MODEL_JOBS = {"concurrency_id": "model-jobs", "concurrency_limit": MODEL_SLOTS.total}

#: Handlers whose config may name a login's plugins, checked in a child process each (Launch, the sweep's launch, the
#: memory estimate, the workbench's launch, the API's ``launch_run`` and ``launch_sweep``) share one Gradio
#: concurrency group of the pool's total (every plugin check slot may be busy) and as many again, so launches
#: without plugins (most: they take no slot) still run while the pool is full (``event.click(...,
#: **PLUGIN_CHECK_JOBS)``). The slot is taken inside, only when a child is due, for the login the handler passes
#: (:func:`grpo_core.tools.job.check_tool_plugins`, :func:`grpo_core.reward_check.job.check_plugins`); a login
#: over its share gets SlotsBusy's message at once, in the handler's own words.
PLUGIN_CHECK_JOBS = {"concurrency_id": "plugin-checks", "concurrency_limit": 2 * PLUGIN_CHECK_SLOTS.total}


@dataclass(frozen=True)
class AppContext:
    """The web process's long-lived objects, created once by :func:`app.server.create_app`."""

    store: Store
    settings: Settings
    launcher: Launcher
    notifier: Notifier | None = None
    logins: LoginRegistry | None = None  # who may log in now (the auth file, read again when it changes)
    #: the folder Gradio may serve from (:class:`app.served_files.ServedFiles`); ``None``: blocks built in a test
    served: Any = None

    def offer(self, path: str | Path | None, request: object | None = None) -> str | None:
        """A path of ``path``'s content that Gradio serves to the login of ``request`` only
        (:meth:`app.served_files.ServedFiles.offer`); the path itself when the dashboard is not served (blocks built
        in a test)."""
        if path is None or self.served is None:
            return None if path is None else str(path)
        return self.served.offer(path, getattr(request, "username", None))


def actor_of(ctx: AppContext, request: object | None) -> Actor:
    """Who a handler serves: the login Gradio gives it (``gr.Request.username``; ``None`` without a login) and
    whether the auth file marks it admin (as the file reads now)."""
    admins = ctx.logins.admins() if ctx.logins is not None else ctx.settings.admins
    return Actor.from_login(getattr(request, "username", None), admins)


def check_webhooks(ctx: AppContext, request: object | None, urls: list) -> None:
    """Refuse a launch whose ``webhook_url`` values (a run's, or a sweep's) the handler's login may not set or that
    name an internal host (:func:`grpo_core.alerts.targets.check_launch_webhooks` under the dashboard's policy).

    Raises:
        grpo_core.alerts.targets.WebhookRefused: a ``ValueError`` whose message starts with ``webhook_url:``.
    """
    actor = actor_of(ctx, request)
    check_launch_webhooks(urls, WebhookPolicy.from_settings(ctx.settings), user=actor.user, is_admin=actor.is_admin)


def boundary_of(ctx: AppContext, request: object | None) -> Boundary:
    """What the login a handler serves may make the server run or read (:mod:`grpo_core.access.boundary`); open without
    a login."""
    settings = ctx.settings
    if ctx.logins is not None:  # the logins and [run-code] marks as the auth file reads now (a second login added
        logins = ctx.logins.logins()  # to a single-user file makes the boundary enforced from then on)
        settings = settings.with_overrides(auth=tuple((user, "") for user in logins),
                                           code_runners=ctx.logins.code_runners())
    return boundary_for(settings, actor_of(ctx, request))


def _login_of(args: tuple, kwargs: dict) -> str | None:
    """The login of the ``gr.Request`` among a handler's arguments (``None``: none, or no login)."""
    for value in (*args, *kwargs.values()):
        if type(value).__name__ == "Request" and hasattr(value, "username"):
            return getattr(value, "username", None) or None
    return None


def fair_share(slots: JobSlots, handler: Callable) -> Callable:
    """``handler`` (a Gradio event handler taking a ``gr.Request``; a generator too) holding one of ``slots`` for
    its login while it runs: a login over its share is refused at once with ``gr.Error`` (SlotsBusy's message),
    so it never waits in a slot others need (:mod:`grpo_core.child_jobs.slots`). The signature is kept (Gradio reads it).
    """
    import gradio as gr

    def refused(exc: SlotsBusy) -> gr.Error:
        return gr.Error(str(exc), print_exception=False)

    if inspect.isgeneratorfunction(handler):
        @functools.wraps(handler)
        def generator(*args, **kwargs):
            login = _login_of(args, kwargs)
            try:
                slots.acquire(login)
            except SlotsBusy as exc:
                raise refused(exc) from None
            try:
                yield from handler(*args, **kwargs)
            finally:
                slots.release(login)
        return generator

    @functools.wraps(handler)
    def function(*args, **kwargs):
        login = _login_of(args, kwargs)
        try:
            slots.acquire(login)
        except SlotsBusy as exc:
            raise refused(exc) from None
        try:
            return handler(*args, **kwargs)
        finally:
            slots.release(login)
    return function
