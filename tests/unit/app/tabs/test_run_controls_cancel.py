"""Cancel applies only while a run can be stopped: enabled for a queued or running run, disabled (with the reason
said on a click) for a completed, failed or cancelled one and while a cancel is already under way; the empty Runs tab's
card is HTML (no Markdown asterisks)."""

from __future__ import annotations

import pytest

from app.tabs.runs.controls import cancel_button, cancel_selected
from app.views.runs import NO_RUNS_HTML, cancel_state
from grpo_core.access.ownership import Actor
from storage import RunStatus

ME = Actor.from_login(None, ())



def _run(ctx, status: RunStatus):
    run = ctx.store.create_run(name=f"run-{status.value}", config={}, dataset_id=None, max_steps=2)
    if status != RunStatus.QUEUED:
        ctx.store.update_run(run.id, status=status)
    return ctx.store.get_run(run.id)


@pytest.mark.parametrize("status", [RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.CANCELLED])
def test_a_finished_run_cannot_be_cancelled_and_a_click_says_why(ctx, status):
    run = _run(ctx, status)
    assert cancel_state(run) == (False, f"Run #{run.id} is {status.value}: there is nothing to cancel.")
    assert cancel_button(ctx, run.id)["interactive"] is False
    kind, message, enabled = cancel_selected(ctx, run.id, ME)
    assert (kind, enabled) == ("warning", False) and "nothing to cancel" in message
    assert ctx.store.get_run(run.id).status == status and not ctx.store.get_run(run.id).cancel_requested


def test_a_queued_run_is_cancelled_at_once_then_the_button_turns_off(ctx):
    run = _run(ctx, RunStatus.QUEUED)
    assert cancel_state(run) == (True, "") and cancel_button(ctx, run.id)["interactive"] is True
    kind, message, enabled = cancel_selected(ctx, run.id, ME)
    assert kind == "info" and "cancelled before it started" in message and not enabled
    assert ctx.store.get_run(run.id).status == RunStatus.CANCELLED
    assert cancel_button(ctx, run.id)["interactive"] is False


def test_a_running_run_stops_once(ctx):
    run = _run(ctx, RunStatus.RUNNING)
    assert cancel_button(ctx, run.id)["interactive"] is True
    kind, message, _ = cancel_selected(ctx, run.id, ME)
    assert kind == "info" and "end of its current step" in message
    update = cancel_button(ctx, run.id)
    assert update["interactive"] is False and update["value"] == "Cancelling…"
    kind, message, _ = cancel_selected(ctx, run.id, ME)  # a second click: said, not silent
    assert kind == "warning" and "already stopping" in message


def test_no_run_or_a_deleted_run(ctx):
    assert cancel_button(ctx, None)["interactive"] is False
    assert cancel_selected(ctx, None, ME) == ("warning", "Choose a run first.", False)
    assert cancel_selected(ctx, 999, ME)[0] == "warning"


def test_the_empty_runs_card_is_html_without_markdown():
    assert "**" not in NO_RUNS_HTML and "<b>Launch</b>" in NO_RUNS_HTML
