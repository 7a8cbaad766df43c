"""The HTTP API through which a script's :class:`grpo_core.integrations.DashboardCallback` records a run.

Routes (JSON; :mod:`grpo_core.integrations.wire` for the bodies), each authenticated by an API token of a login
(``Authorization: Bearer <token>``; :mod:`storage.api_tokens`):

* ``POST /api/v1/runs``: create the run (or find the one this token created under the same ``client_key``), owned
  by the token's login and marked as recorded from a script; answers ``{"run_id", "last_seq"}``.
* ``POST /api/v1/runs/{id}/batches``: records numbered after the last one applied are applied in order (a step:
  :meth:`storage.Store.record_step`, one transaction; the end: :meth:`storage.Store.finish_run`), those at or before
  it are skipped (sent again after a lost answer), and a gap applies nothing; answers ``{"last_seq",
  "cancel_requested"}``, so that the sender resends from there and the script stops when Cancel was pressed.
* ``POST /api/v1/runs/{id}/progress``: the step reached (the heartbeat); ``GET /api/v1/runs/{id}/control``: the
  cancel flag and status. Both answer ``{"cancel_requested", "status"}``.

What a token holder can do is bounded: bodies over :data:`~grpo_core.integrations.wire.MAX_BODY_BYTES` are refused
while being read (413), every field is validated (422 names it), a run's config must be a valid run config, and a
token writes only the runs it created (any other run id answers 404, as an unknown one does). A missing, unknown or
revoked token answers 401, and so does an expired one, or one whose login is no longer in the auth file
(:class:`grpo_core.access.auth_file.LoginRegistry`, read again when it changes). A login creates at most
``max_runs`` runs through the API, all its tokens together (403 beyond; ``--ingest-max-runs``). A run's config,
provenance and a group's extra columns are held to the bounds of config text
(:data:`grpo_core.integrations.wire.JSON_LIMITS`), and the config to what the token's login could launch
(:mod:`grpo_core.access.boundary`), before anything is stored; a run keeps at most
:data:`~grpo_core.integrations.wire.MAX_RUN_METRIC_KEYS` distinct metric names (a record bringing more: 422); a run
id that is not a whole number from 1 to :data:`MAX_RUN_ID` answers 404. The routes run on the dashboard's own FastAPI app (:func:`ingest_routes`), beside
Gradio's; they never load torch.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, HTTPException, Request
from pydantic import ValidationError
from starlette.concurrency import run_in_threadpool

from grpo_core.access.boundary import Boundary
from grpo_core.integrations.wire import (
    MAX_BODY_BYTES,
    MAX_RUN_METRIC_KEYS,
    Batch,
    CreateRun,
    FinishRecord,
    Progress,
    groups_from_wire,
)
from grpo_core.run_config import ConfigError, parse_run_config
from grpo_core.runs.script_runs import RECORDED_FROM, SCRIPT_KIND
from storage import RunStatus, Store, StoreError
from storage.api_tokens import ApiTokenInfo, IngestQuotaError


def _bearer(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise HTTPException(401, "an API token is needed: Authorization: Bearer <token>",
                            headers={"WWW-Authenticate": "Bearer"})
    return token.strip()


async def _read_json(request: Request, limit: int = MAX_BODY_BYTES) -> Any:
    """The request's JSON body, read at most ``limit`` bytes (413 beyond, while reading); 400 when not JSON."""
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise HTTPException(413, f"the body is over the limit of {limit} bytes")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise HTTPException(413, f"the body is over the limit of {limit} bytes")
        chunks.append(chunk)
    try:
        return json.loads(b"".join(chunks))
    except (ValueError, RecursionError) as exc:
        raise HTTPException(400, f"the body is not JSON: {str(exc)[:200]}") from exc


#: The largest run id a path may name (SQLite's INTEGER); beyond it, below 1, or not a whole number: no such run.
MAX_RUN_ID = 2**63 - 1


