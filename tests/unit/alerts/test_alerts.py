"""Webhook alerts against a real HTTP server on 127.0.0.1: completed, failed and cancelled runs and a run-doctor
warning each send one message (not again on the next check, nor after a restart of the notifier); a server that
answers 500 twice is retried with backoff; an unreachable one is given up on and the failure shown on the run;
runs without a URL, and runs that finished long before the notifier started, send nothing. The receivers listen on
loopback, which the dashboard allows here as an admin would (``--webhook-allow-host 127.0.0.1``); what is refused
without it is in ``tests/unit/alerts/test_webhook_targets.py``."""

from __future__ import annotations

import json
import socket
import threading
import time
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.views.runs import run_status_html
from grpo_core.alerts.webhooks import Notifier, alert_message, link_host, status_key, webhook_url
from storage import RunStatus
from tests.store_helpers import record_metrics


class _Receiver:
    """An HTTP server on 127.0.0.1 that records the JSON bodies POSTed to it; answers ``fail_first`` 500s first."""

    def __init__(self, fail_first: int = 0):
        self.bodies: list[dict] = []
        self.attempts = 0
        self.fail_first = fail_first
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 - http.server's name
                length = int(self.headers["Content-Length"])
                body = json.loads(self.rfile.read(length))
                receiver.attempts += 1
                if receiver.attempts <= receiver.fail_first:
                    self.send_response(500)
                    self.end_headers()
                    return
                assert self.headers["Content-Type"] == "application/json"
                receiver.bodies.append(body)
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver():
    result = _Receiver()
    yield result
    result.close()


@pytest.fixture
def settings(settings):
    """The shared settings, loopback allowed as a webhook destination (the receivers listen there)."""
    return settings.with_overrides(webhook_allow_hosts=("127.0.0.1",))


def _running_run(store, name, url="", rewards=(0.5,)):
    run = store.create_run(name=name, config={"webhook_url": url, "max_steps": 5}, dataset_id=None, max_steps=5,
                           owner="alice")
    store.claim_run(run.id, worker_pid=None)
    for step, reward in enumerate(rewards, start=1):
        record_metrics(store, run.id, step, {"reward": reward, "loss": 0.1}, wall_time=time.time())
        store.heartbeat(run.id, step=step)
    return store.get_run(run.id)


def _notifier(store, settings, **kwargs):
    return Notifier(store, settings, backoff_s=0.01, **kwargs)


def test_an_alerts_link_names_a_host_a_browser_can_open():
    assert link_host("127.0.0.1") == "127.0.0.1" and link_host("dash.example") == "dash.example"
    assert link_host("0.0.0.0") == link_host("::") == socket.gethostname()
    assert link_host("::1") == "[::1]" and link_host("[::1]") == "[::1]"


def test_completed_failed_cancelled_and_doctor_messages(store, settings, receiver):
    settings = settings.with_overrides(webhook_url=receiver.url)
    done = _running_run(store, "done", rewards=(0.2, 0.5, 0.8))
    stuck = _running_run(store, "stuck", rewards=(0.0, 0.0, 0.0))  # reward 0 three steps in a row: doctor error
    crashed = _running_run(store, "crashed", rewards=(0.1,))
    stopped = _running_run(store, "stopped", rewards=(0.3,))
    silent = _running_run(store, "no-url", rewards=(0.0, 0.0, 0.0))
    notifier = _notifier(store, settings.with_overrides(webhook_url=""))  # runs carry no URL, the dashboard none
    assert notifier.check() == []

    notifier = _notifier(store, settings)
    try:
        store.finish_run(done.id, RunStatus.COMPLETED)
        store.finish_run(crashed.id, RunStatus.FAILED, error="out of memory: lower per_device_train_batch_size")
        store.request_cancel(stopped.id)
        store.finish_run(stopped.id, RunStatus.CANCELLED)
        queued = notifier.check()
        assert notifier.wait_idle(10)
        assert ("doctor:reward_zero" in {key for run_id, key in queued if run_id == stuck.id})
        assert {run_id for run_id, _ in queued} == {done.id, stuck.id, crashed.id, stopped.id, silent.id}

        by_event = {}
        for body in receiver.bodies:
            by_event.setdefault((body["event"], body["run"]["name"]), body)
        completed = by_event[("completed", "done")]
        assert completed["run"] == {"id": done.id, "name": "done", "status": "completed", "step": 3, "max_steps": 5,
                                    "last_reward": 0.8, "owner": "alice", "error": None,
                                    "link": f"http://{settings.host}:{settings.port}/run?run={done.id}"}
        assert completed["text"] == f"run #{done.id} done completed at step 3/5, last reward 0.8"
        failed = by_event[("failed", "crashed")]
        assert failed["run"]["error"].startswith("out of memory") and "out of memory" in failed["text"]
        assert by_event[("cancelled", "stopped")]["run"]["status"] == "cancelled"
        doctor = by_event[("doctor", "stuck")]
        assert doctor["finding"]["code"] == "reward_zero" and doctor["finding"]["severity"] == "error"
        assert doctor["run"]["status"] == "running" and doctor["finding"]["steps"] == [1, 2, 3]
        assert ("doctor", "no-url") in by_event  # the dashboard's URL serves runs without their own

        count = len(receiver.bodies)
        assert notifier.check() == []  # once per finding and per final status
        restarted = _notifier(store, settings)
        assert restarted.check() == [] and restarted.wait_idle(5)  # recorded in the store: not again after a restart
        assert len(receiver.bodies) == count
        assert store.get_run(done.id).alert_error is None
    finally:
        notifier.shutdown()


