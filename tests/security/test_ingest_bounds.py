"""The ingest API's bodies are held to the bounds of config text, and to the login's boundary, before anything is
stored; what a store gives back is read within bounds; a run id out of range is a 404. A served dashboard with
three logins (tests/security/conftest.py), its tokens made on the page as a login makes them.

Run against the code before the fix: a provenance nested 300 levels deep was stored, a run id of 2**70 answered
500 and ``abc`` 422, a script run's config naming ``os:system`` was kept, and a value nested past the interpreter's
limit, once stored, made ``list_runs`` fail for every login.
"""

from __future__ import annotations

import json
import re
import sqlite3

import httpx
import pytest

from grpo_core.runs.script_runs import run_config_from_trainer
from tests.security.conftest import SharedDashboard

CONFIG = run_config_from_trainer({"num_generations": 2, "per_device_train_batch_size": 2}, model="org/tiny-model",
                                 reward_names=["acc"], reward_weights=[1.0], max_steps=3)


def _deep(levels: int, leaf: object = "x") -> dict:
    value: object = leaf
    for _ in range(levels):
        value = {"a": value}
    return value  # type: ignore[return-value]


@pytest.fixture(scope="module")
def api(shared_dashboard: SharedDashboard):
    """``{user: httpx client with that login's fresh API token}`` for alice and bob."""
    clients = {}
    for user in ("alice", "bob"):
        shown = shared_dashboard.ui(user, "token-create", {"token-name": "bounds"})[0]
        token = re.search(r'<pre id="token-value">([^<]+)</pre>', shown).group(1)
        clients[user] = httpx.Client(base_url=shared_dashboard.url.rstrip("/"), timeout=60,
                                     headers={"Authorization": f"Bearer {token}"})
    return clients


def _create(client: httpx.Client, key: str, **fields) -> httpx.Response:
    return client.post("/api/v1/runs", json={"client_key": key, "name": "bounds", "config": CONFIG, **fields})


def _step(seq: int, extra: dict) -> dict:
    completion = {"index": 0, "text": "4", "rewards": {"acc": 1.0}, "total_reward": 1.0, "advantage": 0.0}
    return {"seq": seq, "kind": "step", "step": seq, "wall_time": 1.0, "metrics": {"reward": 1.0},
            "groups": [{"split": "train", "groups": [{"row_index": 0, "prompt": "2+2?", "extra": extra,
                                                      "completions": [completion]}]}]}


def _run_count(dash: SharedDashboard) -> int:
    return len(dash.client("admin").predict(api_name="/list_runs"))


def test_ingest_bodies_past_the_config_bounds_are_refused_and_never_stored(shared_dashboard, api):
    dash, alice = shared_dashboard, api["alice"]
    before = _run_count(dash)
    many = {f"k{i}": i for i in range(10_001)}
    large = {"text": "x" * (65 * 1024)}
    for i, provenance in enumerate((_deep(300), _deep(33), many, large, {"list": [_deep(40)]})):
        answer = _create(alice, f"bounds-prov-{i}", provenance=provenance)
        assert answer.status_code == 422, (i, answer.text[:300])
        assert "provenance" in answer.text and re.search(r"deeper than 32|10,000 values|over the limit", answer.text)
    answer = _create(alice, "bounds-config", config={**CONFIG, "trl_args": {"generation_kwargs": _deep(300)}})
    assert answer.status_code == 422 and "config" in answer.text, answer.text[:300]
    assert _run_count(dash) == before
    run_id = _create(alice, "bounds-ok", provenance={"host": "node-1"}).json()["run_id"]
    for i, extra in enumerate((_deep(300), many, large)):
        answer = alice.post(f"/api/v1/runs/{run_id}/batches", json={"records": [_step(1, extra)]})
        assert answer.status_code == 422 and "extra columns" in answer.text, (i, answer.text[:300])
    assert dash.client("alice").predict(run_id=run_id, api_name="/run_groups") == []
    for user in ("admin", "alice", "bob"):  # every login still lists every run
        assert any(run["id"] == run_id for run in dash.client(user).predict(api_name="/list_runs"))


