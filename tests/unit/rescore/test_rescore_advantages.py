"""GRPO's group-relative advantage as TRL 1.16.0 computes it (grpo_core/rescore/advantages.py): table-driven, with
zero-std groups, None and NaN rewards, every scale, sign changes, and agreement with the bench's score_group."""

from __future__ import annotations

import math
import random

import pytest

from grpo_core.rescore.advantages import (
    batch_advantages,
    nanstd,
    normalise_scale,
    sign_changed,
    weighted_totals,
)
from grpo_core.rewards.compose import score_group

NAN = float("nan")
S2 = math.sqrt(0.5)  # the unbiased std of [1, 0]


@pytest.mark.parametrize(
    ("totals", "scale", "advantages", "zero_std"),
    [
        # a group without signal: every advantage 0, counted in frac_reward_zero_std
        ([[1.0, 1.0, 1.0, 1.0]], "group", [[0.0, 0.0, 0.0, 0.0]], [True]),
        ([[1.0, 0.0, 0.0, 0.0]], "group", [[0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001]], [False]),
        # an unscorable completion (None or NaN) is out of the mean and std, its advantage 0
        ([[1.0, None, 0.0]], "group", [[0.5 / (S2 + 1e-4), 0.0, -0.5 / (S2 + 1e-4)]], [False]),
        ([[1.0, NAN, 0.0]], "group", [[0.5 / (S2 + 1e-4), 0.0, -0.5 / (S2 + 1e-4)]], [False]),
        # nothing scorable, or one scorable completion: NaN std -> advantages 0, not a zero-std group (TRL's isclose)
        ([[None, None]], "group", [[0.0, 0.0]], [False]),
        ([[2.0, None]], "group", [[0.0, 0.0]], [False]),
        # no scaling: centred only; the std still decides zero-std
        ([[1.0, 0.0, 0.0, 0.0]], "none", [[0.75, -0.25, -0.25, -0.25]], [False]),
        ([[0.5, 0.5]], "none", [[0.0, 0.0]], [True]),
        # batch: each group centred on its own mean, divided by the whole batch's std
        ([[1.0, 1.0], [0.0, 0.0]], "batch", [[0.0, 0.0], [0.0, 0.0]], [False, False]),
        ([[1.0, 0.0], [3.0, 3.0]], "batch",
         [[0.5 / (nanstd([1, 0, 3, 3]) + 1e-4), -0.5 / (nanstd([1, 0, 3, 3]) + 1e-4)], [0.0, 0.0]], [False, False]),
        ([[2.0, 2.0], [2.0, 2.0]], "batch", [[0.0, 0.0], [0.0, 0.0]], [True, True]),
        # groups of different sizes (a recorded sample), one of them flat
        ([[1.0, 0.0], [4.0, 4.0, 4.0]], "group", [[0.5 / (S2 + 1e-4), -0.5 / (S2 + 1e-4)], [0.0, 0.0, 0.0]],
         [False, True]),
        # a group of one: std 0 (TRL's num_generations == 1 branch)
        ([[3.0]], "group", [[0.0]], [True]),
    ],
)
def test_batch_advantages(totals, scale, advantages, zero_std):
    got = batch_advantages(totals, scale_rewards=scale)
    assert got.zero_std == zero_std
    for group, expected in zip(got.advantages, advantages, strict=True):
        assert group == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("given", "expected"), [(True, "group"), (False, "none"), ("batch", "batch"),
                                                 ("group", "group"), ("none", "none"), (None, "none")])
def test_scale_names(given, expected):
    assert normalise_scale(given) == expected


@pytest.mark.parametrize("bad", ["std", "", 1.5, "GROUP"])
def test_unknown_scale_is_refused(bad):
    with pytest.raises(ValueError, match="scale_rewards"):
        batch_advantages([[1.0, 0.0]], scale_rewards=bad)


def test_unknown_aggregation_and_gdpo_without_rewards_are_refused():
    with pytest.raises(ValueError, match="multi_objective_aggregation"):
        batch_advantages([[1.0, 0.0]], multi_objective_aggregation="mean")
    with pytest.raises(ValueError, match="normalize_then_sum needs"):
        batch_advantages([[1.0, 0.0]], multi_objective_aggregation="normalize_then_sum")


@pytest.mark.parametrize(
    ("rewards", "weights", "totals"),
    [
        ([[1.0, 0.0], [0.5, 0.5]], [1.0, 2.0], [2.0, 1.0]),
        ([[1.0, None], [None, None]], [1.0, 1.0], [1.0, None]),  # None skipped; all None: unscorable
        ([[NAN, 1.0], [2.0, NAN]], [1.0, -1.0], [-2.0, 1.0]),  # NaN as None; negative weights
        ([[True, 0], ["bad", 1]], [1.0, 1.0], [1.0, 1.0]),  # a non-number is no reward
    ],
)
def test_weighted_totals(rewards, weights, totals):
    assert weighted_totals(rewards, weights) == totals


def test_weighted_totals_refuses_a_weight_count_mismatch():
    with pytest.raises(ValueError, match="2 weights for 1 rules"):
        weighted_totals([[1.0]], [1.0, 2.0])


@pytest.mark.parametrize(
    ("before", "after", "changed"),
    [(0.5, -0.5, True), (-0.5, 0.5, True), (0.5, 0.1, False), (0.0, -0.5, False), (0.5, 0.0, False),
     (None, 1.0, False), (1.0, None, False), (NAN, -1.0, False), (1e-9, -1.0, False), (-2.0, -1.0, False)],
)
def test_sign_changed(before, after, changed):
    assert sign_changed(before, after) is changed


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("aggregation", ["sum_then_normalize", "normalize_then_sum"])
def test_agrees_with_the_bench_scoring_of_one_group(seed, aggregation):
    """On one group, the workbench's advantages equal compose.score_group's (the TRL mirror the bench uses)."""
    rng = random.Random(seed)
    size = rng.randint(2, 8)
    texts = ["x" * rng.randint(1, 40) + ("</answer>" if rng.random() < 0.5 else "") for _ in range(size)]
    specs = [{"rule": "length", "weight": rng.uniform(-1, 1), "params": {"max_tokens": 20}},
             {"rule": "format_regex", "weight": 1.0, "params": {"pattern": "answer"}}]
    scale = rng.choice(["group", "none", "batch"])
    score = score_group(specs, texts, {"prompt": "p"}, scale_rewards=scale, multi_objective_aggregation=aggregation)
    weights = [s["weight"] for s in specs]
    totals = weighted_totals(score.rewards, weights)
    assert totals == pytest.approx(score.total)
    got = batch_advantages([totals], scale_rewards=scale, rewards=[score.rewards], weights=weights,
                           multi_objective_aggregation=aggregation)
    assert got.advantages[0] == pytest.approx(score.advantages, abs=1e-9)
