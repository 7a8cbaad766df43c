"""Credentials of a shared dashboard, attacked on a real server (an admin and plain logins, ``credentials_dashboard``):
no password stays in plain text in the auth file, a login removed from it loses its sessions and API tokens at once,
tokens expire and show their last use, a login creates a bounded number of runs through the ingest API, and ``sync``
and the HTTP sender give the token to no server but the dashboard's (a spool's ``meta.json`` naming another, or a
redirect to another origin, gets nothing)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from grpo_core.integrations.sender import DashboardClient, DashboardError, url_binding
from grpo_core.integrations.spool import META_FILE, Spool
from grpo_core.integrations.wire import step_record
from grpo_core.runs.script_runs import run_config_from_trainer
from tests.receivers import RecordingServer
from tests.security.conftest import LOGINS
from tests.servers import serving

ROOT = Path(__file__).resolve().parents[2]
CONFIG = run_config_from_trainer({"num_generations": 2, "per_device_train_batch_size": 2, "beta": 0.0},
                                 model="HuggingFaceTB/SmolLM2-135M-Instruct", reward_names=["acc"], reward_weights=[1.0], max_steps=5)


def _cli(*args: str, stdin: str = "", data_dir: Path | None = None) -> subprocess.CompletedProcess:
    extra = ["--data-dir", str(data_dir)] if data_dir is not None else []
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    return subprocess.run([sys.executable, "-m", "app", *args, *extra], input=stdin, capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def _page_token(dashboard, user: str, name: str, expires: str | None = None) -> tuple[str, list]:
    """A token made by the API tokens tab's own Create handler as ``user``; returns it and the tab's table."""
    values = {"token-name": name, **({"token-expires": expires} if expires is not None else {})}
    shown, table = dashboard.ui(user, "token-create", values)
    match = re.search(r'<pre id="token-value">(grpo_[^<]+)</pre>', shown)
    assert match, shown
    return match.group(1), table


def _create(base: str, token: str, key: str | None = None) -> httpx.Response:
    body = {"client_key": key or uuid.uuid4().hex, "name": "r", "config": CONFIG, "max_steps": 5}
    return httpx.post(f"{base}api/v1/runs", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=30)


def _eventually(predicate, timeout_s: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def _login(base: str, user: str, password: str) -> bool:
    answer = httpx.post(f"{base}login", data={"username": user, "password": password}, timeout=30)
    return answer.status_code == 200 and answer.json() == {"success": True}


def test_no_password_is_stored_in_plain_text_and_auth_add_writes_a_hash(credentials_dashboard):
    d = credentials_dashboard
    text = d.auth_file.read_text(encoding="utf-8")
    for password in LOGINS.values():
        assert password not in text
    lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
    assert len(lines) == 4 and all(re.fullmatch(r"(\[admin\] )?\w+:scrypt\$\d+\$\d+\$\d+\$[\w-]+\$[\w-]+", line)
                                   for line in lines), text
    assert oct(d.auth_file.stat().st_mode & 0o777) == "0o600"
    assert "plain text" in d.log_path.read_text()  # the migration said so
    assert _login(d.url, "alice", "alice-pw") and not _login(d.url, "alice", "bob-pw")
    assert not _login(d.url, "nobody", "alice-pw")
    # a login written by the command (password on standard input, never argv) logs in without a restart
    added = _cli("auth", "add", "dave", "--auth-file", str(d.auth_file), stdin="dave-pw\n")
    assert added.returncode == 0, added.stderr
    assert "dave-pw" not in d.auth_file.read_text(encoding="utf-8")
    assert re.search(r"^dave:scrypt\$", d.auth_file.read_text(encoding="utf-8"), re.M)
    assert _eventually(lambda: _login(d.url, "dave", "dave-pw"))
    assert not _login(d.url, "dave", "dave-pw2")


def test_a_login_removed_from_the_auth_file_loses_its_tokens_and_sessions(credentials_dashboard):
    d = credentials_dashboard
    token, _ = _page_token(d, "carol", "cluster")
    created = _create(d.url, token, key="carol-run")
    assert created.status_code == 200, created.text
    run_id = created.json()["run_id"]
    session = d.http("carol")
    assert "components" in session.get("/config").json()
    removed = _cli("auth", "remove", "carol", "--auth-file", str(d.auth_file))
    assert removed.returncode == 0, removed.stderr

    def refused() -> bool:
        answer = httpx.post(f"{d.url}api/v1/runs/{run_id}/progress", json={"step": 1, "phase": "training"},
                            headers={"Authorization": f"Bearer {token}"}, timeout=30)
        return answer.status_code == 401

    assert _eventually(refused)
    assert _create(d.url, token).status_code == 401
    assert _create(d.url, token, key="carol-run").status_code == 401  # not even the run it made
    assert not _login(d.url, "carol", "carol-pw")
    assert _eventually(lambda: "components" not in session.get("/config").json())  # the open session ended


def test_tokens_expire_and_show_when_they_were_last_used(credentials_dashboard):
    d = credentials_dashboard
    token, table = _page_token(d, "bob", "short", expires="4s")
    row = next(r for r in table["data"] if r[1] == "short")
    assert row[3] == "never" and row[4].startswith("active, expires")
    assert _create(d.url, token, key="bob-run-1").status_code == 200
    _, table = _page_token(d, "bob", "another")
    row = next(r for r in table["data"] if r[1] == "short")
    assert row[3] != "never"  # its last use is shown
    assert _eventually(lambda: _create(d.url, token, key="bob-run-1").status_code == 401, timeout_s=8)
    listed = _cli("token", "list", "--login", "bob", data_dir=d.data_dir)
    line = next(line for line in listed.stdout.splitlines() if "\tshort\t" in line)
    assert "expired" in line and "last used" in line, listed.stdout
    made = _cli("token", "create", "--login", "bob", "--expires-in", "12h", data_dir=d.data_dir)
    assert made.returncode == 0 and "expires" in made.stdout, made.stderr
    assert _cli("token", "create", "--login", "bob", "--expires-in", "soon", data_dir=d.data_dir).returncode == 2


def test_a_login_creates_at_most_its_quota_of_runs_through_the_ingest_api(credentials_dashboard):
    d = credentials_dashboard
    first, _ = _page_token(d, "alice", "one")
    second, _ = _page_token(d, "alice", "two")
    assert _create(d.url, first, key="alice-run-1").status_code == 200
    assert _create(d.url, second, key="alice-run-2").status_code == 200
    over = _create(d.url, second, key="alice-run-3")
    assert over.status_code == 403 and "2 runs" in over.json()["detail"]
    assert _create(d.url, first, key="alice-run-1").status_code == 200  # a retried create finds its run
    other, _ = _page_token(d, "bob", "quota")
    assert _create(d.url, other, key="bob-run-2").status_code == 200  # another login keeps its own quota


def _spool(folder: Path, url: str, token: str | None) -> Spool:
    spool = Spool.create(folder, url=url, client_key=uuid.uuid4().hex,
                         create={"name": "synced", "config": CONFIG, "max_steps": 5},
                         url_binding=url_binding(url, token) if token else None)
    record = step_record(0, 1, metrics={"reward": 1.0}, wall_time=1.0)
    record.pop("seq")
    spool.append(record)
    return spool


def test_sync_sends_the_token_only_to_the_given_or_bound_url_and_never_across_origins(credentials_dashboard,
                                                                                     tmp_path):
    d = credentials_dashboard
    token, _ = _page_token(d, "admin", "sync")
    evil = RecordingServer(status=200)
    evil_url = f"http://127.0.0.1:{evil.port}/"
    redirects = [RecordingServer(status=code, headers=[("Location", f"{evil_url}api/v1/runs")])
                 for code in (301, 302, 303, 307)]
    try:
        _spool(tmp_path / "named", evil_url, None)  # meta.json names another server
        assert _cli("sync", str(tmp_path / "named"), "--token", token).returncode != 0
        bound = _spool(tmp_path / "edited", d.url, token)  # written by the callback, then edited to point elsewhere
        meta = json.loads((bound.folder / META_FILE).read_text())
        (bound.folder / META_FILE).write_text(json.dumps({**meta, "url": evil_url}))
        assert _cli("sync", str(tmp_path / "edited"), "--token", token).returncode != 0
        for index, redirect in enumerate(redirects):
            _spool(tmp_path / f"moved{index}", d.url, token)
            moved = _cli("sync", str(tmp_path / f"moved{index}"), "--token", token,
                         "--url", f"http://127.0.0.1:{redirect.port}/")
            assert moved.returncode != 0
            assert redirect.requests, "the given URL is asked"
            with pytest.raises(DashboardError, match="another origin"):  # the script's own sender, too
                DashboardClient(f"http://127.0.0.1:{redirect.port}", token).progress(1, 1, "training")
        assert evil.requests == [] and evil.authorizations == []
        given = _cli("sync", str(tmp_path / "named"), "--token", token, "--url", d.url)
        assert given.returncode == 0, given.stderr
        assert evil.requests == []
        run_id = Spool.open(tmp_path / "named").run_id
        assert run_id is not None
    finally:
        evil.close()
        for redirect in redirects:
            redirect.close()


def test_a_login_added_to_a_single_login_dashboard_is_bounded_at_once(tmp_path, tiny_model_dir):
    """One login is the single user (open boundary); a second one added while serving makes it a shared dashboard
    at once: the newcomer may not name arbitrary code."""
    auth = tmp_path / "users.txt"
    auth.write_text("owner:owner-pw\n", encoding="utf-8")
    with serving(tmp_path / "data", "--auth-file", str(auth), log_path=tmp_path / "serve.log") as app:
        assert _cli("auth", "add", "eve", "--auth-file", str(auth), stdin="eve-pw\n").returncode == 0
        assert _eventually(lambda: _login(app.url, "eve", "eve-pw"))
        eve = Client(app.url, auth=("eve", "eve-pw"), verbose=False, analytics_enabled=False)
        config = {"name": "attack", "model": str(tiny_model_dir), "max_steps": 1, "num_generations": 2,
                  "per_device_train_batch_size": 2, "max_completion_length": 8, "device": "cpu",
                  "rewards": [{"rule": "plugin", "params": {"target": "os:getcwd"}}]}
        with pytest.raises(AppError) as caught:
            eve.predict(config=json.dumps(config), api_name="/launch_run")
        assert "plugin folder" in str(caught.value) or "allowed package" in str(caught.value), str(caught.value)


def test_password_guesses_for_a_name_are_refused_unchecked_after_ten_failures():
    """Before, any client could try passwords as fast as scrypt ran (every check 16 MiB and ~50 ms, on every core).
    Now a name's attempts after 10 wrong passwords in 5 minutes are refused without a check, until the oldest
    failure leaves the window; other names are checked as before; at most 2 checks run at once."""
    import threading

    from grpo_core.access import login_throttle
    from grpo_core.access.login_throttle import LoginThrottle

    checked, running, peak, now = [], [0], [0], [1000.0]
    gate = threading.Lock()

    def verify(user: str, password: str) -> bool:
        with gate:
            running[0] += 1
            peak[0] = max(peak[0], running[0])
        time.sleep(0.02)
        with gate:
            running[0] -= 1
        checked.append(user)
        return password == f"{user}-pw"

    throttle = LoginThrottle(verify, clock=lambda: now[0])
    assert [throttle.check("alice", f"guess{i}") for i in range(10)] == [False] * 10
    assert throttle.check("alice", "alice-pw") is False and len(checked) == 10  # refused, not checked
    assert throttle.check("bob", "bob-pw") is True
    now[0] += login_throttle.WINDOW_S
    assert throttle.check("alice", "alice-pw") is True
    threads = [threading.Thread(target=throttle.check, args=(f"user{i}", "x")) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert peak[0] <= login_throttle.MAX_CONCURRENT_CHECKS