def test_a_deep_value_stored_earlier_breaks_no_listing(shared_dashboard, api):
    dash, alice = shared_dashboard, api["alice"]
    run_id = _create(alice, "bounds-earlier").json()["run_id"]
    answer = alice.post(f"/api/v1/runs/{run_id}/batches", json={"records": [_step(1, {"answer": "4"})]})
    assert answer.status_code == 200, answer.text
    # what an older version let in, written as it would lie in the store: nested 300 and 5,000 levels deep
    with sqlite3.connect(dash.data_dir / "grpo.db") as db:
        db.execute("UPDATE runs SET provenance = ? WHERE id = ?", (json.dumps(_deep(300)), run_id))
        db.execute("UPDATE groups SET extra = ? WHERE run_id = ?", ("[" * 5000 + "]" * 5000, run_id))
    for user in ("admin", "alice", "bob"):
        runs = dash.client(user).predict(api_name="/list_runs")
        assert any(run["id"] == run_id for run in runs), user
    groups = dash.client("bob").predict(run_id=run_id, api_name="/run_groups")
    assert len(groups) == 1 and groups[0]["completions"][0]["text"] == "4"
    with sqlite3.connect(dash.data_dir / "grpo.db") as db:
        db.execute("UPDATE runs SET provenance = ? WHERE id = ?", ("[" * 5000 + "]" * 5000, run_id))
    assert any(run["id"] == run_id for run in dash.client("bob").predict(api_name="/list_runs"))


@pytest.mark.parametrize("run_id", [str(2**70), str(2**63), "-1", "0", "abc", "1.5", "１"])
def test_a_run_id_out_of_range_is_not_found(shared_dashboard, api, run_id):
    alice = api["alice"]
    answers = [alice.post(f"/api/v1/runs/{run_id}/batches", json={"records": [_step(1, {})]}),
               alice.post(f"/api/v1/runs/{run_id}/progress", json={"step": 1}),
               alice.get(f"/api/v1/runs/{run_id}/control")]
    assert [a.status_code for a in answers] == [404, 404, 404], [a.text[:200] for a in answers]
    for endpoint in ("/run_metrics", "/run_groups", "/export_run"):
        with pytest.raises(Exception, match="no run"):
            shared_dashboard.client("bob").predict(run_id=2**70, api_name=endpoint)


def test_an_ingest_config_beyond_the_logins_boundary_is_not_kept(shared_dashboard, api, tmp_path):
    dash, bob = shared_dashboard, api["bob"]
    before = _run_count(dash)
    refused = [
        {**CONFIG, "rewards": [{"rule": "plugin", "params": {"target": "os:system"}}]},
        {**CONFIG, "dataset_path": str(dash.outside / "secret.jsonl")},
        {**CONFIG, "model": str(dash.outside)},
        {**CONFIG, "trl_args": {"model_init_kwargs": {"trust_remote_code": True}}},
    ]
    for i, config in enumerate(refused):
        answer = _create(bob, f"bounds-boundary-{i}", config=config)
        assert answer.status_code == 422, (i, answer.text[:300])
    assert _run_count(dash) == before


def test_a_script_run_keeps_at_most_its_bound_of_metric_names(shared_dashboard, api):
    """A run holds at most ``MAX_RUN_METRIC_KEYS`` distinct metric names; a record bringing more is refused (422)
    and nothing of it stored. Before the fix one batch of 256 steps of 2,000 fresh names each was kept (512,000
    names): choosing that run then took 13 s and 1.5 MB, and every further batch added as many."""
    from grpo_core.integrations.wire import MAX_RUN_METRIC_KEYS

    dash, alice = shared_dashboard, api["alice"]
    run_id = _create(alice, "bounds-names").json()["run_id"]
    half = MAX_RUN_METRIC_KEYS // 2 + 1
    records = [{**_step(seq, {}), "metrics": {f"name{seq}-{i}": 1.0 for i in range(half)}} for seq in (1, 2, 3)]
    answer = alice.post(f"/api/v1/runs/{run_id}/batches", json={"records": records})
    assert answer.status_code == 422 and "metric names" in answer.text, answer.text[:300]
    keys = {p["key"] for p in dash.client("bob").predict(run_id=run_id, api_name="/run_metrics")}
    assert len(keys) == half and "name2-0" not in keys
    again = {**_step(2, {}), "metrics": {"name1-0": 2.0, "reward": 1.0}}  # names it has, and one more: kept
    assert alice.post(f"/api/v1/runs/{run_id}/batches", json={"records": [again]}).status_code == 200


