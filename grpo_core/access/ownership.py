"""Who may change a run: its owner, or an admin of the auth file; everyone may view and compare (a run's
``webhook_url`` excepted: :func:`config_shown_to`).

With several logins (``--auth-file``) each run and dataset records the login that created it (``owner``). Cancel,
resume, delete and editing notes and tags are allowed to that owner and to the admins
(:func:`grpo_core.access.logins.read_auth_admins`); anyone else gets :class:`NotOwnerError`, whose message names the
owner. Without a login (``user`` is ``None``) the dashboard is single-user and every action is allowed; a row
created without a login (``owner`` is ``None``: before logins were turned on) may be changed by any login. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass


class NotOwnerError(PermissionError):
    """An action refused because the login is neither the owner nor an admin; the message says who may."""


@dataclass(frozen=True)
class Actor:
    """Who asks: ``user`` is the login (``None``: no login, single-user), ``is_admin`` from the auth file."""

    user: str | None = None
    is_admin: bool = False

    @classmethod
    def from_login(cls, user: str | None, admins: frozenset[str] | set[str] = frozenset()) -> Actor:
        """The actor for the login name Gradio gives a handler (``gr.Request.username``; ``None`` without one)."""
        return cls(user=user or None, is_admin=bool(user) and user in admins)


SINGLE_USER = Actor()
"""The actor of a dashboard served without a login (and of the command line): may do everything."""


def may_change(actor: Actor, owner: str | None) -> bool:
    """True when ``actor`` may cancel, resume, delete or annotate something owned by ``owner``."""
    return actor.user is None or actor.is_admin or owner is None or owner == actor.user


def check_may_change(actor: Actor, owner: str | None, action: str, what: str) -> None:
    """Refuse ``action`` (``"delete"``, ``"cancel"``, ...) on ``what`` (``"run #3 baseline"``) unless allowed.

    Raises:
        NotOwnerError: ``actor`` is logged in, not an admin, and not ``owner``.
    """
    if not may_change(actor, owner):
        raise NotOwnerError(
            f"{actor.user} may not {action} {what}: it belongs to {owner}; only its owner or an admin may"
        )


#: What a run's ``webhook_url`` reads as to a login that may not change the run.
HIDDEN_WEBHOOK = "(set by the run's owner; hidden)"


def config_shown_to(actor: Actor, owner: str | None, config: dict | None) -> dict:
    """A run's stored config as ``actor`` may read it: whole for whoever may change the run (:func:`may_change`),
    else with a set ``webhook_url`` replaced by :data:`HIDDEN_WEBHOOK`. A webhook address is its owner's secret (a
    Slack or Discord incoming webhook's URL is the credential that posts to the channel), and everyone may view runs.
    """
    config = dict(config or {})
    if config.get("webhook_url") and not may_change(actor, owner):
        config["webhook_url"] = HIDDEN_WEBHOOK
    return config
