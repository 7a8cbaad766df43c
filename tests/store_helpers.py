"""Store operations only tests need, written against the public :class:`storage.Store` API.

The dashboard records a step with :meth:`storage.Store.record_step` and reads metrics and groups incrementally; these
are the one-step and whole-run shortcuts tests use to set a store up and to check what it holds.
"""

from __future__ import annotations

from typing import Any

from storage import Store


def record_metrics(store: Store, run_id: int, step: int, values: dict[str, Any], wall_time: float) -> int:
    """Store the scalars logged at ``step`` (:meth:`storage.Store.record_metric_steps` for one step): non-numbers
    skipped, NaN/inf as NULL, a key already recorded at that step overwritten. Returns how many scalars were stored."""
    return store.record_metric_steps(run_id, [(step, values, wall_time)])


def metric_keys(store: Store, run_id: int) -> list[str]:
    """The distinct metric names recorded for a run, sorted (reads every point: for small test runs)."""
    return sorted({key for _, key, _, _ in store.metric_rows(run_id)})


def count_groups(store: Store, run_id: int) -> int:
    """How many groups a run has recorded, of every split."""
    return sum(len(store.groups_at(run_id, step)) for step in store.group_steps(run_id))


def token_stats_indexes(store: Store, group_id: int) -> list[int]:
    """The indexes of group ``group_id``'s completions that have per-token values, ascending."""
    return [c.index for c in store.get_group(group_id).completions if store.token_stats(group_id, c.index) is not None]
