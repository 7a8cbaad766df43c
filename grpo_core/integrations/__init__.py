"""Record a training script's own TRL ``GRPOTrainer`` into the dashboard: ``DashboardCallback``.

``from grpo_core.integrations import DashboardCallback`` imports transformers (it runs in the training process only);
the rest of the package (the wire format, the spool and its sender) imports neither torch nor transformers, so the
dashboard and ``grpo-dashboard sync`` use it. See docs/integrations.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DashboardCallback"]


def __getattr__(name: str) -> Any:
    if name == "DashboardCallback":  # imported on first use: transformers stays out of the torch-free users
        from grpo_core.integrations.callback import DashboardCallback

        return DashboardCallback
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
