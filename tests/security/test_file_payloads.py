"""No value a login supplies is ever a file to Gradio: file-shaped values (Gradio's own ``FileData`` payload,
``{"path": ..., "meta": {"_type": "gradio.FileData"}}``, and its variants) planted in every field a login can write
(a script run's name, tags, config and provenance and its groups over the ingest API; a launched run's rule
parameters over the named API; a dataset's rows; a run's notes and tags) and naming the server's auth file, its
store, a file in its working directory and one in its temp folder, are walked through every named endpoint and every
handler of the page, as a second plain login. Whatever comes back that Gradio could serve (a ``/file=`` URL) is
fetched: none may give a planted file's content.

Run against the code before the fix, this test read the auth file (with its passwords) and the store back through
``list_runs``.
"""

from __future__ import annotations

import json
import re
import tempfile
import uuid
from pathlib import Path

import httpx
import pytest
from gradio_client import handle_file

from tests.security.conftest import SharedDashboard
from tests.security.page import Page
from tests.servers import ROOT

SECRET = f"planted-secret-{uuid.uuid4().hex}"
#: Page handlers that start training or load a model (minutes each): their outputs are status text, not records.
SLOW_OR_LAUNCHING = ("launch", "preflight", "merge", "try", "fit", "probe", "sweep", "bench", "rescore", "delete",
                     "cancel", "resume", "hub", "token-create", "token-revoke")


def _payloads(path: str) -> list:
    """The shapes Gradio's output processing takes for a file (gradio/processing_utils.py, gradio_client's
    ``is_file_obj*``), all naming ``path``."""
    meta = {"_type": "gradio.FileData"}
    return [{"path": path, "meta": meta}, {"path": path, "url": None, "orig_name": "x.txt", "meta": meta},
            {"path": path, "is_stream": False, "meta": meta}, {"path": path, "url": f"/gradio_api/file={path}"},
            {"path": path}, {"path": path, "meta": "not a mapping"}]


@pytest.fixture(scope="module")
def secrets(shared_dashboard: SharedDashboard):
    """The server files a login must never read: ``{path: text that proves it was read}``."""
    cwd_file = ROOT / f"planted-{uuid.uuid4().hex}.txt"
    tmp_file = Path(tempfile.gettempdir()) / f"planted-{uuid.uuid4().hex}.txt"
    for path in (cwd_file, tmp_file):
        path.write_text(SECRET, encoding="utf-8")
    files = {str(shared_dashboard.data_dir.parent / "users.txt"): "admin-pw",
             str(shared_dashboard.data_dir / "grpo.db"): "SQLite format 3",
             str(cwd_file): SECRET, str(tmp_file): SECRET}
    yield files
    cwd_file.unlink(missing_ok=True)
    tmp_file.unlink(missing_ok=True)


def _everything(paths) -> list:
    shapes = [shape for path in paths for shape in _payloads(path)]
    return shapes + [json.dumps(shape) for shape in shapes[:4]]


def _token(dash: SharedDashboard, user: str) -> str:
    shown = dash.ui(user, "token-create", {"token-name": "planting"})[0]
    return re.search(r'<pre id="token-value">([^<]+)</pre>', shown).group(1)


