"""The web process evaluates no chat template a login brought, reads none outside the model roots, and an export
neither hashes nor reports on files a stored provenance names. A served dashboard with three logins
(tests/security/conftest.py), driven through the page's own handlers, the ingest API and the named API.

Run against the code before the fix: the Launch tab's model field read and rendered ``chat_template.jinja`` from a
folder outside every root (and so told an existing folder from a missing one), a template folding ``7**7**8`` at
compile time (``7**5764801``) held the interpreter for seconds (every login waited), and ``export_run`` warned that the auth file
"changed since the run trained".
"""

from __future__ import annotations

import re
import time

import httpx
import pytest

from grpo_core.run_config import load_run_config
from grpo_core.runs.script_runs import run_config_from_trainer
from tests.security.conftest import SharedDashboard
from tests.security.page import Page

OPENS_THINK = "{{ '<|user|>' + messages[0]['content'] }}{% if add_generation_prompt %}<|assistant|><think>\n{% endif %}"
FOLDS_AT_COMPILE = "{{ 7**5764801 }}" + OPENS_THINK  # jinja's ** is left-associative: written out
MESSAGES = [{"role": "user", "content": "hi"}]


def _model_line(page: Page, model: str) -> str:
    answer = page.call("launch-model", {"launch-model": model}, event="change", output="launch-template-think")
    assert isinstance(answer, dict) and "data" in answer, answer
    return str(answer["data"][0])


def test_a_model_field_outside_the_roots_reads_nothing_and_tells_nothing(shared_dashboard: SharedDashboard):
    dash = shared_dashboard
    folder = dash.outside / "model"
    folder.mkdir(exist_ok=True)
    (folder / "chat_template.jinja").write_text(OPENS_THINK, encoding="utf-8")
    page = Page(dash, "bob")
    present = _model_line(page, str(folder))
    missing = _model_line(page, str(dash.outside / "no-such-model"))
    assert "opens `<think>`" not in present
    assert present.replace(str(folder), "PATH") == missing.replace(str(dash.outside / "no-such-model"), "PATH")
    assert "outside the folders" in present


def test_a_template_that_folds_at_compile_time_stalls_no_login(shared_dashboard: SharedDashboard):
    dash = shared_dashboard
    folder = dash.data_dir / "datasets" / "folding-model"  # the data directory is a model root
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "chat_template.jinja").write_text(FOLDS_AT_COMPILE, encoding="utf-8")
    page = Page(dash, "bob")
    started = time.monotonic()
    line, slowest = dash.while_pinging(lambda: _model_line(page, str(folder)))
    assert slowest < 1.0, f"another login waited {slowest:.1f} s"
    assert time.monotonic() - started < 60
    assert "Chat template" in line


def test_the_bounded_renderer_renders_and_stops_what_runs_away():
    from grpo_core.models.bounded_template import TemplateError, render_chat_prompts

    assert render_chat_prompts(OPENS_THINK, [MESSAGES])[0].endswith("<|assistant|><think>\n")
    started = time.monotonic()
    loops = "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}"
    for template in (loops, "{{ 'a' * 10**10 }}", "{{ 'a'|center(10**10) }}", FOLDS_AT_COMPILE):
        with pytest.raises(TemplateError):
            results = render_chat_prompts(template, [MESSAGES])
            raise results[0] if isinstance(results[0], Exception) else AssertionError(f"rendered {template}")
    assert time.monotonic() - started < 4 * 15
    with pytest.raises(TemplateError, match="over"):
        render_chat_prompts("x" * 300_000, [MESSAGES])
    refused = render_chat_prompts("{{ raise_exception('no system role') }}", [MESSAGES])[0]
    assert isinstance(refused, TemplateError) and "no system role" in str(refused)


def test_an_export_never_reports_on_files_a_provenance_names(shared_dashboard: SharedDashboard):
    dash = shared_dashboard
    shown = dash.ui("alice", "token-create", {"token-name": "export"})[0]
    token = re.search(r'<pre id="token-value">([^<]+)</pre>', shown).group(1)
    api = httpx.Client(base_url=dash.url.rstrip("/"), timeout=60, headers={"Authorization": f"Bearer {token}"})
    auth_file = dash.data_dir.parent / "users.txt"
    named = [str(auth_file), str(dash.outside / "canary"), str(dash.outside / "secret.jsonl"),
             str(dash.outside / "no-such-file.py")]
    config = run_config_from_trainer({"num_generations": 2}, model="org/tiny-model", reward_names=["acc"],
                                     reward_weights=[1.0], max_steps=2)
    answer = api.post("/api/v1/runs", json={"client_key": "export-0001", "name": "export", "config": config,
                                            "provenance": {"plugins": {path: "0" * 64 for path in named}}})
    assert answer.status_code == 200, answer.text
    run_id = answer.json()["run_id"]
    summary, bundle = dash.client("alice").predict(run_id=run_id, api_name="/export_run")
    assert summary["warnings"] == []
    yaml_files = [p for p in summary["files"] if p.endswith("-config.yaml")]
    text = open(yaml_files[0], encoding="utf-8").read()
    assert "changed since the run trained" not in text


def test_a_provenance_cannot_write_lines_into_an_exported_config(shared_dashboard: SharedDashboard):
    """Provenance keys and values are comments in the exported YAML: a line break of any kind YAML knows (``\\n``,
    ``\\r``, NEL, U+2028, U+2029) in either, as text or inside a list, stays inside its comment. Before the fix a key
    ``"x\\nmodel: attacker/evil-model\\n...name: \\""`` rewrote the config another login exports and trains."""
    dash = shared_dashboard
    shown = dash.ui("alice", "token-create", {"token-name": "lines"})[0]
    token = re.search(r'<pre id="token-value">([^<]+)</pre>', shown).group(1)
    api = httpx.Client(base_url=dash.url.rstrip("/"), timeout=60, headers={"Authorization": f"Bearer {token}"})
    config = run_config_from_trainer({"num_generations": 2}, model="org/tiny-model", reward_names=["acc"],
                                     reward_weights=[1.0], max_steps=2)
    config["trl_args"] = {"run_name": 'closes"'}  # a later line that ends an opened double-quoted scalar
    opened = 'x{}model: attacker/evil-model{}trl_args: {{model_init_kwargs: {{trust_remote_code: true}}}}{}name: "'
    provenance = {"versions": {opened.format(*[brk] * 3): "1" for brk in ("\n", "\r", "\x85", "\u2028", "\u2029")},
                  "device": {"name": "a\u2028use_vllm: true", "list": ["b\x85use_vllm: true"]}}
    answer = api.post("/api/v1/runs", json={"client_key": "lines-0001", "name": "lines", "config": config,
                                            "provenance": provenance})
    assert answer.status_code == 200, answer.text
    summary, _ = dash.client("bob").predict(run_id=answer.json()["run_id"], api_name="/export_run")
    exported = load_run_config(next(p for p in summary["files"] if p.endswith("-config.yaml")))
    assert (exported.model, exported.use_vllm, exported.name) == ("org/tiny-model", False, config.get("name", ""))
    assert "model_init_kwargs" not in exported.trl_args
