"""The config and webhook attacks of issue 23 against a real served dashboard with three logins (alice and bob,
and carol, an admin), driven through the named API with ``gradio_client`` as an ordinary login would:

- a 577-byte "billion laughs" config (and near-limit nesting and node floods) sent to ``launch_run`` and
  ``launch_sweep`` is refused at once with a message naming the alias and its line, while bob's calls keep being
  answered within a second; no run is queued and no ``config.yaml`` is written;
- a run's ``webhook_url`` aimed at a loopback service (in several spellings) is refused at launch, and a run in
  the store whose URL targets loopback anyway (written before this check, or by ``grpo-dashboard train``) gets no
  POST when it finishes: the loopback server started here receives nothing, and the run shows why; a run whose
  host the admin allowed (``--webhook-allow-host localhost``) is delivered, and the dashboard's own port never is.

The server is ``python -m app serve --auth-file`` (:func:`tests.servers.serving`), as in
``tests/integration/test_public_api_owners.py``."""

from __future__ import annotations

import json
import multiprocessing
import os
import time
from pathlib import Path

import httpx
import psutil
import pytest
from gradio_client import Client
from gradio_client.exceptions import AppError

from storage import RunStatus, Store, sqlite_url
from tests.receivers import RecordingServer
from tests.servers import serving

USERS = "alice:a-pw\nbob:b-pw\n[admin] carol:c-pw\n"
#: Seconds another login's call may take while the attack goes on (the issue's requirement).
ANSWER_WITHIN_S = 1.0


def billion_laughs_config(size: int = 577) -> str:
    """A run config of ``size`` bytes: nine levels of nine aliases each under ``trl_args`` (a field that takes any
    mapping), 9**9 leaves once expanded, padded with a comment to the issue's 577 bytes."""
    lines = ["a: &a [" + ",".join(['"lol"'] * 9) + "]"]
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True):
        lines.append(f"{name}: &{name} [" + ",".join([f"*{previous}"] * 9) + "]")
    text = "max_steps: 1\ntrl_args:\n  x:\n" + "".join(f"    {line}\n" for line in lines)
    return text + "#" * (size - len(text) - 1) + "\n"


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``(url, data_dir)`` of the dashboard served with three logins; webhooks may reach ``localhost`` by that
    name only (as an admin would allow a relay on the host)."""
    auth = tmp_path_factory.mktemp("auth") / "users.txt"
    auth.write_text(USERS, encoding="utf-8")
    data_dir = tmp_path_factory.mktemp("security-data")
    with serving(data_dir, "--auth-file", str(auth), "--webhook-allow-host", "localhost") as app:
        yield app.url, data_dir


#: What the attacking login sends, round after round: the 577-byte laughs, nesting and value floods just under the
#: size limit, an oversized text, a Python tag.
ATTACKS = [billion_laughs_config(), "[" * 65000, "- " * 30000, "[" + ",".join(["1"] * 30000) + "]",
           "a: " + "x" * 200_000, "x: !!python/object/apply:os.system ['id']\n"]


def call_api(client: httpx.Client, name: str, data: list) -> str:
    """Call the named endpoint ``name`` over Gradio's HTTP API (``POST /gradio_api/call/NAME``, then its event
    stream); returns the ``complete`` event's data (JSON text) or raises ``RuntimeError`` with the error's."""
    response = client.post(f"/gradio_api/call/{name}", json={"data": data})
    response.raise_for_status()
    event_id = response.json()["event_id"]
    with client.stream("GET", f"/gradio_api/call/{name}/{event_id}") as stream:
        event = None
        for line in stream.iter_lines():
            if line.startswith("event:"):
                event = line.split(":", 1)[1].strip()
            elif line.startswith("data:") and event in ("complete", "error"):
                payload = line.split(":", 1)[1].strip()
                if event == "error":
                    raise RuntimeError(json.loads(payload)["error"] if payload != "null" else "error")
                return payload
    raise RuntimeError(f"{name}: the event stream ended without a result")


def _logged_in(url: str, user: str, password: str) -> httpx.Client:
    client = httpx.Client(base_url=url.rstrip("/"), timeout=30)
    assert client.post("/login", data={"username": user, "password": password}).json() == {"success": True}
    return client


def _refused(client: httpx.Client, texts: list[str]) -> None:
    for text in texts:
        with pytest.raises(RuntimeError, match="^launch_run: config"):
            call_api(client, "launch_run", [text])


def _server_process(url: str) -> psutil.Process:
    """The ``python -m app serve`` process listening at ``url`` (a child of this test process)."""
    port = url.rstrip("/").rsplit(":", 1)[1]
    for child in psutil.Process().children(recursive=True):
        command = child.cmdline()
        if "serve" in command and port in command:
            return child
    raise AssertionError(f"no server process for {url}")


def _server_cpu_per_call(server: psutil.Process, call, times: int) -> float:
    """Seconds of the server's CPU time (user + system) per ``call()``, over ``times`` calls made one by one."""
    call()  # warm
    before = sum(server.cpu_times()[:2])
    for _ in range(times):
        call()
    return (sum(server.cpu_times()[:2]) - before) / times


