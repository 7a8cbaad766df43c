"""The labelled corpus itself: enough runs, each citing a public report of its pathology, recorded runs where the
CPU can produce them, labels that name known check codes, and series the doctor can read."""

from __future__ import annotations

import json

import pytest

from tests.doctor.corpus import CORPUS_DIR, FIRST_PREFIX, load, load_corpus

RUNS = load_corpus()
PATHS = sorted(CORPUS_DIR.glob("*.json"))
KNOWN = {
    "clipped", "entropy_collapse", "entropy_surge", "grad_vanishing", "grad_zero", "kl", "learning", "nan",
    "nan_rule", "policy_static", "reward_falling", "reward_flat", "reward_zero", "rule_dominates", "rule_errors",
    "task_rule_falling", "zero_std", "length_long", "length_short", "eval_flat", "beta_zero_std", "reward_plateau",
    "reward_undecided", "reward_slow", "loss_zero", "clip_high", "sampling_mismatch", "grad_spike",
    "tools_stopped", "tool_failures", "iteration_limit", "reward_without_tool",
}


def test_the_corpus_has_twenty_runs_or_more_with_recorded_and_healthy_ones():
    assert len(RUNS) >= 20
    assert sum(run.source == "recorded" for run in RUNS) >= 8
    assert sum(run.healthy for run in RUNS) >= 4


@pytest.mark.parametrize("path", PATHS, ids=[p.stem for p in PATHS])
def test_each_run_is_labelled_cites_a_report_and_is_long_enough(path):
    run = load(path)
    assert run.name == path.stem
    assert run.reports and all("http" in report for report in run.reports)
    assert run.must or run.healthy, "a run labels what it must get, or is healthy"
    assert set(run.must) <= KNOWN and set(run.must_not) <= KNOWN
    assert len(run.steps) >= FIRST_PREFIX
    for label in run.must.values():
        assert label.get("from_step", 0) <= run.steps[-1], "an onset after the run's end is never scored"


def test_a_file_without_labels_is_refused(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"name": "bad", "source": "recorded", "config": {}, "series": {}, "reports": []}))
    with pytest.raises(ValueError, match="missing 'expect'"):
        load(bad)
    bad.write_text(json.dumps({"name": "bad", "source": "made up", "config": {}, "series": {}, "reports": [],
                               "expect": {}}))
    with pytest.raises(ValueError, match="neither 'recorded' nor 'synthetic'"):
        load(bad)
