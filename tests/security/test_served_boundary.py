"""A served dashboard with three logins (tests/security/conftest.py) refuses, through the named API and the UI's own
upload route, every way a login could make the server run code or read files it was not given; a plugin in the
admin's plugin folder still trains.

Evidence that nothing ran: plugins that would write a marker file next to the outside folder's canary, and a
listing of the outside folder before and after.
"""

from __future__ import annotations

import io
import json
import time
import zipfile

import pytest
from gradio_client import handle_file
from gradio_client.exceptions import AppError

FINISHED = {"completed", "failed", "cancelled"}
EVIL = "from pathlib import Path\nPath({marker!r}).write_text('ran')\n\ndef f(completions, **kw):\n    return [1.0] * len(completions)\n"


def _config(dataset_id: int, model: str, **fields) -> str:
    base = {"name": "attack", "model": model, "dataset_id": dataset_id, "max_steps": 1, "num_generations": 2,
            "per_device_train_batch_size": 2, "max_completion_length": 8, "device": "cpu", "use_lora": True,
            "rewards": [{"rule": "numeric_answer", "weight": 1.0}]}
    base.update(fields)
    return json.dumps(base)


def _refused(client, config: str, api_name: str = "/launch_run") -> str:
    with pytest.raises(AppError) as caught:
        client.predict(config=config, api_name=api_name)
    return str(caught.value)


def _listing(folder):
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_uploaded_code_and_module_targets_are_refused_before_any_import(shared_dashboard, alice_dataset):
    dash = shared_dashboard
    alice = dash.client("alice")
    before = _listing(dash.outside)
    marker = dash.outside / "ran-upload"
    upload = dash.http("alice").post("/gradio_api/upload",
                                     files={"files": ("evil.py", EVIL.format(marker=str(marker)).encode())})
    assert upload.status_code == 200, upload.text
    uploaded = upload.json()[0]
    model = str(dash.model_dir)
    targets = [f"{uploaded}:f", "os:system", "subprocess:getoutput", "builtins:exec", "runpy:run_path",
               "importlib:import_module", f"{dash.plugin_dir}/good_reward.py:os.system",
               f"{dash.plugin_dir}/../outside/x.py:f", "good_reward:os.system"]
    for target in targets:
        rewards = [{"rule": "plugin", "params": {"target": target}}, {"rule": "numeric_answer"}]
        message = _refused(alice, _config(alice_dataset, model, rewards=rewards))
        assert "reward rule 1 (plugin)" in message, (target, message)
        assert "plugin folder" in message or "define" in message, (target, message)
        sweep = _refused(alice, _config(alice_dataset, model, rewards=rewards, sweep={"beta": [0.0, 0.1]}),
                         api_name="/launch_sweep")
        assert "nothing was launched" in sweep and "plugin" in sweep
    for target in targets[:3] + targets[-3:]:  # a tool plugin or an environment is plugin code too
        tools = _refused(alice, _config(alice_dataset, model, tools=["calculator"], tool_plugins=[target]))
        assert "tool plugin 1" in tools and ("plugin folder" in tools or "define" in tools), (target, tools)
        environment = _refused(alice, _config(alice_dataset, model, environment=target))
        assert "environment" in environment and ("plugin folder" in environment or "define" in environment)
    # the admin is refused too: [admin] is about runs, [run-code] about code
    message = _refused(dash.client("admin"), _config(alice_dataset, model, rewards=[
        {"rule": "plugin", "params": {"target": f"{uploaded}:f"}}, {"rule": "numeric_answer"}]))
    assert "plugin folder" in message
    assert not marker.exists()
    assert _listing(dash.outside) == before
    assert not [r for r in alice.predict(api_name="/list_runs") if r["name"] == "attack"]


def test_server_files_outside_the_roots_are_refused_alike(shared_dashboard, alice_dataset):
    dash = shared_dashboard
    bob = dash.client("bob")
    model = str(dash.model_dir)
    messages = set()
    for path in (dash.outside / "secret.jsonl", dash.outside / "absent.jsonl", "/etc/passwd",
                 f"{dash.data_dir}/../outside/secret.jsonl", "~/secret.jsonl", "file:///etc/passwd"):
        config = json.loads(_config(alice_dataset, model))
        config.pop("dataset_id")
        config["dataset_path"] = str(path)
        message = _refused(bob, json.dumps(config))
        assert "dataset_path" in message and "outside" in message
        messages.add(message.replace(repr(str(path)), "PATH"))
    assert len(messages) == 1, messages  # the same words whether the file exists or not
    for model_path in (dash.outside, "/nonexistent/model", dash.outside / "m.gguf"):
        message = _refused(bob, _config(alice_dataset, str(model_path)))
        assert "model" in message and "outside" in message and "does not exist" not in message
    message = _refused(bob, _config(alice_dataset, model, trl_args={"model_init_kwargs": {"trust_remote_code": True}}))
    assert "trust_remote_code" in message
    secret_runs = [r for r in bob.predict(api_name="/list_runs") if r["config"].get("dataset_path")]
    assert secret_runs == []
    for run in bob.predict(api_name="/list_runs"):  # nothing any run recorded comes from the secret file
        groups = bob.predict(run_id=run["id"], api_name="/run_groups")
        assert "SECRET-PROMPT" not in json.dumps(groups)