def _run_id(text: str) -> int:
    """A path's run id, or 404 (as for an unknown run) when it is not a whole number from 1 to :data:`MAX_RUN_ID`."""
    if not text.isascii() or not text.isdigit() or len(text) > 19 or not 1 <= int(text) <= MAX_RUN_ID:
        raise HTTPException(404, f"no run {text[:40]!r} recorded with this token")
    return int(text)


def _validated(model, body: Any):
    """``body`` as a ``model`` (pydantic), or 422 naming the first five fields at fault."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        parts = [f"{'.'.join(str(p) for p in error.get('loc', ()))}: {error.get('msg')}" for error in exc.errors()[:5]]
        raise HTTPException(422, "; ".join(parts)) from exc


class IngestApi:
    """The handlers, around the dashboard's store; one lock per run so that two requests for a run (a retry racing
    its first try) apply its records one after the other."""

    def __init__(self, store: Store, boundary: Callable[[str], Boundary] | None = None, *, logins=None,
                 max_runs: int = 0) -> None:
        self.store = store
        self.boundary = boundary  # a login's boundary (grpo_core.access.boundary); None: not checked (tests)
        self.logins = logins  # LoginRegistry | None (no logins: tokens of the login "local")
        self.max_runs = max_runs
        self._locks: dict[int, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._create_lock = threading.Lock()  # a login's quota is counted and used by one create at a time

    def _lock(self, run_id: int) -> threading.Lock:
        with self._locks_guard:
            if len(self._locks) > 4096:  # a lock nobody holds is dropped; a new one is made on the next request
                self._locks = {k: v for k, v in self._locks.items() if v.locked()}
            return self._locks.setdefault(run_id, threading.Lock())

    def authenticate(self, request: Request) -> ApiTokenInfo:
        token = self.store.authenticate_api_token(_bearer(request))
        if token is None:
            raise HTTPException(401, "the API token is unknown, revoked or expired",
                                headers={"WWW-Authenticate": "Bearer"})
        if self.logins is not None and not self.logins.is_live(token.login):
            raise HTTPException(401, "the API token's login may no longer log in to this dashboard",
                                headers={"WWW-Authenticate": "Bearer"})
        return token

    def _own_run(self, token: ApiTokenInfo, run_id: int):
        cursor = self.store.ingest_cursor(run_id)
        if cursor is None or cursor.token_id != token.id:
            raise HTTPException(404, f"no run {run_id} recorded with this token")
        return cursor

    def create(self, token: ApiTokenInfo, body: Any) -> dict[str, Any]:
        create = _validated(CreateRun, body)
        try:
            # webhook_url is the dashboard's to set (a token holder's would make the server call any address)
            config = parse_run_config({**create.config, "webhook_url": ""}, source="config")
            if self.boundary is not None:  # what the login could launch: a stored config is resumed, cloned, exported
                config = self.boundary(token.login).check_config(config)
            config = config.model_dump(mode="json")
        except ConfigError as exc:
            raise HTTPException(422, str(exc)[:2000]) from exc
        provenance = dict(create.provenance)
        origin = provenance.get(RECORDED_FROM) if isinstance(provenance.get(RECORDED_FROM), dict) else {}
        provenance[RECORDED_FROM] = {**origin, "kind": SCRIPT_KIND, "via": "http", "token": token.name}
        try:
            with self._create_lock:
                run, last_seq = self.store.open_ingest_run(
                    token.id, create.client_key, max_runs=self.max_runs, login=token.login,
                    name=create.name or "script run", config=config, max_steps=create.max_steps, owner=token.login,
                    tags=create.tags, provenance=provenance, run_dir=None)
        except IngestQuotaError as exc:
            raise HTTPException(403, str(exc)) from exc
        return {"run_id": run.id, "last_seq": last_seq}

    def batches(self, token: ApiTokenInfo, run_id: int, body: Any) -> dict[str, Any]:
        batch = _validated(Batch, body)
        self._own_run(token, run_id)
        with self._lock(run_id):
            last = self.store.ingest_cursor(run_id).last_seq
            if batch.records[0].seq <= last + 1:  # else a gap: nothing applied, the sender resends from `last`
                names = set(self.store.metric_keys(run_id))
                for record in batch.records:
                    if record.seq <= last:
                        continue  # applied before (a resend)
                    self._check_names(record, names)
                    self._apply(run_id, record)
                    if not self.store.advance_ingest_cursor(run_id, last, record.seq):
                        raise HTTPException(409, "the run's records were written concurrently; send again")
                    last = record.seq
        return {"last_seq": last, **self._control(run_id)}

    @staticmethod
    def _check_names(record, names: set[str]) -> None:
        """422 when ``record`` would bring the run (its metric names so far: ``names``, updated here) past
        :data:`MAX_RUN_METRIC_KEYS` distinct metric names; nothing of the record is stored then."""
        if isinstance(record, FinishRecord):
            return
        fresh = set(record.metrics) - names
        if len(names) + len(fresh) > MAX_RUN_METRIC_KEYS:
            raise HTTPException(422, f"record {record.seq}: a run keeps at most {MAX_RUN_METRIC_KEYS} metric names; "
                                     f"it has {len(names)} and this record brings {len(fresh)} more")
        names |= fresh

    def _apply(self, run_id: int, record) -> None:
        if isinstance(record, FinishRecord):
            self.store.finish_run(run_id, RunStatus(record.status), error=record.error)
            return
        try:
            groups = groups_from_wire(record)
        except ValueError as exc:
            raise HTTPException(422, f"record {record.seq}: {exc}") from exc
        self.store.record_step(run_id, record.step, metrics=record.metrics, wall_time=record.wall_time,
                               groups=groups)

    def progress(self, token: ApiTokenInfo, run_id: int, body: Any) -> dict[str, Any]:
        progress = _validated(Progress, body)
        self._own_run(token, run_id)
        if self.store.get_run(run_id).status == RunStatus.RUNNING:
            self.store.heartbeat(run_id, step=progress.step, phase=progress.phase)
        return self._control(run_id)

    def control(self, token: ApiTokenInfo, run_id: int) -> dict[str, Any]:
        self._own_run(token, run_id)
        return self._control(run_id)

    def _control(self, run_id: int) -> dict[str, Any]:
        try:
            run = self.store.get_run(run_id)
        except StoreError as exc:  # deleted in the dashboard meanwhile
            raise HTTPException(404, str(exc)) from exc
        return {"cancel_requested": bool(run.cancel_requested), "status": run.status.value}


def ingest_routes(store: Store, boundary: Callable[[str], Boundary] | None = None, *, logins=None,
                  max_runs: int = 0) -> list:
    """The API's routes, to give Gradio's FastAPI app (``launch(app_kwargs={"routes": ...})``) ahead of its own.
    ``boundary(login)``: what that login may make the server run or read; a run's config outside it is refused.
    ``logins`` (a :class:`grpo_core.access.auth_file.LoginRegistry`) says which tokens' logins are still live,
    ``max_runs`` how many runs a login may create (0: no limit)."""
    api = IngestApi(store, boundary, logins=logins, max_runs=max_runs)
    router = APIRouter(prefix="/api/v1")

    async def authenticated(request: Request) -> ApiTokenInfo:
        return await run_in_threadpool(api.authenticate, request)

    @router.post("/runs")
    async def create_run(request: Request) -> dict[str, Any]:
        token = await authenticated(request)
        body = await _read_json(request, limit=2 * 1024 * 1024)
        return await run_in_threadpool(api.create, token, body)

    @router.post("/runs/{run_id}/batches")
    async def post_batches(run_id: str, request: Request) -> dict[str, Any]:
        token = await authenticated(request)
        body = await _read_json(request)
        return await run_in_threadpool(api.batches, token, _run_id(run_id), body)

    @router.post("/runs/{run_id}/progress")
    async def post_progress(run_id: str, request: Request) -> dict[str, Any]:
        token = await authenticated(request)
        body = await _read_json(request, limit=4096)
        return await run_in_threadpool(api.progress, token, _run_id(run_id), body)

    @router.get("/runs/{run_id}/control")
    async def get_control(run_id: str, request: Request) -> dict[str, Any]:
        token = await authenticated(request)
        return await run_in_threadpool(api.control, token, _run_id(run_id))

    return list(router.routes)