def _plant(dash: SharedDashboard, paths: list[str], tmp_path: Path) -> dict[str, int]:
    """Plant file-shaped values everywhere alice can write; returns the ids of what was made."""
    shapes = _everything(paths)
    text = json.dumps(shapes[0])
    made: dict[str, int] = {}
    # a script run over the ingest API: name, tags, config (a trl_args mapping), provenance, groups' extra columns
    api = httpx.Client(base_url=dash.url.rstrip("/"), timeout=60,
                       headers={"Authorization": f"Bearer {_token(dash, 'alice')}"})
    config = {"model": "org/tiny-model", "max_steps": 3, "trl_args": {"generation_kwargs": {"a": shapes[0]}},
              "rewards": [{"rule": "numeric_answer"}]}
    body = {"client_key": "planted-0001", "name": text, "config": config, "max_steps": 3, "tags": [json.dumps({"path": paths[0]})[:64]],
            "provenance": {"planted": shapes, "recorded_from": {"host": shapes[0], "command": text}, **shapes[0]}}
    answer = api.post("/api/v1/runs", json=body)
    if answer.status_code != 200:  # the config's mapping may be refused: the rest is planted without it
        answer = api.post("/api/v1/runs", json={**body, "config": {**config, "trl_args": {}}})
    assert answer.status_code == 200, answer.text
    made["script_run"] = answer.json()["run_id"]
    completion = {"index": 0, "text": text, "rewards": {"acc": 1.0}, "total_reward": 1.0, "advantage": 0.5,
                  "num_tokens": 1}
    group = {"row_index": 0, "prompt": text, "extra": {"planted": shapes[0], "list": shapes, **shapes[0]},
             "completions": [completion, {**completion, "index": 1, "advantage": -0.5}]}
    step = {"seq": 1, "kind": "step", "step": 1, "wall_time": 1.0, "metrics": {"reward": 1.0},
            "groups": [{"split": "train", "groups": [group]}]}
    answer = api.post(f"/api/v1/runs/{made['script_run']}/batches", json={"records": [step]})
    assert answer.status_code == 200, answer.text
    # a dataset whose rows hold the shapes, as values and as text
    rows = [{"prompt": json.dumps(shape) if i % 2 else f"What is {i} + 1?", "answer": str(i + 1), "info": shape}
            for i, shape in enumerate(shapes[:8])]
    upload = tmp_path / "planted.jsonl"
    upload.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    alice = dash.client("alice")
    made["dataset"] = int(alice.predict(file=handle_file(str(upload)), name="planted rows",
                                        api_name="/add_dataset")["id"])
    # a run launched over the named API: its name is the shape as text; a trl_args mapping holding the shape is
    # tried first (a login's boundary may refuse it: then the run is launched without it)
    launch = {"name": text, "model": str(dash.model_dir), "dataset_id": made["dataset"], "max_steps": 1,
              "num_generations": 2, "per_device_train_batch_size": 2, "max_completion_length": 4, "device": "cpu",
              "rewards": [{"rule": "numeric_answer"}]}
    try:
        launched = alice.predict(config=json.dumps({**launch, "trl_args": {"generation_kwargs": {"x": shapes[0]}}}),
                                 api_name="/launch_run")
    except Exception:  # noqa: BLE001 - refused: planted through the name alone
        launched = alice.predict(config=json.dumps(launch), api_name="/launch_run")
    made["launched_run"] = launched["run"]["id"]
    alice.predict(run_id=made["launched_run"], api_name="/cancel_run")
    # notes and tags of alice's run, through the page
    page = Page(dash, "alice")
    for run in (made["launched_run"], made["script_run"]):
        answer = page.call("runs-notes-save", {"runs-select": run, "runs-notes": text, "runs-tags": text[:60]})
        assert answer and answer.get("data"), answer
    return made


def _file_urls(value, found: set[str]) -> None:
    """Every ``/file=`` URL in ``value`` (any depth), as served, and every FileData's ``url``."""
    if isinstance(value, dict):
        url = value.get("url")
        if isinstance(url, str) and "file=" in url:
            found.add(url)
        for item in value.values():
            _file_urls(item, found)
    elif isinstance(value, list | tuple):
        for item in value:
            _file_urls(item, found)
    elif isinstance(value, str):
        found.update(re.findall(r"(?:https?://[^\s\"'<>]*)?/(?:gradio_api/)?file=[^\s\"'<>)]+", value))


def _walk_named_api(dash: SharedDashboard, user: str, made: dict[str, int]) -> list:
    client = dash.client(user)
    calls = [({}, "/list_runs"), ({}, "/list_datasets")]
    for run in (made["script_run"], made["launched_run"]):
        calls += [({"run_id": run}, "/run_groups"), ({"run_id": run}, "/run_metrics"),
                  ({"run_id": run}, "/export_run")]
    outputs = []
    for kwargs, name in calls:
        try:
            outputs.append(client.predict(**kwargs, api_name=name))
        except Exception as exc:  # noqa: BLE001 - a refusal is an answer too: its text is checked
            outputs.append(str(exc))
    return outputs


def _walk_page(dash: SharedDashboard, user: str, made: dict[str, int]) -> list:
    """Run every handler of the page (but those that launch, delete or load models) once with each planted run
    (and the planted dataset) chosen wherever an input takes a run (or a dataset); returns their outputs."""
    page = Page(dash, user)
    outputs = []
    for dependency in page.config["dependencies"]:
        if not dependency["targets"] or not dependency.get("backend_fn", True):
            continue
        elem_id = page.elem_id(dependency["targets"][0][0])
        if any(word in elem_id for word in SLOW_OR_LAUNCHING):
            continue
        for run in (made["script_run"], made["launched_run"]):
            data = []
            for input_id in dependency["inputs"]:
                name = page.elem_id(input_id) + str(page.by_id[input_id].get("props", {}).get("label", "")).lower()
                value = page.default(input_id)
                if "dataset" in name and page.by_id[input_id].get("type") in ("dropdown", "number"):
                    value = made["dataset"]
                elif "run" in name and page.by_id[input_id].get("type") in ("dropdown", "number"):
                    value = run
                data.append(value)
            outputs.append(page.run(dependency, data))
    return outputs


@pytest.fixture(scope="module")
def planted(shared_dashboard, secrets, tmp_path_factory) -> dict[str, int]:
    return _plant(shared_dashboard, list(secrets), tmp_path_factory.mktemp("planted"))