def _answer_times(client: httpx.Client, expected: list, seconds: float, enough=lambda: True) -> list[float]:
    """Call ``list_runs`` every 0.1 s for ``seconds`` and then until ``enough()`` (60 s at most); each call's wall
    time (the answer checked)."""
    times = []
    started = time.monotonic()
    while time.monotonic() < started + seconds or (not enough() and time.monotonic() < started + 60):
        before = time.monotonic()
        assert json.loads(call_api(client, "list_runs", [""])) == [expected]
        times.append(time.monotonic() - before)
        time.sleep(0.1)
    return times


def _p90(seconds: list[float]) -> float:
    return sorted(seconds)[int(0.9 * (len(seconds) - 1))]


def _attack(url: str, texts: list[str], stop, refusals) -> None:
    """The attacking login's process: sends ``texts`` to ``launch_run`` until ``stop``, puts each refusal on
    ``refusals`` (an accepted attack puts ``ACCEPTED``). At the lowest CPU priority: on a real network the
    attacker's own work happens on another machine; here it must not slow the server or bob's client."""
    os.nice(19)
    client = _logged_in(url, "alice", "a-pw")
    while not stop.is_set():
        for text in texts:
            try:
                call_api(client, "launch_run", [text])
                refusals.put("ACCEPTED")
            except RuntimeError as exc:
                refusals.put(str(exc))


def _client(url, user, password, tmp_path_factory):
    return Client(url, auth=(user, password), verbose=False, analytics_enabled=False,
                  download_files=str(tmp_path_factory.mktemp(f"dl-{user}")))


def _config_files(data_dir: Path) -> list[Path]:
    return [p for p in data_dir.rglob("*") if p.is_file() and p.suffix in (".yaml", ".yml")]


def test_a_billion_laughs_config_is_refused_while_other_logins_are_answered(served, tmp_path_factory):
    url, data_dir = served
    alice = _client(url, "alice", "a-pw", tmp_path_factory)
    bob = _client(url, "bob", "b-pw", tmp_path_factory)
    attack = billion_laughs_config()
    assert len(attack.encode()) == 577
    runs_before = bob.predict(api_name="/list_runs")

    with pytest.raises(AppError, match=r"launch_run: config, line 5, column 12: YAML alias \*a refused: aliases "
                                       r"can expand"):
        alice.predict(config=attack, api_name="/launch_run")
    with pytest.raises(AppError, match=r"launch_sweep: config, line 5, column 12: YAML alias \*a refused"):
        alice.predict(config=attack + "sweep: {beta: [0.0, 0.1]}\n", api_name="/launch_sweep")
    with pytest.raises(AppError, match=r"launch_sweep: sweep, line 2, column 5: YAML alias \*b refused"):
        alice.predict(config="max_steps: 1\n", grid="beta: &b [0.0]\nlr: *b\n", api_name="/launch_sweep")

    # What one refused attack costs the server: the CPU time of the serving process, against an empty list_runs.
    server = _server_process(url)
    alice_http, bob_http = _logged_in(url, "alice", "a-pw"), _logged_in(url, "bob", "b-pw")
    started = time.monotonic()
    _refused(alice_http, [attack])
    refused_in_s = time.monotonic() - started
    cpu_per_list_s = _server_cpu_per_call(server, lambda: call_api(bob_http, "list_runs", [""]), 10)
    cpu_per_attack_s = _server_cpu_per_call(server, lambda: _refused(alice_http, ATTACKS), 3) / len(ATTACKS)
    alice_http.close()
    print(f"\nserver CPU per call: list_runs {cpu_per_list_s * 1000:.0f} ms, a refused attack "
          f"{cpu_per_attack_s * 1000:.0f} ms")
    assert cpu_per_attack_s < 3 * cpu_per_list_s

    # bob's calls timed on their own, then while the attack goes on again and again from another process, with
    # the largest texts the limits let through to the parser (deep nesting, value floods) and oversized ones.
    idle_s = _answer_times(bob_http, runs_before, seconds=5)
    context = multiprocessing.get_context("spawn")
    stop, refusals = context.Event(), context.Queue()
    attacker = context.Process(target=_attack, args=(url, ATTACKS, stop, refusals), daemon=True)
    attacker.start()
    try:
        while refusals.empty():  # the attacker has logged in and is refused
            assert attacker.is_alive()
            time.sleep(0.1)
        answered_in_s = _answer_times(bob_http, runs_before, seconds=15,
                                      enough=lambda: refusals.qsize() >= 2 * len(ATTACKS))
    finally:
        stop.set()
        attacker.join(timeout=60)
        bob_http.close()
    messages = []
    while not refusals.empty():
        messages.append(refusals.get())
    assert len(messages) >= 2 * len(ATTACKS), messages  # the attack kept going while bob was answered
    assert all(m.startswith("launch_run: config") for m in messages), messages
    for expected in ("YAML alias *a refused", "nested deeper than 32 levels", "more than 10,000 values",
                     "over the limit of 65,536 bytes", "tag !!python/object/apply:os.system refused"):
        assert any(expected in m for m in messages), (expected, messages)
    p90, idle_p90 = _p90(answered_in_s), _p90(idle_s)
    print(f"refused in {refused_in_s:.3f} s; bob answered on his own in {idle_p90:.3f} s (90th percentile, slowest "
          f"{max(idle_s):.3f} s), and {len(answered_in_s)} times during {len(messages)} attacks in {p90:.3f} s "
          f"(slowest {max(answered_in_s):.3f} s)")
    # Within a second, unless this machine is so loaded that bob's calls were that slow already without the attack
    # (the 90th percentile: on a shared 2-core machine at load 10 a single call now and then takes 2 s, attack or
    # not; the server's CPU per attack above is the measure that load does not blur).
    budget_s = max(ANSWER_WITHIN_S, 1.5 * idle_p90)
    assert p90 < budget_s, answered_in_s
    assert refused_in_s < budget_s

    assert bob.predict(api_name="/list_runs") == runs_before == alice.predict(api_name="/list_runs")
    assert _config_files(data_dir) == []  # no run folder, no expanded config.yaml anywhere


