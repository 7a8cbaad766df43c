"""Tests for grpo_core.doctor, table-driven on synthetic metric series: each check fires on the pattern it names,
stays quiet on healthy runs and near misses, and its advice carries the run's numbers and example completions."""

from __future__ import annotations

import math
import random
import statistics

import pytest

from grpo_core.doctor import (
    TREND_MIN_STEPS,
    Finding,
    Severity,
    completion_outcome,
    diagnose,
    mann_kendall,
    reward_weights,
    rule_variance_shares,
    series_from_points,
    step_ranges,
    task_rule,
)
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
        ("clipped once (information)", _series(completions__clipped_ratio=[0.1, 0.5, 0.1]), ["clipped"]),
        ("clipped at the bound", _series(completions__clipped_ratio=[0.3, 0.3]), []),
        # KL
        # KL: 11 nats is past any beta's bound (without a beta, KL_MAX_NATS); an ordinary drift is not alarmed
        ("kl above bound", _series(kl=[0.1, 0.2, 11.0, 12.0, 12.5]), ["kl"]),
        # was a false alarm ("x3 within 5 steps"): a policy that learns drifts like this at beta 0.02
        ("kl tripling over 5 steps", _series(kl=[0.02, 0.025, 0.03, 0.035, 0.04, 0.061]), []),
        ("kl jumping 10x over its own median", _series(kl=[0.02] * 10 + [0.3, 0.4, 0.5]), ["kl"]),
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
        ("finite numbers whose sum overflows are not NaN", _series(**{"rewards__big__mean": [1e308, 1e308]}), []),
        ("a string is not a number", _series(**{"rewards__odd__mean": [0.5, "x", 0.5]}), ["nan_rule"]),
        # loss exactly 0 is explained, not alarmed
        ("loss zero", _series(loss=[0.0, 0.0, 0.01]), ["loss_zero"]),
    ],
)
def test_diagnose_flags(name, series, expected):
    assert sorted(_codes(diagnose(series))) == sorted(expected), name


def test_nan_steps_of_keys_not_read_count_as_the_series_would():
    without_entropy = {k: v for k, v in HEALTHY.items() if k != "entropy"}
    findings = {f.code: f for f in diagnose(without_entropy, nan_steps={"rewards/b/mean": [4, 2], "entropy": [5]})}
    assert findings["nan"].steps == (5,) and findings["nan"].title == "NaN or inf in entropy (1 steps)"
    assert findings["nan_rule"].steps == (2, 4) and findings["nan_rule"].title == "NaN in rewards/b/mean (2 steps)"
    # a key in the series is judged from the series, whatever nan_steps says of it
    assert _codes(diagnose(HEALTHY, nan_steps={"grad_norm": [1, 2]})) == []


def test_findings_are_sorted_by_severity_and_list_their_steps():
    series = _series(
        reward=[0.0, 0.0, 0.0, 0.0],
        frac_reward_zero_std=[1.0, 1.0, 1.0, 1.0],
        completions__clipped_ratio=[0.9, 0.8, 0.7, 0.6],
        loss=[0.0, 0.0, 0.0, 0.0],
    )
    findings = diagnose(series)
    assert _codes(findings) == ["reward_zero", "zero_std", "clipped", "loss_zero"]
    # 4 steps are too few to tell whether the cuts block the reward: clipped is information
    assert [f.severity for f in findings] == [Severity.ERROR, Severity.WARNING, Severity.INFO, Severity.INFO]
    assert all(f.steps == (1, 2, 3, 4) for f in findings)


def test_zero_std_reports_every_streak_and_the_longest():
    series = _series(frac_reward_zero_std=[0.9, 0.9, 0.9, 0.1, 0.9, 0.9, 0.9, 0.9, 0.2])
    [finding] = diagnose(series)
    assert finding.steps == (1, 2, 3, 5, 6, 7, 8)
    assert "4 steps in a row" in finding.title