def test_a_run_url_wins_and_old_runs_are_not_replayed(store, settings, receiver):
    other = _Receiver()
    try:
        run = _running_run(store, "own-url", url=other.url)
        assert webhook_url(run, settings.with_overrides(webhook_url=receiver.url)) == other.url
        store.finish_run(run.id, RunStatus.COMPLETED)
        later = datetime.now(timezone.utc) + timedelta(hours=2)
        stale = _notifier(store, settings, now=lambda: later)  # started long after the run finished
        assert stale.check() == []
        notifier = _notifier(store, settings.with_overrides(webhook_url=receiver.url))
        notifier.check()
        assert notifier.wait_idle(10)
        assert [b["event"] for b in other.bodies] == ["completed"] and receiver.bodies == []
    finally:
        other.close()


def test_delivery_retries_with_backoff_then_succeeds(store, settings):
    flaky = _Receiver(fail_first=2)
    try:
        run = _running_run(store, "flaky", url=flaky.url)
        store.finish_run(run.id, RunStatus.COMPLETED)
        notifier = _notifier(store, settings)
        notifier.check()
        assert notifier.wait_idle(10)
        assert flaky.attempts == 3 and [b["event"] for b in flaky.bodies] == ["completed"]
        after = store.get_run(run.id)
        assert after.alert_error is None and status_key(after) in after.alerts_sent
    finally:
        flaky.close()


def test_an_unreachable_webhook_is_given_up_on_and_shown_on_the_run(store, settings):
    dead = _Receiver()
    url = dead.url
    dead.close()  # nothing listens there any more
    run = _running_run(store, "unheard", url=url)
    store.finish_run(run.id, RunStatus.FAILED, error="boom")
    notifier = _notifier(store, settings, max_attempts=3)
    started = time.monotonic()
    notifier.check()  # returns at once: delivery happens on the notifier's thread
    assert time.monotonic() - started < 1.0
    assert notifier.wait_idle(10)
    after = store.get_run(run.id)
    assert after.alert_error.startswith("webhook message failed@") and "after 3 attempt(s)" in after.alert_error
    assert "not delivered" in run_status_html(after)
    assert notifier.check() == []  # given up on: not retried forever


def test_message_of_a_run_without_metrics():
    from storage import RunInfo

    now = datetime.now(timezone.utc)
    run = RunInfo(id=7, name="r", status=RunStatus.CANCELLED, config={}, dataset_id=None, created_at=now,
                  started_at=None, finished_at=now, heartbeat_at=None, worker_pid=None, run_dir=None, log_path=None,
                  error=None, current_step=0, max_steps=10, phase=None, cancel_requested=True)
    body = alert_message(run, "cancelled", reward=None, link="http://x/?run=7")
    assert body["text"] == "run #7 r cancelled at step 0/10, last reward none yet" and "finding" not in body
    assert json.loads(json.dumps(body)) == body
