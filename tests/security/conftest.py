"""A real dashboard served with three logins, shared by the security tests (tests/security/).

Fixtures:

* ``shared_dashboard`` (module scope): a :class:`SharedDashboard`, ``python -m app serve`` on a free port
  (:func:`tests.servers.serving`) with ``--auth-file`` listing ``[admin] admin:admin-pw``, ``alice:alice-pw`` and
  ``bob:bob-pw``; an admin plugin folder (``--plugin-dir``) holding ``good_reward.py`` (its ``length_reward``
  scores ``len(completion) / 100``); the tiny test model's folder as ``--model-root``. Its ``url`` ends with ``/``;
  ``data_dir`` is the server's data directory; ``outside`` is a folder outside every root, holding a
  ``secret.jsonl`` (a valid prompt file the logins must never read) and a ``canary`` file; ``client(user)`` is a
  ``gradio_client.Client`` logged in as ``"admin"``, ``"alice"`` or ``"bob"`` (downloads in a folder of its own);
  ``http(user)`` an ``httpx.Client`` logged in through Gradio's ``/login`` (for the UI's own routes);
  ``ui(user, elem_id, values)`` runs the page's own handler of the element ``elem_id`` (a button's click) as the
  browser does (``/gradio_api/queue/join`` by ``fn_index``, the result read from ``/gradio_api/queue/data``), its
  inputs the page's defaults except ``values`` (``{elem_id: value}``); it returns the handler's outputs;
  ``while_pinging(action)`` runs ``action()`` while another client reads ``/config`` every 0.1 s and returns
  ``(action's result, the slowest answer in seconds)``.
* ``credentials_dashboard`` (module scope): the same with its own data directory, a fourth plain login ``carol``
  (``carol:carol-pw``, for the tests that remove a login), ``--ingest-max-runs 2``, and ``auth_file`` set.
* ``alice_dataset``: the id of a small dataset (columns ``prompt``, ``answer``, ``cmd``) alice added through
  ``add_dataset``.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import httpx
import pytest
from gradio_client import Client, handle_file

from tests.servers import serving

LOGINS = {"admin": "admin-pw", "alice": "alice-pw", "bob": "bob-pw", "carol": "carol-pw"}
AUTH_FILE = "[admin] admin:admin-pw\nalice:alice-pw\nbob:bob-pw\n"
GOOD_PLUGIN = '''
import os  # a name the file only imports: 'good_reward.py:os.system' must not reach it


def length_reward(completions, **kwargs):
    return [len(str(c)) / 100 for c in completions]
'''
T = TypeVar("T")
SECRET_ROWS = [{"prompt": "SECRET-PROMPT-1", "answer": "4"}, {"prompt": "SECRET-PROMPT-2", "answer": "5"}]


@dataclass
class SharedDashboard:
    """A served dashboard with three logins (see the module's docstring)."""

    url: str
    data_dir: Path
    plugin_dir: Path
    outside: Path
    model_dir: Path
    log_path: Path
    downloads: Path
    auth_file: Path | None = None
    _clients: dict[str, Client] = field(default_factory=dict)

    def client(self, user: str) -> Client:
        """A ``gradio_client.Client`` logged in as ``user`` (one per user, reused)."""
        if user not in self._clients:
            folder = self.downloads / user
            folder.mkdir(parents=True, exist_ok=True)
            self._clients[user] = Client(self.url, auth=(user, LOGINS[user]), verbose=False,
                                         analytics_enabled=False, download_files=str(folder))
        return self._clients[user]

    def http(self, user: str) -> httpx.Client:
        """An ``httpx.Client`` on the server's base URL with ``user``'s session cookie."""
        session = httpx.Client(base_url=self.url.rstrip("/"), timeout=60)
        answer = session.post("/login", data={"username": user, "password": LOGINS[user]})
        assert answer.json() == {"success": True}, answer.text
        return session


    def while_pinging(self, action: Callable[[], T]) -> tuple[T, float]:
        """``(action(), slowest /config answer in seconds)``, another client asking every 0.1 s meanwhile."""
        lags: list[float] = []
        done = threading.Event()

        def ping() -> None:
            while not done.is_set():
                start = time.monotonic()
                httpx.get(self.url + "config", timeout=300)
                lags.append(time.monotonic() - start)
                time.sleep(0.1)

        pinger = threading.Thread(target=ping)
        pinger.start()
        try:
            result = action()
        finally:
            done.set()
            pinger.join()
        return result, max(lags, default=0.0)

    def ui(self, user: str, elem_id: str, values: dict[str, object] | None = None, event: str = "click") -> list:
        """The outputs of the page's own ``event`` handler on the element ``elem_id`` (see the module docstring).

        Raises:
            AssertionError: no such element or handler, or the handler failed (with Gradio's message).
        """
        session = self.http(user)
        config = session.get("/config").json()
        by_id = {c["id"]: c for c in config["components"]}
        ids = {c.get("props", {}).get("elem_id"): c["id"] for c in config["components"]}
        assert elem_id in ids, f"no element {elem_id}"
        target = ids[elem_id]
        dependency = next((d for d in config["dependencies"] if [target, event] in d["targets"]), None)
        assert dependency is not None, f"no {event} handler on {elem_id}"
        values = values or {}
        data = []
        for input_id in dependency["inputs"]:
            props = by_id[input_id].get("props", {})
            data.append(values.get(props.get("elem_id"), props.get("value")))
        session_hash = uuid.uuid4().hex[:11]
        joined = session.post("/gradio_api/queue/join", json={
            "data": data, "fn_index": dependency["id"], "session_hash": session_hash, "trigger_id": target,
            "event_data": None})
        assert joined.status_code == 200, joined.text
        with session.stream("GET", "/gradio_api/queue/data", params={"session_hash": session_hash},
                            timeout=300) as stream:
            for line in stream.iter_lines():
                if not line.startswith("data:"):
                    continue
                message = json.loads(line[5:])
                if message.get("msg") == "process_completed":
                    output = message.get("output") or {}
                    assert message.get("success"), output.get("error") or output
                    return output["data"]
        raise AssertionError("the handler never completed")


@pytest.fixture(scope="module")
def shared_dashboard(tmp_path_factory, tiny_model_dir) -> SharedDashboard:
    root = tmp_path_factory.mktemp("shared")
    auth = root / "users.txt"
    auth.write_text(AUTH_FILE, encoding="utf-8")
    plugins = root / "plugins"
    plugins.mkdir()
    (plugins / "good_reward.py").write_text(GOOD_PLUGIN, encoding="utf-8")
    outside = root / "outside"
    outside.mkdir()
    (outside / "secret.jsonl").write_text("".join(json.dumps(r) + "\n" for r in SECRET_ROWS), encoding="utf-8")
    (outside / "canary").write_text("untouched", encoding="utf-8")
    data_dir = root / "data"
    with serving(data_dir, "--auth-file", str(auth), "--plugin-dir", str(plugins),
                 "--model-root", str(tiny_model_dir), log_path=root / "serve.log") as app:
        yield SharedDashboard(url=app.url, data_dir=data_dir, plugin_dir=plugins, outside=outside,
                              model_dir=tiny_model_dir, log_path=app.log_path, downloads=root / "downloads")


@pytest.fixture(scope="module")
def alice_dataset(shared_dashboard, tmp_path_factory) -> int:
    rows = [{"prompt": f"What is {i} + 1?", "answer": str(i + 1), "cmd": "touch /tmp/grpo-pwned"} for i in range(8)]
    path = tmp_path_factory.mktemp("alice-data") / "sums.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    info = shared_dashboard.client("alice").predict(file=handle_file(str(path)), name="alice sums",
                                                    api_name="/add_dataset")
    return int(info["id"])


@pytest.fixture(scope="module")
def credentials_dashboard(tmp_path_factory, tiny_model_dir) -> SharedDashboard:
    root = tmp_path_factory.mktemp("credentials")
    auth = root / "users.txt"
    auth.write_text(AUTH_FILE + "carol:carol-pw\n", encoding="utf-8")
    plugins = root / "plugins"
    plugins.mkdir()
    (plugins / "good_reward.py").write_text(GOOD_PLUGIN, encoding="utf-8")
    outside = root / "outside"
    outside.mkdir()
    data_dir = root / "data"
    with serving(data_dir, "--auth-file", str(auth), "--plugin-dir", str(plugins), "--model-root",
                 str(tiny_model_dir), "--ingest-max-runs", "2", log_path=root / "serve.log") as app:
        yield SharedDashboard(url=app.url, data_dir=data_dir, plugin_dir=plugins, outside=outside,
                              model_dir=tiny_model_dir, log_path=app.log_path, downloads=root / "downloads",
                              auth_file=auth)