def test_clipped_is_a_warning_only_while_it_blocks_the_reward():
    # nearly all cut for 12 steps, not falling, the reward flat: the cuts block it
    blocked = _series(completions__clipped_ratio=[0.95] * 12, reward=[0.1] * 12, reward_std=[0.2] * 12)
    [now] = [f for f in diagnose(blocked, config={"max_completion_length": 64}) if f.code == "clipped"]
    assert now.severity == Severity.WARNING and "block the reward" in now.title
    assert "max_completion_length (now 64)" in now.advice
    assert now.steps == tuple(range(1, 13))
    # the same cuts while the reward rises: the policy learns to finish (the quick start)
    rising = {**blocked, **_series(reward=[0.1 + 0.05 * i for i in range(12)])}
    [learning] = [f for f in diagnose(rising) if f.code == "clipped"]
    assert learning.severity == Severity.INFO and "learns to finish" in learning.title
    # 2 steps: too early to tell
    [early] = diagnose(_series(completions__clipped_ratio=[0.1, 0.5]))
    assert early.severity == Severity.INFO and "too early to tell" in early.title
    [before] = diagnose(_series(completions__clipped_ratio=[0.5, 0.1]))
    assert before.severity == Severity.INFO
    assert "10% at the latest step, below 30% again" in before.title


def test_clipped_reads_whether_finished_completions_score_more():
    series = _series(completions__clipped_ratio=[0.95] * 12, reward=[0.3] * 12, reward_std=[0.3] * 12)
    cut = CompletionRecord(index=0, text="To add", rewards={}, total_reward=0.0, advantage=None, truncated=True)
    done = CompletionRecord(index=1, text="7", rewards={}, total_reward=1.0, advantage=None)
    pays = [GroupRecord(step=12, row_index=r, prompt="", completions=[cut, cut, cut, done]) for r in range(8)]
    [finding] = [f for f in diagnose(series, pays) if f.code == "clipped"]
    assert finding.severity == Severity.INFO and "finished completions score +1 more" in finding.title
    # 3 finished completions are too few to say finishing pays (max_completion_length 6 on the quick start)
    [finding] = [f for f in diagnose(series, pays[:3]) if f.code == "clipped"]
    assert finding.severity == Severity.WARNING
    equal = CompletionRecord(index=1, text="7", rewards={}, total_reward=0.0, advantage=None)
    blocks = [GroupRecord(step=12, row_index=r, prompt="", completions=[cut, cut, cut, equal]) for r in range(8)]
    [finding] = [f for f in diagnose(series, blocks) if f.code == "clipped"]
    assert finding.severity == Severity.WARNING


def test_many_but_not_nearly_all_cut_is_information():
    # the quick start: 60-90% cut for its first 30 steps, the reward not yet significantly rising
    series = _series(completions__clipped_ratio=[0.75, 0.62, 0.88] * 4, reward=[0.3] * 12, reward_std=[0.4] * 12)
    [finding] = [f for f in diagnose(series) if f.code == "clipped"]
    assert finding.severity == Severity.INFO and "enough completions finish" in finding.title


def test_kl_advice_names_beta_and_learning_rate():
    [finding] = diagnose(_series(kl=[0.2, 5.5, 6.0]), config={"beta": 0.02, "learning_rate": 1e-5})
    assert "beta (now 0.02)" in finding.advice and "learning_rate (now 1e-05)" in finding.advice
    assert "beta 0.02 × KL = 0.11 per token" in finding.title


@pytest.mark.parametrize(
    ("beta", "kl", "fires"),
    [
        (0.04, 2.6, True),  # 0.04 x 2.6 = 0.104: past a tenth of a unit advantage
        (0.04, 2.4, False),
        (0.001, 9.0, False),  # a small beta tolerates a far larger KL ...
        (0.001, 10.5, True),  # ... up to KL_MAX_NATS
    ],
)
def test_kl_bound_scales_with_beta(beta, kl, fires):
    series = _series(kl=[kl * 0.9, kl * 0.95, kl, kl])  # no jump: only the bound can fire
    assert ("kl" in _codes(diagnose(series, config={"beta": beta}))) is fires


def test_kl_rising_is_alarmed_with_a_falling_reward_only():
    n = 30
    kl = [0.05 + 0.01 * i for i in range(n)]
    falling = _series(kl=kl, reward=[0.8 - 0.02 * i for i in range(n)], reward_std=[0.3] * n)
    rising = _series(kl=kl, reward=[0.2 + 0.02 * i for i in range(n)], reward_std=[0.3] * n)
    assert "kl" in _codes(diagnose(falling, config={"beta": 0.04}))
    assert "kl" not in _codes(diagnose(rising, config={"beta": 0.04}))


