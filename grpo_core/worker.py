"""The training worker: ``python -m grpo_core.worker RUN_ID --db URL --data-dir DIR``.

One worker process trains one run: it loads the run's config and dataset from the store, prepares the model,
builds TRL's ``GRPOTrainer`` with the recording callback, trains, and leaves the run ``completed``, ``cancelled``
or ``failed`` (with the error; every step recorded before a crash stays). The launcher starts it in its own process
group with its output going to ``<run folder>/train.log``; ``grpo-dashboard train`` runs the same code in-process.
SIGTERM asks for a cooperative stop at the next step, like Cancel in the dashboard.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from pathlib import Path
from typing import Any

from grpo_core.config import parse_run_config
from grpo_core.datasets import load_prompt_dataset, read_normalized
from grpo_core.model_source import prepare_model
from grpo_core.recorder import Heartbeat
from grpo_core.settings import Settings, load_settings
from storage import RunInfo, RunStatus, Store


def run_dir(settings: Settings, run_id: int) -> Path:
    """The folder of run ``run_id`` under the data directory."""
    return settings.runs_dir / f"run-{run_id:05d}"


def load_rows(store: Store, run: RunInfo) -> list[dict[str, Any]]:
    """The prompt rows of a run: its uploaded dataset, else the file named by ``dataset_path``.

    Raises:
        ValueError: the run names no dataset, or the file is invalid (:class:`grpo_core.datasets.DatasetError`).
    """
    config = run.config
    if config.get("dataset_id") is not None:
        dataset = store.get_dataset(int(config["dataset_id"]))
        return read_normalized(Path(dataset.path))
    if config.get("dataset_path"):
        return load_prompt_dataset(config["dataset_path"]).rows
    raise ValueError("the run names no dataset (set dataset_id or dataset_path)")


def _error_text(exc: BaseException) -> str:
    lines = traceback.format_exception_only(type(exc), exc)
    return "".join(lines).strip()[-4000:]


def train_run(store: Store, settings: Settings, run_id: int) -> RunStatus:
    """Train run ``run_id`` in this process and return its final status.

    A ``queued`` run is claimed first (headless use); a ``running`` one was claimed by the launcher. Errors do
    not propagate: the run ends ``failed`` with the error text, and the traceback goes to standard error.
    """
    run = store.get_run(run_id)
    if run.status == RunStatus.QUEUED and not store.claim_run(run_id, os.getpid()):
        return store.get_run(run_id).status
    if run.status.is_final:
        return run.status
    folder = run_dir(settings, run_id)
    folder.mkdir(parents=True, exist_ok=True)
    store.update_run(run_id, worker_pid=os.getpid(), output_dir=str(folder))

    heartbeat = Heartbeat(store, run_id).start()
    previous_sigterm = signal.signal(signal.SIGTERM, lambda *_: heartbeat.cancel_requested.set())

    def progress(message: str) -> None:
        print(f"[run {run_id}] {message}", flush=True)
        heartbeat.beat(phase=message[:200])

    try:
        config = parse_run_config(run.config, source=f"run {run_id} config")
        (folder / "config.yaml").write_text(config.to_yaml(), encoding="utf-8")
        progress("loading dataset")
        rows = load_rows(store, run)
        progress("preparing model")
        model_path = prepare_model(config.model, settings.model_cache_dir, progress)

        from grpo_core.trainer import build_trainer

        built = build_trainer(
            config,
            rows,
            model_path=model_path,
            output_dir=folder / "output",
            store=store,
            run_id=run_id,
            heartbeat=heartbeat,
            progress=progress,
        )
        progress(f"training {config.max_steps} steps on {built.device}")
        built.trainer.train()
        if built.trainer.args.should_save:
            built.trainer.save_model(str(folder / "adapter"))
        cancelled = built.recorder.cancelled or heartbeat.cancel_requested.is_set()
        status = RunStatus.CANCELLED if cancelled else RunStatus.COMPLETED
        store.finish_run(run_id, status)
        print(f"[run {run_id}] {status.value}", flush=True)
        return status
    except BaseException as exc:  # noqa: BLE001 - the run must end failed whatever happened
        traceback.print_exc()
        sys.stderr.flush()
        store.finish_run(run_id, RunStatus.FAILED, error=_error_text(exc))
        if isinstance(exc, KeyboardInterrupt):
            raise
        return RunStatus.FAILED
    finally:
        heartbeat.stop()
        signal.signal(signal.SIGTERM, previous_sigterm)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m grpo_core.worker``; exit status 0 unless the run failed."""
    parser = argparse.ArgumentParser(prog="python -m grpo_core.worker", description="Train one queued run.")
    parser.add_argument("run_id", type=int, help="id of the run in the store")
    parser.add_argument("--db", help="SQLAlchemy URL of the store (default: $GRPO_DB_URL or the data dir's SQLite)")
    parser.add_argument("--data-dir", help="data directory (default: $GRPO_DATA_DIR or ./grpo_data)")
    args = parser.parse_args(argv)
    settings = load_settings(data_dir=args.data_dir, db_url=args.db)
    settings.ensure_dirs()
    store = Store(settings.db_url)
    try:
        status = train_run(store, settings, args.run_id)
    finally:
        store.close()
    return 1 if status == RunStatus.FAILED else 0


if __name__ == "__main__":
    sys.exit(main())
