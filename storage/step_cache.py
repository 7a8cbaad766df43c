"""What a run's only metric writer (the worker's writer thread) remembers between its steps, so that recording a
step reads nothing back from the store: per metric key its downsampled-history state with only its last bucket
(:class:`storage.summary.SeriesState`), and per split the highest step whose groups are stored.

Pure data; :meth:`storage.Store.record_step` fills and uses it. The state is a copy of what is committed: the store
installs a step's new state only after its transaction committed, and :meth:`StepCache.clear` (on any failure)
makes the next step read the store again. It is valid only while its holder is the only writer of the run's
metrics and groups (a worker and its run; the dashboard only reads them).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from storage.summary import SeriesState


@dataclass
class StepCache:
    """One run's recording state as last committed.

    ``series``: metric key -> its history state, ``buckets`` holding the key's last bucket only; a key absent is
    read from the store (or built) at its next point. ``group_steps``: split (``"train"``, ``"eval"``) -> the
    highest step with groups stored (``-1``: none); a split absent is read once from the store.
    """

    series: dict[str, SeriesState] = field(default_factory=dict)
    group_steps: dict[str, int] = field(default_factory=dict)

    def clear(self) -> None:
        """Forget everything (after a failed transaction: the store is read again at the next step)."""
        self.series.clear()
        self.group_steps.clear()