def test_kl_spike_reads_logged_steps_not_step_numbers():
    # logging_steps = 2: the history is the 10 logged points before the latest 3, wherever they fall
    steps = list(range(1, 27, 2))
    series = {"kl": (steps, [0.02] * 10 + [0.25, 0.3, 0.3])}
    [finding] = diagnose(series)
    assert "from a median of 0.02 over the 10 logged steps before" in finding.title
    assert finding.steps == tuple(steps[-10:])


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


def test_reward_zero_examples_come_from_the_flagged_steps_first():
    series = _series(reward=[0.0, 0.0, 0.0, 0.5, 0.25])  # 0 at steps 1-3, not at 4 and 5
    groups = [  # newest first, as the store samples them
        _group(5, 1, [0.0, 1.0]),
        _group(4, 2, [0.0, 0.5]),
        _group(2, 3, [0.0, 0.0]),
        _group(1, 4, [0.0, 0.0]),
    ]
    [finding] = [f for f in diagnose(series, groups) if f.code == "reward_zero"]
    assert finding.steps == (1, 2, 3)
    assert [e.split(",")[0] for e in finding.examples] == ["step 2", "step 1", "step 5"]


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


def test_step_ranges_of_a_long_run_keep_the_first_and_the_latest():
    steps = list(range(1, 200, 2))  # 100 single steps
    assert step_ranges(steps, max_ranges=4) == "1, 3, … 96 more …, 197, 199"
    assert step_ranges(steps, max_ranges=3) == "1, 3, … 97 more …, 199"
    assert step_ranges([1, 2, 5], max_ranges=4) == "1–2, 5"  # within the limit: all of them


# ------------------------------------------------------------------------------------------- trend test


def _phi(z: float) -> float:
    return statistics.NormalDist().cdf(z)


def test_mann_kendall_of_a_strictly_rising_series():
    trend = mann_kendall(list(range(1, 11)), [0.1 * i for i in range(10)])
    # every pair rises: S = n(n-1)/2 = 45; Var S = n(n-1)(2n+5)/18 = 125; z = (S - 1)/sqrt(Var S)
    assert trend.n == 10 and trend.s == 45
    assert trend.z == pytest.approx(44 / math.sqrt(125))
    assert trend.p_rising == pytest.approx(1 - _phi(44 / math.sqrt(125)))
    assert trend.p_falling == pytest.approx(_phi(44 / math.sqrt(125)))
    assert trend.slope == pytest.approx(0.1)


def test_mann_kendall_corrects_the_variance_for_ties():
    trend = mann_kendall([1, 2, 3, 4], [1.0, 1.0, 2.0, 2.0])
    # 4 rising pairs, 2 tied; two tie groups of size 2: Var S = (4*3*13 - 2 * 2*1*9) / 18 = 120 / 18
    assert trend.s == 4
    assert trend.z == pytest.approx(3 / math.sqrt(120 / 18))
    assert trend.slope == pytest.approx(5 / 12)  # median of the pairwise slopes 0, 0, 1/3, 1/2, 1/2, 1


@pytest.mark.parametrize("values", [[0.4] * 12, [0.0, 0.0]])
def test_mann_kendall_of_a_constant_series_has_no_trend(values):
    trend = mann_kendall(list(range(len(values))), values)
    assert (trend.s, trend.z, trend.p_rising, trend.p_falling, trend.slope) == (0, 0.0, 0.5, 0.5, 0.0)


def test_mann_kendall_uses_the_logged_steps_for_the_slope():
    assert mann_kendall([2, 4, 6], [1.0, 2.0, 3.0]).slope == pytest.approx(0.5)


@pytest.mark.parametrize(("steps", "values"), [([1], [0.5]), ([1, 2], [0.5]), ([], [])])
def test_mann_kendall_rejects_too_few_or_mismatched_points(steps, values):
    with pytest.raises(ValueError):
        mann_kendall(steps, values)


# ------------------------------------------------------------------------------------- reward not improving

LORA_SHORT = {"learning_rate": 1e-5, "use_lora": True, "beta": 0.2, "num_generations": 4, "max_steps": 10}
TUNED = {"learning_rate": 1e-4, "use_lora": True, "beta": 0.0, "num_generations": 8, "max_steps": 500}


def _noisy(values: list[float], seed: int, sigma: float = 0.05) -> list[float]:
    rng = random.Random(seed)
    return [v + rng.gauss(0.0, sigma) for v in values]


def _rising(n: int, seed: int) -> list[float]:
    return _noisy([0.1 + 0.01 * i for i in range(n)], seed)