def _arrow_bytes(prompt: str) -> bytes:
    import pyarrow as pa

    sink = io.BytesIO()
    table = pa.table({"prompt": [prompt]})
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue()


def test_a_zipped_dataset_cannot_read_outside_itself(shared_dashboard, tmp_path):
    dash = shared_dashboard
    alice = dash.client("alice")
    (dash.outside / "data.arrow").write_bytes(_arrow_bytes("SECRET-ARROW"))
    cases = {
        "absolute": ({"filename": str(dash.outside / "data.arrow")}, None),
        "absent": ({"filename": str(dash.outside / "absent.arrow")}, None),
        "dotdot": ({"filename": "../../../../../../../../" + str(dash.outside / "data.arrow").lstrip("/")}, None),
        "member": ({"filename": "data.arrow"}, "../data.arrow"),
        "symlink": ({"filename": "data.arrow"}, "link"),
    }
    messages = {}
    for label, (entry, member) in cases.items():
        path = tmp_path / f"{label}.zip"
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("saved/state.json", json.dumps({"_data_files": [entry]}))
            archive.writestr("saved/data.arrow", _arrow_bytes("inside"))
            if member == "link":
                info = zipfile.ZipInfo("saved/other.arrow")
                info.external_attr = 0o120777 << 16
                archive.writestr(info, str(dash.outside / "data.arrow"))
            elif member:
                archive.writestr(member, _arrow_bytes("escape"))
        with pytest.raises(AppError) as caught:
            alice.predict(file=handle_file(str(path)), name=f"zip {label}", api_name="/add_dataset")
        messages[label] = str(caught.value)
        assert "SECRET-ARROW" not in messages[label]
    assert messages["absolute"].replace(str(dash.outside / "data.arrow"), "P").replace("absolute.zip", "Z") == \
        messages["absent"].replace(str(dash.outside / "absent.arrow"), "P").replace("absent.zip", "Z")
    assert "zip member" in messages["member"] and "symbolic link" in messages["symlink"]
    assert not (dash.data_dir.parent / "data.arrow").exists()
    assert not [d for d in alice.predict(api_name="/list_datasets") if d["name"].startswith("zip ")]


def test_a_plugin_in_the_admins_folder_trains(shared_dashboard, alice_dataset):
    dash = shared_dashboard
    alice = dash.client("alice")
    rewards = [{"rule": "plugin", "params": {"target": f"{dash.plugin_dir}/good_reward.py:length_reward"}},
               {"rule": "plugin", "params": {"target": "good_reward:length_reward", "name": "dotted"}}]
    answer = alice.predict(config=_config(alice_dataset, str(dash.model_dir), name="permitted-plugin",
                                          rewards=rewards), api_name="/launch_run")
    run = answer["run"]
    assert run["config"]["rewards"][0]["params"]["target"].startswith(str(dash.plugin_dir.resolve()))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        run = next(r for r in alice.predict(api_name="/list_runs") if r["id"] == run["id"])
        if run["status"] in FINISHED:
            break
        time.sleep(1.0)
    assert run["status"] == "completed", dash.log_path.read_text()[-3000:]
    metrics = alice.predict(run_id=run["id"], after_step=-1, keys=["rewards/length_reward/mean"],
                            api_name="/run_metrics")
    assert metrics, "the plugin's reward was recorded"
    export = alice.predict(run_id=run["id"], api_name="/export_run")
    assert export[0]["folder"].startswith(str(dash.data_dir.resolve()))


