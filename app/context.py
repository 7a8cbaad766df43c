"""What every tab's handlers share: the store, the settings and the launcher."""

from __future__ import annotations

from dataclasses import dataclass

from grpo_core.launcher import Launcher
from grpo_core.settings import Settings
from storage import Store


@dataclass(frozen=True)
class AppContext:
    """The web process's long-lived objects, created once by :func:`app.server.create_app`."""

    store: Store
    settings: Settings
    launcher: Launcher