def _flat(n: int, seed: int) -> list[float]:
    return _noisy([0.3] * n, seed)


@pytest.mark.parametrize(
    ("name", "reward", "expected"),
    [
        ("learning with noise", _rising(30, seed=1), ["learning"]),
        ("flat with noise", _flat(30, seed=1), ["reward_flat"]),
        ("flat and constant", [0.4] * 12, ["reward_flat"]),
        ("falling", _noisy([0.6 - 0.01 * i for i in range(30)], seed=2), ["reward_falling"]),
        ("too few steps to judge", [0.4] * (TREND_MIN_STEPS - 1), []),
        ("rose, then levelled off", _rising(50, seed=3) + _noisy([0.6] * 50, seed=4), ["learning", "reward_plateau"]),
        ("flat at zero is reward_zero's", [0.0] * 12, ["reward_zero"]),
    ],
)
def test_reward_trend(name, reward, expected):
    # reward_std 0.4: a meaningful rise is 0.2, which these 12-50 points can see (so "not improving" can be said)
    series = _series(reward=reward, reward_std=[0.4] * len(reward))
    assert _codes(diagnose(series, config=TUNED)) == expected, name


@pytest.mark.parametrize("seed", range(20))
def test_a_learning_run_is_never_flagged(seed):
    found = diagnose(_series(reward=_rising(20, seed), reward_std=[0.4] * 20), config=LORA_SHORT)
    assert [f for f in found if f.severity is not Severity.INFO] == []


def test_a_flat_run_is_flagged_nearly_always():
    # a flat reward with 20 points of noise 0.05 is judged "not improving" (the test could see a rise of 0.2); a
    # chance "rising" at p < 0.05 is held back by Sen's interval
    flagged = sum(
        any(f.code == "reward_flat" for f in diagnose(_series(reward=_flat(20, seed), reward_std=[0.4] * 20)))
        for seed in range(40)
    )
    assert flagged >= 36


def test_too_early_to_tell_states_the_power():
    # 12 noisy points (0.2) cannot tell a rise of 0.2 from noise: "too early to tell", not "not improving"
    reward = _noisy([0.3] * 12, seed=3, sigma=0.2)
    [finding] = diagnose(_series(reward=reward, reward_std=[0.4] * 12), config=LORA_SHORT)
    assert finding.code == "reward_undecided" and finding.severity is Severity.INFO
    assert "80% of the time" in finding.advice and "Mann-Kendall" in finding.advice


def test_learning_gives_the_numbers_and_the_test():
    reward = [0.2] * 10 + [0.2 + 0.03 * i for i in range(20)] + [0.8] * 10
    [finding] = diagnose(_series(reward=reward, reward_std=[0.4] * 40))
    assert finding.code == "learning" and finding.severity is Severity.INFO
    assert finding.title.startswith("Learning: reward up from 0.2 (mean of the first 10 logged steps) to 0.8")
    assert "Mann-Kendall p = " in finding.title and "95% interval" in finding.title


def test_reward_flat_names_the_config_settings_to_change():
    [finding] = diagnose(_series(reward=[0.4] * 12, reward_std=[0.4] * 12), config=LORA_SHORT)
    assert finding.code == "reward_flat" and finding.severity == Severity.WARNING
    assert finding.steps == tuple(range(1, 13))
    assert "0.4 → 0.4 over the last 12 logged steps" in finding.title and "p = 0.5" in finding.title
    advice = finding.advice
    assert "learning_rate 1e-5 with LoRA is low for a short run: try 1e-4" in advice
    assert "beta 0.2 holds the policy close to the reference model: try 0.04" in advice
    assert "num_generations 4 is a small group" in advice
    assert "max_steps 10 is short" in advice


@pytest.mark.parametrize(
    ("config", "says", "not_says"),
    [
        ({"learning_rate": 1e-7, "use_lora": False}, "learning_rate 1e-7 is low for full fine-tuning: try 1e-6", "LoRA"),
        ({"learning_rate": 2.5e-5, "use_lora": True, "max_steps": 400}, "2.5e-5 with LoRA is low: try", "short"),
        ({"learning_rate": 1e-4, "use_lora": True}, "", "learning_rate"),
        (TUNED, "The config looks reasonable", "try"),
    ],
)
def test_reward_flat_advice_follows_the_config(config, says, not_says):
    [finding] = diagnose(_series(reward=[0.4] * 12, reward_std=[0.4] * 12), config=config)
    assert says in finding.advice
    assert not_says not in finding.advice


