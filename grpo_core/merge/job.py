"""A model to serve, the web half: merge a finished run's adapter into its base model in a worker process
(:mod:`grpo_core.merge.worker`, a child job: :mod:`grpo_core.child_jobs.request`) and report its progress.

The merged folder goes to ``<data dir>/exports/run-NNNNN-merged-<adapter fingerprint>/`` (safetensors, tokenizer,
generation config): ``AutoModelForCausalLM.from_pretrained(folder)`` and ``vllm serve folder`` load it. Merging is
idempotent: the folder is named after the run and a fingerprint of its base model and adapter files, and the worker
writes it whole or not at all, so a second merge of the same run and adapter reuses the folder instead of writing
another copy of the model. Imports no torch.
"""

from __future__ import annotations

import hashlib
import time
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from grpo_core.child_jobs.request import ChildJob, start_child
from grpo_core.runs.export import exports_dir
from grpo_core.runs.files import adapter_dir, run_dir
from grpo_core.settings import Settings
from storage import RunInfo

MERGE_TIMEOUT_S = 1800.0
#: How a progress line saying that an earlier merge of the same run and adapter is reused begins.
REUSED = "already merged"


class MergeError(RuntimeError):
    """The merge cannot start or failed; the message carries the reason (the worker's, or the end of its log)."""


MERGE_JOB = ChildJob(
    module="grpo_core.merge.worker",
    error=MergeError,
    failed="merging {run} failed",
    timed_out="merging {run} took longer than {timeout_s} s; stopped",
    answered="merging {run} failed: {error}",
    tail_lines=20,
)
"""The merge's child job (:mod:`grpo_core.child_jobs.request`); ``{run}`` is ``run #N``."""


def merge_request(settings: Settings, run: RunInfo, dest: Path) -> dict[str, Any]:
    """The worker's request for merging ``run``'s final adapter into its base model at ``dest``."""
    return {"model": str(run.config.get("model", "")), "weights": str(adapter_dir(run_dir(settings, run))),
            "dest": str(dest), "cache_dir": str(settings.model_cache_dir)}


def adapter_fingerprint(model: str, weights: Path) -> str:
    """A SHA-256 hex digest of the base model's name and every file under ``weights`` (relative path and bytes,
    in path order): equal for the same run's unchanged adapter, different once training rewrote any of it.

    Raises:
        OSError: a file cannot be read.
    """
    digest = hashlib.sha256(f"model\0{model}\0".encode())
    for path in sorted(p for p in Path(weights).rglob("*") if p.is_file()):
        digest.update(f"file\0{path.relative_to(weights).as_posix()}\0{path.stat().st_size}\0".encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def merged_folder(settings: Settings, run: RunInfo) -> Path:
    """Where the merge of ``run``'s current adapter goes (or went): ``<exports>/run-NNNNN-merged-<fingerprint>``
    (:func:`adapter_fingerprint`, first 12 hex digits).

    Raises:
        MergeError: the run has no final adapter yet.
        OSError: the adapter cannot be read.
    """
    weights = adapter_dir(run_dir(settings, run))
    if not weights.is_dir() or not any(weights.iterdir()):
        raise MergeError(f"run #{run.id} has no adapter yet: it has not finished training")
    fingerprint = adapter_fingerprint(str(run.config.get("model", "")), weights)
    return exports_dir(settings) / f"run-{run.id:05d}-merged-{fingerprint[:12]}"


def merge_run(
    settings: Settings,
    run: RunInfo,
    *,
    timeout_s: float = MERGE_TIMEOUT_S,
    poll_s: float = 0.5,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[str]:
    """Merge ``run``'s adapter into its base model; yields progress lines, the last one the merged folder.

    When that folder already holds the merge of the same base model and adapter (:func:`merged_folder`), nothing is
    started: the lines are one beginning with :data:`REUSED`, then the folder.

    Closing the generator (the page went away) stops the worker, as a timeout does.

    Raises:
        MergeError: the run has no final adapter, the worker failed (its reason, or the end of its log) or ran past
            ``timeout_s`` (it is then stopped).
    """
    dest = merged_folder(settings, run)
    if dest.is_dir():
        yield f"{REUSED}: run #{run.id}'s adapter has not changed since {dest.name} was written; reusing it"
        yield str(dest)
        return
    dest.parent.mkdir(parents=True, exist_ok=True)
    with start_child(MERGE_JOB, merge_request(settings, run, dest), timeout_s=timeout_s,
                     context={"run": f"run #{run.id}"}) as job:
        for events in job.watch(poll_s, sleep):
            yield from (event.message for event in events if event.message is not None)
        job.result()
    if not dest.is_dir():
        raise MergeError(f"merging run #{run.id} failed: the worker wrote no folder at {dest}")
    yield str(dest)


def zip_merged_folder(folder: Path) -> Path:
    """Zip a merged folder to ``<folder>.zip`` beside it, its files under the folder's name; safetensors are stored
    uncompressed (float weights barely compress), the rest deflated. Returns the zip (rewritten if present).

    Raises:
        OSError: the folder cannot be read or the zip written.
    """
    folder = Path(folder)
    dest = folder.with_suffix(".zip")
    partial = dest.with_name(f".{dest.name}.partial")
    with zipfile.ZipFile(partial, "w") as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                method = zipfile.ZIP_STORED if path.suffix == ".safetensors" else zipfile.ZIP_DEFLATED
                archive.write(path, f"{folder.name}/{path.relative_to(folder).as_posix()}", compress_type=method)
    partial.replace(dest)
    return dest