def test_the_pages_own_handlers_refuse_the_same(shared_dashboard):
    """The Launch tab's launch, reward bench and preflight handlers, called as the page calls them (by
    ``fn_index`` on the queue, as alice), refuse an uploaded plugin and a stdlib target before importing either (as
    a reward rule, as the Tools group's environment or tool function),
    and an outside model folder without reading it; the tab lists the admin's plugin file with its SHA-256."""
    import hashlib

    from tests.security.conftest import GOOD_PLUGIN

    dash = shared_dashboard
    marker = dash.outside / "ran-ui"
    upload = dash.http("alice").post("/gradio_api/upload",
                                     files={"files": ("evil.py", EVIL.format(marker=str(marker)).encode())})
    uploaded = upload.json()[0]
    plugin = {"rule-1": "plugin", "params-1": json.dumps({"target": f"{uploaded}:f", "name": ""}),
              "launch-model": str(dash.model_dir)}
    status = dash.ui("alice", "launch-button", plugin)[0]
    assert "Not launched" in status and "plugin folder" in status, status
    bench = dash.ui("alice", "bench-button", {
        "rule-1": "plugin", "params-1": json.dumps({"target": "subprocess:getoutput", "name": ""}),
        "bench-row": json.dumps({"prompt": "p", "cmd": f"touch {marker}"}), "bench-completions": "a\n---\nb"})
    assert "plugin folder" in bench[1], bench
    preflight = dash.ui("alice", "preflight-button", plugin)
    assert "Preflight not started" in preflight[0] and "plugin folder" in preflight[0], preflight
    for fields, where in (({"hp-environment": f"{uploaded}:f"}, "environment"),
                          ({"hp-tool_plugins": f"{dash.plugin_dir}/good_reward.py:length_reward\nos:system",
                            "hp-tools": ["python"]}, "tool plugin 2")):
        launched = dash.ui("alice", "launch-button", {"launch-model": str(dash.model_dir), **fields})[0]
        assert "Not launched" in launched and where in launched and "plugin folder" in launched, launched
        preflight = dash.ui("alice", "preflight-button", {"launch-model": str(dash.model_dir), **fields})
        assert "Preflight not started" in preflight[0] and where in preflight[0], preflight
    outside_model = dash.ui("alice", "launch-button", {"launch-model": str(dash.outside)})[0]
    assert "Not launched" in outside_model and "outside" in outside_model and "config.json" not in outside_model
    assert not marker.exists()

    config = dash.http("bob").get("/config").json()
    listing = next(c["props"]["value"] for c in config["components"]
                   if c.get("props", {}).get("elem_id") == "launch-plugin-files")
    assert hashlib.sha256(GOOD_PLUGIN.encode()).hexdigest() in listing and "good_reward.py" in listing


def test_single_user_mode_keeps_its_freedom_and_logins_later_cannot_use_such_a_run(tmp_path, tiny_model_dir):
    """Without a login the dashboard accepts an outside dataset file, an outside plugin and an outside model, as
    before. Served again on the same data with several logins, that run is refused to them for export, merge and
    resume (the boundary re-checks its stored config), with the reason."""
    from gradio_client import Client

    from tests.security.conftest import AUTH_FILE, LOGINS
    from tests.servers import serving

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "rows.jsonl").write_text("".join(json.dumps({"prompt": f"{i} + 1 =", "answer": str(i + 1)}) + "\n"
                                                for i in range(4)))
    (outside / "mine.py").write_text("def score(completions, **kw):\n    return [0.5] * len(completions)\n")
    data = tmp_path / "data"
    config = json.loads(_config(0, str(tiny_model_dir), name="single-user-run", max_steps=1))
    config.pop("dataset_id")
    config.update(dataset_path=str(outside / "rows.jsonl"),
                  rewards=[{"rule": "plugin", "params": {"target": f"{outside / 'mine.py'}:score"}}])
    with serving(data) as app:
        client = Client(app.url, verbose=False, analytics_enabled=False, download_files=str(tmp_path / "dl"))
        run = client.predict(config=json.dumps(config), api_name="/launch_run")["run"]
        assert run["config"]["dataset_path"] == str((outside / "rows.jsonl").resolve())
        client.predict(run_id=run["id"], api_name="/cancel_run")
        deadline = time.monotonic() + 120
        while next(r for r in client.predict(api_name="/list_runs") if r["id"] == run["id"])["status"] not in FINISHED:
            assert time.monotonic() < deadline
            time.sleep(1.0)
    auth = tmp_path / "users.txt"
    auth.write_text(AUTH_FILE)
    with serving(data, "--auth-file", str(auth), log_path=tmp_path / "logins.log") as app:
        alice = Client(app.url, auth=("alice", LOGINS["alice"]), verbose=False, analytics_enabled=False,
                       download_files=str(tmp_path / "dl-alice"))
        for api_name, arguments in (("/export_run", {}), ("/merge_run", {"download": False}), ("/resume_run", {})):
            with pytest.raises(AppError) as caught:
                alice.predict(run_id=run["id"], api_name=api_name, **arguments)
            assert "cannot" in str(caught.value) and "outside" in str(caught.value), (api_name, caught.value)
        assert not list((data / "exports").glob("*")) if (data / "exports").exists() else True
