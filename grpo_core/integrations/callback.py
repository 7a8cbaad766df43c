"""``DashboardCallback``: any script's TRL ``GRPOTrainer`` recorded into the dashboard, with one line.

::

    from grpo_core.integrations import DashboardCallback

    trainer = GRPOTrainer(model=..., reward_funcs=[...], args=GRPOConfig(...), train_dataset=...)
    trainer.add_callback(DashboardCallback("./grpo_data", name="my run", tags=["sweep-3"], keep_columns=["answer"]))
    trainer.train()

The run is recorded as the dashboard's own worker records one, by the same code: a
:class:`~grpo_core.engine.recorder.RunRecorder` (every metric TRL logs, under TRL's names; each step's groups with
prompts, completions, per-function rewards, totals and TRL's advantages; the token values TRL computes in its loss,
through :class:`~grpo_core.engine.token_stats.TokenCapture`), its writer thread and the
:class:`~grpo_core.engine.group_capture.RolloutTap` around the first reward function, which the callback puts in
place when training begins. The run's config (:func:`grpo_core.runs.script_runs.run_config_from_trainer`) and
provenance (library versions, device, host, command, every ``GRPOConfig`` field) are recorded at the start.

Where it records (``target``):

* a store URL, as ``--db`` takes (``sqlite:////data/grpo.db``, ``postgresql+psycopg://...``), or a data directory
  (its ``grpo.db``): written directly, like the worker;
* the address of a served dashboard (``http(s)://host:port``) with an API token (``token=`` or
  ``$GRPO_DASHBOARD_TOKEN``): each step goes to a local spool (:mod:`grpo_core.integrations.spool`) that a sender
  thread empties over HTTP, in order and exactly once, whenever the dashboard answers; training never waits for it.

Default target: ``$GRPO_DASHBOARD_URL``, else ``$GRPO_DB_URL``, else ``$GRPO_DATA_DIR``, else ``./grpo_data``.

With several processes (``accelerate launch``) every process needs the callback (the script is the same), but only
the main one writes; Cancel in the dashboard stops every process at the same step (``should_training_stop``, and a
checkpoint is saved). When ``train()`` raises, the run is marked failed when the interpreter exits.
"""

from __future__ import annotations

import atexit
import inspect
import os
import shlex
import socket
import sys
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from grpo_core.engine.group_capture import RolloutTap
from grpo_core.engine.heartbeat import Heartbeat, SilentHeartbeat
from grpo_core.engine.recorder import RunRecorder
from grpo_core.integrations.origin import describe_trainer
from storage import RunStatus

ENV_URL = "GRPO_DASHBOARD_URL"
ENV_TOKEN = "GRPO_DASHBOARD_TOKEN"
#: Seconds the end of training waits for the spool to reach a served dashboard before leaving it for ``sync``
#: (``$GRPO_DASHBOARD_FINAL_SEND_S`` overrides it).
FINAL_SEND_S = 30.0


def _find_trainer(frame) -> Any:
    """The ``GRPOTrainer`` whose training loop called this callback: the ``self`` of a calling frame with TRL's
    per-completion buffers (``_logs``) and ``reward_funcs``."""
    while frame is not None:
        candidate = frame.f_locals.get("self")
        if hasattr(candidate, "_logs") and hasattr(candidate, "reward_funcs") and hasattr(candidate, "callback_handler"):
            return candidate
        frame = frame.f_back
    return None


