"""Sends a spool to a served dashboard over HTTP, and stands in for the store in a script that records remotely.

* :class:`DashboardClient`: the three requests (create the run, post a batch of records, report progress and read
  the cancel flag) with the API token as ``Authorization: Bearer``, over the standard library's ``urllib``, to an
  ``http(s)`` URL only. A redirect is followed only within the same origin (scheme, host and port): one to another
  origin is refused before anything is sent there (``urllib`` would carry the ``Authorization`` header along).
* :class:`SpoolSender`: a daemon thread that sends the spool's unacknowledged records in order, in batches, and
  reports progress; when the dashboard does not answer it retries with a growing pause (at most
  ``max_backoff_s``), never blocking the thread that appends. The dashboard applies each record once (by its
  number), so a batch whose answer was lost is simply sent again.
* :class:`RemoteStore`: the few :class:`storage.Store` methods the recorder and its heartbeat call
  (``record_step``, ``heartbeat``, ``cancel_requested``, ``finish_run``), answered from the spool and the sender:
  a step becomes a spool record, the cancel flag is the one the dashboard last sent.

Imports neither torch nor TRL (``grpo-dashboard sync`` uses the client and the sender).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Sequence
from typing import Any

from grpo_core.integrations.spool import Spool
from grpo_core.integrations.wire import MAX_BODY_BYTES, MAX_RECORDS, step_record
from storage import GroupRecord, RunStatus

API_PREFIX = "/api/v1"


class DashboardError(RuntimeError):
    """The dashboard refused a request (``status`` is the HTTP status; 0: it could not be reached)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"HTTP {status}: {message}" if status else message)
        self.status = status

    @property
    def permanent(self) -> bool:
        """A refusal that a retry will not change (a bad or revoked token, a record refused as invalid, a redirect
        to another origin)."""
        return self.status in (400, 401, 403, 404, 413, 422) or 300 <= self.status < 400


def origin_of(url: str) -> tuple[str, str, int | None]:
    """``(scheme, host, port)`` of ``url``, lower-cased, the port made explicit (80 for http, 443 for https).

    Raises:
        ValueError: not an ``http`` or ``https`` URL with a host.
    """
    parts = urllib.parse.urlsplit(str(url).strip())
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{str(url)[:200]!r} is not an http(s) URL of a dashboard")
    return scheme, parts.hostname.lower(), parts.port or (443 if scheme == "https" else 80)


def same_origin(first: str, second: str) -> bool:
    """Whether two URLs have the same scheme, host and port (False when either is not an http(s) URL)."""
    try:
        return origin_of(first) == origin_of(second)
    except ValueError:
        return False


def url_binding(url: str, token: str) -> str:
    """An HMAC-SHA256 of the dashboard's URL keyed by the token, written in a spool's ``meta.json`` when the
    callback makes it: ``grpo-dashboard sync`` sends the token to that URL only if the binding matches, so a
    ``meta.json`` edited to name another server (without the token) is refused."""
    return hmac.new(token.encode("utf-8"), url.rstrip("/").encode("utf-8"), hashlib.sha256).hexdigest()


