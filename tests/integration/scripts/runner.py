"""Starts tests/integration/scripts/trl_grpo_script.py (a user's own TRL script with DashboardCallback) as a process
of its own, as a user would, and checks what a recorded run holds."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from grpo_core.doctor import diagnose, series_keys
from grpo_core.doctor.findings import series_from_points
from storage import Store
from tests.store_helpers import token_stats_indexes

REPO = Path(__file__).resolve().parents[3]
SCRIPT = Path(__file__).with_name("trl_grpo_script.py")
VLM_SCRIPT = Path(__file__).with_name("trl_vlm_script.py")


def script_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GRPO_")}
    env.update({"PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1", **extra})
    return env


def script_args(model: Path, output_dir: Path, *, target: str | None, steps: int = 2, **options) -> list[str]:
    args = ["--model", str(model), "--output-dir", str(output_dir), "--steps", str(steps)]
    if target is not None:
        args += ["--target", target]
    for name, value in options.items():
        flag = "--" + name.replace("_", "-")
        args += [flag] if value is True else [flag, str(value)]
    return args


def start_script(model: Path, output_dir: Path, log: Path, *, target: str | None, steps: int = 2,
                 launcher: list[str] | None = None, env: dict[str, str] | None = None, script: Path = SCRIPT,
                 **options) -> subprocess.Popen:
    """The script (by default ``trl_grpo_script.py``; ``VLM_SCRIPT``: a vision-language model's) as a child process
    (``launcher``: e.g. ``accelerate launch`` and its flags), its output in ``log``."""
    command = [*(launcher or [sys.executable]), str(script), *script_args(model, output_dir, target=target,
                                                                          steps=steps, **options)]
    handle = open(log, "w")  # noqa: SIM115 - closed with the process by the caller's wait
    return subprocess.Popen(command, cwd=REPO, env=script_env(**(env or {})), stdout=handle,
                            stderr=subprocess.STDOUT)


def run_script(model: Path, output_dir: Path, log: Path, *, timeout_s: float = 300, **kwargs) -> str:
    """Run the script to its end; returns its output. Fails the test when it exits with an error."""
    process = start_script(model, output_dir, log, **kwargs)
    code = process.wait(timeout=timeout_s)
    text = log.read_text()
    assert code == 0, text[-4000:]
    return text


def wait_until(predicate, timeout_s: float, what: str):
    """``predicate()``'s first true value, polled every 0.3 s; fails with ``what`` after ``timeout_s``."""
    import time

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"{what} within {timeout_s} s")


def check_recorded_run(store: Store, run_id: int, *, steps: int, group_size: int = 4,
                       command: str = "trl_grpo_script.py") -> None:
    """Everything a dashboard run has: a metric per TRL key at every step, groups with prompts, completions,
    per-function rewards, totals and TRL's advantages (summing to ~0 per group), the kept column, token values,
    the script's provenance, a config the doctor reads."""
    run = store.get_run(run_id)
    by_step: dict[int, set[str]] = {}
    for point in store.metrics_since(run_id):
        by_step.setdefault(point.step, set()).add(point.key)
    assert sorted(by_step) == list(range(1, steps + 1)), sorted(by_step)
    for keys in by_step.values():
        assert {"reward", "reward_std", "kl", "entropy", "loss", "completions/mean_length", "frac_reward_zero_std",
                "rewards/correct_answer/mean", "rewards/short_reply/mean"} <= keys
    assert store.group_steps(run_id) == list(range(1, steps + 1))
    for step in range(1, steps + 1):
        groups = store.groups_at(run_id, step)
        assert groups
        for group in groups:
            assert "What is" in group.prompt and group.extra.get("answer")
            assert len(group.completions) == group_size
            advantages = [c.advantage for c in group.completions]
            assert all(a is not None for a in advantages) and abs(sum(advantages)) < 1e-3
            for c in group.completions:
                assert set(c.rewards) == {"correct_answer", "short_reply"}
                expected = c.rewards["correct_answer"] * 1.0 + c.rewards["short_reply"] * 0.5
                assert abs(c.total_reward - expected) < 1e-6
                assert c.num_tokens is not None and c.num_tokens >= 1
        assert token_stats_indexes(store, groups[0].id) == list(range(group_size))
    stats = store.token_stats(groups[0].id, 0)
    assert stats is not None and len(stats.pieces) == len(stats.logprobs) >= 1
    origin = run.provenance["recorded_from"]
    assert origin["kind"] == "script" and command in origin["command"] and origin["host"]
    assert origin["grpo_config"]["num_generations"] == group_size and run.provenance["versions"]["trl"]
    assert [(r["name"], r["weight"]) for r in run.config["rewards"]] == [("correct_answer", 1.0), ("short_reply", 0.5)]
    assert run.config["beta"] == 0.04 and run.config["max_completion_length"] == 8
    assert "rewards/correct_answer/mean" in series_keys(run.config)
    findings = diagnose(series_from_points(store.metrics_since(run_id)), store.recent_groups(run_id), run.config)
    assert isinstance(findings, list)
