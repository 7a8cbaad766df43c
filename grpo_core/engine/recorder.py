"""Records a TRL GRPO run into the store as it trains: metrics, sampled groups, heartbeat and cancel.

Two pieces cooperate:

* :class:`~grpo_core.engine.group_capture.RolloutTap` (in :mod:`grpo_core.engine.group_capture`, with the readers of
  TRL's buffers) wraps the first reward function. TRL calls it once per generation batch with the
  ``completion_ids`` and the dataset columns; it passes the token count, truncation flag and dataset row of every
  completion to TRL's ``log_extra`` hook, so that TRL gathers them across processes in the same order as the
  prompts, completions, per-function rewards and advantages it keeps in ``trainer._logs``.
* :class:`RunRecorder`, a ``TrainerCallback``, records at every ``on_log`` all metrics TRL logged (TRL's names:
  ``reward``, ``reward_std``, ``rewards/<fn>/mean``, ``kl``, ``entropy``, ``completions/mean_length``, ...) and the
  groups of the latest generation with **the advantages TRL computed**, and turns a cancel request into
  ``control.should_training_stop`` plus ``control.should_save`` (a checkpoint to resume from). Only the main
  process writes; with several processes it broadcasts its cancel decision so that all stop at the same step.

The callbacks run on the training thread and do not write to the store themselves, nor build what is written: at
each log they copy plain values (the logged scalars, TRL's per-completion buffers, the token capture's list of
tensors) and hand one write to a :class:`~grpo_core.engine.store_writer.StoreWriter`, whose thread builds the groups
(with each token decoded) and records the step with :meth:`storage.Store.record_step`: its metrics, its groups, the
heartbeat (``current_step``) and a read of the cancel flag, in one transaction, with the metric history's last
bucket per key kept in memory (:class:`storage.StepCache`), so a step reads nothing back. What is recorded when:

* **Step N is in the store before step N+1 is scored.** The tap waits, before the first reward function runs, for
  every write submitted so far (the writer had the whole generation of step N+1 to drain them, so the wait is
  usually nil). A step is recorded when its transaction commits: its metrics and groups together or neither; writes
  replace rather than add (a key per step, the groups of a step and split), so no step is ever stored twice.
* **What a kill keeps.** SIGKILL flushes nothing. A worker killed after step N+1's scoring began (the gate of
  ``tests/integration/gates.py`` holds a worker exactly there) keeps steps 1..N whole; killed earlier in step N+1
  (during its generation), it keeps steps 1..N-1 whole and step N whole or not at all, which a resume from the last
  checkpoint drops or trains again.
* **A checkpoint is never ahead of the store.** At a step that saves, the records of the steps it covers are
  flushed before TRL writes the checkpoint (``on_log`` with ``should_save``), so a resume from it never skips an
  unrecorded step.
* **Train end, cancel, crash: everything.** ``on_train_end`` (also after a cancel, SIGTERM included) flushes; the
  worker's crash path calls :meth:`RunRecorder.close`, which flushes what was submitted before the exception.
* **Cancel stays cheap and timely.** A logged step's transaction reads the run's cancel flag, and so does a progress
  beat. Before a scoring, once the writer is idle (the tap waits for it), the recorder also has it read the flag
  (one primary-key read, done while the step scores, runs the backward pass and updates) if the previous such check
  was at least ``progress_interval_s`` ago, and ``on_step_end`` takes the answer (it is nearly always in by then; it
  waits at most ``cancel_wait_s``). With steps longer than ``progress_interval_s``, every step gets that check: a
  cancel requested before the step's scoring stops training at that step, and one requested later (during the
  scoring, backward or optimizer update, or in a step without a scoring, e.g. ``num_iterations`` > 1) at the next
  step, through the flag the step's own transaction (or its progress beat) reads. Faster steps (a GPU's) get the
  check, and the progress beat of a step that logs nothing, once per ``progress_interval_s``: a cancel stops them
  within about ``progress_interval_s`` and a step. The training thread never waits for the cancel check's answer
  behind other writes: it waits at most ``cancel_wait_s``, and only for the check it queued while the writer was
  idle.
* A failed write fails the run: the next callback raises
  :class:`~grpo_core.engine.store_writer.RecordingError` from the write's exception; the failed step's
  transaction leaves nothing of it in the store.
"""

