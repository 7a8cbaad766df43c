"""A 4-point sweep of the tiny local Llama trains for real through the launcher, two runs at a time
(``max_concurrent_runs`` 2): every run completes with its steps recorded, carries the sweep's id and tag, and its
stored config holds its point's values; never more than two train at once. The headless ``grpo-dashboard sweep``
command does the same from a run config's ``sweep:`` block."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import yaml

from grpo_core.submit.sweeps import REWARD_KEY, submit_sweep
from grpo_core.training.launcher import Launcher
from storage import RunStatus, Store
from tests.helpers import REWARDS, tiny_config
from tests.integration.gates import Gate

GRID = {"learning_rate": [1e-3, 1e-2], "beta": [0.0, 0.04]}
POINTS = [(1e-3, 0.0), (1e-3, 0.04), (1e-2, 0.0), (1e-2, 0.04)]


def test_a_four_point_sweep_completes_two_runs_at_a_time(store, settings, tiny_model_dir):
    launched = submit_sweep(store, tiny_config(tiny_model_dir, max_steps=1, name="grid"), GRID)
    sweep, run_ids = launched.sweep, [run.id for run in launched.runs]
    launcher = Launcher(store, settings.with_overrides(max_concurrent_runs=2))

    launcher.tick()
    statuses = [store.get_run(run_id).status for run_id in run_ids]
    assert statuses == [RunStatus.RUNNING] * 2 + [RunStatus.QUEUED] * 2  # oldest first, two at a time
    most_running = 2
    deadline = time.monotonic() + 600
    while time.monotonic() < deadline:
        launcher.tick()
        runs = store.sweep_runs(sweep.id)
        most_running = max(most_running, sum(r.status == RunStatus.RUNNING for r in runs))
        if all(r.status.is_final for r in runs):
            break
        time.sleep(0.5)
    assert most_running == 2

    runs = store.sweep_runs(sweep.id)
    assert [r.id for r in runs] == run_ids
    for run, (learning_rate, beta) in zip(runs, POINTS, strict=True):
        assert run.status == RunStatus.COMPLETED, run.error
        assert run.sweep_id == sweep.id and run.tags == [f"sweep:{sweep.id}"]
        assert (run.config["learning_rate"], run.config["beta"]) == (learning_rate, beta)
        assert run.name == f"grid · learning_rate={learning_rate:g} beta={beta:g}"
        assert store.group_steps(run.id) == [1]
        with open(f"{run.run_dir}/config.yaml", encoding="utf-8") as handle:  # the worker's own copy of the config
            written = yaml.safe_load(handle)
        assert (written["learning_rate"], written["beta"]) == (learning_rate, beta)
    summary = store.final_and_best(run_ids, REWARD_KEY)
    assert set(summary) == set(run_ids) and all(final is not None for final, _ in summary.values())


def test_headless_sweep_command_trains_every_point(settings, tiny_model_dir, tmp_path):
    config = tiny_config(tiny_model_dir, max_steps=1, name="headless-sweep").model_dump(mode="json")
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**config, "sweep": {"seed": [1, 2]}}, sort_keys=False))
    result = subprocess.run(
        [sys.executable, "-m", "app", "sweep", str(path), "--data-dir", str(settings.data_dir), "--db",
         settings.db_url, "--max-concurrent-runs", "2"],
        capture_output=True, text=True, timeout=400,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = [line.split("\t") for line in result.stdout.strip().splitlines()[-3:]]
    assert table[0] == ["run", "status", "step", "seed", "final reward", "best reward"]
    assert [(row[1], row[2], row[3]) for row in table[1:]] == [("completed", "1/1", "1"), ("completed", "1/1", "2")]
    store = Store(settings.db_url)
    try:
        (sweep,) = store.list_sweeps()
        assert [r.config["seed"] for r in store.sweep_runs(sweep.id)] == [1, 2]
    finally:
        store.close()


def test_headless_sweep_cancels_its_runs_on_sigterm(settings, tiny_model_dir, tmp_path):
    gate = Gate.create(tmp_path, at_step=1)  # the first point holds after step 1 (recorded), step 2 in progress
    config = tiny_config(tiny_model_dir, max_steps=5, name="stopped-sweep", rewards=[*REWARDS, gate.rule(0.1)])
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump({**config.model_dump(mode="json"), "sweep": {"seed": [1, 2]}}, sort_keys=False))
    command = [sys.executable, "-m", "app", "sweep", str(path), "--data-dir", str(settings.data_dir), "--db",
               settings.db_url, "--max-concurrent-runs", "1"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        gate.wait_reached(240)
        process.send_signal(signal.SIGTERM)  # as `kill` or a job scheduler stops the command
        gate.release()
        out, err = process.communicate(timeout=240)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 1, err[-3000:]  # not every run completed
    assert "interrupted; cancelling the sweep's runs" in err
    store = Store(settings.db_url)
    try:
        (sweep,) = store.list_sweeps()
        first, second = store.sweep_runs(sweep.id)
        assert first.status == RunStatus.CANCELLED and 1 <= first.current_step < 5  # stopped at a step, not killed
        assert second.status == RunStatus.CANCELLED and second.current_step == 0  # never started
    finally:
        store.close()
    assert "cancelled" in out
