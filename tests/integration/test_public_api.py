"""The public API scripted with ``gradio_client`` against ``python -m app serve --auth user:pw``, as a notebook would:
add a dataset, launch a two-step run of the tiny model from a JSON config, poll the run list until it completes,
read its metrics and groups, export it; cancel and resume a second run; only the named endpoints exist, and
without the login the client is refused.

One server for the module (it trains one run for real, ~1 min).
"""

from __future__ import annotations

import json
import time
import zipfile
from pathlib import Path

import httpx
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError

from tests.helpers import FINISHED
from tests.servers import serving

USER, PASSWORD = "user", "pw"
PUBLIC = {"/add_dataset", "/launch_run", "/launch_sweep", "/list_runs", "/run_metrics", "/run_groups", "/run_images",
          "/cancel_run", "/resume_run", "/export_run", "/delete_run", "/merge_run", "/list_datasets", "/rename_dataset",
          "/delete_dataset", "/rescore_run"}
REWARDS = [
    {"rule": "numeric_answer", "weight": 1.0},
    {"rule": "format_regex", "weight": 0.5, "params": {"pattern": r"\d"}},
]
@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """``python -m app serve --auth user:pw`` on a free port, with its own data directory (its URL and log)."""
    with serving(tmp_path_factory.mktemp("api-data"), "--auth", f"{USER}:{PASSWORD}") as app:
        yield app


@pytest.fixture(scope="module")
def served(server):
    """The base URL of :func:`server`."""
    return server.url


@pytest.fixture(scope="module")
def client(served, tmp_path_factory):
    return Client(served, auth=(USER, PASSWORD), verbose=False, analytics_enabled=False,
                  download_files=str(tmp_path_factory.mktemp("downloads")))


def _run(client: Client, run_id: int) -> dict:
    return next(r for r in client.predict(api_name="/list_runs") if r["id"] == run_id)


def _wait(client: Client, run_id: int, done, timeout_s: float) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        run = _run(client, run_id)
        if done(run):
            return run
        time.sleep(1.0)
    raise AssertionError(f"run {run_id} did not get there within {timeout_s} s: {_run(client, run_id)}")


def test_only_the_named_endpoints_are_listed(client):
    info = client.view_api(print_info=False, return_format="dict")
    assert set(info["named_endpoints"]) == PUBLIC
    assert info["unnamed_endpoints"] == {}
    listed = client.view_api(print_info=False, return_format="str")
    assert "/lambda" not in listed and "/on_" not in listed
    params = {p["parameter_name"] for p in info["named_endpoints"]["/run_metrics"]["parameters"]}
    assert params == {"run_id", "after_step", "keys"}
    # a UI handler is not callable by name
    with pytest.raises(ValueError):
        client.predict(api_name="/on_refresh")


