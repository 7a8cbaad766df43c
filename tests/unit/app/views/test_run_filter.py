"""Tests for the runs table's filter (app.views.run_filter) and the run-status card's heartbeat warning, GPUs, resume
point, tags and notes (app.views.runs), all pure."""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.views.run_filter import STATUS_FILTER_CHOICES, filter_runs
from app.views.runs import HEARTBEAT_STALE_S, RUNS_TABLE_HEADERS, heartbeat_silence, run_status_html, runs_table
from storage import RunStatus
from tests.helpers import NOW, run_info

RUNS = [
    run_info(id=1, name="baseline", status=RunStatus.COMPLETED, tags=["lr-sweep"]),
    run_info(id=2, name="big batch", status=RunStatus.RUNNING, tags=["Sweep B"]),
    run_info(id=3, name="broken", status=RunStatus.FAILED),
    run_info(id=12, name="waiting", status=RunStatus.QUEUED, tags=["baseline"]),
]


@pytest.mark.parametrize(
    ("status", "typed", "ids"),
    [
        (None, None, [1, 2, 3, 12]),
        ("all", "", [1, 2, 3, 12]),
        ("active", "", [2, 12]),
        ("failed", None, [3]),
        ("cancelled", None, []),
        ("all", "baseline", [1, 12]),  # a name or a tag
        ("all", "SWEEP", [1, 2]),  # case-insensitive, part of a tag
        ("all", "sweep big", [2]),  # every word must match
        ("completed", "sweep", [1]),
        ("all", "#12", [12]),
        ("all", "nothing like it", []),
    ],
)
def test_filter_runs(status, typed, ids):
    assert [r.id for r in filter_runs(RUNS, status, typed)] == ids


def test_status_filter_choices_cover_every_status():
    assert {s.value for s in RunStatus} <= set(STATUS_FILTER_CHOICES)


def test_a_silent_running_run_is_flagged():
    fresh = run_info(heartbeat_at=NOW - timedelta(seconds=3))
    silent = run_info(heartbeat_at=NOW - timedelta(seconds=95))
    assert heartbeat_silence(fresh, NOW) is None
    assert heartbeat_silence(silent, NOW) == pytest.approx(95)
    assert heartbeat_silence(run_info(heartbeat_at=NOW - timedelta(seconds=HEARTBEAT_STALE_S - 1)), NOW) is None
    assert heartbeat_silence(run_info(status=RunStatus.COMPLETED, heartbeat_at=NOW - timedelta(hours=2)), NOW) is None
    assert "no heartbeat for 95 s" in run_status_html(silent, now=NOW)
    assert "no heartbeat" not in run_status_html(fresh, now=NOW)


def test_status_card_shows_gpus_resume_point_tags_and_notes_escaped():
    queued = run_info(status=RunStatus.QUEUED, resume_from="/data/runs/run-00007/output/checkpoint-40", gpus="0,1",
                  tags=["<b>x</b>"], notes="try a lower lr <now>")
    page = run_status_html(queued, now=NOW)
    assert "resumes from checkpoint-40" in page
    assert "GPUs 0,1" in page
    assert "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
    assert "try a lower lr &lt;now&gt;" in page


def test_runs_table_has_a_tags_column():
    [row] = runs_table([run_info(tags=["a", "b"])], {})
    assert len(row) == len(RUNS_TABLE_HEADERS)
    assert row[RUNS_TABLE_HEADERS.index("tags")] == "a, b"
