"""What every tab's handlers share: the store, the settings and the launcher."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_core.alerts import Notifier
from grpo_core.boundary import Boundary, boundary_for
from grpo_core.launcher import Launcher
from grpo_core.ownership import Actor
from grpo_core.settings import Settings
from storage import Store


@dataclass(frozen=True)
class AppContext:
    """The web process's long-lived objects, created once by :func:`app.server.create_app`."""

    store: Store
    settings: Settings
    launcher: Launcher
    notifier: Notifier | None = None


def actor_of(ctx: AppContext, request: object | None) -> Actor:
    """Who a handler serves: the login Gradio gives it (``gr.Request.username``; ``None`` without a login) and
    whether the auth file marks it admin."""
    return Actor.from_login(getattr(request, "username", None), ctx.settings.admins)


def boundary_of(ctx: AppContext, request: object | None) -> Boundary:
    """What the login a handler serves may make the server run or read (:mod:`grpo_core.boundary`); open without
    a login."""
    return boundary_for(ctx.settings, actor_of(ctx, request))
