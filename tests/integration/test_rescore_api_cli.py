"""``/rescore_run`` on the served dashboard and ``grpo-dashboard rescore`` give the same numbers for the same run and
rules (each stored as its own rescoring); both refuse a bad request with the same message, and the table output of
the CLI carries the same figures."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from gradio_client import Client

from storage import Store, sqlite_url
from tests.rescore_fixtures import NEW_RULES, seed_run
from tests.servers import ROOT, serving

RULES_YAML = json.dumps(NEW_RULES)


def _cli(data_dir, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "rescore", "--data-dir", str(data_dir), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)


def test_api_and_cli_return_the_same_numbers(tmp_path):
    data_dir = tmp_path / "data"
    data_dir.mkdir()
    store = Store(sqlite_url(data_dir / "grpo.db"))
    run_id = seed_run(store, tmp_path)
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES_YAML)
    with serving(data_dir) as app:
        client = Client(app.url, verbose=False, analytics_enabled=False)
        api = client.predict(run_id, RULES_YAML, 2, 4, api_name="/rescore_run")
        with pytest.raises(Exception, match="no recorded groups in steps 7-9"):
            client.predict(run_id, RULES_YAML, 7, 9, api_name="/rescore_run")
    cli = _cli(data_dir, str(run_id), str(rules), "--first-step", "2", "--last-step", "4", "--json")
    assert cli.returncode == 0, cli.stderr
    headless = json.loads(cli.stdout)
    assert api.pop("rescoring_id") != headless.pop("rescoring_id")
    assert api == headless
    assert [s["step"] for s in api["steps"]] == [2, 3, 4] and api["summary"]["groups_changed"] == 9
    assert [r.status for r in store.list_rescorings(run_id)] == ["completed", "completed"]

    table = _cli(data_dir, str(run_id), str(rules), "--first-step", "2", "--last-step", "4")
    assert table.returncode == 0, table.stderr
    first = next(line for line in table.stdout.splitlines() if line.startswith("2\t")).split("\t")
    step = api["steps"][0]
    assert float(first[2]) == pytest.approx(step["reward_before"], abs=1e-4)
    assert float(first[3]) == pytest.approx(step["reward_after"], abs=1e-4)
    refused = _cli(data_dir, str(run_id), str(rules), "--first-step", "7", "--last-step", "9")
    assert refused.returncode == 2 and "no recorded groups in steps 7-9" in refused.stderr
    store.close()