def test_script_a_run_from_a_notebook(client, tiny_model_dir, tmp_path):
    rows = [{"prompt": f"What is {i} + {i}?", "answer": 2 * i} for i in range(12)]
    upload = tmp_path / "doubles.jsonl"
    upload.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    dataset = client.predict(file=handle_file(str(upload)), name="doubles", api_name="/add_dataset")
    assert dataset["name"] == "doubles" and dataset["num_rows"] == 12
    assert dataset["columns"] == ["prompt", "answer"]

    gsm8k = tmp_path / "gsm8k.jsonl"
    gsm8k.write_text(json.dumps({"question": "Natalia sold 48 clips, then half as many. How many?",
                                 "answer": "48 + 24 = 72\n#### 72"}) + "\n")
    mapped = client.predict(file=handle_file(str(gsm8k)), name="gsm8k", prompt_column="question",
                            system_prompt="Solve it.", column_renames="", api_name="/add_dataset")
    assert mapped["name"] == "gsm8k" and mapped["columns"] == ["prompt", "answer"]
    assert mapped["prompt_kind"] == "chat"

    bad = tmp_path / "broken.jsonl"
    bad.write_text('{"prompt": "fine", "answer": 1}\n{"prompt": "oops" "answer": 2}\n')
    with pytest.raises(AppError, match="line 2"):
        client.predict(file=handle_file(str(bad)), name="", api_name="/add_dataset")

    config = {"name": "api-run", "model": str(tiny_model_dir), "dataset_id": dataset["id"], "rewards": REWARDS,
              "max_steps": 2, "max_completion_length": 12, "num_generations": 4, "per_device_train_batch_size": 8,
              "temperature": 1.0, "learning_rate": 1e-3}
    launched = client.predict(config=json.dumps(config), api_name="/launch_run")
    run_id = launched["run"]["id"]
    assert launched["run"]["name"] == "api-run" and launched["run"]["status"] in {"queued", "running"}
    assert launched["run"]["config"]["dataset_id"] == dataset["id"]
    with pytest.raises(AppError, match="max_steps"):
        client.predict(config="max_steps: -1\n", api_name="/launch_run")

    # a second run, in YAML, queued behind the first (one run at a time): cancelled at once
    second = client.predict(config=f"name: api-second\nmodel: {tiny_model_dir}\ndataset_id: {dataset['id']}\n"
                                   "max_steps: 2\nmax_completion_length: 8\nnum_generations: 4\nper_device_train_batch_size: 8\n",
                          api_name="/launch_run")["run"]
    cancelled = client.predict(run_id=second["id"], api_name="/cancel_run")
    assert cancelled["status"] == "cancelled" or cancelled["cancel_requested"]

    # a sweep: refused whole when one value is bad; else one run per point with the sweep's id and tag (queued behind
    # the first run, one at a time), cancelled here
    sweep_config = (f"name: api-sweep\nmodel: {tiny_model_dir}\ndataset_id: {dataset['id']}\nmax_steps: 1\n"
                    "max_completion_length: 8\n")
    before = len(client.predict(api_name="/list_runs"))
    with pytest.raises(AppError, match="sweep: beta = -1"):
        client.predict(config=sweep_config, grid="beta: 0.0, -1", api_name="/launch_sweep")
    assert len(client.predict(api_name="/list_runs")) == before
    swept = client.predict(config=sweep_config + "sweep: {beta: [0.0, 0.04]}\n", api_name="/launch_sweep")
    sweep_id = swept["sweep"]["id"]
    assert swept["sweep"]["name"] == "api-sweep" and swept["sweep"]["grid"] == {"beta": [0.0, 0.04]}
    assert swept["sweep"]["run_ids"] == [r["id"] for r in swept["runs"]]
    assert [r["config"]["beta"] for r in swept["runs"]] == [0.0, 0.04]
    assert [(r["sweep_id"], r["tags"]) for r in swept["runs"]] == [(sweep_id, [f"sweep:{sweep_id}"])] * 2
    for point in swept["runs"]:
        cancelled = client.predict(run_id=point["id"], api_name="/cancel_run")
        assert cancelled["status"] == "cancelled" or cancelled["cancel_requested"]

    run = _wait(client, run_id, lambda r: r["status"] in FINISHED, timeout_s=300)
    assert run["status"] == "completed", run["error"]
    assert run["current_step"] == 2
    assert [r["id"] for r in client.predict(status="completed", api_name="/list_runs")] == [run_id]

    metrics = client.predict(run_id=run_id, api_name="/run_metrics")
    assert {p["step"] for p in metrics} == {1, 2}
    assert {"reward", "kl", "rewards/numeric_answer/mean"} <= {p["key"] for p in metrics}
    latest = client.predict(run_id=run_id, after_step=1, keys=["reward"], api_name="/run_metrics")
    assert [(p["step"], p["key"]) for p in latest] == [(2, "reward")]
    assert latest[0]["value"] == next(p["value"] for p in metrics if p["step"] == 2 and p["key"] == "reward")

    groups = client.predict(run_id=run_id, api_name="/run_groups")
    assert {g["step"] for g in groups} == {1, 2}
    for group in groups:
        assert len(group["completions"]) == 4
        assert set(group["completions"][0]["rewards"]) == {"numeric_answer", "format_regex"}
        assert all(c["advantage"] is not None for c in group["completions"])
    at_two = client.predict(run_id=run_id, step=2, api_name="/run_groups")
    assert at_two and {g["step"] for g in at_two} == {2}
    assert client.predict(run_id=run_id, after_step=1, api_name="/run_groups") == at_two
    assert len(client.predict(run_id=run_id, limit=1, api_name="/run_groups")) == 1
    # pages of one at a time, by the keyset (step, group id): every group once, in order
    paged, after = [], {}
    while page := client.predict(run_id=run_id, limit=1, api_name="/run_groups", **after):
        paged += page
        after = {"after_step": page[-1]["step"], "after_group": page[-1]["id"]}
    assert [g["id"] for g in paged] == [g["id"] for g in groups]
    row = groups[0]["row_index"]
    of_row = client.predict(run_id=run_id, row_index=row, api_name="/run_groups")
    assert of_row == [g for g in groups if g["row_index"] == row]
    rest = client.predict(run_id=run_id, row_index=row, after_step=of_row[0]["step"], after_group=of_row[0]["id"],
                          api_name="/run_groups")
    assert rest == of_row[1:]
    with pytest.raises(AppError, match="no run with id 999"):
        client.predict(run_id=999, api_name="/run_metrics")

    summary, bundle = client.predict(run_id=run_id, api_name="/export_run")
    assert summary["run_id"] == run_id
    with zipfile.ZipFile(bundle) as archive:
        names = {Path(n).name for n in archive.namelist()}
    prefix = f"run-{run_id:05d}"
    assert {f"{prefix}-config.yaml", f"{prefix}-metrics.csv", f"{prefix}-groups.parquet"} <= names

    # resume the cancelled second run, then cancel it again
    _wait(client, second["id"], lambda r: r["status"] in FINISHED, timeout_s=120)
    with pytest.raises(AppError, match="only a cancelled or failed run"):
        client.predict(run_id=run_id, api_name="/resume_run")
    resumed = client.predict(run_id=second["id"], api_name="/resume_run")
    assert resumed["status"] == "queued"
    client.predict(run_id=second["id"], api_name="/cancel_run")
    assert _wait(client, second["id"], lambda r: r["status"] in FINISHED, timeout_s=180)["status"] == "cancelled"


