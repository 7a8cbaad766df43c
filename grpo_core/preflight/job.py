"""Runs a preflight (:mod:`grpo_core.preflight.worker`) for the web process, in a subprocess: the dashboard never
imports torch, and a stuck model load cannot hang it.

:func:`start_preflight` writes the config to a fresh folder and starts ``python -m grpo_core.preflight.worker CONFIG
--json ...`` there (:func:`grpo_core.processes.start_process`: no shell, its own process group, its output going to
``preflight.log`` in that folder, never an unread pipe). The caller polls :meth:`PreflightJob.poll` (the UI streams :meth:`last_line`), and
reads :meth:`PreflightJob.result`; :meth:`PreflightJob.stop` kills the group and removes the folder.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from grpo_core.preflight.report import DEFAULT_PROMPTS, PreflightReport
from grpo_core.processes import start_process, stop_process, tail_text
from grpo_core.run_config import RunConfig
from grpo_core.settings import ENV_DB_URL, Settings

PREFLIGHT_TIMEOUT_S = 900.0
"""Default wall-clock limit of one preflight (model conversion on first use, loading and sampling), seconds."""

LOG_FILE_NAME = "preflight.log"


class PreflightError(RuntimeError):
    """The preflight failed, timed out or left no report; the message says why (with the log's end)."""


@dataclass
class PreflightJob:
    """A running preflight subprocess.

    Attributes:
        process: the child (leader of its own process group).
        folder: its folder (config, log, JSON report), removed by :meth:`stop`.
        deadline: ``time.monotonic()`` value after which :meth:`poll` kills it.
    """

    process: subprocess.Popen
    folder: Path
    deadline: float
    started: float = field(default_factory=time.monotonic)

    @property
    def log_path(self) -> Path:
        """The child's combined stdout and stderr."""
        return self.folder / LOG_FILE_NAME

    @property
    def json_path(self) -> Path:
        """Where the child writes its report (or ``{"error": ...}``)."""
        return self.folder / "report.json"

    @property
    def elapsed_s(self) -> float:
        """Seconds since the start."""
        return time.monotonic() - self.started

    def poll(self) -> bool:
        """True once the child has exited; kills it (and returns True) past the deadline."""
        if self.process.poll() is not None:
            return True
        if time.monotonic() > self.deadline:
            self._kill()
            return True
        return False

    def last_line(self, max_bytes: int = 4096) -> str:
        """The last non-empty line of the log ("" while there is none); progress bars' ``\\r`` ends a line too."""
        text = tail_text(self.log_path, max_lines=5, max_bytes=max_bytes)
        lines = [line.strip() for line in text.replace("\r", "\n").splitlines() if line.strip()]
        return lines[-1] if lines else ""

    def log_tail(self, max_lines: int = 15, max_bytes: int = 16_000) -> str:
        """The last ``max_lines`` lines of the log."""
        return tail_text(self.log_path, max_lines=max_lines, max_bytes=max_bytes)

    def result(self) -> PreflightReport:
        """The report of a finished preflight.

        Raises:
            PreflightError: it timed out, failed (the error it wrote, else the log's end) or wrote no report.
        """
        returncode = self.process.poll()
        if returncode is None or returncode < 0:
            why = "timed out" if time.monotonic() > self.deadline else f"was killed (signal {-(returncode or 9)})"
            raise PreflightError(f"the preflight {why}\n{self.log_tail()}")
        try:
            data = json.loads(self.json_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise PreflightError(
                f"the preflight ended (exit {returncode}) without a report\n{self.log_tail()}"
            ) from None
        if "error" in data:
            raise PreflightError(str(data["error"]))
        return PreflightReport.from_dict(data)

    def _kill(self) -> None:
        stop_process(self.process)

    def stop(self) -> None:
        """Kill the child's process group if it still runs, and remove the folder."""
        if self.process.poll() is None:
            self._kill()
        shutil.rmtree(self.folder, ignore_errors=True)


def build_preflight_parser(prog: str = "grpo-dashboard preflight") -> argparse.ArgumentParser:
    """The one argument parser of a preflight: ``grpo-dashboard preflight`` and ``python -m
    grpo_core.preflight.worker`` (which :func:`preflight_argv` builds the argv of)."""
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Will this run learn? Sample a few prompts x num_generations completions from the config's "
        "model, score them with its reward rules and report how often rewards vary within a group (no training).",
    )
    add_preflight_arguments(parser)
    return parser


def add_preflight_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the preflight's arguments to ``parser`` (a sub-command's parser, or :func:`build_preflight_parser`'s)."""
    parser.add_argument("config", help="run config YAML file")
    parser.add_argument(
        "--prompts", type=int, default=DEFAULT_PROMPTS, help=f"prompts (groups) to sample (default {DEFAULT_PROMPTS})"
    )
    parser.add_argument("--dataset-id", type=int, help="use this stored dataset instead of the config's")
    parser.add_argument("--db", help="SQLAlchemy URL of the store (env GRPO_DB_URL; default SQLite in the data dir)")
    parser.add_argument(
        "--data-dir", help="data directory: store, model cache (env GRPO_DATA_DIR; default ./grpo_data)"
    )
    parser.add_argument("--json", dest="json_out", help="also write the report as JSON to this file")


def preflight_argv(settings: Settings, config_path: Path, json_path: Path, num_prompts: int) -> list[str]:
    """The argv of a preflight subprocess (this interpreter, ``-m grpo_core.preflight.worker``).

    The store URL is not in it: it travels in the environment (``GRPO_DB_URL``), as for workers, so a password in it
    shows neither in ``ps`` nor in the log.
    """
    return [
        sys.executable,
        "-m",
        "grpo_core.preflight.worker",
        str(config_path),
        "--prompts",
        str(int(num_prompts)),
        "--data-dir",
        str(settings.data_dir),
        "--json",
        str(json_path),
    ]


def start_preflight(
    settings: Settings,
    config: RunConfig,
    *,
    num_prompts: int,
    env: Mapping[str, str] | None = None,
    timeout_s: float = PREFLIGHT_TIMEOUT_S,
) -> PreflightJob:
    """Start a preflight of ``config`` in a subprocess and return at once.

    Args:
        settings: where the store and the model cache are (the child reads the dataset and the converted model
            from them).
        config: the run config to test (``dataset_id`` or an absolute ``dataset_path``).
        num_prompts: groups to sample.
        env: extra environment variables for the child (as the launcher's for workers).
        timeout_s: wall-clock limit, after which :meth:`PreflightJob.poll` kills it.

    Raises:
        OSError: the folder cannot be written or the interpreter not started.
    """
    folder = Path(tempfile.mkdtemp(prefix="grpo-preflight-"))
    try:
        config_path = folder / "config.yaml"
        config_path.write_text(config.to_yaml(), encoding="utf-8")
        job_env = {**os.environ, **dict(env or {}), ENV_DB_URL: settings.db_url, "PYTHONUNBUFFERED": "1"}
        process = start_process(
            preflight_argv(settings, config_path, folder / "report.json", num_prompts),
            log_path=folder / LOG_FILE_NAME,
            cwd=folder,
            env=job_env,
        )
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return PreflightJob(process=process, folder=folder, deadline=time.monotonic() + timeout_s)
