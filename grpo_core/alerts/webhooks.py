"""Webhook alerts: a JSON message when a run completes, fails or is cancelled, and once per new run-doctor warning.

The URL is the run's ``webhook_url`` (:class:`~grpo_core.run_config.RunConfig`) where its owner may set one
(``--run-webhooks``), else the dashboard's ``--webhook-url`` / ``GRPO_WEBHOOK_URL``
(:attr:`grpo_core.settings.Settings.webhook_url`); a run with neither gets none. Every POST goes through
:func:`grpo_core.alerts.targets.post_json`: an internal destination (loopback, private, this machine, the dashboard)
is refused unless an admin allowed its host, a redirect is not followed, and the answer's body is never read; a
refusal is recorded on the run with its reason, not retried. The :class:`Notifier` lives in the web process: an APScheduler job reads the store every ``interval_s``
(never the launcher or the worker, which therefore never wait on a webhook), and a background thread delivers the
messages, retrying with exponential backoff. Each message has a key (:func:`status_key`, :func:`finding_key`)
stored on the run once it was delivered or given up on (``Store.record_alert``), so a message goes out once, even
across a restart of the dashboard; a failed delivery is logged and kept as the run's ``alert_error``.

Message (:func:`alert_message`), ``POST``ed as ``application/json``::

    {"event": "completed" | "failed" | "cancelled" | "doctor",
     "text": "run #3 baseline completed at step 200/200, last reward 0.81",
     "run": {"id", "name", "status", "step", "max_steps", "last_reward", "owner", "error", "link"},
     "finding": {"code", "severity", "title", "advice", "steps"}}        # doctor messages only

A run that finished before the notifier started (minus :data:`STARTUP_LOOKBACK_S`) gets no status message: turning
alerts on does not replay a store's history. Doctor findings of ``info`` severity are not sent. Imports no torch.
"""

from __future__ import annotations

import functools
import logging
import queue
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from grpo_core.alerts.targets import WebhookPolicy, WebhookRefused, may_set_run_webhook, post_json, url_in_public_text
from grpo_core.doctor import Finding, Severity, diagnose, series_from_points
from grpo_core.doctor.thresholds import RECENT_STEPS
from storage import MetricPoint, RunInfo, RunStatus, Store, StoreError

if TYPE_CHECKING:  # settings read the webhook flags through alerts.targets: a type only here, no import cycle
    from grpo_core.settings import Settings

log = logging.getLogger(__name__)

#: Seconds between two reads of the store.
DEFAULT_INTERVAL_S = 10.0
#: Delivery attempts per message, and the wait before the n-th retry: ``BACKOFF_S * 2 ** (n - 1)`` seconds.
MAX_ATTEMPTS = 4
BACKOFF_S = 2.0
#: Seconds one POST may take.
TIMEOUT_S = 10.0
#: A run that finished up to this many seconds before the notifier started still gets its status message.
STARTUP_LOOKBACK_S = 600.0
#: How many of the latest groups the doctor reads (as the Runs tab's panel does).
DOCTOR_GROUPS = 16
#: The doctor severities that are sent.
ALERT_SEVERITIES = (Severity.ERROR, Severity.WARNING)


def webhook_url(run: RunInfo, settings: Settings) -> str:
    """The URL a run's messages go to: its own ``webhook_url`` where its owner may set one (``--run-webhooks``),
    else the dashboard's; ``""``: none."""
    own = str(run.config.get("webhook_url") or "").strip()
    if own and may_set_run_webhook(WebhookPolicy.from_settings(settings), run.owner, settings.admins):
        return own
    return settings.webhook_url


def status_key(run: RunInfo) -> str:
    """``"completed@<finished_at ISO>"``: one key per time a run finishes (a resumed run finishes again)."""
    when = run.finished_at.isoformat() if run.finished_at else ""
    return f"{run.status.value}@{when}"


def finding_key(finding: Finding) -> str:
    """``"doctor:<code>"``: one message per finding code and run."""
    return f"doctor:{finding.code}"


def last_reward(points: Sequence[MetricPoint]) -> float | None:
    """The last non-null ``reward`` among ``points`` (ordered by step), or ``None``."""
    for point in reversed(points):
        if point.key == "reward" and point.value is not None:
            return point.value
    return None