from __future__ import annotations

import atexit
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from transformers import TrainerCallback

from grpo_core.engine.group_capture import (
    RolloutTap,
    environment_reward_names,
    groups_from_trl_logs,
    snapshot_of_trl_logs,
    tail_of_trl_logs,
    tap_tool_mask,
)
from grpo_core.engine.heartbeat import Heartbeat
from grpo_core.engine.store_writer import StoreWrite, StoreWriter
from storage import GroupRecord, StepCache, Store

if TYPE_CHECKING:
    from grpo_core.engine.token_stats import TokenCapture

#: Default least seconds between two cancel checks before a scoring, and between two progress beats of steps that log
#: nothing (the dashboard's pages refresh every 2 s; the heartbeat thread beats every 5 s besides).
PROGRESS_INTERVAL_S = 1.0


def _plain(value: Any) -> Any:
    """A logged value as plain Python: a 0-d tensor or NumPy scalar becomes its number (no tensor is kept)."""
    item = getattr(value, "item", None)
    return item() if callable(item) else value


class RunRecorder(TrainerCallback):
    """Records a GRPO run's metrics and groups at every logging step, through a writer thread.

    Args:
        store: the store.
        run_id: the run being trained.
        reward_names: names of the reward functions, in TRL's order.
        reward_weights: their weights (TRL's ``reward_weights``).
        num_generations: group size G.
        rows: the dataset rows, indexed by ``row_index``, to attach each group's other columns.
        heartbeat: the worker's heartbeat (a :class:`SilentHeartbeat` on non-main processes), whose cancel flag
            stops training, with a checkpoint, at the next step.
        tap: the :class:`RolloutTap` around the first reward function (tells when a new generation happened, and
            holds the scoring of step N+1 until step N is in the store).
        eval_rows: the rows evaluated on, indexed by the eval groups' ``row_index`` (``rows`` for a held-out
            fraction, the eval dataset's rows for ``eval_dataset_id``).
        device_metrics: called at each training step's log, its metrics recorded beside TRL's (the GPU's memory
            and utilisation, :func:`grpo_core.engine.policy_model.gpu_step_metrics`, on CUDA); ``None``: none.
        token_capture: the :class:`~grpo_core.engine.token_stats.TokenCapture` on the trainer, whose per-token
            log-probability, KL and entropy go with the recorded training groups (``None``: none recorded).
        writer: the :class:`~grpo_core.engine.store_writer.StoreWriter` that applies the writes (default: a new
            one on ``store``, its thread started by the first write).
        cancel_wait_s: most seconds ``on_step_end`` waits for the answer to the cancel check submitted before the
            step's scoring (a slower answer lets the cancel take effect one step later).
        progress_interval_s: least seconds between two cancel checks before a scoring, and between two progress
            beats (``current_step``) of steps that log nothing (counted from the last beat, a logged step's
            transaction included). Steps longer than this get both every step; faster ones (a GPU's) once per
            ``progress_interval_s``, so a cancel takes effect within about that long plus a step. A logged step's
            own transaction beats and reads the flag every time, and the last step is always beaten.

    An evaluation (TRL logs its metrics with the ``eval_`` prefix: ``eval_reward``, ``eval_rewards/<fn>/mean``, ...)
    is recorded under TRL's names, and its groups with ``split="eval"``. See the module docstring for what is in
    the store when.

    Raises (from the callbacks, on the training thread):
        RecordingError: a write to the store failed; its exception is the ``__cause__``.
    """

    def __init__(
        self,
        store: Store,
        run_id: int,
        *,
        reward_names: Sequence[str],
        reward_weights: Sequence[float],
        num_generations: int,
        rows: Sequence[dict[str, Any]] | None = None,
        heartbeat: Heartbeat | None = None,
        tap: RolloutTap | None = None,
        eval_rows: Sequence[dict[str, Any]] | None = None,
        device_metrics: Callable[[], dict[str, float]] | None = None,
        token_capture: TokenCapture | None = None,
        writer: StoreWriter | None = None,
        cancel_wait_s: float = 1.0,
        progress_interval_s: float = PROGRESS_INTERVAL_S,
    ) -> None:
        self.store = store
        self.run_id = run_id
        self.reward_names = list(reward_names)
        self.reward_weights = list(reward_weights)
        self.num_generations = num_generations
        self.rows = rows
        self.heartbeat = heartbeat
        self.tap = tap
        self.eval_rows = eval_rows
        self.device_metrics = device_metrics
        self.token_capture = token_capture
        self.writer = writer if writer is not None else StoreWriter(store, name=f"recorder-{run_id}")
        self.cancel_wait_s = cancel_wait_s
        self.progress_interval_s = progress_interval_s
        self._next_check = 0.0  # time.monotonic() from which a scoring gets a cancel check again
        self._next_beat = 0.0  # time.monotonic() from which a step that logs nothing gets a progress beat again
        self.trainer = None
        self.cancelled = False
        self._recorded_generation = 0
        self._eval_batches: list[tuple[int, dict[str, Any]]] = []  # (step, copy of TRL's buffers) per eval batch
        self.step_cache = StepCache()  # the writer thread's: each metric's last history bucket, the last group steps
        self._cancel_check: int | None = None
        self._main_process = True  # on_train_begin says; before it (a test driving the callbacks): the main one
        self.environment_rewards: list[str] = []  # reward functions TRL named after an environment (get_reward)

    def attach(self, trainer) -> None:
        """Give the recorder the trainer whose ``_logs`` buffers hold the latest groups (and tell the tap when the
        trainer evaluates: TRL's own test, ``not model.training``; and to wait for the store before scoring; and
        TRL's tool mask of each multi-turn batch)."""
        self.trainer = trainer
        self.environment_rewards = environment_reward_names(trainer)
        if self.tap is not None:
            tap_tool_mask(trainer, self.tap)
            self.tap.in_eval = lambda: not trainer.model.training
            self.tap.before_scoring = self.before_scoring

    def wait_recorded(self) -> None:
        """Block until every write submitted so far is in the store.

        Raises:
            RecordingError: a write failed.
        """
        self.writer.wait_applied()

    def before_scoring(self) -> None:
        """The tap calls it before each scoring: wait until every write submitted so far is in the store, then (on
        the main process) have the now idle writer read the run's cancel flag while the step scores, runs the backward
        pass and updates, unless the previous check was less than ``progress_interval_s`` ago; ``on_step_end`` takes
        the answer.

        Raises:
            RecordingError: a write failed.
        """
        self.writer.wait_applied()
        if (self._main_process and self.heartbeat is not None and self._cancel_check is None
                and time.monotonic() >= self._next_check):
            self._next_check = time.monotonic() + self.progress_interval_s
            heartbeat = self.heartbeat
            self._cancel_check = self.writer.submit(StoreWrite("cancel check", lambda _store: heartbeat.check_cancel()))

    def flush(self, timeout_s: float | None = None) -> None:
        """Wait until every write submitted so far is in the store (no limit by default).

        Raises:
            RecordingError: a write failed, or the writes did not drain within ``timeout_s`` seconds.
        """
        self.writer.flush(timeout_s)

    def close(self, timeout_s: float = 60.0) -> None:
        """Flush and stop the writer thread (the worker calls it at the end, on cancel and on a crash).

        Raises:
            RecordingError: a write failed, or the writes did not drain within ``timeout_s`` seconds.
        """
        self.writer.close(timeout_s)

    def on_train_begin(self, args, state, control, **kwargs):
        self._main_process = state.is_world_process_zero
        if state.is_world_process_zero:
            self.writer.start()
            if self.heartbeat is not None:
                self.heartbeat.beat(step=state.global_step, phase="training")

    def on_step_end(self, args, state, control, **kwargs):
        if self.heartbeat is not None and state.is_world_process_zero:
            if self._cancel_check is not None:
                self.writer.wait_applied(self._cancel_check, timeout_s=self.cancel_wait_s)
                self._cancel_check = None
            # a logging step beats in its log's transaction; the others every progress_interval_s, and when saving
            if not getattr(control, "should_log", False) and (time.monotonic() >= self._next_beat
                                                              or control.should_save):
                self._next_beat = time.monotonic() + self.progress_interval_s
                self._submit_beat(state.global_step)
        if self._cancel_agreed(args):
            self.cancelled = True
            control.should_training_stop = True
            control.should_save = True  # a checkpoint of this step, for Resume to continue from
        if control.should_save and not control.should_log:
            self.writer.flush(None)  # the checkpoint must not get ahead of the store
        return control

    def on_train_end(self, args, state, control, **kwargs):
        """Training ended (finished or cancelled): the last step beaten, every write in the store before the run is
        marked."""
        if self.heartbeat is not None and state.is_world_process_zero:
            self._submit_beat(state.global_step)
        self.writer.flush(None)
        if getattr(args, "world_size", 1) > 1:
            release_process_group_at_exit()

    def _submit_beat(self, step: int) -> None:
        """Have the writer record a heartbeat with ``step`` as the run's progress (it also reads the cancel flag)."""
        heartbeat = self.heartbeat
        self.writer.submit(StoreWrite(f"step {step} heartbeat", lambda _store: heartbeat.beat(step=step)))

    def _cancel_agreed(self, args) -> bool:
        """Whether the main process saw a cancel request; every process gets its answer (one broadcast per step).

        All processes must stop (and save) at the same step, or the others would wait forever in a collective.
        """
        local = self.heartbeat is not None and self.heartbeat.cancel_requested.is_set()
        if getattr(args, "world_size", 1) <= 1:
            return local
        import torch.distributed as dist

        if not (dist.is_available() and dist.is_initialized()):
            return local
        decision = [local]
        dist.broadcast_object_list(decision, src=0)
        return bool(decision[0])

    def on_log(self, args, state, control, logs=None, **kwargs):
        """Hand the step's metrics, and the groups of a new generation (or of the evaluation that just ended), to
        the writer thread as one write: :meth:`storage.Store.record_step`, one transaction with the heartbeat and
        the cancel read. The training thread only copies plain values; the groups and their token values are built
        on the writer thread."""
        if not state.is_world_process_zero or not logs:
            return
        step = state.global_step
        evaluation = any(key.startswith("eval_") for key in logs)
        values = {key: _plain(value) for key, value in logs.items()}
        summary = "train_runtime" in logs  # the closing summary TRL logs once, at the last step
        # a training step's log, not an evaluation's nor the closing summary (train_runtime, ...) at the same step
        if self.device_metrics is not None and not evaluation and not summary:
            values.update(self.device_metrics())
        wall_time = time.time()
        if evaluation:
            split, build = "eval", self._eval_groups_builder()
        else:
            split, build = "train", self._train_groups_builder(step)
        run_id, heartbeat, cache = self.run_id, self.heartbeat, self.step_cache

        def record(store: Store) -> None:
            groups = build() if build is not None else []
            cancel = store.record_step(run_id, step, metrics=values, wall_time=wall_time,
                                       groups=[(split, groups)] if groups else (), cache=cache)
            if cancel and heartbeat is not None:
                heartbeat.cancel_requested.set()

        label = f"step {step} " + ("run summary" if summary else "metrics")
        if build is not None:
            label += f", {split} groups"
        self.writer.submit(StoreWrite(label, record))
        # the record beats: the progress beat of the steps after it can wait (the check before the next scoring not:
        # a step longer than progress_interval_s gets it every time, whatever its generation takes)
        self._next_beat = time.monotonic() + self.progress_interval_s
        if control.should_save:
            self.writer.flush(None)  # the checkpoint TRL writes next must not get ahead of the store

    def _train_groups_builder(self, step: int) -> Callable[[], list[GroupRecord]] | None:
        """A function, for the writer thread, building the groups of the latest training generation (with their
        token values) from copies taken now; ``None`` when that generation is recorded already or has no group."""
        generation = self.tap.calls if self.tap is not None else None
        if self.trainer is None or generation == self._recorded_generation:
            return None
        logs = snapshot_of_trl_logs(self.trainer._logs)
        if min(len(logs["prompt"]), len(logs["completion"]), len(logs["advantages"])) < self.num_generations:
            return None
        self._recorded_generation = generation
        capture = self.token_capture
        captured = capture.snapshot() if capture is not None else None  # now: the next generation resets it
        names, weights, size, rows = self.reward_names, self.reward_weights, self.num_generations, self.rows
        environments, pictures = tuple(self.environment_rewards), self._pictures()

        def build() -> list[GroupRecord]:
            groups = groups_from_trl_logs(logs, step=step, num_generations=size, reward_names=names,
                                          reward_weights=weights, rows=rows, environment_rewards=environments,
                                          pictures=pictures)
            return groups if capture is None else capture.attach(groups, captured)

        return build

    def on_prediction_step(self, args, state, control, **kwargs):
        """After each eval batch: copy its completions off the tail of TRL's buffers (which keep only the latest
        ``generation_batch_size`` entries), to be cut into eval groups on the writer thread at the evaluation's
        ``on_log``."""
        count = self.tap.eval_completions if self.tap is not None else 0
        if not state.is_world_process_zero or self.trainer is None or not count:
            return
        self.tap.eval_completions = 0
        # the tap counts this process's completions; TRL's buffers hold those gathered from every process
        gathered = count * max(1, getattr(args, "world_size", 1))
        self._eval_batches.append((state.global_step, tail_of_trl_logs(self.trainer._logs, gathered)))

    def _eval_groups_builder(self) -> Callable[[], list[GroupRecord]] | None:
        """A function, for the writer thread, building the groups of the evaluation that just ended (the batches
        :meth:`on_prediction_step` copied); ``None`` when there are none."""
        batches, self._eval_batches = self._eval_batches, []
        if not batches:
            return None
        names, weights, size, rows = self.reward_names, self.reward_weights, self.num_generations, self.eval_rows
        environments, pictures = tuple(self.environment_rewards), self._pictures()

        def build() -> list[GroupRecord]:
            return [group for step, logs in batches for group in groups_from_trl_logs(
                logs, step=step, num_generations=size, reward_names=names, reward_weights=weights, rows=rows,
                split="eval", environment_rewards=environments, pictures=pictures)]

        return build

    def _pictures(self):
        """The tap's picture copier (a user's script records its prompts' pictures), else ``None``."""
        shelf = self.tap.pictures if self.tap is not None else None
        return shelf.copy if shelf is not None else None


