"""A run's metric history kept downsampled as it is recorded: per key, at most :data:`SUMMARY_BUCKETS` buckets of
``2**level`` steps, each with its min, max, sum, count and last point. Pure arithmetic; :class:`storage.Store`
keeps the buckets in the ``metric_buckets`` table and the per-key state in ``metric_series``.

Why: a chart's first load must not depend on how long the run is. TensorBoard keeps at most N scalars per tag by
reservoir sampling (``tensorboard/backend/event_processing/reservoir.py``: uniform over the run, the most recent
point always kept); W&B's sampled history returns a bounded number of points per key (about 1,500 on a chart),
with a min/max band when a chart buckets its points. This keeps both honest properties without sampling at random:

* **bounded**: bucket ``b`` of level ``L`` holds the steps ``[b * 2**L, (b + 1) * 2**L)``. A key starts at level 0
  (one bucket a step). When a new step would make the key span :data:`SUMMARY_BUCKETS` buckets or more, the level
  rises by one and neighbouring buckets merge in pairs (bucket ``b`` of level ``L + 1`` is exactly buckets ``2b``
  and ``2b + 1`` of level ``L``), so a key never holds more than :data:`SUMMARY_BUCKETS` buckets, whatever the run
  length. Amortised, a recorded point costs one bucket update; a merge rewrites at most that many rows and happens
  each time the run doubles in length.
* **true last point and extremes**: each bucket keeps the value of its last step (so the last bucket's is the run's
  last recorded point) and the min and max of its values (a chart draws them as an envelope).
* **backfill equals incremental**: the level a key has after recording steps ``first..last`` one by one is the
  smallest level at which ``first..last`` spans fewer than :data:`SUMMARY_BUCKETS` buckets (:func:`level_for`), and
  its buckets are plain aggregates of the raw points, so a store can compute them once from existing metrics
  (:meth:`storage.Store.rebuild_metric_summary`) and get the same buckets.

Values are floats or ``None`` (NaN/inf are stored as NULL); ``min``, ``max``, ``sum`` and ``count`` cover the
non-``None`` values only, ``last_value`` may be ``None``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SUMMARY_BUCKETS = 1000
"""Most buckets kept per metric key (and so points per key on a chart's first load)."""


@dataclass
class Bucket:
    """The points of one key within one bucket of steps.

    ``first_step``/``last_step``: the first and last recorded step in it; ``count``: how many non-``None`` values;
    ``min``/``max``/``sum``: over those (``None`` when there are none); ``last_value``/``wall_time``: the value and
    time (seconds since the epoch) of ``last_step``.
    """

    first_step: int
    last_step: int
    count: int
    min: float | None
    max: float | None
    sum: float | None
    last_value: float | None
    wall_time: float

    @property
    def mean(self) -> float | None:
        """The mean of the bucket's values, ``None`` without any."""
        return self.sum / self.count if self.count and self.sum is not None else None


def bucket_of(step: int, level: int) -> int:
    """The index of the bucket of ``2**level`` steps that holds ``step`` (steps are >= 0)."""
    return step >> level


def level_for(first_step: int, last_step: int, capacity: int = SUMMARY_BUCKETS) -> int:
    """The smallest level at which the steps ``first_step..last_step`` fall in fewer than ``capacity`` buckets."""
    level = 0
    while (last_step >> level) - (first_step >> level) >= capacity:
        level += 1
    return level


def point_bucket(step: int, value: float | None, wall_time: float) -> Bucket:
    """A bucket holding one point."""
    return Bucket(step, step, 0 if value is None else 1, value, value, value, value, wall_time)


def _pick(a: float | None, b: float | None, choose) -> float | None:
    if a is None:
        return b
    if b is None:
        return a
    return choose(a, b)


def merge(earlier: Bucket, later: Bucket) -> Bucket:
    """Two buckets of the same key as one; every step of ``earlier`` comes before every step of ``later``."""
    return Bucket(
        first_step=earlier.first_step,
        last_step=later.last_step,
        count=earlier.count + later.count,
        min=_pick(earlier.min, later.min, min),
        max=_pick(earlier.max, later.max, max),
        sum=_pick(earlier.sum, later.sum, lambda a, b: a + b),
        last_value=later.last_value,
        wall_time=later.wall_time,
    )


def coarsen(buckets: dict[int, Bucket], levels: int) -> dict[int, Bucket]:
    """``buckets`` (index -> bucket at some level) re-bucketed ``levels`` levels up: index ``b`` becomes
    ``b >> levels`` and buckets falling together merge, in step order."""
    if levels <= 0:
        return dict(buckets)
    out: dict[int, Bucket] = {}
    for index in sorted(buckets):
        target = index >> levels
        out[target] = merge(out[target], buckets[index]) if target in out else buckets[index]
    return out


@dataclass
class SeriesState:
    """One key's summary: its level, first and last recorded step, and its buckets (index -> bucket)."""

    level: int
    first_step: int
    last_step: int
    buckets: dict[int, Bucket]


def fold(state: SeriesState | None, points: Iterable[tuple[int, float | None, float]],
         capacity: int = SUMMARY_BUCKETS) -> tuple[SeriesState, bool]:
    """Add new points ``(step, value, wall_time)``, in ascending step order and all after ``state.last_step``, to one
    key's summary (``None``: the key's first points). Returns the new state and whether the level rose (every bucket
    changed) — otherwise only the buckets holding the new steps did.

    ``state.buckets`` need only hold the key's last bucket unless the level rises; the caller then passes them all.
    The last bucket is updated in place.

    Raises:
        ValueError: a step is not after the last one recorded.
    """
    raised = False
    for step, value, wall_time in points:
        if state is None:
            state = SeriesState(0, step, step, {})
        elif step <= state.last_step:
            raise ValueError(f"step {step} is not after the last recorded step {state.last_step}")
        level = level_for(state.first_step, step, capacity)
        if level != state.level:
            state.buckets = coarsen(state.buckets, level - state.level)
            state.level = level
            raised = True
        index = bucket_of(step, state.level)
        bucket = state.buckets.get(index)
        if bucket is None:
            state.buckets[index] = point_bucket(step, value, wall_time)
        else:  # merge(bucket, point_bucket(...)) in place: this runs once per recorded point
            if value is not None:
                bucket.count += 1
                bucket.min = value if bucket.min is None or value < bucket.min else bucket.min
                bucket.max = value if bucket.max is None or value > bucket.max else bucket.max
                bucket.sum = value if bucket.sum is None else bucket.sum + value
            bucket.last_step, bucket.last_value, bucket.wall_time = step, value, wall_time
        state.last_step = step
    if state is None:
        raise ValueError("no points to fold")
    return state, raised


def downsample(buckets: dict[int, Bucket], max_points: int) -> dict[int, Bucket]:
    """``buckets`` merged a level up until at most ``max_points`` (>= 1) remain (the read side of a chart that wants
    fewer points than are stored)."""
    levels = 0
    while len({index >> levels for index in buckets}) > max(1, max_points):
        levels += 1
    return coarsen(buckets, levels)