def test_reward_falling_advises_a_lower_learning_rate():
    reward = [0.6 - 0.02 * i for i in range(12)]
    [finding] = diagnose(_series(reward=reward), config={"learning_rate": 1e-4, "beta": 0.0})
    assert finding.code == "reward_falling"
    assert "lower the learning rate (now 0.0001)" in finding.advice and "beta (now 0.0)" in finding.advice


def test_reward_plateau_is_information_over_the_latest_window():
    reward = _rising(50, seed=3) + _noisy([0.6] * 50, seed=4)
    learning, plateau = diagnose(_series(reward=reward))
    assert (learning.code, plateau.code) == ("learning", "reward_plateau")
    assert plateau.severity == Severity.INFO
    assert plateau.steps == tuple(range(51, 101))


# ------------------------------------------------------------------------------- why groups have zero std


def _scored(step: int, row: int, answers: list[float | None], lengths: list[float] | None = None) -> GroupRecord:
    """A group under the default rules: ``numeric_answer`` (weight 1) and ``length`` (weight 0.2); an answer the
    rule did not score (``None``) adds 0 to the total, as in TRL."""
    lengths = lengths or [1.0] * len(answers)
    return _group(
        step,
        row,
        [(a or 0.0) + 0.2 * n for a, n in zip(answers, lengths, strict=True)],
        rewards=[{"numeric_answer": a, "length": n} for a, n in zip(answers, lengths, strict=True)],
    )


DEFAULT_RULES = {
    "rewards": [
        {"rule": "numeric_answer", "weight": 1.0},
        {"rule": "format_regex", "weight": 0.2},
        {"rule": "length", "weight": 0.2},
    ]
}
FLAT_STEPS = _series(frac_reward_zero_std=[1.0, 1.0, 1.0])


def test_reward_weights_name_rules_as_the_reward_functions_are_named():
    config = {
        "rewards": [
            {"rule": "numeric_answer", "weight": 1.0},
            {"rule": "numeric_answer", "weight": 0.5},
            {"rule": "plugin", "name": "my_rule", "weight": -0.3},
            {"rule": "length"},
        ]
    }
    assert reward_weights(config) == {"numeric_answer": 1.0, "numeric_answer_2": 0.5, "my_rule": -0.3, "length": 1.0}
    assert reward_weights({}) == {}


def test_a_plugin_without_a_name_is_weighed_under_its_functions_name_as_trl_logs_it():
    from grpo_core.rewards.compose import build_reward_funcs

    rewards = [
        {"rule": "numeric_answer", "weight": 1.0},
        {"rule": "plugin", "weight": 0.5, "params": {"target": "rules.py:short"}},
        {"rule": "plugin", "weight": 0.2, "params": {"target": "pkg.mod:Scorer.score", "name": "scorer"}},
        {"rule": "plugin", "weight": 0.1, "params": {"target": "other.py:short"}},
        {"rule": "reward_model", "weight": 0.3, "params": {"model": "some/model"}},
    ]
    weights = reward_weights({"rewards": rewards})
    assert weights == {"numeric_answer": 1.0, "short": 0.5, "scorer": 0.2, "short_2": 0.1, "reward_model": 0.3}
    assert list(weights) == build_reward_funcs(rewards)[2]  # the names the worker gives TRL


@pytest.mark.parametrize(
    ("config", "groups", "rule"),
    [
        (DEFAULT_RULES, [], "numeric_answer"),
        ({"rewards": [{"rule": "length", "weight": 0.5}, {"rule": "code_tests", "weight": 2}]}, [], "code_tests"),
        ({"rewards": [{"rule": "json_valid"}, {"rule": "length"}]}, [], "json_valid"),  # a tie: the first listed
        ({}, [_scored(1, 1, [1.0, 0.0])], "numeric_answer"),
        ({}, [], None),
    ],
)
def test_task_rule(config, groups, rule):
    assert task_rule(config, groups) == rule


@pytest.mark.parametrize(
    ("score", "outcome"), [(1.0, "right"), (0.9999999, "right"), (0.0, "wrong"), (0.5, "partial"), (None, None)]
)
def test_completion_outcome(score, outcome):
    [completion] = _group(1, 1, [score], rewards=[{"numeric_answer": score}]).completions
    assert completion_outcome(completion, "numeric_answer") == outcome


