"""Users' regular expressions and rule parameters in the web process: a JSON schema's ``pattern`` (from a dataset
row, read by ``json_valid``) or a ``format_regex`` pattern that backtracks for ever, a bench of thousands of
completions, an n-gram size of a million words. Each is bounded (grpo_core/rewards/regex_budget.py, the bench's
limits in app/tabs/launch/handlers.py, ``repetition``'s ``MAX_NGRAM_SIZE``) and the served dashboard keeps answering."""

from __future__ import annotations

import json
import time

import pytest

from grpo_core.rewards.regex_budget import RegexTimeout, bounded_search, match_timeout, time_budget
from grpo_core.rewards.text import make_format_regex, make_json_valid, make_repetition

EVIL = "^(a|aa)+$"
EVIL_TEXT = "a" * 50 + "!"  # about 1.6^50 backtracking steps for Python's re: days, holding the interpreter lock


@pytest.mark.parametrize("schema", [
    {"type": "string", "pattern": EVIL},
    {"type": "object", "patternProperties": {EVIL: {"type": "number"}}},
    {"type": "object", "patternProperties": {EVIL: {}}, "additionalProperties": False},
], ids=["pattern", "patternProperties", "additionalProperties"])
def test_a_schema_pattern_that_backtracks_is_stopped_and_cannot_judge(schema):
    rule = make_json_valid("schema")
    completion = json.dumps(EVIL_TEXT if schema["type"] == "string" else {EVIL_TEXT: 1})
    assert rule([completion], schema=[json.dumps(schema)]) == [None]
    honest = json.dumps("aaa" if schema["type"] == "string" else {"aaa": 1})
    assert rule([honest], schema=[json.dumps(schema)]) == [1.0]


def test_a_schema_ref_to_a_url_is_not_fetched_and_cannot_judge():
    rule = make_json_valid("schema")
    assert rule(['"x"'], schema=[json.dumps({"$ref": "http://127.0.0.1:9/secret"})]) == [None]


def test_a_spent_budget_stops_every_later_match():
    with time_budget(0.0):
        with pytest.raises(RegexTimeout):
            match_timeout()
        with pytest.raises(RegexTimeout):
            bounded_search("a", "a")
        assert make_format_regex("a")(["a", "a"]) == [0.0, 0.0]
    assert make_format_regex("a")(["a"]) == [1.0]  # outside the block, no budget


def test_repetition_bounds_the_ngram_size_and_scores_as_before():
    with pytest.raises(ValueError, match="between 1 and"):
        make_repetition(ngram_size=1_000_000)
    rule = make_repetition(ngram_size=2)
    assert rule(["a b a b a b"]) == [pytest.approx(-(1 - 2 / 5))]
    assert rule(["one two three"]) == [0.0]


def test_a_backtracking_schema_on_the_bench_does_not_stop_the_server(shared_dashboard):
    dash = shared_dashboard
    start = time.monotonic()
    bench, lag = dash.while_pinging(lambda: dash.ui("alice", "bench-button", {
        "rule-1": "json_valid", "params-1": json.dumps({"schema_column": "schema"}),
        "bench-row": json.dumps({"prompt": "p", "schema": {"type": "string", "pattern": EVIL}}),
        "bench-completions": "\n---\n".join([json.dumps(EVIL_TEXT)] * 20)}))
    took = time.monotonic() - start
    assert "20 completions scored" in bench[1], bench
    assert took < 60 and lag < 2.0, (took, lag)
    many = dash.ui("bob", "bench-button", {"rule-1": "format_regex", "params-1": json.dumps({"pattern": "(a|aa)+$"}),
                                           "bench-completions": "\n---\n".join(["a" * 40 + "!"] * 5000)})
    assert "more than the 256" in many[1], many
    ngram = dash.ui("bob", "bench-button", {"rule-1": "repetition",
                                            "params-1": json.dumps({"ngram_size": 500_000}),
                                            "bench-completions": " ".join(["w"] * 600_000)})
    assert "between 1 and" in ngram[1], ngram


def test_the_probe_scores_an_admins_plugin_outside_the_web_process(shared_dashboard):
    """The reward-hacking probe, like the bench, imports a plugin only in a child process (a plugin is vetted to run
    as the server, not inside the process that serves every login)."""
    dash = shared_dashboard
    marker = dash.outside / "probe-imported-in"
    (dash.plugin_dir / "where_probe.py").write_text(
        "import sys\n"
        f"open({str(marker)!r}, 'a').write('web\\n' if 'gradio' in sys.modules else 'child\\n')\n\n\n"
        "def score(completions, **kwargs):\n    return [0.5 for _ in completions]\n", encoding="utf-8")
    status = dash.ui("alice", "probe-button", {
        "rule-1": "plugin", "params-1": json.dumps({"target": "where_probe:score", "name": ""}),
        "bench-row": json.dumps({"prompt": "What is 2 + 2?", "answer": "4"}), "bench-completions": "4\n---\n5"})[1]
    assert "❌" not in status, status
    assert marker.read_text().split() == ["child"]
