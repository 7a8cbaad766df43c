"""Tests for grpo_core.doctor, table-driven on synthetic metric series: each check fires on the pattern it names,
stays quiet on healthy runs and near misses, and its advice carries the run's numbers and example completions."""

from __future__ import annotations

import math

import pytest

from grpo_core.doctor import Finding, Severity, diagnose, series_from_points, step_ranges
from storage import CompletionRecord, GroupRecord, MetricPoint


def _series(**columns: list[float | None]) -> dict[str, tuple[list[int], list[float | None]]]:
    """``key=[v1, v2, ...]`` at steps 1, 2, ...; ``__`` in a key stands for ``/``."""
    return {key.replace("__", "/"): (list(range(1, len(v) + 1)), list(v)) for key, v in columns.items()}


HEALTHY = _series(
    reward=[0.1, 0.2, 0.3, 0.35, 0.4, 0.5],
    reward_std=[0.3, 0.3, 0.25, 0.25, 0.2, 0.2],
    frac_reward_zero_std=[0.25, 0.5, 0.25, 0.0, 0.5, 0.25],
    completions__clipped_ratio=[0.1, 0.2, 0.3, 0.1, 0.0, 0.0],
    kl=[0.0, 0.004, 0.008, 0.01, 0.02, 0.025],
    loss=[0.01, -0.02, 0.03, 0.01, 0.02, -0.01],
    grad_norm=[0.5, 0.4, 0.6, 0.5, 0.4, 0.3],
    **{"rewards__numeric_answer__mean": [0.1, 0.2, 0.3, 0.3, 0.4, 0.5]},
)


def _codes(findings: list[Finding]) -> list[str]:
    return [f.code for f in findings]


@pytest.mark.parametrize(
    ("name", "series", "expected"),
    [
        ("healthy", HEALTHY, []),
        ("nothing logged", {}, []),
        # no learning signal: > 0.5 for >= 3 logged steps in a row
        ("zero std 3 in a row", _series(frac_reward_zero_std=[0.2, 0.75, 1.0, 0.6, 0.3]), ["zero_std"]),
        ("zero std only 2 in a row", _series(frac_reward_zero_std=[0.75, 1.0, 0.25, 0.75, 1.0]), []),
        ("zero std exactly 0.5 is not high", _series(frac_reward_zero_std=[0.5, 0.5, 0.5, 0.5]), []),
        ("zero std broken by NaN", _series(frac_reward_zero_std=[1.0, 1.0, None, 1.0, 1.0]), ["nan_rule"]),
        # truncation
        ("clipped once", _series(completions__clipped_ratio=[0.1, 0.5, 0.1]), ["clipped"]),
        ("clipped at the bound", _series(completions__clipped_ratio=[0.3, 0.3]), []),
        # KL
        ("kl above bound", _series(kl=[0.1, 0.2, 0.6]), ["kl"]),
        ("kl tripling over 5 steps", _series(kl=[0.02, 0.025, 0.03, 0.035, 0.04, 0.061]), ["kl"]),
        ("kl doubling over 5 steps", _series(kl=[0.02, 0.025, 0.03, 0.035, 0.04, 0.05]), []),
        ("kl tripling from nothing", _series(kl=[0.0, 0.0001, 0.0005, 0.001, 0.003, 0.009]), []),
        # reward flat at zero (all groups zero-std too)
        (
            "reward zero",
            _series(reward=[0.0, 0.0, 0.0], frac_reward_zero_std=[1.0, 1.0, 1.0]),
            ["reward_zero", "zero_std"],
        ),
        ("reward zero twice", _series(reward=[0.0, 0.0, 0.1, 0.0]), []),
        ("reward negative is not zero", _series(reward=[-0.2, -0.2, -0.2]), []),
        # NaN: the store keeps NaN as NULL (None); a raw float NaN/inf counts too
        ("loss NaN", _series(loss=[0.1, None, 0.2]), ["nan"]),
        ("grad_norm inf", _series(grad_norm=[0.1, math.inf, 0.2]), ["nan"]),
        ("rule mean NaN", _series(**{"rewards__code_tests__mean": [0.5, math.nan, 0.5]}), ["nan_rule"]),
        ("never a number is not NaN", _series(kl=[None, None, None]), []),
        # loss exactly 0 is explained, not alarmed
        ("loss zero", _series(loss=[0.0, 0.0, 0.01]), ["loss_zero"]),
    ],
)
def test_diagnose_flags(name, series, expected):
    assert sorted(_codes(diagnose(series))) == sorted(expected), name


def test_findings_are_sorted_by_severity_and_list_their_steps():
    series = _series(
        reward=[0.0, 0.0, 0.0, 0.0],
        frac_reward_zero_std=[1.0, 1.0, 1.0, 1.0],
        completions__clipped_ratio=[0.9, 0.8, 0.7, 0.6],
        loss=[0.0, 0.0, 0.0, 0.0],
    )
    findings = diagnose(series)
    assert _codes(findings) == ["reward_zero", "zero_std", "clipped", "loss_zero"]
    assert [f.severity for f in findings] == [Severity.ERROR, Severity.WARNING, Severity.WARNING, Severity.INFO]
    assert all(f.steps == (1, 2, 3, 4) for f in findings)


def test_zero_std_reports_every_streak_and_the_longest():
    series = _series(frac_reward_zero_std=[0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.2])
    [finding] = diagnose(series)
    assert finding.steps == (1, 2, 3, 5, 6, 7, 8)
    assert "4 steps in a row" in finding.title


