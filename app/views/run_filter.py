"""Filtering the runs table by status and by text in a run's name or tags (pure functions; no Gradio)."""

from __future__ import annotations

from storage import RunInfo, RunStatus

ALL_STATUSES = "all"
#: Choices of the status filter: everything, the runs still on their way, then each status.
STATUS_FILTER_CHOICES = [ALL_STATUSES, "active", *(s.value for s in RunStatus)]


def _status_matches(run: RunInfo, status: str | None) -> bool:
    if not status or status == ALL_STATUSES:
        return True
    if status == "active":
        return not run.status.is_final
    return run.status.value == status


def filter_runs(runs: list[RunInfo], status: str | None = None, text: str | None = None) -> list[RunInfo]:
    """The runs with ``status`` (a :class:`RunStatus` value, ``"active"`` for queued or running, ``"all"`` or
    ``None`` for any) whose name or a tag contains every word of ``text`` (case-insensitive; ``#12`` matches
    run 12), in the given order."""
    words = (text or "").casefold().split()
    kept = []
    for run in runs:
        if not _status_matches(run, status):
            continue
        haystack = " ".join([run.name, *run.tags, f"#{run.id}"]).casefold()
        if all(word in haystack for word in words):
            kept.append(run)
    return kept
