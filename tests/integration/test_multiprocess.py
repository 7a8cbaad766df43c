"""A run with ``num_processes: 2`` trains through ``accelerate launch`` (torchrun; gloo on the CPU) with the tiny
Llama, and only the main process writes: every step is recorded once, with the groups of both processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from sqlalchemy import text

from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus, Store
from tests.helpers import tiny_config


def test_two_processes_record_the_groups_of_both(store, settings, tiny_model_dir):
    config = tiny_config(tiny_model_dir, num_processes=2, device="cpu", max_steps=2)
    assert config.prompts_per_step == 4  # 8 completions per process, groups of 4, two processes
    run = submit_run(store, config).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=400), "the run did not finish"

    final = store.get_run(run.id)
    log = Path(final.log_path).read_text(errors="replace")
    assert final.status == RunStatus.COMPLETED, (final.error, log[-3000:])
    assert final.current_step == 2
    assert "accelerate" not in (final.error or "")
    assert log.count("training 2 steps") == 1  # only the main process reports

    with store.engine.connect() as conn:
        counts = conn.execute(
            text("SELECT step, key, COUNT(*) FROM metrics WHERE run_id = :r GROUP BY step, key"), {"r": run.id}
        ).all()
    assert {step for step, _, _ in counts} == {1, 2}
    assert all(n == 1 for _, _, n in counts)  # no rank wrote a second copy
    assert store.group_steps(run.id) == [1, 2]
    for step in (1, 2):
        groups = store.groups_at(run.id, step)
        assert len(groups) == config.prompts_per_step  # the prompts of both processes
        for group in groups:
            assert [c.index for c in group.completions] == [0, 1, 2, 3]
            assert all(c.advantage is not None for c in group.completions)
            assert 0 <= group.row_index < 400


def test_headless_train_runs_two_processes_like_the_dashboard(settings, tiny_model_dir, tmp_path):
    """`grpo-dashboard train` with num_processes 2 starts accelerate as the launcher does: two processes of 4
    completions (one group of G=4 each) record two groups per step, not the one group of a single process."""
    config = tiny_config(tiny_model_dir, num_processes=2, device="cpu", max_steps=2, per_device_train_batch_size=4,
                         name="headless-2p")
    assert config.prompts_per_step == 2
    path = tmp_path / "run.yaml"
    path.write_text(config.to_yaml())
    result = subprocess.run(
        [sys.executable, "-m", "app", "train", str(path), "--data-dir", str(settings.data_dir), "--db",
         settings.db_url],
        capture_output=True, text=True, timeout=400,
    )
    assert result.returncode == 0, (result.stdout[-3000:], result.stderr[-3000:])
    assert "2 processes (accelerate launch)" in result.stdout
    assert "training 2 steps" in result.stdout  # the worker's log reaches the terminal
    assert "accelerate.commands.launch --multi_gpu --main_process_port" in result.stderr  # the launcher's command
    store = Store(settings.db_url)
    try:
        [run] = [r for r in store.list_runs() if r.name == "headless-2p"]
        assert run.status == RunStatus.COMPLETED and run.current_step == 2
        assert store.group_steps(run.id) == [1, 2]
        for step in (1, 2):
            groups = store.groups_at(run.id, step)
            assert len(groups) == 2  # one group per process, both recorded by rank 0
            for group in groups:
                assert [c.index for c in group.completions] == [0, 1, 2, 3]
                assert all(c.advantage is not None for c in group.completions)
    finally:
        store.close()

