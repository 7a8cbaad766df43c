"""What every tab's handlers share: the store, the settings and the launcher."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from grpo_core.access.boundary import Boundary, boundary_for
from grpo_core.access.ownership import Actor
from grpo_core.alerts.targets import WebhookPolicy, check_launch_webhooks
from grpo_core.alerts.webhooks import Notifier
from grpo_core.settings import Settings
from grpo_core.training.launcher import Launcher
from storage import Store

#: Handlers that load a model in a child process (preflight, Try the model, merge) share one Gradio concurrency group
#: of this many at once, whichever login asks: each may take a GPU's memory, so a login clicking them over and over
#: (or several logins at once) queues instead of starving the runs (``event.click(..., **MODEL_JOBS)``).
MODEL_JOBS = {"concurrency_id": "model-jobs", "concurrency_limit": 2}


@dataclass(frozen=True)
class AppContext:
    """The web process's long-lived objects, created once by :func:`app.server.create_app`."""

    store: Store
    settings: Settings
    launcher: Launcher
    notifier: Notifier | None = None
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
    whether the auth file marks it admin."""
    return Actor.from_login(getattr(request, "username", None), ctx.settings.admins)


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
    return boundary_for(ctx.settings, actor_of(ctx, request))