def test_clipped_is_a_warning_while_it_lasts_and_info_after():
    [now] = diagnose(_series(completions__clipped_ratio=[0.1, 0.5]), config={"max_completion_length": 64})
    assert now.severity == Severity.WARNING
    assert "max_completion_length (now 64)" in now.advice
    assert now.steps == (2,)
    [before] = diagnose(_series(completions__clipped_ratio=[0.5, 0.1]))
    assert before.severity == Severity.INFO
    assert "not at the latest step" in before.title


def test_kl_advice_names_beta_and_learning_rate():
    [finding] = diagnose(_series(kl=[0.2, 0.9]), config={"beta": 0.02, "learning_rate": 1e-5})
    assert "beta (now 0.02)" in finding.advice and "learning rate (now 1e-05)" in finding.advice
    assert finding.steps == (2,)


def test_kl_growth_compares_with_the_value_five_steps_earlier():
    # steps are not contiguous (logging_steps = 2): step 11 is compared with step 5, not with step 9
    series = {"kl": ([1, 3, 5, 7, 9, 11], [0.02, 0.02, 0.02, 0.03, 0.05, 0.07])}
    [finding] = diagnose(series)
    assert finding.steps == (11,)


def _group(step: int, row: int, totals: list[float | None], rewards: list[dict] | None = None) -> GroupRecord:
    return GroupRecord(
        step=step,
        row_index=row,
        prompt=f"What is {row} + {row}?",
        completions=[
            CompletionRecord(
                index=i,
                text=f"I think the answer is {row + i}\n<end>",
                rewards=(rewards[i] if rewards else {"numeric_answer": t, "format_regex": t}),
                total_reward=t,
                advantage=0.0,
            )
            for i, t in enumerate(totals)
        ],
    )


def test_reward_zero_shows_three_examples_with_the_rules_that_gave_zero():
    series = _series(reward=[0.0, 0.0, 0.0])
    groups = [
        _group(3, 7, [0.0, 0.0], rewards=[{"numeric_answer": 0.0, "code_tests": None}] * 2),
        _group(3, 8, [0.0, 0.0]),
        _group(2, 9, [0.0, 0.0]),
        _group(2, 10, [0.0, 0.0]),
    ]
    [finding] = [f for f in diagnose(series, groups) if f.code == "reward_zero"]
    assert len(finding.examples) == 3
    first = finding.examples[0]
    assert "step 3, row 7, completion #0" in first
    assert "I think the answer is 7 <end>" in first  # whitespace collapsed
    assert "0 from numeric_answer" in first and "no score from code_tests" in first
    assert "0 from numeric_answer, format_regex" in finding.examples[1]
    assert finding.severity == Severity.ERROR


def test_reward_zero_without_groups_has_no_examples():
    [finding] = [f for f in diagnose(_series(reward=[0.0] * 5)) if f.code == "reward_zero"]
    assert finding.examples == ()


def test_zero_std_examples_are_the_flat_groups():
    series = _series(frac_reward_zero_std=[1.0, 1.0, 1.0])
    groups = [_group(3, 1, [1.0, 1.0, 1.0]), _group(3, 2, [1.0, 0.0, 1.0]), _group(3, 4, [None, 0.0, 0.0])]
    [finding] = diagnose(series, groups, config={"num_generations": 4})
    assert finding.examples == ("step 3, dataset row 1: all 3 completions scored 1",)
    assert "num_generations (now 4)" in finding.advice


def test_nan_separates_core_metrics_from_rule_means():
    series = _series(
        loss=[0.1, None, None], kl=[0.01, 0.01, math.nan], **{"rewards__json_valid__mean": [1.0, None, 1.0]}
    )
    findings = {f.code: f for f in diagnose(series)}
    assert findings["nan"].severity == Severity.ERROR
    assert findings["nan"].steps == (2, 3)
    assert "kl (1 steps)" in findings["nan"].title and "loss (2 steps)" in findings["nan"].title
    assert findings["nan_rule"].severity == Severity.WARNING
    assert findings["nan_rule"].steps == (2,)


@pytest.mark.parametrize(
    ("series", "config", "says", "not_says"),
    [
        (
            _series(loss=[0.0, 0.0, 0.0], frac_reward_zero_std=[1.0, 0.5, 1.0]),
            {"beta": 0.02},
            "steps 1, 3",
            "beta is 0",
        ),
        (_series(loss=[0.0, 0.0], frac_reward_zero_std=[0.5, 0.0]), {"beta": 0.0}, "beta is 0", "taught nothing"),
        (_series(loss=[0.0]), {"beta": 0.04}, "beta × kl", "taught nothing"),
        (_series(loss=[0.0]), {}, "minus the mean advantage", "beta is 0"),
    ],
)
def test_loss_zero_explanations(series, config, says, not_says):
    [finding] = [f for f in diagnose(series, config=config) if f.code == "loss_zero"]
    assert finding.severity == Severity.INFO
    assert says in finding.advice
    assert not_says not in finding.advice


def test_series_from_points_keeps_the_first_of_a_repeated_step():
    points = [
        MetricPoint(1, "reward", 0.5, 10.0),
        MetricPoint(1, "kl", None, 10.0),
        MetricPoint(2, "reward", 0.7, 11.0),
        MetricPoint(2, "reward", 0.9, 11.0),
    ]
    assert series_from_points(points) == {"reward": ([1, 2], [0.5, 0.7]), "kl": ([1], [None])}


@pytest.mark.parametrize(
    ("steps", "text"), [([], ""), ([4], "4"), ([1, 2, 3, 7, 9, 10], "1–3, 7, 9–10"), ([3, 1, 2, 2], "1–3")]
)
def test_step_ranges(steps, text):
    assert step_ranges(steps) == text