def alert_message(
    run: RunInfo, event: str, *, reward: float | None, link: str, finding: Finding | None = None
) -> dict[str, Any]:
    """The JSON body of one message (see the module docstring). ``event`` is the run's final status or ``doctor``."""
    shown = "none yet" if reward is None else f"{reward:.4g}"
    if finding is None:
        text = f"run #{run.id} {run.name} {run.status.value} at step {run.current_step}/{run.max_steps}, " \
               f"last reward {shown}"
        if run.error:
            text += f": {run.error.splitlines()[0][:200]}"
    else:
        text = f"run #{run.id} {run.name}, step {run.current_step}: {finding.severity.value}: {finding.title}"
    message: dict[str, Any] = {
        "event": event,
        "text": text,
        "run": {
            "id": run.id,
            "name": run.name,
            "status": run.status.value,
            "step": run.current_step,
            "max_steps": run.max_steps,
            "last_reward": reward,
            "owner": run.owner,
            "error": run.error,
            "link": link,
        },
    }
    if finding is not None:
        message["finding"] = {
            "code": finding.code,
            "severity": finding.severity.value,
            "title": finding.title,
            "advice": finding.advice,
            "steps": list(finding.steps),
        }
    return message


def link_host(host: str) -> str:
    """The host an alert's link names for a dashboard served on ``host``: this machine's name (``socket.gethostname``)
    for the any-address binds, an IPv6 address in brackets, else ``host`` itself."""
    if host.strip() in ("", "0.0.0.0", "::", "[::]"):
        return socket.gethostname() or "localhost"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


@dataclass
class _Delivery:
    run_id: int
    key: str
    url: str
    body: dict[str, Any]


@dataclass
class _RunMetrics:
    """The metric points of one run read so far (the store is read incrementally, after ``last_step``), the latest
    :data:`~grpo_core.doctor.thresholds.RECENT_STEPS` steps at most."""

    points: list[MetricPoint] = field(default_factory=list)
    last_step: int = -1