@pytest.mark.parametrize(
    ("groups", "title", "advice"),
    [
        (
            [_scored(3, 1, [1.0] * 4), _scored(3, 2, [1.0] * 4), _scored(2, 3, [0.0] * 4)],
            "sampled flat groups: 2 too easy (all right), 1 too hard (all wrong)",
            "too easy: every completion got full marks from numeric_answer",
        ),
        (
            [_scored(3, 1, [0.0] * 4), _scored(3, 2, [0.0] * 4), _scored(3, 3, [1.0, 0.0, 0.0, 0.0])],
            "sampled flat groups: 2 too hard (all wrong)",
            "too hard: every completion got 0 from numeric_answer",
        ),
        (
            [_scored(3, 1, [0.5] * 4)],
            "sampled flat groups: 1 same partial score",
            "If they all score 0 the task is too hard",
        ),
    ],
)
def test_zero_std_splits_flat_groups_by_cause(groups, title, advice):
    [finding] = diagnose(FLAT_STEPS, groups, config=DEFAULT_RULES)
    assert title in finding.title
    assert advice in finding.advice


def test_zero_std_gives_the_pass_rate_per_step():
    groups = [
        _scored(3, 1, [1.0, 1.0, 1.0, 1.0]),
        _scored(3, 2, [1.0, 0.0, 0.0, 0.0]),
        _scored(2, 3, [0.0] * 4),
        _scored(2, 4, [0.0, 0.0, None, 0.0]),  # an unscored completion is not counted
    ]
    [finding] = diagnose(FLAT_STEPS, groups, config=DEFAULT_RULES)
    assert "Pass rate by numeric_answer in the sampled groups: step 2: 0% (0/7), step 3: 62% (5/8)." in finding.advice


# ---------------------------------------------------------------------------------------- entropy collapse


def _falling(start: float, end: float, n: int = 12) -> list[float]:
    return [start + (end - start) * i / (n - 1) for i in range(n)]


@pytest.mark.parametrize(
    ("name", "columns", "expected"),
    [
        ("collapse on a flat reward", {"entropy": _falling(2.0, 0.1), "reward": [0.4] * 12}, True),
        ("collapse without a reward logged", {"entropy": _falling(2.0, 0.1)}, True),
        ("sharpening on a rising reward", {"entropy": _falling(2.0, 0.1), "reward": _falling(0.1, 0.6)}, False),
        ("a mild fall", {"entropy": _falling(2.0, 1.0), "reward": [0.4] * 12}, False),
        ("too few steps", {"entropy": _falling(2.0, 0.1, n=TREND_MIN_STEPS - 1)}, False),
        ("low but steady", {"entropy": [0.1] * 12}, False),
    ],
)
def test_entropy_collapse(name, columns, expected):
    assert ("entropy_collapse" in _codes(diagnose(_series(**columns)))) is expected, name


def test_entropy_collapse_advice_names_temperature_and_beta():
    config = {"temperature": 0.7, "learning_rate": 1e-5, "beta": 0.0}
    [finding] = [f for f in diagnose(_series(entropy=_falling(2.0, 0.1)), config=config)]
    assert finding.severity == Severity.WARNING
    assert "1.83 → 0.273 nats per token" in finding.title  # medians of the first and of the last 3 steps
    assert "temperature (now 0.7)" in finding.advice and "set beta > 0 (now 0)" in finding.advice


# ------------------------------------------------------------------------------------------ length drift


@pytest.mark.parametrize(
    ("name", "lengths", "config", "expected"),
    [
        ("growing to the limit", _falling(20.0, 62.0), {"max_completion_length": 64}, ["length_long"]),
        ("growing to the limit and cut", _falling(20.0, 62.0), {"max_completion_length": 64, "cut": 0.5}, ["clipped"]),
        ("growing, far from the limit", _falling(20.0, 40.0), {"max_completion_length": 64}, []),
        ("growing, limit unknown", _falling(20.0, 62.0), {}, []),
        ("steady at the limit", [60.0] * 12, {"max_completion_length": 64}, []),
        ("collapsing to very short", _falling(40.0, 5.0), {}, ["length_short"]),
        ("getting a bit shorter", _falling(40.0, 20.0), {}, []),
    ],
)
def test_length_drift(name, lengths, config, expected):
    series, config = _series(completions__mean_length=lengths), dict(config)
    if "cut" in config:  # the clipped finding says it, with the same advice
        series |= _series(completions__clipped_ratio=[config.pop("cut")] * len(lengths))
    assert _codes(diagnose(series, config=config)) == expected, name


