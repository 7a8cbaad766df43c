"""Cancel keeps its promise when a step takes longer than the cancel grace period: the tiny Llama trains for real with
a reward plugin that takes 3 s a call (a slow rule, a loaded machine), under a 1 s grace. The cancel, asked while step
2 is being scored, lets step 2 finish and save its checkpoint (the grace follows the run's measured step time), and
Resume continues from it to the end with every step recorded once."""

from __future__ import annotations

import time
from pathlib import Path

from grpo_core.runs.actions import resume_run, resume_state
from grpo_core.runs.files import last_checkpoint
from grpo_core.submit.queue import submit_run
from grpo_core.training.launcher import Launcher
from storage import RunStatus
from tests.helpers import REWARDS, assert_steps_recorded_once, tiny_config, wait_for, wait_until_worker_gone

SLOW_S = 3.0
GRACE_S = 1.0

_SLOW = """\
import time


def slow(completions, trainer_state=None, **kwargs):
    if trainer_state is not None and trainer_state.global_step >= 1:
        with open({reached!r}, "a") as marker:
            marker.write(f"{{trainer_state.global_step}}\\n")
    time.sleep({slow_s})
    return [0.5] * len(completions)
"""


def test_a_cancel_during_a_step_longer_than_the_grace_keeps_a_checkpoint_and_resumes(
    store, settings, tiny_model_dir, tmp_path
):
    reached = tmp_path / "reached"
    plugin = tmp_path / "slow.py"
    plugin.write_text(_SLOW.format(reached=str(reached), slow_s=SLOW_S))
    rule = {"rule": "plugin", "weight": 1.0, "params": {"target": f"{plugin}:slow"}}
    run = submit_run(store, tiny_config(tiny_model_dir, max_steps=3, rewards=[REWARDS[1], rule])).run
    launcher = Launcher(store, settings.with_overrides(cancel_grace_s=GRACE_S))
    wait_for(reached.exists, 240, interval_s=0.1, launcher=launcher)  # step 2 is being scored (3 s)
    launcher.cancel(run.id)
    asked = time.monotonic()
    wait_for(lambda: store.get_run(run.id).status.is_final, 120, interval_s=0.1, launcher=launcher)
    took = time.monotonic() - asked
    final = store.get_run(run.id)
    print(f"cancel during a {SLOW_S:g} s scoring under a {GRACE_S:g} s grace: stopped in {took:.1f} s")

    assert final.status == RunStatus.CANCELLED
    assert final.error is None, final.error  # it stopped by itself at the step's end, not by force
    assert took > GRACE_S  # the step outlasted the grace
    checkpoint = last_checkpoint(final.run_dir)
    assert checkpoint is not None and checkpoint.step == final.current_step >= 2
    offered, why = resume_state(settings, final)
    assert offered and f"checkpoint-{checkpoint.step}" in why

    wait_until_worker_gone(store, launcher, run.id)
    queued = resume_run(store, settings, run.id)
    assert Path(queued.resume_from).name == f"checkpoint-{checkpoint.step}"
    wait_for(lambda: store.get_run(run.id).status.is_final, 240, interval_s=0.2, launcher=launcher)
    resumed = store.get_run(run.id)
    assert resumed.status == RunStatus.COMPLETED, resumed.error
    assert_steps_recorded_once(store, run.id, steps=3)
