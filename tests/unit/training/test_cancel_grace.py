"""A cancelled run's grace follows its own measured step time, a forced stop says exactly what it kept, and Resume is
offered only where there is a checkpoint to resume from."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC

from app.tabs.runs.controls import resume_button
from grpo_core.runs.actions import resume_state
from grpo_core.runs.files import output_dir, run_dir
from grpo_core.training.cancel_grace import FORCED_STOP, STEP_FACTOR, cancel_deadline, forced_stop_message
from grpo_core.training.launcher import Launcher
from storage import RunStatus


def _running(store, steps: int = 0, step_s: float = 0.0, ended_ago_s: float = 0.0):
    """A running run whose ``steps`` steps each took ``step_s`` s, the latest logged ``ended_ago_s`` s ago."""
    run = store.create_run(name="r", config={}, dataset_id=None, max_steps=50)
    store.claim_run(run.id, worker_pid=os.getpid())
    now = time.time()
    for step in range(1, steps + 1):
        wall = now - ended_ago_s - (steps - step) * step_s
        store.record_step(run.id, step, metrics={"reward": 0.5, "step_time": step_s * 0.9}, wall_time=wall)
    return store.get_run(run.id)


def _checkpoint(settings, run, step: int) -> None:
    folder = output_dir(run_dir(settings, run)) / f"checkpoint-{step}"
    folder.mkdir(parents=True)
    (folder / "adapter_config.json").write_text("{}")
    (folder / "trainer_state.json").write_text(json.dumps({"global_step": step}))


def test_the_grace_covers_a_step_longer_than_it_by_the_runs_own_step_time(store):
    run = _running(store, steps=3, step_s=244.0, ended_ago_s=30.0)  # the code recipe on a loaded machine
    now = time.time()
    deadline = cancel_deadline(store, run, grace_s=60.0, cancel_seen_at=now)
    assert deadline.longest_step_s is not None and deadline.longest_step_s >= 240
    # not before the step in progress ran STEP_FACTOR times the longest step (plus the grace for the save)
    assert deadline.at >= now - 30.0 + STEP_FACTOR * 240
    assert f"allowed {STEP_FACTOR:g}x that" in deadline.describe()


def test_fast_steps_keep_the_configured_grace(store):
    run = _running(store, steps=3, step_s=1.0, ended_ago_s=0.5)
    now = time.time()
    deadline = cancel_deadline(store, run, grace_s=60.0, cancel_seen_at=now)
    assert now + 60.0 <= deadline.at <= now + 60.0 + STEP_FACTOR * 1.0


def test_before_any_step_the_first_step_gets_as_long_again_as_it_has_run(store):
    run = _running(store)
    moment = run.started_at
    started = (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    deadline = cancel_deadline(store, run, grace_s=1.0, cancel_seen_at=started + 100.0)
    assert deadline.longest_step_s is None and deadline.at >= started + 100.0 * (1 + STEP_FACTOR)


def test_the_launcher_does_not_kill_a_run_inside_its_measured_step_time(store, settings):
    run = _running(store, steps=2, step_s=30.0, ended_ago_s=1.0)
    launcher = Launcher(store, settings.with_overrides(cancel_grace_s=0.1))
    launcher.cancel(run.id)
    time.sleep(0.3)
    launcher.tick()  # past the 0.1 s grace, well inside 3 x 30 s of the step in progress: left to finish it
    after = store.get_run(run.id)
    assert after.status == RunStatus.RUNNING and after.cancel_requested


def test_a_forced_stop_says_what_it_kept(store, settings):
    run = _running(store, steps=5, step_s=1.0)
    message = forced_stop_message(settings, run)
    assert message.startswith(FORCED_STOP)
    assert "no checkpoint was saved" in message and "steps 1-5 are recorded" in message
    _checkpoint(settings, run, 4)
    message = forced_stop_message(settings, run)
    assert "kept checkpoint-4 (steps 1-4)" in message and "Resume continues from" in message
    assert "steps 5-5, recorded after it, are dropped" in message and "in the middle of a step" in message


def test_resume_is_offered_only_with_a_checkpoint(store, settings):
    run = _running(store, steps=2, step_s=1.0)
    store.finish_run(run.id, RunStatus.CANCELLED, error="stopped")
    run = store.get_run(run.id)
    offered, why = resume_state(settings, run)
    assert not offered and "no checkpoint to resume from" in why
    _checkpoint(settings, run, 2)
    offered, why = resume_state(settings, run)
    assert offered and "checkpoint-2" in why
    running = _running(store, steps=1, step_s=1.0)
    assert resume_state(settings, running) == (False, f"Run #{running.id} is running: only a cancelled or failed "
                                                      "run can be resumed.")
    assert resume_state(settings, None)[0] is False


def test_the_resume_button_follows_the_checkpoint(ctx):
    run = _running(ctx.store, steps=2, step_s=1.0)
    ctx.store.finish_run(run.id, RunStatus.FAILED, error="boom")
    assert resume_button(ctx, run.id)["interactive"] is False
    _checkpoint(ctx.settings, ctx.store.get_run(run.id), 2)
    assert resume_button(ctx, run.id)["interactive"] is True
    assert resume_button(ctx, None)["interactive"] is False
