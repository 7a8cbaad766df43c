"""The worker trains a tiny local Llama with TRL for real, through the launcher's subprocess, and records into a
real SQLite store: metrics every step, groups with TRL's advantages, a failing rule, a cancel, a killed worker,
and the headless ``grpo-dashboard train`` command. The two-step run, the failing rule and the killed worker run on
PostgreSQL too (tests/backends.py)."""

from __future__ import annotations

import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo_core.submit.queue import submit_run
from grpo_core.training.cpu_share import usable_cores
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import REWARDS, tiny_config, wait_for
from tests.integration.gates import Gate


@pytest.mark.backends("sqlite", "postgres")
def test_worker_trains_two_steps_and_records_everything(store, settings, tiny_model_dir):
    run = submit_run(store, tiny_config(tiny_model_dir)).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=240), "the run did not finish"

    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    assert final.current_step == 2

    points = store.metrics_since(run.id)
    by_step: dict[int, dict[str, float | None]] = {}
    for point in points:
        by_step.setdefault(point.step, {})[point.key] = point.value
    assert sorted(by_step) == [1, 2]
    for step in (1, 2):
        keys = by_step[step]
        for key in ("reward", "reward_std", "kl", "loss", "entropy", "completions/mean_length",
                    "frac_reward_zero_std", "rewards/numeric_answer/mean", "rewards/format_regex/mean",
                    "rewards/length/mean"):
            assert key in keys, f"step {step} lacks {key}"
        assert keys["kl"] is not None  # beta > 0: the KL term is computed

    assert store.group_steps(run.id) == [1, 2]
    for step in (1, 2):
        groups = store.groups_at(run.id, step)
        assert len(groups) == 2  # 8 completions per step / 4 per group
        for group in groups:
            assert 0 <= group.row_index < 400
            assert "answer" in group.extra
            assert "What is" in group.prompt
            assert [c.index for c in group.completions] == [0, 1, 2, 3]
            advantages = [c.advantage for c in group.completions]
            assert all(a is not None for a in advantages)
            assert abs(sum(advantages)) < 1e-3
            for completion in group.completions:
                assert set(completion.rewards) == {"numeric_answer", "format_regex", "length"}
                expected = (completion.rewards["numeric_answer"] * 1.0 + completion.rewards["format_regex"] * 0.5
                            + completion.rewards["length"] * 0.25)
                assert math.isclose(completion.total_reward, expected, abs_tol=1e-6)
                assert 1 <= completion.num_tokens <= 12
            totals = [c.total_reward for c in group.completions]
            if max(totals) - min(totals) > 1e-6:  # TRL's (r - mean) / (std + 1e-4): the best gets the top advantage
                best = max(group.completions, key=lambda c: c.total_reward)
                assert best.advantage == max(advantages)

    folder = Path(final.run_dir)
    assert (folder / "config.yaml").is_file()
    assert (folder / "train.log").read_text().count("training 2 steps") == 1
    assert (folder / "adapter" / "adapter_config.json").is_file()
    # a CPU run's worker keeps torch's threads by default (grpo_core.training.cpu_share), unless OpenMP is told otherwise
    if not os.environ.get("OMP_NUM_THREADS"):
        assert 1 <= final.provenance["device"]["threads"] <= usable_cores()


@pytest.mark.backends("sqlite", "postgres")
def test_rule_that_raises_is_recorded_as_its_errors_and_the_run_goes_on(store, settings, tiny_model_dir, tmp_path):
    """A reward function that raises is its own outcome (None rewards, ``rewards/<fn>/errors``, a mark per
    completion), not a 0 and not a crash of the run."""
    plugin = tmp_path / "flaky_reward.py"
    plugin.write_text(
        "def flaky(completions, trainer_state=None, **kwargs):\n"
        "    if trainer_state is not None and trainer_state.global_step >= 1:\n"
        "        raise RuntimeError('reward service unavailable')\n"
        "    return [0.5] * len(completions)\n"
    )
    config = tiny_config(
        tiny_model_dir,
        max_steps=3,
        rewards=[REWARDS[1], {"rule": "plugin", "weight": 1.0, "params": {"target": f"{plugin}:flaky"}}],
    )
    run = submit_run(store, config).run
    launcher = Launcher(store, settings)
    assert launcher.wait_idle(timeout_s=240)
    final = store.get_run(run.id)
    assert final.status == RunStatus.COMPLETED, final.error
    errors = {p.step: p.value for p in store.metrics_since(run.id, keys=["rewards/flaky/errors"])}
    assert errors[1] == 0 and errors[2] > 0 and errors[3] > 0, errors
    assert store.group_steps(run.id) == [1, 2, 3]
    marked = [
        text
        for group in store.groups_at(run.id, 2)
        for per_rule in group.extra.get("reward_errors", {}).values()
        for text in per_rule.values()
    ]
    assert marked and all("reward service unavailable" in text for text in marked)
    assert not any(group.extra.get("reward_errors") for group in store.groups_at(run.id, 1))