def test_a_run_naming_another_logins_image_dataset_shows_bob_none_of_its_images(shared_dashboard, api, tmp_path):
    """Images follow their dataset's owner: bob's own script run whose config names alice's image dataset (by
    ``dataset_id``, or by its rows file under the data directory as ``dataset_path``) gets none of its pictures from
    ``run_images``. Before the fix both returned alice's images to bob: the check looked at the run's owner only."""
    import zipfile

    from tests.helpers import png_bytes

    dash, bob = shared_dashboard, api["bob"]
    upload = tmp_path / "private.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        archive.writestr("data.jsonl", '{"prompt": "Colour?", "image": "red.png"}\n')
        archive.writestr("red.png", png_bytes((220, 20, 20)))
    from gradio_client import handle_file

    dataset = dash.client("alice").predict(file=handle_file(str(upload)), name="alice private pictures",
                                           api_name="/add_dataset")
    rows_files = [p for p in dash.data_dir.glob("datasets/**/*.jsonl") if p.with_suffix(".images").is_dir()]
    assert rows_files
    run_ids = {}
    for key, config in (("by-id", {**CONFIG, "dataset_id": dataset["id"]}),
                        ("by-path", {**CONFIG, "dataset_path": str(rows_files[-1])})):
        created = _create(bob, f"images-{key}", config=config)
        assert created.status_code == 200, created.text[:300]  # a config bob could launch: kept
        run_id = run_ids[key] = created.json()["run_id"]
        assert bob.post(f"/api/v1/runs/{run_id}/batches", json={"records": [_step(1, {})]}).status_code == 200
        try:
            shown = dash.client("bob").predict(run_id, 0, "train", api_name="/run_images")
        except Exception as exc:  # noqa: BLE001 - a refusal is what is wanted
            assert "may not see the images of dataset" in str(exc), exc
        else:
            assert shown == [], key
    admin_sees = dash.client("admin").predict(run_ids["by-id"], 0, "train", api_name="/run_images")
    assert len(admin_sees) == 1 and admin_sees[0]["data_url"].startswith("data:image/png;base64,")


def test_an_environment_reward_past_a_float_is_stored_as_none_not_a_server_error(shared_dashboard, api):
    """A hostile environment's ``get_reward()`` (or a script) sending a reward turn of 10**400: the value is kept
    as ``None``. Before the fix ``float()`` raised OverflowError inside the wire's validator: a 500 for the batch."""
    alice = api["alice"]
    run_id = _create(alice, "turns-overflow").json()["run_id"]
    record = _step(1, {})
    record["groups"][0]["groups"][0]["completions"][0]["turns"] = [
        {"kind": "assistant", "text": "4"}, {"kind": "reward", "name": "Env", "value": 10**400}]
    answer = alice.post(f"/api/v1/runs/{run_id}/batches", json={"records": [record]})
    assert answer.status_code == 200, answer.text[:300]
    groups = shared_dashboard.client("alice").predict(run_id=run_id, api_name="/run_groups")
    assert groups[0]["completions"][0]["turns"][-1] == {"kind": "reward", "name": "Env", "value": None}


def test_an_export_never_copies_a_server_file_a_script_runs_dataset_path_names(shared_dashboard, api, tmp_path):
    """A script run's ``dataset_path`` is never read at ingest (it names the script's file), yet the boundary lets a
    login name any file under the data directory. Before the fix bob's own run naming the store (``grpo.db``: every
    login's runs, presets and token hashes) or one of alice's stored pictures got that file copied byte for byte
    into the bundle ``export_run`` offered him. Now only a file that reads as a dataset is copied."""
    import zipfile

    dash, bob = shared_dashboard, api["bob"]
    from gradio_client import handle_file

    from tests.helpers import png_bytes

    upload = tmp_path / "alice-pictures.zip"
    with zipfile.ZipFile(upload, "w") as archive:
        archive.writestr("data.jsonl", '{"prompt": "Colour?", "image": "blue.png"}\n')
        archive.writestr("blue.png", png_bytes((20, 20, 220)))
    dash.client("alice").predict(file=handle_file(str(upload)), name="alice export pictures", api_name="/add_dataset")
    pictures = sorted(dash.data_dir.glob("datasets/**/*.images/*.png"))
    for key, path in (("store", dash.data_dir / "grpo.db"), ("picture", pictures[0])):
        created = _create(bob, f"export-{key}", config={**CONFIG, "dataset_path": str(path)})
        assert created.status_code == 200, created.text[:300]
        summary, bundle = dash.client("bob").predict(created.json()["run_id"], api_name="/export_run")
        secret = path.read_bytes()[:64]
        with zipfile.ZipFile(bundle) as archive:
            for name in archive.namelist():
                with archive.open(name) as member:
                    assert member.read(64) != secret, (key, name)


def test_a_runs_notes_and_a_launched_config_are_bounded_before_they_are_stored(shared_dashboard, api):
    """Every run listing (``list_runs``, the page's run reads) carries each run's notes and config. Before the fix a
    login's Runs tab saved 20 MB of notes on its own run in one request (six such runs: the store 120 MB, the
    server 375 MB more, each of alice's ``list_runs`` 120 MB), and the Launch form's run name, never read from bounded
    text, was stored at any length. Now notes past ``grpo_core.runs.actions.MAX_NOTES_CHARS`` (20,000) and a config whose JSON is
    past the config-text bounds are refused, and nothing is stored."""
    from tests.security.page import Page

    dash = shared_dashboard
    run_id = _create(api["bob"], "bounds-notes").json()["run_id"]
    page = Page(dash, "bob")
    for notes in ("kept: a short note", "N" * 100_000):
        page.call("runs-notes-save", {"runs-select": run_id, "runs-notes": notes, "runs-filter-status": "all"})
    stored = next(run for run in dash.client("alice").predict(api_name="/list_runs") if run["id"] == run_id)
    assert stored["notes"] == "kept: a short note", len(stored["notes"])  # the long notes never were
    before = _run_count(dash)
    status = page.call("launch-button", {"launch-name": "x" * 70_000, "launch-model": str(dash.model_dir)})
    text = json.dumps(status)
    assert "Not launched" in text and "the run config" in text and "over the limit" in text, text[:500]
    assert _run_count(dash) == before