def test_no_planted_file_shape_ever_yields_a_server_file(shared_dashboard, secrets, planted):
    dash, made = shared_dashboard, planted
    outputs = _walk_named_api(dash, "bob", made) + _walk_named_api(dash, "alice", made)
    page_outputs = _walk_page(dash, "bob", made)
    answered = [o for o in page_outputs if isinstance(o, dict) and "data" in o]
    assert len(answered) >= 40, f"only {len(answered)} of {len(page_outputs)} page handlers answered"
    outputs += page_outputs
    urls: set[str] = set()
    _file_urls(outputs, urls)
    bob = dash.http("bob")
    read = []
    for url in sorted(urls):
        answer = bob.get(url if url.startswith("http") else "/" + url.lstrip("/"))
        if answer.status_code == 200 and any(proof.encode() in answer.content for proof in secrets.values()):
            read.append(url)
    assert read == [], f"planted file shapes served server files: {read}"
    downloaded = [str(p) for p in dash.downloads.rglob("*") if p.is_file()
                  and any(proof.encode() in p.read_bytes() for proof in secrets.values())]
    assert downloaded == [], f"the API clients were sent server files: {downloaded}"
    dumped = json.dumps(outputs, default=str)
    assert SECRET not in dumped and "admin-pw" not in dumped
    # the shapes are still there, as data: what was planted is shown, not served
    assert any(str(secrets and list(secrets)[0]) in json.dumps(o, default=str) for o in outputs)
    # and the server still answers every login
    assert len(dash.client("admin").predict(api_name="/list_runs")) >= 2


def test_exports_are_offered_under_random_names_and_server_folders_are_never_served(shared_dashboard, secrets,
                                                                                     planted):
    dash = shared_dashboard
    summary, bundle = dash.client("alice").predict(run_id=planted["launched_run"], api_name="/export_run")
    assert Path(bundle).read_bytes()[:2] == b"PK"  # the caller gets the zip
    bob = dash.http("bob")
    # where the export lies on the server (its answer says so, and the names are a run id and a time): not served
    for path in [*summary["files"], *secrets]:
        assert bob.get(f"/gradio_api/file={path}").status_code in (403, 404), path
    # the page's own Export button: each download answers the login that exported, and no other
    answer = Page(dash, "alice").call("export-button", {"runs-select": planted["launched_run"]})
    urls: set[str] = set()
    _file_urls(answer["data"], urls)
    assert len(urls) >= 4, answer
    alice = dash.http("alice")
    for url in sorted(urls):
        path = "/" + url.split("/gradio_api/", 1)[-1] if "/gradio_api/" in url else url
        assert alice.get("/gradio_api/" + path.lstrip("/")).status_code == 200, url
        assert bob.get("/gradio_api/" + path.lstrip("/")).status_code == 404, url


def test_a_stored_name_is_text_in_the_pages_markdown(shared_dashboard):
    """A run's name (any token holder's) is shown in Markdown (Inspect's summary, the Launch tab's clone line) as
    literal text: no HTML element, link or image of it reaches another login's page. Before the fix Gradio's
    sanitizer kept ``<img src=...>`` (without its handlers) and Markdown links, so every viewer's browser fetched
    an address the run's owner chose."""
    dash = shared_dashboard
    api = httpx.Client(base_url=dash.url.rstrip("/"), timeout=60,
                       headers={"Authorization": f"Bearer {_token(dash, 'alice')}"})
    name = '<img src="http://192.0.2.1/x.png"> ![i](http://192.0.2.1/i.png) [log in](http://192.0.2.1/) *x*'
    config = {"model": "org/tiny-model", "max_steps": 3, "rewards": [{"rule": "numeric_answer"}]}
    run_id = api.post("/api/v1/runs", json={"client_key": "markup-0001", "name": name, "config": config}).json()["run_id"]
    completion = {"index": 0, "text": "4", "rewards": {"acc": 1.0}, "total_reward": 1.0, "advantage": 0.0}
    step = {"seq": 1, "kind": "step", "step": 1, "wall_time": 1.0, "metrics": {"reward": 1.0}, "groups": [
        {"split": "train", "groups": [{"row_index": 0, "prompt": "2+2?", "completions": [completion]}]}]}
    assert api.post(f"/api/v1/runs/{run_id}/batches", json={"records": [step]}).status_code == 200
    page = Page(dash, "bob")
    summary = page.call("inspect-refresh", {"inspect-run": run_id}, output="inspect-summary")
    clone = page.call("launch-clone", {"launch-clone": run_id}, event="input", output="launch-clone-status")
    shown = [next(v for v in answer["data"] if isinstance(v, str) and mark in v)
             for answer, mark in ((summary, ", step 1:"), (clone, "Form filled from run"))]
    assert all("log in" in text for text in shown), shown  # the name is there, as text
    for text in shown:
        assert not re.search(r"<img|(?<!\\)!\[|(?<!\\)\]\(|(?<!\\)\*x", text), text
    # and in the charts' titles and legends, which plotly.js reads a subset of HTML in (``<a href>``, ``style``)
    from app.views.charts import MetricSeries, compare_figure, training_figure

    series = MetricSeries(run_id=run_id, data={name: ([1], [1.0]), "reward": ([1], [1.0])})
    figures = [training_figure(series, name), compare_figure({name: series}, name)]
    texts = [figures[0].layout.title.text, figures[1].layout.title.text, figures[1].data[0].name]
    assert not any("<img" in text for text in texts), texts