class Notifier:
    """Finds the messages due in the store and delivers them from a background thread.

    Args:
        store: the store to read (and to record deliveries in).
        settings: the dashboard's ``webhook_url`` and ``host``/``port`` (for the link).
        post: ``post(url, body)`` delivers one message or raises (default
            :func:`grpo_core.alerts.targets.post_json` under the settings' :class:`WebhookPolicy`; tests swap it).
        interval_s: seconds between two reads of the store (:meth:`start`).
        backoff_s: wait before the first retry, doubled for each next one.
        now: the clock (UTC); the notifier's start time bounds which finished runs get a status message.
    """

    def __init__(
        self,
        store: Store,
        settings: Settings,
        *,
        post: Callable[[str, dict[str, Any]], None] | None = None,
        interval_s: float = DEFAULT_INTERVAL_S,
        backoff_s: float = BACKOFF_S,
        max_attempts: int = MAX_ATTEMPTS,
        now: Callable[[], datetime] = lambda: datetime.now(timezone.utc),
    ) -> None:
        self.store = store
        self.settings = settings
        self.post = post or functools.partial(post_json, policy=WebhookPolicy.from_settings(settings),
                                              timeout_s=TIMEOUT_S)
        self.interval_s = interval_s
        self.backoff_s = backoff_s
        self.max_attempts = max_attempts
        self._now = now
        self._since = now() - timedelta(seconds=STARTUP_LOOKBACK_S)
        self._queue: queue.Queue[_Delivery | None] = queue.Queue()
        self._in_flight: set[tuple[int, str]] = set()
        self._lock = threading.Lock()
        self._metrics: dict[int, _RunMetrics] = {}
        self._thread: threading.Thread | None = None
        self._scheduler = None

    @property
    def link_base(self) -> str:
        """The dashboard's address as links show it: ``http://<host>:<port>/``; served on every address
        (``0.0.0.0``, ``::``), this machine's name stands for the host (a link to ``0.0.0.0`` opens nothing)."""
        return f"http://{link_host(self.settings.host)}:{self.settings.port}/"

    def start(self) -> None:
        """Start the delivery thread and the APScheduler job that calls :meth:`check` every ``interval_s``."""
        from apscheduler.schedulers.background import BackgroundScheduler

        self._start_thread()
        self._scheduler = BackgroundScheduler(daemon=True)
        self._scheduler.add_job(self.check, "interval", seconds=self.interval_s, max_instances=1, coalesce=True,
                                id="grpo-alerts")
        self._scheduler.start()

    def shutdown(self) -> None:
        """Stop the job and the thread (messages still queued are dropped; they go out after the next start)."""
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(timeout=5)
            self._thread = None

    def _start_thread(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._deliver_forever, name="grpo-alerts", daemon=True)
            self._thread.start()

    def check(self) -> list[tuple[int, str]]:
        """Queue every message due: final-status messages and new doctor warnings of runs with a webhook URL.

        Returns ``(run_id, key)`` of the messages queued by this call. Never raises: a failure is logged.
        """
        self._start_thread()
        try:
            return self._check()
        except Exception:  # noqa: BLE001 - a scheduler job must not die on one bad read
            log.exception("alerts: checking the store failed")
            return []

    def _check(self) -> list[tuple[int, str]]:
        queued = []
        watched = set()
        for run in self.store.list_runs():
            url = webhook_url(run, self.settings)
            recently_final = run.status.is_final and run.finished_at is not None and run.finished_at >= self._since
            if not url or not (run.status == RunStatus.RUNNING or recently_final):
                continue
            watched.add(run.id)
            sent = set(run.alerts_sent)
            findings = self._new_findings(run, sent)
            reward = last_reward(self._metrics[run.id].points)
            link = f"{self.link_base}run?run={run.id}"  # the run's own page (app.run_page)
            for finding in findings:
                queued += self._enqueue(run, finding_key(finding), url,
                                        alert_message(run, "doctor", reward=reward, link=link, finding=finding))
            if recently_final:
                key = status_key(run)
                if key not in sent:
                    queued += self._enqueue(run, key, url,
                                            alert_message(run, run.status.value, reward=reward, link=link))
        for run_id in set(self._metrics) - watched:
            del self._metrics[run_id]  # deleted or requeued: read again from the start when it runs
        return queued

    def _new_findings(self, run: RunInfo, sent: set[str]) -> list[Finding]:
        state = self._metrics.setdefault(run.id, _RunMetrics())
        # the doctor judges the latest steps only: read no more at first, and keep no more
        after = state.last_step if state.points else max(-1, (run.current_step or 0) - RECENT_STEPS)
        new_points = self.store.metrics_since(run.id, after)
        if new_points:
            state.points.extend(new_points)
            state.last_step = new_points[-1].step
            first = state.last_step - RECENT_STEPS
            if state.points[0].step <= first:
                state.points = [p for p in state.points if p.step > first]
        elif run.status.is_final:
            return []  # nothing new since the last read: its findings were already considered
        groups = self.store.recent_groups(run.id, limit=DOCTOR_GROUPS)
        findings = diagnose(series_from_points(state.points), groups, run.config)
        return [f for f in findings if f.severity in ALERT_SEVERITIES and finding_key(f) not in sent]

    def _enqueue(self, run: RunInfo, key: str, url: str, body: dict[str, Any]) -> list[tuple[int, str]]:
        with self._lock:
            if (run.id, key) in self._in_flight:
                return []
            self._in_flight.add((run.id, key))
        self._queue.put(_Delivery(run.id, key, url, body))
        return [(run.id, key)]

    def _deliver_forever(self) -> None:
        while True:
            delivery = self._queue.get()
            if delivery is None:
                return
            try:
                self.deliver(delivery)
            finally:
                with self._lock:
                    self._in_flight.discard((delivery.run_id, delivery.key))
                self._queue.task_done()

    def deliver(self, delivery: _Delivery) -> str | None:
        """POST one message, retrying with backoff; record it on the run. Returns the error given up on, or None."""
        error = None
        refused = False
        for attempt in range(1, self.max_attempts + 1):
            try:
                self.post(delivery.url, delivery.body)
                error = None
                break
            except WebhookRefused as exc:  # nothing was sent, and retrying would not change that
                error, refused = str(exc), True
                break
            except (OSError, ValueError) as exc:
                error = f"{exc.__class__.__name__}: {exc}"
                log.warning("alerts: run #%s %s to %s, attempt %d/%d failed: %s", delivery.run_id, delivery.key,
                            delivery.url, attempt, self.max_attempts, error)
                if isinstance(exc, ValueError) or attempt == self.max_attempts:
                    break
                time.sleep(self.backoff_s * 2 ** (attempt - 1))
        shown = None
        if error is not None:
            error = url_in_public_text(error, delivery.url)  # the card is every login's; the URL its owner's
            shown = f"webhook message {delivery.key} not sent: {error}" if refused else \
                f"webhook message {delivery.key} not delivered after {attempt} attempt(s): {error}"
            log.error("alerts: run #%s: %s", delivery.run_id, shown)
        try:
            self.store.record_alert(delivery.run_id, delivery.key, shown)
        except StoreError:
            log.exception("alerts: could not record the delivery of %s", delivery.key)
        return shown

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until every queued message was delivered or given up on (tests). Returns False on timeout."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if not self._in_flight:
                    return True
            time.sleep(0.05)
        return False