class DashboardCallback(TrainerCallback):
    """Records the ``GRPOTrainer`` it is added to as a dashboard run (see the module docstring).

    Args:
        target: where to record: a store URL, a data directory, or a served dashboard's ``http(s)://`` address.
        token: the API token for a served dashboard (default ``$GRPO_DASHBOARD_TOKEN``).
        name: the run's name (default: ``output_dir``'s last part).
        tags: the run's tags.
        keep_columns: dataset columns kept with each group (shown beside its prompt in Inspect; e.g. the answer).
        spool_dir: the spool folder for a served dashboard (default ``<output_dir>/dashboard-spool``).
        progress_interval_s: least seconds between two cancel checks (see :class:`RunRecorder`).

    Raises:
        ValueError: a served dashboard's address without a token; ``target`` of an unknown form.
    """

    def __init__(self, target: str | os.PathLike | None = None, *, token: str | None = None, name: str | None = None,
                 tags: Sequence[str] = (), keep_columns: Sequence[str] = (), spool_dir: str | os.PathLike | None = None,
                 progress_interval_s: float = 1.0) -> None:
        target = target if target is not None else (os.environ.get(ENV_URL) or os.environ.get("GRPO_DB_URL")
                                                    or os.environ.get("GRPO_DATA_DIR") or "grpo_data")
        self.target = str(target)
        self.remote = self.target.startswith(("http://", "https://"))
        self.token = token or os.environ.get(ENV_TOKEN)
        if self.remote and not self.token:
            raise ValueError(f"recording to {self.target} needs an API token: token=... or ${ENV_TOKEN} (create one "
                             "in the dashboard or with `grpo-dashboard token create`)")
        self.name = name
        self.tags = [str(t) for t in tags]
        self.keep_columns = [str(c) for c in keep_columns]
        self.spool_dir = spool_dir
        self.progress_interval_s = progress_interval_s
        self.trainer = None
        self.recorder: RunRecorder | None = None
        self.run_id: int | None = None
        self.store = None
        self.sender = None
        self._heartbeat = None
        self._ended = False
        self._main = False

    # ---------------------------------------------------------------------------------------------- set up
    def attach(self, trainer) -> DashboardCallback:
        """Name the trainer explicitly (otherwise found when training begins). Returns itself."""
        self.trainer = trainer
        return self

    def on_train_begin(self, args, state, control, **kwargs):
        if self.recorder is not None:  # a second train() on the same trainer: a new run
            self._finish(state)
        trainer = self.trainer or _find_trainer(inspect.currentframe())
        if trainer is None:
            raise RuntimeError("DashboardCallback: the GRPOTrainer could not be found; call callback.attach(trainer)")
        self.trainer = trainer
        self._main = bool(state.is_world_process_zero)
        tap = self._install_tap(trainer)
        facts = describe_trainer(trainer, max_steps=state.max_steps, keep_columns=self.keep_columns)
        if self._main:
            self.store, run_dir = self._open_sink(args, facts)
            self._heartbeat = Heartbeat(self.store, self.run_id).start()
            self.recorder = RunRecorder(self.store, self.run_id, reward_names=facts.reward_names,
                                        reward_weights=facts.reward_weights, num_generations=facts.num_generations,
                                        heartbeat=self._heartbeat, tap=tap, device_metrics=facts.device_metrics,
                                        token_capture=facts.token_capture(trainer),
                                        progress_interval_s=self.progress_interval_s)
            atexit.register(self._at_exit)
            if run_dir is not None:
                print(f"[grpo-dashboard] recording run {self.run_id} into {self._where()}", file=sys.stderr)
        else:
            self._heartbeat = SilentHeartbeat()
            self.recorder = RunRecorder(None, 0, reward_names=facts.reward_names, reward_weights=facts.reward_weights,
                                        num_generations=facts.num_generations, heartbeat=self._heartbeat, tap=tap)
        self.recorder.attach(trainer)
        self._ended = False
        return self.recorder.on_train_begin(args, state, control, **kwargs)

    def _install_tap(self, trainer) -> RolloutTap:
        """Wrap the trainer's first reward function that is a plain function (a reward model stays as it is) in a
        :class:`RolloutTap`, on every process (TRL gathers what it logs across processes)."""
        from grpo_core.engine.policy_model import end_of_sequence_ids

        funcs = trainer.reward_funcs
        for position, func in enumerate(funcs):
            if isinstance(func, RolloutTap):
                return func
            if callable(func) and not hasattr(func, "forward"):
                processing = trainer.processing_class
                tokenizer = getattr(processing, "tokenizer", processing)
                tap = RolloutTap(func, end_of_sequence_ids(trainer.model, tokenizer),
                                 trainer.args.max_completion_length, keep_columns=self.keep_columns,
                                 record_images=True)
                funcs[position] = tap
                return tap
        raise ValueError("DashboardCallback needs at least one reward function that is a Python function")

    def _where(self) -> str:
        from grpo_core.access.logins import redact_url

        return redact_url(self.target)

    def _open_sink(self, args, facts) -> tuple[Any, str | None]:
        """Open the store (or the spool and its sender) and create the run; returns the sink and the run folder."""
        name = self.name or Path(str(args.output_dir)).name or "script run"
        command = shlex.join([Path(sys.executable).name, *sys.argv])
        if self.token:
            command = command.replace(self.token, "***")
        origin = {"kind": "script", "host": socket.gethostname(), "command": command[:2000], "pid": os.getpid(),
                  "output_dir": str(Path(args.output_dir).resolve()), "grpo_config": facts.grpo_config}
        provenance = {**facts.provenance, "recorded_from": origin}
        if self.remote:
            return self._open_remote(args, name, facts, provenance), None
        from grpo_core.runs.files import OUTPUT_DIR_NAME, run_dir
        from grpo_core.settings import load_settings
        from storage import Store

        is_url = "://" in self.target
        settings = load_settings(data_dir=None if is_url else self.target, db_url=self.target if is_url else None)
        settings.ensure_dirs()
        store = Store(settings.db_url)
        run = store.create_script_run(name=name, config=facts.config, max_steps=facts.max_steps, tags=self.tags,
                                      provenance=provenance)
        self.run_id = run.id
        folder = run_dir(settings, run.id)
        try:  # the dashboard finds checkpoints in <run folder>/output: the script's output_dir
            folder.mkdir(parents=True, exist_ok=True)
            (folder / OUTPUT_DIR_NAME).symlink_to(Path(args.output_dir).resolve(), target_is_directory=True)
            store.update_run(run.id, run_dir=str(folder))
        except OSError as exc:
            print(f"[grpo-dashboard] the run folder {folder} could not link the output_dir: {exc}", file=sys.stderr)
        return store, str(folder)

    def _open_remote(self, args, name: str, facts, provenance: dict[str, Any]):
        from grpo_core.integrations.sender import DashboardClient, RemoteStore, SpoolSender, url_binding
        from grpo_core.integrations.spool import Spool

        client_key = uuid.uuid4().hex
        folder = Path(self.spool_dir or Path(args.output_dir) / "dashboard-spool") / client_key
        create = {"name": name, "config": facts.config, "max_steps": facts.max_steps, "tags": self.tags,
                  "provenance": provenance}
        spool = Spool.create(folder, url=self.target, client_key=client_key, create=create,
                             url_binding=url_binding(self.target, self.token))
        self.sender = SpoolSender(spool, DashboardClient(self.target, self.token)).start()
        self.run_id = 0  # the dashboard's id comes with its first answer; the spool does not need it
        print(f"[grpo-dashboard] recording into {self.target}; spool {folder}", file=sys.stderr)
        return RemoteStore(spool, self.sender)

    # -------------------------------------------------------------------------------------------- callbacks
    def on_step_end(self, args, state, control, **kwargs):
        if self.recorder is not None:
            return self.recorder.on_step_end(args, state, control, **kwargs)
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if self.recorder is not None:
            self.recorder.on_log(args, state, control, logs=logs, **kwargs)

    def on_prediction_step(self, args, state, control, **kwargs):
        if self.recorder is not None:
            self.recorder.on_prediction_step(args, state, control, **kwargs)

    def on_train_end(self, args, state, control, **kwargs):
        if self.recorder is None:
            return
        self.recorder.on_train_end(args, state, control, **kwargs)
        self._finish(state)

    @property
    def cancelled(self) -> bool:
        """Whether training stopped because Cancel was pressed in the dashboard."""
        return self.recorder is not None and self.recorder.cancelled

    def _finish(self, state, error: str | None = None) -> None:
        """Close the recorder and mark the run: completed, cancelled (stopped early by Cancel) or failed."""
        if self._ended or self.recorder is None:
            return
        self._ended = True
        if not self._main:
            return
        try:
            self.recorder.close()
        finally:
            self._heartbeat.stop()
            if error is not None:
                status = RunStatus.FAILED
            elif self.recorder.cancelled and state is not None and state.global_step < state.max_steps:
                status = RunStatus.CANCELLED
            else:
                status = RunStatus.COMPLETED
            self.store.finish_run(self.run_id, status, error=error)
            if self.sender is not None:
                if not self.sender.flush(float(os.environ.get("GRPO_DASHBOARD_FINAL_SEND_S") or FINAL_SEND_S)):
                    print(f"[grpo-dashboard] the dashboard has not taken every step yet; send them later with "
                          f"`grpo-dashboard sync {self.sender.spool.folder}`", file=sys.stderr)
                self.sender.stop()

    def _at_exit(self) -> None:
        """The interpreter exits: a run whose training never ended (``train()`` raised) is marked failed."""
        if self._ended or not self._main:
            return
        error = getattr(sys, "last_value", None)
        text = f"{type(error).__name__}: {error}" if error is not None else "the training script exited during training"
        try:
            self._finish(None, error=text[:20_000])
        except Exception as exc:  # noqa: BLE001 - exiting anyway; say why the run stays as it is
            print(f"[grpo-dashboard] could not mark the run failed: {exc}", file=sys.stderr)