def test_gradios_run_history_is_off_and_its_routes_are_not_served(shared_dashboard):
    """Gradio's run history (on by default) serves ``/gradio_api/run-history/*`` without a login and, for a client
    reaching the server over loopback (a reverse proxy on the same host forwards every client from there), calls the
    hub with the server's own saved HF token: list its buckets, create one, read a bucket's files; an event sent with
    a bucket header is written there. It also keeps every event's inputs and outputs in the browser (the API token
    the tab shows once). Before the fix an anonymous ``GET /gradio_api/run-history/buckets`` from 127.0.0.1 reached
    the hub (``502 hub error`` offline, the buckets' names online); the routes are not served now."""
    dash = shared_dashboard
    anonymous = httpx.Client(base_url=dash.url.rstrip("/"), timeout=30)
    for path in ("/gradio_api/run-history/buckets", "/gradio_api/run-history/records?bucket=someone/private",
                 "/gradio_api/runs"):
        assert anonymous.get(path).status_code == 404, path
    assert anonymous.post("/gradio_api/run-history/connect", json={"bucket_id": "someone/new"}).status_code == 404
    assert dash.http("bob").get("/config").json().get("run_history") is False


def test_gradios_deep_links_are_not_served_and_a_slashed_page_keeps_its_run(shared_dashboard):
    """Gradio's deep links (round six): ``/gradio_api/deep_link?session_hash=S`` saved every value session ``S``'s
    client had sent (bob's text in the run page's number box, his filter) as a file on the server, and
    ``/run?run=1&deep_link=<name>`` opened alice's page with bob's values (the dashboard's with his run config in the
    Launch form). The route answers 404 now and the parameter is dropped. ``/run/?run=1`` was redirected to ``/run``,
    from the server's root and without its run; it is a relative redirect keeping the query now."""
    dash = shared_dashboard
    bob = dash.http("bob")
    config = bob.get("/config", params={"page": "run"}).json()
    by_id = {c["id"]: c for c in config["components"]}
    elem = {c["id"]: c.get("props", {}).get("elem_id") for c in config["components"]}
    redraw = next(d for d in config["dependencies"] if d.get("backend_fn") and "runs-panel-filter" in
                  [elem[i] for i in d["inputs"]] and elem[d["inputs"][0]] == "run-page-run")
    planted = {"run-page-run": "<img src=x onerror=alert(1)>", "runs-panel-filter": "planted by bob"}
    data = [planted.get(elem[i], by_id[i].get("props", {}).get("value")) for i in redraw["inputs"]]
    session_hash = uuid.uuid4().hex[:11]
    joined = bob.post("/gradio_api/queue/join?run=1", json={"data": data, "fn_index": redraw["id"],
                                                            "session_hash": session_hash, "event_data": None})
    assert joined.status_code == 200, joined.text
    with bob.stream("GET", "/gradio_api/queue/data", params={"session_hash": session_hash}) as stream:
        for line in stream.iter_lines():
            if line.startswith("data:") and json.loads(line[5:]).get("msg") == "process_completed":
                break
    saved = bob.get("/gradio_api/deep_link", params={"session_hash": session_hash})
    assert saved.status_code == 404, saved.text  # was 200 and the saved values' name
    alice = dash.http("alice")
    for name in ("lkgVTuAeoPQ", "deep-link"):
        page_config = alice.get("/config", params={"page": "run", "deep_link": name}).json()
        encoded = alice.get(f"/config?page=run&deep%5Flink={name}").json()  # the name percent-encoded
        assert encoded.get("deep_link_state") in (None, "none")
        assert page_config.get("deep_link_state") in (None, "none")  # was "invalid" (or "valid" with bob's values)
        assert "planted by bob" not in json.dumps(page_config)
        assert alice.get("/run", params={"run": "1", "deep_link": name}).status_code == 200
    slashed = alice.get("/run/", params={"run": "1"}, follow_redirects=False)
    assert slashed.is_redirect and slashed.headers["location"] == "../run?run=1"  # was /run, without the run