_release_registered = False
#: Seconds the exit handler releases the GIL so gloo's worker threads finish (:func:`release_process_group_at_exit`).
EXIT_GRACE_S = 0.1


def release_process_group_at_exit() -> None:
    """At interpreter exit, let gloo's worker threads finish with the process group, then destroy it.

    Called when training ends normally in a multi-process run (``accelerate launch`` on the CPU). A gloo worker thread
    that finished a collective drops its last reference to the work's tensors after the caller's ``wait()`` returned,
    and that needs the GIL; when the process is already finalizing by then, the thread aborts the process
    (``terminate called without an active exception``, SIGABRT from ``ProcessGroupGloo::runLoop``; pytorch/pytorch
    #190489, #179291) and the launcher reports the run failed although every step was trained and recorded. The
    handler runs while the interpreter is still whole, after the script's own code (collectives after ``train()``,
    saving or evaluating, are unaffected): it destroys the default group unless the script did, then releases the GIL
    for :data:`EXIT_GRACE_S` so such threads finish. NCCL groups are left alone. Registered once per process.
    """
    global _release_registered
    import torch.distributed as dist

    if _release_registered or not (dist.is_available() and dist.is_initialized()) or dist.get_backend() != "gloo":
        return
    _release_registered = True
    atexit.register(_release_process_group)


def _release_process_group() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        try:
            dist.destroy_process_group()
        except Exception as exc:  # noqa: BLE001 - exiting anyway
            print(f"[grpo-dashboard] the process group could not be destroyed at exit: {exc}", file=sys.stderr)
    time.sleep(EXIT_GRACE_S)  # the GIL free: gloo's threads drop their finished work while Python is alive