def test_cancel_stops_a_running_run_at_a_step_boundary(store, settings, tiny_model_dir):
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=500)).run
    launcher = Launcher(store, settings)
    wait_for(lambda: store.get_run(run.id).current_step >= 1, 240, launcher=launcher)
    launcher.cancel(run.id)
    requested = time.monotonic()
    wait_for(lambda: store.get_run(run.id).status.is_final, 120, launcher=launcher)
    final = store.get_run(run.id)
    assert final.status == RunStatus.CANCELLED
    assert final.error is None  # it stopped by itself, not by force
    assert 1 <= final.current_step < 500
    steps = sorted({p.step for p in store.metrics_since(run.id)})
    assert steps == list(range(1, steps[-1] + 1))  # contiguous, nothing lost
    assert time.monotonic() - requested < 120


@pytest.mark.backends("sqlite", "postgres")
def test_killed_worker_is_marked_failed_with_its_log_tail(store, settings, tiny_model_dir, tmp_path):
    gate = Gate.create(tmp_path, at_step=1)  # step 1 wholly recorded, step 2 held before its scoring
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=500, rewards=[*REWARDS, gate.rule(0.1)])).run
    launcher = Launcher(store, settings)
    gate.wait_reached(240, launcher=launcher)
    pid = store.get_run(run.id).worker_pid
    os.killpg(pid, signal.SIGKILL)
    wait_for(lambda: store.get_run(run.id).status.is_final, 30, launcher=launcher)
    final = store.get_run(run.id)
    assert final.status == RunStatus.FAILED
    assert "exited without reporting" in final.error
    assert "training 500 steps" in final.error  # the log's tail is attached
    assert store.group_steps(run.id)[0] == 1  # steps before the crash stay


def test_headless_train_command_records_into_the_same_store(settings, tiny_model_dir, tmp_path):
    config = tiny_config(tiny_model_dir, max_steps=1, name="headless", max_completion_length=8)
    path = tmp_path / "run.yaml"
    path.write_text(config.to_yaml())
    result = subprocess.run(
        [sys.executable, "-m", "app", "train", str(path), "--data-dir", str(settings.data_dir), "--db",
         settings.db_url],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "grpo-dashboard train: warning: max_completion_length below 16 tokens" in result.stdout  # submit_run's warnings
    from storage import Store

    store = Store(settings.db_url)
    try:
        runs = [r for r in store.list_runs() if r.name == "headless"]
        assert len(runs) == 1 and runs[0].status == RunStatus.COMPLETED
        assert store.group_steps(runs[0].id) == [1]
    finally:
        store.close()


@pytest.mark.parametrize("bad", ["missing.yaml", "not-yaml"])
def test_headless_train_rejects_bad_configs(settings, tmp_path, bad):
    path = tmp_path / "run.yaml"
    if bad == "not-yaml":
        path.write_text("model: [unclosed\n")
    result = subprocess.run(
        [sys.executable, "-m", "app", "train", str(path), "--data-dir", str(settings.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "run.yaml" in result.stderr


def test_headless_train_refuses_a_bad_max_steps_override(settings, tiny_model_dir, tmp_path):
    """`--max-steps 0` is validated like the file's own value, not silently ignored."""
    path = tmp_path / "run.yaml"
    path.write_text(tiny_config(tiny_model_dir).to_yaml())
    result = subprocess.run(
        [sys.executable, "-m", "app", "train", str(path), "--max-steps", "0", "--data-dir", str(settings.data_dir)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert "max_steps" in result.stderr and "--max-steps" in result.stderr
