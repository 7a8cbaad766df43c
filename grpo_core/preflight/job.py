"""Runs a preflight (:mod:`grpo_core.preflight.worker`) for the web process, in a subprocess: the dashboard never
imports torch, and a stuck model load cannot hang it.

:func:`start_preflight` starts it as a child job (:mod:`grpo_core.child_jobs.request`: the request, the progress
messages, the cancel, the timeout and the error shape every child job has) and returns the
:class:`~grpo_core.child_jobs.request.RunningJob`: the caller follows it (:meth:`~grpo_core.child_jobs.request.
RunningJob.watch`, the newest message in ``latest``), reads :func:`preflight_report`, and closes it (which kills a
child still running and removes its folder). The command line's arguments (:func:`add_preflight_arguments`) are
here too: ``grpo-dashboard preflight`` runs the same sampling in its own process.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping

from grpo_core.child_jobs.request import ChildJob, RunningJob, start_child
from grpo_core.preflight.report import DEFAULT_PROMPTS, PreflightReport
from grpo_core.run_config import RunConfig
from grpo_core.settings import ENV_DB_URL, Settings

PREFLIGHT_TIMEOUT_S = 900.0
"""Default wall-clock limit of one preflight (model conversion on first use, loading and sampling), seconds."""


class PreflightError(RuntimeError):
    """The preflight failed, timed out or left no report; the message says why (with the log's end)."""


PREFLIGHT_JOB = ChildJob(
    module="grpo_core.preflight.worker",
    error=PreflightError,
    failed="the preflight failed",
    timed_out="the preflight timed out after {timeout_s} s",
    tail_lines=15,
    tail_bytes=16_000,
    in_folder=True,
)
"""The preflight's child job; it runs in its own folder (whatever it writes goes away with it)."""


def add_preflight_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the preflight's arguments to ``parser`` (``grpo-dashboard preflight``'s sub-command parser)."""
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


def start_preflight(
    settings: Settings,
    config: RunConfig,
    *,
    num_prompts: int,
    env: Mapping[str, str] | None = None,
    timeout_s: float = PREFLIGHT_TIMEOUT_S,
) -> RunningJob:
    """Start a preflight of ``config`` in a subprocess and return at once.

    Args:
        settings: where the store and the model cache are (the child reads the dataset and the converted model
            from them; the store URL travels in the environment, never in argv).
        config: the run config to test (``dataset_id`` or an absolute ``dataset_path``).
        num_prompts: groups to sample.
        env: extra environment variables for the child (as the launcher's for workers).
        timeout_s: wall-clock limit, after which a poll kills it.

    Raises:
        OSError: the folder cannot be written or the interpreter not started.
    """
    request = {"config": config.model_dump(mode="json"), "num_prompts": int(num_prompts),
               "data_dir": str(settings.data_dir)}
    job_env = {**dict(env or {}), ENV_DB_URL: settings.db_url, "PYTHONUNBUFFERED": "1"}
    return start_child(PREFLIGHT_JOB, request, timeout_s=timeout_s, env=job_env)


def preflight_report(job: RunningJob) -> PreflightReport:
    """The report of a finished preflight.

    Raises:
        PreflightError: it timed out, was cancelled, failed (the error it gave, else the log's end) or wrote no
            report.
    """
    answer = job.result()
    try:
        return PreflightReport.from_dict(answer)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise PreflightError(f"the preflight's report cannot be read ({type(exc).__name__}: {exc})") from None