def test_without_the_login_the_client_is_refused(served):
    with pytest.raises(ValueError, match="[Ll]ogin|auth|401"):
        Client(served, verbose=False, analytics_enabled=False)
    with pytest.raises(ValueError):
        Client(served, auth=(USER, "wrong"), verbose=False, analytics_enabled=False)
    assert httpx.post(f"{served}gradio_api/call/list_runs", json={"data": []}, timeout=10).status_code == 401


def test_a_refused_call_is_one_log_line_not_a_traceback(client, server):
    with pytest.raises(AppError, match="no run with id 987654"):
        client.predict(run_id=987654, api_name="/cancel_run")
    runs = client.predict(api_name="/list_runs")
    if runs:  # a run the earlier tests launched: its arguments are checked before anything is read
        with pytest.raises(AppError, match="run_groups: row_index must be a whole number, got 'abc'"):
            client.predict(run_id=runs[0]["id"], row_index="abc", api_name="/run_groups")
        with pytest.raises(AppError, match="run_groups: limit must be at least 1, got 0"):
            client.predict(run_id=runs[0]["id"], limit=0, api_name="/run_groups")
    log = server.log_path.read_text(encoding="utf-8", errors="replace")
    assert "API call refused: no run with id 987654" in log
    assert "Traceback" not in log
