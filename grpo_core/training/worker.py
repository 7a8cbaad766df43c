"""The training worker: ``python -m grpo_core.training.worker RUN_ID --data-dir DIR`` (store URL in ``GRPO_DB_URL``).

One worker process trains one run: it loads the run's config and dataset from the store, prepares the model,
builds TRL's ``GRPOTrainer`` with the recording callback, trains, and leaves the run ``completed``, ``cancelled``
or ``failed`` (with the error; every step recorded before a crash stays: the recorder's queued writes are
flushed on the way out, see :mod:`grpo_core.engine.recorder`). The launcher starts it in its own process
group with its output going to ``<run_dir>/train.log``; ``grpo-dashboard train`` runs the same code in-process.
SIGTERM asks for a cooperative stop at the next step, like Cancel in the dashboard; a cancelled run saves a
checkpoint first, and a run the store marks ``resume_from`` continues from that checkpoint.

Under ``accelerate launch`` (``num_processes > 1``) every process runs this module; only the main process (rank 0)
claims the run, beats, records metrics and groups and sets the final status. The others only read the run's config.

Two optional limits, for hosts shared with other work (CPU runs; CUDA maps more address space than it uses):
``GRPO_WORKER_MAX_MEMORY_MB`` caps the worker's address space (an allocation beyond it fails with ``MemoryError``
and the run fails "out of memory"), ``GRPO_WORKER_MAX_FILE_MB`` caps the size of any file it writes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from grpo_core.datasets.images import rows_images_folder
from grpo_core.datasets.rows import dataset_file, load_rows
from grpo_core.engine.heartbeat import Heartbeat, SilentHeartbeat
from grpo_core.engine.policy_model import prepare_model
from grpo_core.models.prompt_lengths import require_prompts_fit
from grpo_core.run_config import parse_run_config
from grpo_core.runs.failures import failure_text
from grpo_core.runs.files import CONFIG_FILE_NAME, adapter_dir, output_dir, run_dir
from grpo_core.runs.provenance import collect_provenance, plugin_files
from grpo_core.settings import Settings, load_settings
from grpo_core.training.limits import apply_resource_limits
from storage import RunStatus, Store

#: Seconds the crash path waits for the recorder's queued writes to reach the store.
FLUSH_TIMEOUT_S = 60.0


def process_rank() -> tuple[int, int]:
    """``(rank, world size)`` of this process: torchrun's ``RANK``/``WORLD_SIZE`` under accelerate, else ``(0, 1)``."""
    return int(os.environ.get("RANK", "0") or 0), int(os.environ.get("WORLD_SIZE", "1") or 1)


def _say(message: str) -> None:
    """Print to the run's log; a log that cannot be written (full disk) must not hide the real failure."""
    try:
        print(message, flush=True)
    except OSError:
        pass


def _free_bytes(folder: Path) -> int | None:
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return None


def _report_traceback() -> None:
    try:
        traceback.print_exc()
        sys.stderr.flush()
    except OSError:
        pass


def _flush_records(recorder) -> None:
    """On the crash path: store what the recorder had queued before the exception (at most
    :data:`FLUSH_TIMEOUT_S`); a recording failure of its own is only printed, the run's error stays the first one."""
    try:
        recorder.close(FLUSH_TIMEOUT_S)
    except Exception as exc:  # noqa: BLE001 - the original failure is the one to report
        _say(f"the queued records could not all be stored: {exc}")