def test_length_drift_names_the_length_rule():
    config = {"max_completion_length": 64, **DEFAULT_RULES}
    [finding] = diagnose(_series(completions__mean_length=_falling(20.0, 62.0)), config=config)
    assert "mean 23.8 → 58.2 tokens of 64" in finding.title  # medians of the first and of the last 3 steps
    assert "max_completion_length (now 64)" in finding.advice and "length (weight 0.2) rule" in finding.advice
    [short] = diagnose(_series(completions__mean_length=_falling(40.0, 5.0)), config=DEFAULT_RULES)
    assert short.severity == Severity.INFO and "length (weight 0.2)" in short.advice


# --------------------------------------------------------------------------------- one rule carries it all


def test_rule_variance_shares_decompose_the_weighted_total():
    groups = [_scored(1, 1, [1.0, 0.0, 1.0, 0.0], lengths=[1.0, 1.0, 0.0, 0.0])]
    shares, used = rule_variance_shares(groups, {"numeric_answer": 1.0, "length": 0.2})
    # numeric and length are uncorrelated here: shares are their variances over the total's, 1 : 0.04
    assert used == 1
    assert shares == pytest.approx({"numeric_answer": 1 / 1.04, "length": 0.04 / 1.04})
    assert list(shares) == ["numeric_answer", "length"]


def test_rule_variance_shares_skip_flat_groups_and_unscored_completions():
    groups = [_scored(1, 1, [1.0] * 4), _group(1, 2, [None, None], rewards=[{"numeric_answer": None}] * 2)]
    assert rule_variance_shares(groups, {}) == ({}, 0)


def _length_only(step: int, row: int) -> GroupRecord:
    return _scored(step, row, [0.0] * 4, lengths=[1.0, 0.5, 0.0, 1.0])


@pytest.mark.parametrize(
    ("name", "groups", "config", "expected"),
    [
        ("the shaping term carries it", [_length_only(3, r) for r in range(4)], DEFAULT_RULES, Severity.WARNING),
        ("too few groups", [_length_only(3, r) for r in range(3)], DEFAULT_RULES, None),
        (
            "the task rule carries it",
            [_scored(3, r, [1.0, 0.0, 1.0, 0.0]) for r in range(4)],
            DEFAULT_RULES,
            None,
        ),
        ("equal weights", [_length_only(3, r) for r in range(4)], {}, Severity.INFO),
        (
            "shared with the task",
            [_scored(3, r, [1.0, 0.0, 0.0, 0.0], lengths=[0.0, 1.0, 0.0, 1.0]) for r in range(4)],
            {"rewards": [{"rule": "numeric_answer"}, {"rule": "length", "weight": 1.0}]},
            None,
        ),
    ],
)
def test_rule_dominates(name, groups, config, expected):
    found = [f for f in diagnose({}, groups, config=config) if f.code == "rule_dominates"]
    assert [f.severity for f in found] == ([expected] if expected else []), name


def test_rule_dominates_names_the_rule_and_its_share():
    [finding] = diagnose({}, [_length_only(3, r) for r in range(4)], config=DEFAULT_RULES)
    assert finding.title == "One reward rule carries 100% of the within-group reward variance: length"
    assert "what length (weight 0.2) rewards, while numeric_answer (weight 1) hardly" in finding.advice
    assert finding.examples[0] == "length: 100% of the variance (weight 0.2)"
    assert finding.steps == (3,)


# ---------------------------------------------------------------------------------- beta with zero-std groups


@pytest.mark.parametrize(
    ("name", "frac", "config", "expected"),
    [
        ("beta with most groups flat", [0.0, 0.0, 0.75, 1.0, 0.75, 1.0, 0.5], {"beta": 0.02}, True),
        ("beta 0", [1.0, 1.0, 1.0], {"beta": 0.0}, False),
        ("beta unknown", [1.0, 1.0, 1.0], {}, False),
        ("half the groups is not most", [0.5, 0.5, 0.5, 0.5, 0.5], {"beta": 0.04}, False),
        ("it was earlier, not now", [1.0, 1.0, 1.0, 1.0, 0.25, 0.25, 0.25, 0.25, 0.25], {"beta": 0.04}, False),
        ("too few steps", [1.0, 1.0], {"beta": 0.04}, False),
    ],
)
def test_beta_with_zero_std_groups(name, frac, config, expected):
    found = [f for f in diagnose(_series(frac_reward_zero_std=frac), config=config) if f.code == "beta_zero_std"]
    assert bool(found) is expected, name
    if found:
        assert found[0].severity == Severity.INFO
        assert found[0].steps == (3, 4, 5, 6)
        assert "beta 0.02 > 0" in found[0].title and "80% over the last 5 logged steps" in found[0].title