def _finished_run(store: Store, name: str, webhook: str, owner: str = "carol") -> int:
    """A run in the store that finishes now with ``webhook`` as its own URL (as ``grpo-dashboard train`` or an
    older dashboard would have stored it: no launch check)."""
    run = store.create_run(name=name, config={"webhook_url": webhook, "max_steps": 1}, dataset_id=None,
                           max_steps=1, owner=owner)
    if store.claim_run(run.id, worker_pid=None):  # else the dashboard's launcher took it: its worker fails it
        store.finish_run(run.id, RunStatus.COMPLETED)
    return run.id


def test_a_webhook_aimed_at_loopback_gets_no_post(served, tmp_path_factory):
    url, data_dir = served
    alice = _client(url, "alice", "a-pw", tmp_path_factory)
    carol = _client(url, "carol", "c-pw", tmp_path_factory)
    receiver = RecordingServer(status=200)
    dashboard_port = int(url.rstrip("/").rsplit(":", 1)[1])
    try:
        base = {"name": "hooked", "max_steps": 1}
        hook = f"http://127.0.0.1:{receiver.port}/hook"
        with pytest.raises(AppError, match=r"launch_run: webhook_url: on this dashboard only admins may set a run's "
                                           r"own webhook_url \(--run-webhooks admins\)"):
            alice.predict(config=json.dumps({**base, "webhook_url": "https://hooks.example.com/x"}),
                          api_name="/launch_run")
        for spelling in (hook, f"http://2130706433:{receiver.port}/", f"http://0x7f.1:{receiver.port}/",
                         f"http://[::ffff:127.0.0.1]:{receiver.port}/", f"http://alice@127.0.0.1:{receiver.port}/",
                         f"http://localhost.localdomain:{receiver.port}/", f"http://127.0.0.1:{dashboard_port}/"):
            with pytest.raises(AppError, match=r"launch_run: webhook_url: webhook URL .*(loopback|dashboard itself)"):
                carol.predict(config=json.dumps({**base, "webhook_url": spelling}), api_name="/launch_run")
        with pytest.raises(AppError, match=r"launch_sweep: webhook_url: .*a loopback address"):
            carol.predict(config=json.dumps(base), grid=f"webhook_url: {hook}, https://hooks.example.com/x",
                          api_name="/launch_sweep")
        assert carol.predict(api_name="/list_runs") == []

        store = Store(sqlite_url(data_dir / "grpo.db"))
        try:
            refused = _finished_run(store, "to-loopback", hook)
            own_api = _finished_run(store, "to-dashboard", f"http://localhost:{dashboard_port}/gradio_api/info")
            allowed = _finished_run(store, "to-allowed-relay", f"http://localhost:{receiver.port}/allowed")
        finally:
            store.close()
        deadline = time.monotonic() + 90  # the notifier reads the store every 10 s
        while True:
            runs = {r["id"]: r for r in carol.predict(api_name="/list_runs")}
            if all(runs[i]["alert_error"] for i in (refused, own_api)) and runs[allowed]["alerts_sent"]:
                break
            assert time.monotonic() < deadline, runs
            time.sleep(1.0)
        time.sleep(1.0)
        assert [(method, path) for method, path, _ in receiver.requests] == [("POST", "/allowed")]  # only the host the admin allowed got a message
        shown = runs[refused]["alert_error"]
        assert "not sent: webhook URL" in shown and "127.0.0.1 is a loopback address" in shown
        assert "--webhook-allow-host 127.0.0.1" in shown and "200" not in shown and "SECRET" not in shown
        assert "is the dashboard itself" in runs[own_api]["alert_error"]
        assert runs[allowed]["alert_error"] is None
    finally:
        receiver.close()