class _SameOriginRedirects(urllib.request.HTTPRedirectHandler):
    """Follows a redirect only to the origin of the request (the token never leaves it)."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        target = urllib.parse.urljoin(req.full_url, newurl)
        if not same_origin(req.full_url, target):
            raise DashboardError(code, f"the dashboard redirected to another origin ({target[:200]}); the token is "
                                       "not sent there: give the dashboard's own URL")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


class DashboardClient:
    """The HTTP requests of a script to a served dashboard at ``url`` with API ``token``.

    Raises:
        DashboardError: (status 0) ``url`` is not an http(s) URL.
    """

    def __init__(self, url: str, token: str, *, timeout_s: float = 30.0) -> None:
        self.url = url.rstrip("/")
        try:
            origin_of(self.url)
        except ValueError as exc:
            raise DashboardError(0, str(exc)) from None
        self.token = token
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_SameOriginRedirects)

    def _request(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode("utf-8")
        request = urllib.request.Request(self.url + API_PREFIX + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:  # http(s) only (checked)
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                detail = json.loads(exc.read() or b"{}").get("detail", exc.reason)
            except ValueError:
                detail = exc.reason
            raise DashboardError(exc.code, str(detail)) from exc
        except (urllib.error.URLError, OSError, ValueError) as exc:
            raise DashboardError(0, f"the dashboard at {self.url} cannot be reached: {exc}") from exc

    def create_run(self, create: dict[str, Any], client_key: str) -> tuple[int, int]:
        """Create (or find, for the same ``client_key``) the run; returns its id and the last record applied."""
        answer = self._request("POST", "/runs", {**create, "client_key": client_key})
        return int(answer["run_id"]), int(answer["last_seq"])

    def send_records(self, run_id: int, records: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """Post records (consecutive numbers); returns ``{"last_seq": int, "cancel_requested": bool}``."""
        return self._request("POST", f"/runs/{run_id}/batches", {"records": list(records)})

    def progress(self, run_id: int, step: int | None, phase: str | None) -> bool:
        """Report the step reached (the run's heartbeat); returns the run's cancel flag."""
        return bool(self._request("POST", f"/runs/{run_id}/progress", {"step": step, "phase": phase})
                    .get("cancel_requested"))


class SpoolSender:
    """Empties ``spool`` into the dashboard through ``client`` on a daemon thread (started by :meth:`start`).

    Args:
        poll_s: seconds between two looks at the spool when it is empty.
        progress_s: least seconds between two progress reports (the heartbeat, and the cancel flag's answer when no
            step was sent meanwhile).
        max_backoff_s: longest pause after a failed request.
        log: where one line per change of the connection's state goes (lost, back, refused).
    """

    def __init__(self, spool: Spool, client: DashboardClient, *, poll_s: float = 0.5, max_backoff_s: float = 30.0,
                 progress_s: float = 2.0, log=None) -> None:
        self.spool = spool
        self.client = client
        self.poll_s = poll_s
        self.max_backoff_s = max_backoff_s
        self.progress_s = progress_s
        self._next_progress = 0.0
        self.log = log or (lambda message: print(f"[grpo-dashboard] {message}", file=sys.stderr, flush=True))
        self.cancel_requested = threading.Event()
        self.progress_step: int | None = None
        self.progress_phase: str | None = None
        self.refused: DashboardError | None = None
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._connected: bool | None = None
        self._thread = threading.Thread(target=self._loop, name="grpo-dashboard-sender", daemon=True)

    def start(self) -> SpoolSender:
        self._thread.start()
        return self

    def wake(self) -> None:
        """Send now rather than at the next poll (a record was appended)."""
        self._wake.set()

    def send_once(self) -> bool:
        """One round on the calling thread: create the run if needed, send what is pending (every batch), report
        progress. Returns whether the spool is empty.

        Raises:
            DashboardError: a request failed.
        """
        run_id = self.spool.run_id
        if run_id is None or self.spool.acked == 0:  # a create again after a restart finds the same run
            run_id, applied = self.client.create_run(self.spool.create_request, self.spool.client_key)
            self.spool.set_run_id(run_id)
            if applied != self.spool.acked:
                self.spool.ack(applied)
        while True:
            records = self.spool.pending(max_records=MAX_RECORDS // 4, max_bytes=MAX_BODY_BYTES // 4)
            if not records:
                break
            before = self.spool.acked
            answer = self.client.send_records(run_id, records)
            self.spool.ack(int(answer["last_seq"]))  # lower than sent: the dashboard wants earlier ones again
            if answer.get("cancel_requested"):
                self.cancel_requested.set()
            if self.spool.acked == before:
                raise DashboardError(0, f"the dashboard applied none of records {records[0]['seq']}.."
                                        f"{records[-1]['seq']}")
        if time.monotonic() >= self._next_progress:  # a batch's answer carries the cancel flag too
            self._next_progress = time.monotonic() + self.progress_s
            if self.client.progress(run_id, self.progress_step, self.progress_phase):
                self.cancel_requested.set()
        return self.spool.finished

    def _loop(self) -> None:
        backoff = self.poll_s
        while not self._stop.is_set():
            try:
                self.send_once()
                if self._connected is False:
                    self.log(f"the dashboard answers again; {self.spool.folder} is sent")
                self._connected, self.refused, backoff = True, None, self.poll_s
            except DashboardError as exc:
                if exc.permanent:
                    if self.refused is None or str(self.refused) != str(exc):
                        self.log(f"the dashboard refused the records ({exc}); they stay in {self.spool.folder} "
                                 "(send them later with `grpo-dashboard sync`)")
                    self.refused = exc
                elif self._connected is not False:
                    self.log(f"{exc}; training goes on, steps wait in {self.spool.folder}")
                self._connected = False
                backoff = min(self.max_backoff_s, backoff * 2)
            self._wake.wait(backoff if self._connected is False else self.poll_s)
            self._wake.clear()

    def flush(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for the spool to be sent; returns whether it was."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.spool.finished and self._connected:
                return True
            self._wake.set()
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))
        return self.spool.finished

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5.0)


class RemoteStore:
    """The store methods the recorder, its heartbeat and the callback call, for a run recorded over HTTP.

    Writes go to the spool (never over the network on the caller's thread); reads answer from what the sender last
    heard. ``run_id`` arguments are ignored: one ``RemoteStore`` records one run.
    """

    def __init__(self, spool: Spool, sender: SpoolSender) -> None:
        self.spool = spool
        self.sender = sender

    def record_step(self, run_id: int, step: int, *, metrics: dict[str, Any] | None = None,
                    wall_time: float | None = None, groups: Sequence[tuple[str, Sequence[GroupRecord]]] = (),
                    cache: Any = None) -> bool:
        record = step_record(0, step, metrics=metrics, wall_time=wall_time, groups=groups)
        record.pop("seq")
        self.spool.append(record)
        self.sender.progress_step = step
        self.sender.wake()
        return self.sender.cancel_requested.is_set()

    def heartbeat(self, run_id: int, *, step: int | None = None, phase: str | None = None) -> bool:
        if step is not None:
            self.sender.progress_step = step
        if phase is not None:
            self.sender.progress_phase = phase[:200]
        return self.sender.cancel_requested.is_set()

    def cancel_requested(self, run_id: int) -> bool:
        return self.sender.cancel_requested.is_set()

    def finish_run(self, run_id: int, status: RunStatus, error: str | None = None) -> bool:
        self.spool.append({"kind": "finish", "status": RunStatus(status).value,
                           "error": None if error is None else error[:20_000]})
        self.sender.wake()
        return True