def test_run_metrics_reads_at_most_a_runs_bound_of_metric_names(shared_dashboard, api):
    """``run_metrics``' ``keys`` went into one SQL ``IN`` as given: 400,000 names held the call 10 s (other logins'
    pages answered up to 1.3 s late) and ended in SQLite's "too many SQL variables". Now more names than a run keeps
    (``MAX_RUN_METRIC_KEYS``), or a name longer than the ingest API stores, are refused before the store is asked."""
    dash = shared_dashboard
    run_id = _create(api["bob"], "bounds-metric-keys").json()["run_id"]
    bob = dash.client("bob")
    assert bob.predict(run_id, -1, ["reward", "kl"], api_name="/run_metrics") == []
    for keys in ([f"k{i}" for i in range(2_001)], ["x" * 201]):
        with pytest.raises(Exception, match="at most 2,000 metric names"):
            bob.predict(run_id, -1, keys, api_name="/run_metrics")


def test_a_runs_webhook_url_is_shown_to_its_owner_and_admins_only(shared_dashboard, api):
    """A run's ``webhook_url`` (a Slack or Discord incoming webhook's address is the credential that posts to the
    channel; admins set them, ``--run-webhooks admins``) was read by every login: ``list_runs``, the Compare table
    and ``export_run``'s config YAML carried it. Now another login reads it as hidden and exports without it."""
    import zipfile

    dash = shared_dashboard
    secret = "https://hooks.example.com/services/T000/B000/planted-webhook-secret"
    run_id = _create(api["alice"], "bounds-webhook").json()["run_id"]
    with sqlite3.connect(dash.data_dir / "grpo.db") as db:  # as alice's launch with a webhook stores it
        config = json.loads(db.execute("SELECT config FROM runs WHERE id = ?", (run_id,)).fetchone()[0])
        db.execute("UPDATE runs SET config = ? WHERE id = ?", (json.dumps({**config, "webhook_url": secret}), run_id))

    def listed(user: str) -> str:
        run = next(r for r in dash.client(user).predict(api_name="/list_runs") if r["id"] == run_id)
        return run["config"]["webhook_url"]

    assert listed("alice") == secret and listed("admin") == secret
    assert listed("bob") == "(set by the run's owner; hidden)"
    from tests.security.page import Page

    other = _create(api["bob"], "bounds-webhook-other").json()["run_id"]
    compared = Page(dash, "bob").call("compare-button", {"compare-runs": [run_id, other]})
    assert "webhook_url" in json.dumps(compared) and secret not in json.dumps(compared), compared
    for user, shown in (("bob", False), ("alice", True)):
        _, bundle = dash.client(user).predict(run_id=run_id, api_name="/export_run")
        with zipfile.ZipFile(bundle) as archive:
            text = "".join(archive.read(n).decode(errors="replace") for n in archive.namelist() if n.endswith(".yaml"))
        assert (secret in text) is shown, user


def test_inspects_search_looks_for_a_bounded_text(shared_dashboard, api):
    """Inspect's search is SQL ``LIKE '%text%'``, whose cost is the run's texts times the pattern: before the fix a
    20,000-character search on one 200,000-character completion (a script may record 1,000,000) took 22 s of a core,
    per click and per completion. Now a search is at most ``MAX_SEARCH_CHARS`` characters; a short one still finds."""
    import time

    from tests.security.page import Page

    bob = api["bob"]
    run_id = _create(bob, "bounds-search").json()["run_id"]
    step = _step(1, {})
    step["groups"][0]["groups"][0]["completions"][0]["text"] = "a" * 200_000 + " needle"
    assert bob.post(f"/api/v1/runs/{run_id}/batches", json={"records": [step]}).status_code == 200
    page = Page(shared_dashboard, "bob")
    started = time.monotonic()
    refused = page.call("inspect-search-button", {"inspect-run": run_id, "inspect-search": "a" * 20_000 + "b"})
    assert "search for at most 200 characters" in json.dumps(refused), str(refused)[:300]
    assert time.monotonic() - started < 10
    found = page.call("inspect-search-button", {"inspect-run": run_id, "inspect-search": "needle"})
    shown = found["data"][0]
    assert 'data-total="1"' in shown and "completion #0" in shown, shown[-500:]
