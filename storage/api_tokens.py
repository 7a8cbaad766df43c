"""API tokens and runs recorded from users' own training scripts: the :class:`ApiTokenQueries` the ``Store`` is made of.

A login creates API tokens (in the dashboard or with ``grpo-dashboard token create``) for
:class:`grpo_core.integrations.DashboardCallback` to record runs over HTTP. Only the token's sha256 is stored; the
plain token is returned once, by :meth:`ApiTokenQueries.create_api_token`. A revoked token, or one past its
``expires_at``, authenticates nothing; each use is remembered (``last_used_at``, to the minute). Whether the token's
login may still log in is the caller's question (the served dashboard asks its auth file:
:meth:`grpo_core.access.auth_file.LoginRegistry.is_live`).

A run recorded from a script is created ``running`` at once (:meth:`ApiTokenQueries.create_script_run`): it is
never queued, so the launcher never starts a worker for it. A run recorded over HTTP also has an ingest cursor
(:class:`storage.tables.IngestCursorRow`): the token that created it (the only one that may write it), the
sender's key for it (a create sent twice finds the same run) and the last batch sequence number applied (a batch
sent twice is applied once).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError

from storage.records import RunInfo, StoreError
from storage.tables import ApiTokenRow, IngestCursorRow, RunRow, RunStatus, utcnow

#: Prefix of every plain token (a secret scanner can spot one pasted where it should not be).
TOKEN_PREFIX = "grpo_"
#: Longest login or token name, in characters.
MAX_NAME_CHARS = 200
MAX_LIVE_TOKENS = 50
"""API tokens a login may hold at once (neither revoked nor expired): one per script or machine is the use."""
MAX_TOKEN_ROWS = 1_000
"""Tokens a login may ever have in the store, revoked and expired ones included (they stay, as the runs they
created name them): creating and revoking in a loop must not fill the store."""


#: Seconds between two writes of a token's ``last_used_at``.
LAST_USED_RESOLUTION_S = 60.0
#: The longest expiry a token may be given: ten years, in seconds.
MAX_EXPIRY_S = 10 * 365 * 86400
_DURATION = re.compile(r"\s*(\d{1,9}(?:\.\d+)?)\s*([smhdw]?)\s*")
_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class IngestQuotaError(StoreError):
    """A login has created as many runs through the ingest API as it may."""


def parse_expiry(text: str | float | None) -> float | None:
    """A token's lifetime in seconds from ``"90d"``, ``"12h"``, ``"30m"``, ``"2w"``, ``"3600"`` (seconds); empty,
    ``None``, ``"never"``: no expiry.

    Raises:
        StoreError: not a duration, zero, or over :data:`MAX_EXPIRY_S` (the message quotes the text).
    """
    if text is None or str(text).strip().lower() in ("", "never", "none"):
        return None
    match = _DURATION.fullmatch(str(text).lower())
    seconds = float(match.group(1)) * _UNITS[match.group(2)] if match else 0.0
    if not 0 < seconds <= MAX_EXPIRY_S:
        raise StoreError(f"expires in {str(text)[:40]!r}: give a duration such as 30d, 12h, 90m or 3600 (seconds), "
                         "at most ten years, or 'never'")
    return seconds


def _aware(moment: datetime) -> datetime:
    """A stored time as timezone-aware UTC (SQLite gives it back naive)."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def token_hash(plain: str) -> str:
    """The sha256 (hex) under which a plain token is stored."""
    return hashlib.sha256(plain.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class ApiTokenInfo:
    """An API token as callers see it (never its plain value nor its hash). Times are timezone-aware UTC."""

    id: int
    login: str
    name: str
    created_at: datetime
    revoked_at: datetime | None
    last_used_at: datetime | None
    expires_at: datetime | None = None

    @property
    def expired(self) -> bool:
        return self.expires_at is not None and _aware(self.expires_at) <= datetime.now(timezone.utc)

    @property
    def active(self) -> bool:
        return self.revoked_at is None and not self.expired

    @property
    def state(self) -> str:
        """``active`` (``, expires 2026-01-31 12:00``), ``revoked ...`` or ``expired ...``, for a list."""
        if self.revoked_at is not None:
            return f"revoked {_aware(self.revoked_at):%Y-%m-%d %H:%M}"
        if self.expires_at is None:
            return "active"
        return f"{'expired' if self.expired else 'active, expires'} {_aware(self.expires_at):%Y-%m-%d %H:%M}"


@dataclass(frozen=True)
class IngestCursor:
    """The ingest state of a run recorded over HTTP: the token that created it and the last batch applied."""

    run_id: int
    token_id: int
    client_key: str
    last_seq: int


def _token_info(row: ApiTokenRow) -> ApiTokenInfo:
    return ApiTokenInfo(id=row.id, login=row.login, name=row.name, created_at=_aware(row.created_at),
                        revoked_at=row.revoked_at and _aware(row.revoked_at),
                        last_used_at=row.last_used_at and _aware(row.last_used_at),
                        expires_at=row.expires_at and _aware(row.expires_at))


def _check_name(value: str, what: str) -> str:
    value = (value or "").strip()
    if not value:
        raise StoreError(f"{what} must not be empty")
    if len(value) > MAX_NAME_CHARS or any(ord(c) < 32 for c in value):
        raise StoreError(f"{what} must be at most {MAX_NAME_CHARS} printable characters")
    return value


class ApiTokenQueries:
    """The ``Store``'s API token and script run queries (a mixin: it uses the facade's ``_session`` and ``get_run``)."""

    # ------------------------------------------------------------------------------------------------ tokens
    def create_api_token(self, login: str, name: str, *, expires_in_s: float | None = None
                         ) -> tuple[ApiTokenInfo, str]:
        """Create a token for ``login``, valid ``expires_in_s`` seconds (``None``: until revoked); returns it and
        its plain value (shown once, never stored).

        Raises:
            StoreError: an empty or over-long login or name; an expiry not in (0, :data:`MAX_EXPIRY_S`]; the login
                already holds :data:`MAX_LIVE_TOKENS` live tokens or has had :data:`MAX_TOKEN_ROWS` in all.
        """
        login, name = _check_name(login, "the login"), _check_name(name, "the token name")
        expires_in_s = parse_expiry(expires_in_s)
        plain = TOKEN_PREFIX + secrets.token_urlsafe(32)
        now = utcnow()
        expires_at = None if expires_in_s is None else now + timedelta(seconds=expires_in_s)
        with self._session() as session:
            mine = select(func.count()).select_from(ApiTokenRow).where(ApiTokenRow.login == login)
            if session.scalar(mine) >= MAX_TOKEN_ROWS:
                raise StoreError(f"{login} has had {MAX_TOKEN_ROWS} API tokens, the most a login may create; "
                                 "ask an admin to remove old ones")
            live = mine.where(ApiTokenRow.revoked_at.is_(None)).where(
                (ApiTokenRow.expires_at.is_(None)) | (ApiTokenRow.expires_at > now))
            if session.scalar(live) >= MAX_LIVE_TOKENS:
                raise StoreError(f"{login} already holds {MAX_LIVE_TOKENS} live API tokens, the most a login may; "
                                 "revoke one it no longer uses first")
            row = ApiTokenRow(login=login, name=name, token_hash=token_hash(plain), expires_at=expires_at)
            session.add(row)
            session.commit()
            return _token_info(row), plain

    def list_api_tokens(self, login: str | None = None) -> list[ApiTokenInfo]:
        """The tokens of ``login`` (``None``: every login's), newest first, revoked ones included."""
        query = select(ApiTokenRow).order_by(ApiTokenRow.id.desc())
        if login is not None:
            query = query.where(ApiTokenRow.login == login)
        with self._session() as session:
            return [_token_info(row) for row in session.scalars(query)]

    def revoke_api_token(self, token_id: int, *, login: str | None = None) -> ApiTokenInfo:
        """Revoke a token (idempotent); with ``login``, only a token of that login.

        Raises:
            StoreError: no such token (or not ``login``'s).
        """
        with self._session() as session:
            row = session.get(ApiTokenRow, token_id)
            if row is None or (login is not None and row.login != login):
                raise StoreError(f"no API token with id {token_id}" + (f" for {login}" if login else ""))
            if row.revoked_at is None:
                row.revoked_at = utcnow()
                session.commit()
            return _token_info(row)

    def authenticate_api_token(self, plain: str) -> ApiTokenInfo | None:
        """The active token whose plain value is ``plain`` (its ``last_used_at`` set now), else ``None`` (unknown,
        revoked or expired)."""
        if not isinstance(plain, str) or not plain.startswith(TOKEN_PREFIX) or len(plain) > 200:
            return None
        digest = token_hash(plain)
        with self._session() as session:
            row = session.scalar(select(ApiTokenRow).where(ApiTokenRow.token_hash == digest))
            # the lookup is by hash; compare again in constant time all the same
            if row is None or row.revoked_at is not None or not hmac.compare_digest(row.token_hash, digest):
                return None
            now = utcnow()
            if row.expires_at is not None and _aware(row.expires_at) <= now:
                return None
            if row.last_used_at is None or (now - _aware(row.last_used_at)).total_seconds() > LAST_USED_RESOLUTION_S:
                row.last_used_at = now  # once a minute at most: a sender's requests need not each write
                session.commit()
            return _token_info(row)

    # ----------------------------------------------------------------------------------------- script runs
    def create_script_run(
        self,
        *,
        name: str,
        config: dict[str, Any],
        max_steps: int,
        owner: str | None = None,
        tags: Sequence[str] = (),
        provenance: dict[str, Any] | None = None,
        run_dir: str | None = None,
    ) -> RunInfo:
        """Insert a run recorded from a user's own training script, already ``running`` (never queued: no worker
        is started for it); ``provenance["recorded_from"]`` says where it trains (see
        :mod:`grpo_core.runs.script_runs`)."""
        run_id = self._insert_script_run(self._session(), name=name, config=config, max_steps=max_steps, owner=owner,
                                         tags=tags, provenance=provenance, run_dir=run_dir, commit=True)
        return self.get_run(run_id)

    @staticmethod
    def _insert_script_run(session, *, name, config, max_steps, owner, tags, provenance, run_dir, commit) -> int:
        now = utcnow()
        with session if commit else nullcontext(session):
            row = RunRow(name=name[:200], config=config, dataset_id=None, max_steps=max(0, int(max_steps)),
                         status=RunStatus.RUNNING.value, owner=owner, tags=list(tags), provenance=provenance,
                         started_at=now, heartbeat_at=now, run_dir=run_dir, phase="training")
            session.add(row)
            session.flush()
            if commit:
                session.commit()
            return row.id

    def count_ingest_runs(self, login: str) -> int:
        """How many runs of the store were created through the ingest API by ``login``'s tokens (deleted runs
        are not counted)."""
        with self._session() as session:
            return int(session.scalar(
                select(func.count()).select_from(IngestCursorRow)
                .join(ApiTokenRow, ApiTokenRow.id == IngestCursorRow.token_id)
                .join(RunRow, RunRow.id == IngestCursorRow.run_id)
                .where(ApiTokenRow.login == login)) or 0)

    def open_ingest_run(self, token_id: int, client_key: str, *, max_runs: int = 0, login: str | None = None,
                        **fields: Any) -> tuple[RunInfo, int]:
        """The run token ``token_id`` records under the sender's ``client_key``, created by
        :meth:`create_script_run` with ``fields`` the first time; returns it and the last batch applied (0: none).

        A create sent twice (the answer was lost) finds the run made the first time: one run per key and token.
        With ``max_runs`` (> 0) and ``login``, a new run is refused once ``login``'s tokens created that many.

        Raises:
            IngestQuotaError: the login's quota is reached (nothing is stored).
        """
        key = _check_name(client_key, "the client key")[:64]
        with self._session() as session:
            cursor = session.scalar(select(IngestCursorRow).where(IngestCursorRow.token_id == token_id,
                                                                  IngestCursorRow.client_key == key))
            if cursor is None:
                if max_runs > 0 and login is not None and self.count_ingest_runs(login) >= max_runs:
                    raise IngestQuotaError(f"{login} has created {max_runs} runs through the ingest API, the most a "
                                           "login may keep; delete some in the dashboard first")
                run_id = self._insert_script_run(session, commit=False, **fields)
                session.add(IngestCursorRow(run_id=run_id, token_id=token_id, client_key=key, last_seq=0))
                try:
                    session.commit()
                except IntegrityError:  # the same create, at the same moment, from a retry: take that one
                    session.rollback()
                    return self.open_ingest_run(token_id, client_key, max_runs=max_runs, login=login, **fields)
                return self.get_run(run_id), 0
            return self.get_run(cursor.run_id), cursor.last_seq

    def ingest_cursor(self, run_id: int) -> IngestCursor | None:
        """The ingest state of a run recorded over HTTP (``None``: the run was not)."""
        with self._session() as session:
            row = session.get(IngestCursorRow, run_id)
            if row is None:
                return None
            return IngestCursor(run_id=row.run_id, token_id=row.token_id, client_key=row.client_key,
                                last_seq=row.last_seq)

    def advance_ingest_cursor(self, run_id: int, expected_seq: int, new_seq: int) -> bool:
        """Move a run's last applied batch from ``expected_seq`` to ``new_seq``; False when another request moved it
        first (the caller then re-reads the cursor and applies nothing twice)."""
        with self._session() as session:
            result = session.execute(update(IngestCursorRow)
                                     .where(IngestCursorRow.run_id == run_id, IngestCursorRow.last_seq == expected_seq)
                                     .values(last_seq=new_seq))
            session.commit()
            return result.rowcount == 1

