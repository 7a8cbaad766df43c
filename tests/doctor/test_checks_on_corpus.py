"""Each doctor check on the labelled corpus (``tests/doctor/corpus/``), at every prefix from 10 logged steps on, as
the Runs tab reads a training run: a labelled finding is there from its onset with its cause named, a healthy run
gets no warning or error from any check, a run's ``must_not`` codes never warn, and no finding says what the run's
``say_never`` forbids (e.g. a higher learning rate for a run whose gradient is 0)."""

from __future__ import annotations

from functools import cache

import pytest

from grpo_core.doctor import Finding, Severity
from tests.doctor.corpus import CorpusRun, found, load_corpus, names_cause

RUNS = {run.name: run for run in load_corpus()}
#: Every check code the corpus labels or that any check can give as a warning or an error.
CHECKS = sorted(
    {code for run in RUNS.values() for code in (*run.must, *run.must_not)}
    | {"clipped", "entropy_collapse", "entropy_surge", "grad_vanishing", "grad_zero", "kl", "nan", "nan_rule",
       "policy_static", "reward_falling", "reward_flat", "reward_zero", "rule_dominates", "rule_errors",
       "task_rule_falling", "zero_std", "length_long", "eval_flat", "clip_high", "sampling_mismatch", "grad_spike"}
)


@cache
def _findings(name: str) -> dict[int, list[Finding]]:
    run = RUNS[name]
    return {step: run.diagnose_at(step) for step in run.prefixes()}


def _cases(kind: str) -> list[tuple[str, str]]:
    cases = []
    for run in RUNS.values():
        for code in CHECKS:
            if kind == "must" and code in run.must:
                cases.append((code, run.name))
            if kind == "quiet" and code not in run.must and (run.healthy or code in run.must_not):
                cases.append((code, run.name))
    return cases


@pytest.mark.parametrize(("code", "name"), _cases("must"))
def test_a_labelled_finding_is_found_with_its_cause_from_its_onset(code, name):
    run: CorpusRun = RUNS[name]
    label = run.must[code]
    scored = {step: findings for step, findings in _findings(name).items() if step >= label.get("from_step", 0)}
    assert scored, f"{name}: no prefix at or after step {label.get('from_step')}"
    least = Severity(label.get("severity", "warning"))
    for step, findings in scored.items():
        hit = found(findings, code, least)
        assert hit is not None, f"{name}@{step}: no {code} ({[f.code for f in findings]})"
        assert names_cause(hit, label), f"{name}@{step}: {code} does not name {label.get('cause')}: {hit}"


@pytest.mark.parametrize(("code", "name"), _cases("quiet"))
def test_no_false_alarm_at_any_prefix(code, name):
    for step, findings in _findings(name).items():
        alarms = [f for f in findings if f.code == code and f.severity is not Severity.INFO]
        assert not alarms, f"{name}@{step}: {alarms[0].title}"


@pytest.mark.parametrize("name", [run.name for run in RUNS.values() if run.say_never])
def test_no_finding_gives_the_advice_the_run_must_never_get(name):
    run = RUNS[name]
    for step, findings in _findings(name).items():
        for finding in findings:
            text = f"{finding.title} {finding.advice}".lower()
            said = [phrase for phrase in run.say_never if phrase.lower() in text]
            assert not said, f"{name}@{step}: {finding.code} says {said}"
