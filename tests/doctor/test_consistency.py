"""The doctor agrees with itself and with the run's own trend, on every corpus run at every prefix: no finding about
flat groups or collapsing entropy while the reward verdict is "learning" (and not levelled off), no sentence that
says the reward is not improving beside "Learning: reward up", every "see the X finding" points at a finding that is
shown, and no sentence says a thing and its negation ("0% at the latest step, not at the latest step")."""

from __future__ import annotations

import re
from functools import cache

import pytest

from grpo_core.doctor import Finding, diagnose
from grpo_core.doctor.findings import Severity
from tests.doctor.corpus import load_corpus

RUNS = {run.name: run for run in load_corpus()}
#: Codes whose finding says the groups or the policy stopped learning: silent while the reward rises.
SILENT_WHILE_LEARNING = ("entropy_collapse", "zero_std", "beta_zero_std", "reward_flat", "reward_falling")
#: Words that claim the reward is not getting better.
NOT_LEARNING = ("without getting better", "reward is flat", "not improving", "reward is not rising",
                "reward does not rise", "no learning signal")


@cache
def _findings(name: str) -> dict[int, list[Finding]]:
    run = RUNS[name]
    return {step: run.diagnose_at(step) for step in run.prefixes()}


def _text(finding: Finding) -> str:
    return f"{finding.title} {finding.advice}"


def _learning_now(findings: list[Finding]) -> bool:
    codes = {f.code for f in findings}
    return "learning" in codes and "reward_plateau" not in codes


def _self_negations(text: str) -> list[str]:
    """Phrases of 3 or more words the text both says and says with "not" before them."""
    words = re.findall(r"[\w%.]+", text.lower())
    said = []
    for i, word in enumerate(words):
        if word != "not" or i + 4 > len(words):
            continue
        phrase = " ".join(words[i + 1:i + 4])
        plain = " " + " ".join(words) + " "
        if plain.count(" " + phrase + " ") > plain.count(" not " + phrase + " "):
            said.append(phrase)
    return said


@pytest.mark.parametrize("name", sorted(RUNS))
def test_no_finding_contradicts_the_reward_verdict(name):
    for step, findings in _findings(name).items():
        if not _learning_now(findings):
            continue
        for finding in findings:
            assert finding.code not in SILENT_WHILE_LEARNING, f"{name}@{step}: {finding.title}"
            text = _text(finding).lower()
            assert not [w for w in NOT_LEARNING if w in text], f"{name}@{step}: {finding.code}: {finding.title}"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_cross_reference_points_at_a_finding_that_is_shown(name):
    for step, findings in _findings(name).items():
        shown = {f.code.replace("_", "-") for f in findings}
        for finding in findings:
            for target in re.findall(r"see the ([\w-]+) finding", _text(finding)):
                assert target in shown, f"{name}@{step}: {finding.code} points at {target!r}, shown: {shown}"


@pytest.mark.parametrize("name", sorted(RUNS))
def test_no_sentence_says_a_thing_and_its_negation(name):
    for step, findings in _findings(name).items():
        for finding in findings:
            assert not _self_negations(finding.title), f"{name}@{step}: {finding.title}"


def test_the_healthy_quick_start_final_series_reads_as_learning_with_no_warning():
    run = RUNS["synthetic_quick_start_final"]
    last = run.steps[-1]
    findings = run.diagnose_at(last)
    assert [f.code for f in findings if f.severity is not Severity.INFO] == []
    learning = next(f for f in findings if f.code == "learning")
    assert learning.title.startswith("Learning: reward up from 0.2")
    assert not {"entropy_collapse", "zero_std", "beta_zero_std"} & {f.code for f in findings}


def _series(**keys: list[float]) -> dict[str, tuple[list[int], list[float]]]:
    return {key: (list(range(1, len(values) + 1)), values) for key, values in keys.items()}


def test_cuts_that_stopped_say_so_once():
    clipped = [0.8] * 12 + [0.1] * 3
    findings = diagnose(_series(reward=[0.3] * 15, **{"completions/clipped_ratio": clipped}))
    title = next(f.title for f in findings if f.code == "clipped")
    assert "10% at the latest step, below 30% again" in title
    assert title.count("latest step") == 1 and "not at the latest step" not in title


def test_beta_note_without_a_zero_std_finding_names_the_remedy_itself():
    # most groups flat over the last 5 steps, but never 3 in a row above half: no zero_std finding
    flat = [0.0] * 10 + [1.0, 1.0, 0.5, 1.0, 1.0]
    findings = diagnose(_series(reward=[0.3, 0.35] * 7 + [0.3], frac_reward_zero_std=flat), config={"beta": 0.04})
    codes = {f.code for f in findings}
    beta = next(f for f in findings if f.code == "beta_zero_std")
    assert "zero_std" not in codes
    assert "zero-std finding" not in beta.advice and "harder or easier prompts" in beta.advice


def test_flat_groups_are_silent_while_the_reward_rises_and_a_warning_when_it_does_not():
    flat = [0.25] * 20 + [1.0] * 10
    rising = [0.1 + 0.02 * t for t in range(30)]
    assert "zero_std" not in {f.code for f in diagnose(_series(reward=rising, frac_reward_zero_std=flat))}
    held = diagnose(_series(reward=[0.5] * 30, frac_reward_zero_std=flat))
    assert next(f for f in held if f.code == "zero_std").severity is Severity.WARNING


def test_a_short_streak_of_flat_groups_is_information_that_says_it_may_be_chance():
    flat = [0.0, 0.5] * 5 + [1.0, 1.0, 1.0] + [0.5, 0.0]
    findings = diagnose(_series(reward=[0.3, 0.2] * 7 + [0.3], frac_reward_zero_std=flat))
    finding = next(f for f in findings if f.code == "zero_std")
    assert finding.severity is Severity.INFO and "by chance" in finding.advice