# ------------------------------------------------------------------------------------------- whole runs


def test_a_healthy_learning_run_has_no_findings():
    n = 30
    series = _series(
        reward=_rising(n, seed=5),
        reward_std=_noisy([0.3] * n, seed=6, sigma=0.02),
        frac_reward_zero_std=[0.25] * n,
        kl=[0.001 * i for i in range(n)],
        loss=_noisy([0.0] * n, seed=7, sigma=0.01),
        entropy=_falling(1.2, 0.8, n),
        completions__mean_length=_noisy([12.0] * n, seed=8, sigma=1.0),
        completions__clipped_ratio=[0.0] * n,
    )
    groups = [_scored(n, r, [1.0, 0.0, 1.0, 0.0], lengths=[1.0, 0.9, 1.0, 1.0]) for r in range(8)]
    config = {**DEFAULT_RULES, **TUNED, "max_completion_length": 64, "temperature": 0.9}
    assert _codes(diagnose(series, groups, config)) == ["learning"]


def test_a_stuck_run_lists_each_problem_once_most_severe_first():
    n = 30
    series = _series(
        reward=[0.2] * n,
        frac_reward_zero_std=[0.9] * n,
        entropy=_falling(2.0, 0.05, n),
        completions__mean_length=_falling(20.0, 63.0, n),
        completions__clipped_ratio=[0.5] * n,
        loss=[0.0] * n,
    )
    groups = [_length_only(n, r) for r in range(4)] + [_scored(n, 9, [0.0] * 4)]
    config = {**DEFAULT_RULES, **LORA_SHORT, "max_completion_length": 64, "beta": 0.02}
    findings = diagnose(series, groups, config)
    codes = _codes(findings)
    assert len(codes) == len(set(codes))
    assert set(codes) == {
        "reward_flat",
        "zero_std",
        "rule_dominates",
        "entropy_collapse",
        "clipped",  # not length_long as well: the same advice
        "beta_zero_std",
        "loss_zero",
    }
    ranks = [{Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}[f.severity] for f in findings]
    assert ranks == sorted(ranks)


def _eval_series(train: list[float], evals: dict[int, float]) -> dict[str, tuple[list[int], list[float | None]]]:
    """A train ``reward`` at steps 1..n and ``eval_reward`` at the given steps (as TRL logs an eval split)."""
    series = _series(reward=train)
    series["eval_reward"] = (sorted(evals), [evals[s] for s in sorted(evals)])
    return series


RISING_TRAIN = [0.1 + 0.03 * i for i in range(20)]


@pytest.mark.parametrize(
    ("name", "series", "fires"),
    [
        ("train up, eval flat", _eval_series(RISING_TRAIN, {5: 0.2, 10: 0.21, 15: 0.2, 20: 0.22}), True),
        ("train up, eval falls", _eval_series(RISING_TRAIN, {5: 0.3, 10: 0.25, 15: 0.2, 20: 0.15}), True),
        ("eval follows train", _eval_series(RISING_TRAIN, {5: 0.2, 10: 0.35, 15: 0.5, 20: 0.6}), False),
        ("only two evaluations", _eval_series(RISING_TRAIN, {10: 0.2, 20: 0.2}), False),
        ("train flat too", _eval_series([0.3, 0.31] * 10, {5: 0.2, 10: 0.2, 15: 0.2, 20: 0.2}), False),
        ("no eval split", _series(reward=RISING_TRAIN), False),
    ],
)
def test_eval_flat_compares_train_and_eval_reward(name, series, fires):
    found = [f for f in diagnose(series) if f.code == "eval_flat"]
    assert bool(found) is fires, name
    if fires:
        assert found[0].severity is Severity.WARNING
        assert found[0].steps == tuple(series["eval_reward"][0])
        assert "eval reward does not" in found[0].title
