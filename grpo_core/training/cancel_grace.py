"""How long a cancelled run may take to stop by itself, and what a forced stop kept.

A cancelled worker finishes the step it is in, saves a checkpoint and exits (:mod:`grpo_core.engine.recorder`). A
fixed grace period breaks that promise whenever a step takes longer than the grace: the code recipe's steps take
45-52 s on quiet cores and 244 s on a loaded machine, and a 60 s grace killed such a run mid-step with nothing
saved. So the grace follows the run's own measured step time: the launcher stops a cancelled run by force only once
both ``cancel_grace_s`` has passed since the cancel was first seen and the step in progress has run
:data:`STEP_FACTOR` times the longest of the latest :data:`STEP_WINDOW` measured steps (plus ``cancel_grace_s`` for
the checkpoint save). A step's duration is read from the store: TRL's ``step_time`` where logged, and the wall-clock
gap between consecutive logged ``reward`` points (which also counts scoring and logging). Before any step is logged
the first step (model loading included) has run from the worker's start to the cancel; it gets that long again,
:data:`STEP_FACTOR` times.

Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from grpo_core.runs.files import last_checkpoint, run_dir
from grpo_core.settings import Settings
from storage import RunInfo, Store

#: A step in progress may take this many times the longest recent step before a cancelled run is stopped by force: a
#: machine that gets busier mid-run (the code recipe: 45 s a step on quiet cores, 244 s loaded) slows a step several
#: fold, and a kill mid-step loses everything since the last checkpoint.
STEP_FACTOR = 3.0
#: The latest this many logged steps are measured.
STEP_WINDOW = 5
#: What a forced stop says before what it kept (``RunInfo.error`` starts with it).
FORCED_STOP = "stopped by force after the cancel grace period"


@dataclass(frozen=True)
class CancelDeadline:
    """When a cancelled run is stopped by force: ``at`` (seconds since the epoch), with what it was computed from:
    ``longest_step_s`` (``None``: no step logged yet, ``first_step_s`` is how long the first one had run) and
    ``last_step_at`` (when the latest step was logged, or the worker started)."""

    at: float
    longest_step_s: float | None
    last_step_at: float
    first_step_s: float | None = None

    def describe(self) -> str:
        """``"a step takes up to 12 s here; waits until 3 x that after the latest step"``, for the log."""
        if self.longest_step_s is None:
            return (f"no step logged yet; the first had run {self.first_step_s or 0:.0f} s at the cancel, allowed "
                    f"{STEP_FACTOR:g}x that")
        return f"the longest of the latest steps took {self.longest_step_s:.0f} s, allowed {STEP_FACTOR:g}x that"


def _epoch(moment: datetime | None) -> float | None:
    if moment is None:
        return None
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def step_durations(store: Store, run: RunInfo) -> tuple[list[float], float | None]:
    """The measured durations (seconds) of the run's latest :data:`STEP_WINDOW` logged steps, and when its latest step
    was logged (seconds since the epoch; ``None``: no step logged). Read from ``step_time`` and from the wall-clock
    gaps between ``reward`` points (per step when several steps lie between two logged points)."""
    after = max(-1, run.current_step - STEP_WINDOW - 1)
    points = store.metrics_since(run.id, after_step=after, keys=["step_time", "reward"])
    durations = [p.value for p in points if p.key == "step_time" and p.value is not None and p.value > 0]
    rewards = sorted((p.step, p.wall_time) for p in points if p.key == "reward")
    for (s1, w1), (s2, w2) in zip(rewards, rewards[1:], strict=False):
        if s2 > s1 and w2 >= w1:
            durations.append((w2 - w1) / (s2 - s1))
    started = _epoch(run.started_at)
    if rewards and rewards[0][0] == 1 and started is not None and rewards[0][1] >= started:
        durations.append(rewards[0][1] - started)  # step 1 with the model's loading: an upper bound
    return durations, (rewards[-1][1] if rewards else None)


def cancel_deadline(store: Store, run: RunInfo, grace_s: float, cancel_seen_at: float) -> CancelDeadline:
    """When the cancelled ``run`` is stopped by force (module docstring): never before ``cancel_seen_at + grace_s``
    (seconds since the epoch), nor before the step in progress has run :data:`STEP_FACTOR` times the longest measured
    step plus ``grace_s`` for the checkpoint save."""
    durations, last_logged = step_durations(store, run)
    started = _epoch(run.started_at) or cancel_seen_at
    floor = cancel_seen_at + grace_s
    if not durations:
        first = max(0.0, cancel_seen_at - started)
        return CancelDeadline(at=max(floor, started + (1 + STEP_FACTOR) * first + grace_s), longest_step_s=None,
                              last_step_at=started, first_step_s=first)
    longest = max(durations)
    since = last_logged if last_logged is not None else started
    return CancelDeadline(at=max(floor, since + STEP_FACTOR * longest + grace_s), longest_step_s=longest,
                          last_step_at=since)


def forced_stop_message(settings: Settings, run: RunInfo, mid_step: bool = True) -> str:
    """:data:`FORCED_STOP` and exactly what was kept: the checkpoint Resume continues from (and the recorded steps
    after it, which a resume drops and trains again), or that no checkpoint exists (the recorded steps stay readable,
    Resume is not offered). ``mid_step``: the launcher killed the worker in a step (else the worker was found gone
    after a cancel, e.g. stopped by Ray, and where it was is not known)."""
    try:
        checkpoint = last_checkpoint(run_dir(settings, run))
    except (OSError, ValueError):
        checkpoint = None
    steps = run.current_step
    where = ", in the middle of a step" if mid_step else ""
    recorded = f"steps 1-{steps} are recorded in the store and stay readable" if steps else "no step was recorded"
    if checkpoint is None:
        return (f"{FORCED_STOP}{where}: no checkpoint was saved, so there is nothing to resume from; {recorded}. "
                "Launch it again to train.")
    folder = Path(checkpoint.path).name
    dropped = (f"; steps {checkpoint.step + 1}-{steps}, recorded after it, are dropped and trained again on resume"
               if steps > checkpoint.step else "")
    return (f"{FORCED_STOP}{where}: kept {folder} (steps 1-{checkpoint.step}), which Resume continues from"
            f"{dropped}.")
