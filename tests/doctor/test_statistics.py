"""The doctor's statistics: the power of the Mann-Kendall test (what "too early to tell" rests on), Sen's slope
interval (the learning finding's interval) and the Wilson interval (the preflight's zero-std share), checked by
simulation against what they claim."""

from __future__ import annotations

import math
import random

import pytest

from grpo_core.doctor.progress import rises
from grpo_core.doctor.trends import detectable_rise, mann_kendall, sen_slope_interval
from grpo_core.preflight.verdict import wilson_interval


def _noise(n: int, sigma: float, rng: random.Random) -> list[float]:
    return [rng.gauss(0.0, sigma) for _ in range(n)]


@pytest.mark.parametrize("n", [10, 20, 40])
def test_a_rise_of_the_detectable_size_is_detected_about_80_percent_of_the_time(n):
    # the rise is estimated from one noisy series (as the doctor does), then series with that rise are simulated
    rng = random.Random(n)
    steps = list(range(1, n + 1))
    rates = []
    for draw in range(8):
        rise = detectable_rise(steps, _noise(n, 0.2, random.Random(1000 * n + draw)), 0.05, 0.8)
        hits = 0
        for _ in range(150):
            values = [rise * (t - 1) / (n - 1) + e for t, e in zip(steps, _noise(n, 0.2, rng), strict=True)]
            hits += mann_kendall(steps, values).p_rising < 0.05
        rates.append(hits / 150)
    assert 0.72 <= sum(rates) / len(rates) <= 0.95


def test_detectable_rise_shrinks_with_more_points_and_less_noise():
    rng = random.Random(0)
    noise = _noise(40, 0.1, rng)
    assert detectable_rise(range(1, 41), noise, 0.05, 0.8) < detectable_rise(range(1, 21), noise[:20], 0.05, 0.8)
    assert detectable_rise(range(1, 13), [0.4] * 12, 0.05, 0.8) == pytest.approx(0.0, abs=1e-12)
    assert detectable_rise([1, 2], [0.1, 0.2], 0.05, 0.8) == math.inf
    assert detectable_rise([3, 3, 3], [0.1, 0.2, 0.3], 0.05, 0.8) == math.inf


def test_sen_interval_covers_the_true_slope_about_95_percent_of_the_time():
    rng = random.Random(7)
    steps = list(range(1, 21))
    covered = 0
    for _ in range(300):
        values = [0.01 * t + e for t, e in zip(steps, _noise(20, 0.1, rng), strict=True)]
        low, high = sen_slope_interval(steps, values)
        covered += low <= 0.01 <= high
    assert 0.9 <= covered / 300 <= 0.995


def test_sen_interval_needs_three_points():
    with pytest.raises(ValueError, match="at least 3 points"):
        sen_slope_interval([1, 2], [0.1, 0.2])


def test_rises_holds_a_chance_trend_of_a_flat_series_back():
    # one-sided p < 0.05 alone calls a flat noisy series rising about 1 time in 20; with Sen's interval, rarely
    rng = random.Random(3)
    steps = list(range(1, 21))
    called = sum(rises(list(zip(steps, _noise(20, 0.1, rng), strict=True))) for _ in range(400))
    assert called / 400 < 0.04
    assert rises([(t, 0.02 * t) for t in steps])


@pytest.mark.parametrize(
    ("k", "n", "low", "high"),
    [(3, 4, 0.301, 0.954), (0, 4, 0.0, 0.490), (4, 4, 0.510, 1.0), (12, 16, 0.505, 0.898), (0, 0, 0.0, 1.0)],
)
def test_wilson_interval(k, n, low, high):
    got = wilson_interval(k, n)
    assert got == pytest.approx((low, high), abs=2e-3)
