"""Tests for storage.summary: the downsampled metric history's arithmetic (pure, no database)."""

from __future__ import annotations

import random

import pytest

from storage.summary import Bucket, coarsen, downsample, fold, level_for, point_bucket


def _aggregate(points, level):
    """The buckets of ``points`` at ``level`` computed directly (what a backfill from raw points computes)."""
    out = {}
    for step, value, wall in points:
        index = step >> level
        out[index] = point_bucket(step, value, wall) if index not in out else Bucket(
            out[index].first_step, step, out[index].count + (value is not None),
            min(v for v in (out[index].min, value) if v is not None) if value is not None else out[index].min,
            max(v for v in (out[index].max, value) if v is not None) if value is not None else out[index].max,
            (out[index].sum or 0.0) + value if value is not None else out[index].sum, value, wall)
    return out


@pytest.mark.parametrize(("first", "last", "capacity", "level"), [
    (1, 1, 4, 0), (1, 4, 4, 0), (0, 3, 4, 0), (0, 4, 4, 1), (1, 8, 4, 2), (1, 100, 4, 5), (5, 5, 1, 0),
    (1, 200_000, 1000, 8),
])
def test_level_for_is_the_smallest_level_that_fits(first, last, capacity, level):
    assert level_for(first, last, capacity) == level
    assert (last >> level) - (first >> level) < capacity
    if level:
        assert (last >> (level - 1)) - (first >> (level - 1)) >= capacity


def test_fold_point_by_point_equals_the_direct_aggregate_and_stays_bounded():
    rng = random.Random(3)
    # Binary fractions, so sums are exact whichever order they are added in.
    points = [(step, None if step % 11 == 0 else rng.randrange(-64, 64) / 8, 1000.0 + step) for step in range(3, 700)]
    state = None
    for point in points:
        state, _ = fold(state, [point], capacity=16)
        assert len(state.buckets) <= 16
    assert state.level == level_for(3, 699, 16)
    assert state.buckets == _aggregate(points, state.level)
    last = state.buckets[max(state.buckets)]
    assert (last.last_step, last.last_value) == (699, points[-1][1])
    values = [v for _, v, _ in points if v is not None]
    assert min(b.min for b in state.buckets.values()) == min(values)
    assert max(b.max for b in state.buckets.values()) == max(values)
    assert sum(b.count for b in state.buckets.values()) == len(values)


def test_fold_reports_a_rising_level_and_refuses_old_steps():
    state, raised = fold(None, [(1, 1.0, 0.0), (2, 2.0, 0.0)], capacity=2)
    assert not raised and state.level == 0
    state, raised = fold(state, [(3, 3.0, 0.0)], capacity=2)
    assert raised and state.level == 1
    assert state.buckets == {0: Bucket(1, 1, 1, 1.0, 1.0, 1.0, 1.0, 0.0), 1: Bucket(2, 3, 2, 2.0, 3.0, 5.0, 3.0, 0.0)}
    with pytest.raises(ValueError, match="not after"):
        fold(state, [(3, 1.0, 0.0)], capacity=2)
    with pytest.raises(ValueError, match="no points"):
        fold(None, [])


def test_a_bucket_of_none_values_has_no_extremes_but_keeps_its_last_point():
    state, _ = fold(None, [(1, None, 5.0), (2, None, 6.0)], capacity=1)
    (bucket,) = state.buckets.values()
    assert (bucket.count, bucket.min, bucket.max, bucket.mean) == (0, None, None, None)
    assert (bucket.last_step, bucket.last_value, bucket.wall_time) == (2, None, 6.0)


def test_coarsen_and_downsample_merge_neighbours_in_step_order():
    buckets = {i: point_bucket(i, float(i % 5), float(i)) for i in range(10)}
    assert coarsen(buckets, 1)[2] == Bucket(4, 5, 2, 0.0, 4.0, 4.0, 0.0, 5.0)
    assert coarsen(buckets, 0) == buckets
    small = downsample(buckets, 3)
    assert len(small) <= 3
    assert small[max(small)].last_step == 9
    assert min(b.min for b in small.values()) == 0.0 and max(b.max for b in small.values()) == 4.0
