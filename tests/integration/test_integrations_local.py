"""A user's own TRL script (tests/integration/scripts/trl_grpo_script.py: its own model loading, dataset and reward
functions) records into a local store with ``DashboardCallback``: everything a dashboard run has; Cancel in the
dashboard stops it at its next step; the launcher leaves it alone; a crash marks it failed; Resume is refused."""

from __future__ import annotations

import signal

import pytest

from grpo_core.runs.actions import RunActionError, resume_run
from grpo_core.runs.files import list_checkpoints
from grpo_core.runs.script_runs import is_script_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.integration.scripts.runner import check_recorded_run, run_script, start_script, wait_until


def test_script_records_every_step_into_a_data_directory(settings, store, tiny_model_dir, tmp_path):
    run_script(tiny_model_dir, tmp_path / "out", tmp_path / "log.txt", target=str(settings.data_dir), steps=2,
               save_steps=1)
    [run] = store.list_runs()
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.name == "my script run" and run.tags == ["script"] and is_script_run(run)
    assert run.current_step == 2 and run.max_steps == 2
    check_recorded_run(store, run.id, steps=2)
    # the Try and Export panels find the script's checkpoints in the run folder
    assert [c.step for c in list_checkpoints(run.run_dir)] == [1, 2]


def test_cancel_in_the_dashboard_stops_the_script_and_the_launcher_leaves_it_alone(settings, store, tiny_model_dir,
                                                                                      tmp_path, monkeypatch):
    monkeypatch.setattr("grpo_core.training.executors.STARTING_GRACE_S", 0.0)  # no grace: a worker would be "gone"
    log = tmp_path / "log.txt"
    process = start_script(tiny_model_dir, tmp_path / "out", log, target=settings.db_url, steps=40, step_sleep=0.5)
    try:
        run = wait_until(lambda: next(iter(store.list_runs()), None), 180, "the run was not created")
        wait_until(lambda: store.get_run(run.id).current_step >= 1, 180, "no step was recorded")
        launcher = Launcher(store, settings)
        launcher.tick()  # a dashboard watching: the script's run is not its worker, not "vanished"
        assert store.get_run(run.id).status == RunStatus.RUNNING
        # "stop now" cannot kill a process that is not the dashboard's: it asks for the cooperative stop
        assert launcher.stop_now(store.get_run(run.id)) is False
        assert store.get_run(run.id).cancel_requested
        assert process.wait(timeout=120) == 0, log.read_text()[-3000:]
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
            process.wait()
    final = store.get_run(run.id)
    assert final.status == RunStatus.CANCELLED, (final.status, final.error)
    assert final.current_step < 40
    steps = sorted({p.step for p in store.metrics_since(run.id)})
    assert steps == list(range(1, steps[-1] + 1)) and steps[-1] <= final.current_step
    with pytest.raises(RunActionError, match="recorded from a script"):  # re-run the script instead
        resume_run(store, settings, run.id)


def test_a_script_that_crashes_leaves_the_run_failed(settings, store, tiny_model_dir, tmp_path):
    # a reward function that raises at the second step: TRL's train() raises out of the script
    out = tmp_path / "out"
    process = start_script(tiny_model_dir, out, tmp_path / "log.txt", target=str(settings.data_dir), steps=3,
                           crash_at_step=2)
    process.wait(timeout=300)
    assert process.returncode != 0
    [run] = store.list_runs()
    assert run.status == RunStatus.FAILED
    assert "step 2" in (run.error or ""), run.error
    assert store.group_steps(run.id) == [1]


def test_the_callback_given_to_the_trainer_s_constructor_records_too(settings, store, tiny_model_dir, tmp_path):
    from grpo_core.integrations import DashboardCallback
    from tests.integration.scripts.trl_grpo_script import make_trainer

    callback = DashboardCallback(settings.db_url, name="in-process", keep_columns=["answer"])
    trainer = make_trainer(str(tiny_model_dir), str(tmp_path / "out"), steps=1, callbacks=[callback])
    trainer.train()
    [run] = store.list_runs()
    assert run.id == callback.run_id and run.name == "in-process" and run.status == RunStatus.COMPLETED
    check_recorded_run(store, run.id, steps=1, command="pytest")