def train_run(store: Store, settings: Settings, run_id: int) -> RunStatus:
    """Train run ``run_id`` in this process and return its final status.

    A ``queued`` run is claimed first (headless use); a ``running`` one was claimed by the launcher. A run with
    ``resume_from`` continues from that checkpoint (the store already dropped the steps recorded after it). Errors
    do not propagate: the run ends ``failed`` with the error text (:func:`grpo_core.runs.failures.failure_text`), and the
    traceback goes to standard error. On a non-main process of a multi-process run nothing is written to the store;
    the returned status is then this process's view (``completed``, ``cancelled`` or ``failed``).
    """
    rank, world_size = process_rank()
    main_process = rank == 0
    run = store.get_run(run_id)
    if main_process and run.status == RunStatus.QUEUED and not store.claim_run(run_id, os.getpid()):
        return store.get_run(run_id).status
    if run.status.is_final:
        return run.status
    folder = run_dir(settings, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    if main_process:
        fields: dict[str, Any] = {"run_dir": str(folder)}
        if world_size == 1:  # under accelerate the launcher's pid (the process group leader) stays recorded
            fields["worker_pid"] = os.getpid()
        store.update_run(run_id, **fields)

    heartbeat = Heartbeat(store, run_id).start() if main_process else SilentHeartbeat()
    previous_sigterm = signal.signal(signal.SIGTERM, lambda *_: heartbeat.cancel_requested.set())

    def progress(message: str) -> None:
        if main_process:
            _say(f"[run {run_id}] {message}")
        heartbeat.beat(phase=message[:200])

    built = None
    try:
        config = parse_run_config(run.config, source=f"run {run_id} config")
        if main_process:
            (folder / CONFIG_FILE_NAME).write_text(config.to_yaml(), encoding="utf-8")
        resume_from = run.resume_from
        if resume_from and not Path(resume_from).is_dir():
            raise FileNotFoundError(f"the checkpoint to resume from, {resume_from}, no longer exists")
        progress("loading dataset")
        rows = load_rows(store, run.config)
        eval_rows = load_rows(store, {"dataset_id": config.eval_dataset_id}) if config.eval_dataset_id is not None else None
        images = rows_images_folder(store, run.config, rows)
        eval_images = (rows_images_folder(store, {"dataset_id": config.eval_dataset_id}, eval_rows)
                       if eval_rows is not None else None)
        progress("preparing model")
        model_path = prepare_model(config.model, settings.model_cache_dir, progress)
        if (Path(model_path) / "tokenizer.json").is_file():  # before the model is loaded: the tokenizer only
            progress("checking prompt lengths")
            from grpo_core.engine.tool_plugin_check import run_tool_schemas_of

            require_prompts_fit(rows, model_path, config.max_completion_length, tools=run_tool_schemas_of(config))

        from grpo_core.engine.policy_model import describe_device
        from grpo_core.engine.trainer import build_trainer

        built = build_trainer(
            config,
            rows,
            model_path=model_path,
            output_dir=output_dir(folder),
            store=store,
            run_id=run_id,
            heartbeat=heartbeat,
            progress=progress,
            eval_rows=eval_rows,
            images=images,
            eval_images=eval_images,
        )
        if main_process:
            store.update_run(run_id, provenance=collect_provenance(
                dataset_file=dataset_file(store, run.config), model=config.model,
                cache_dir=settings.model_cache_dir, device=describe_device(built.device),
                plugins=plugin_files(config.rewards)))
        if world_size == 1 and heartbeat.cancel_requested.is_set():
            # Cancelled while loading: stop before the first step (several processes decide together, at a step).
            status = RunStatus.CANCELLED
        else:
            if resume_from:
                progress(f"resuming from {Path(resume_from).name}: training to step {config.max_steps} "
                         f"on {built.device}")
            else:
                progress(f"training {config.max_steps} steps on {built.device}")
            built.trainer.train(resume_from_checkpoint=resume_from or None)
            built.recorder.close()  # every step's records in the store before the run is marked
            if built.trainer.args.should_save:
                built.trainer.save_model(str(adapter_dir(folder)))
            stopped = built.recorder.cancelled or heartbeat.cancel_requested.is_set()
            unfinished = built.trainer.state.global_step < config.max_steps
            status = RunStatus.CANCELLED if stopped and unfinished else RunStatus.COMPLETED
        if main_process:
            store.finish_run(run_id, status)
            _say(f"[run {run_id}] {status.value}")
        return status
    except BaseException as exc:  # noqa: BLE001 - the run must end failed whatever happened
        _report_traceback()
        if built is not None:
            _flush_records(built.recorder)
        if main_process:
            store.finish_run(run_id, RunStatus.FAILED, error=failure_text(exc, free_bytes=_free_bytes(folder)))
        if isinstance(exc, KeyboardInterrupt):
            raise
        return RunStatus.FAILED
    finally:
        heartbeat.stop()
        signal.signal(signal.SIGTERM, previous_sigterm)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m grpo_core.training.worker``; exit status 0 unless the run failed."""
    parser = argparse.ArgumentParser(prog="python -m grpo_core.training.worker", description="Train one queued run.")
    parser.add_argument("run_id", type=int, help="id of the run in the store")
    parser.add_argument("--db", help="SQLAlchemy URL of the store (default: $GRPO_DB_URL or the data dir's SQLite)")
    parser.add_argument("--data-dir", help="data directory (default: $GRPO_DATA_DIR or ./grpo_data)")
    parser.add_argument("--shared-dir", help="folder of run folders, datasets and models that every node sees "
                        "(default: $GRPO_SHARED_DIR or the data directory)")
    args = parser.parse_args(argv)
    limits = apply_resource_limits()
    if limits:
        _say(f"[run {args.run_id}] worker limits: {', '.join(limits)}")
    settings = load_settings(data_dir=args.data_dir, db_url=args.db, shared_dir=args.shared_dir)
    settings.ensure_dirs()
    store = Store(settings.db_url, create=process_rank()[0] == 0)  # other ranks only read
    try:
        status = train_run(store, settings, args.run_id)
    finally:
        store.close()
    return 1 if status == RunStatus.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
