"""Which GPUs a run's worker sees: ``CUDA_VISIBLE_DEVICES`` chosen by the launcher. Imports no torch.

The web process must not import torch, so the machine's GPUs are listed with ``nvidia-smi -L`` (none when the
command is missing or fails). A run's config names its GPUs (``gpus: "0,1"``, used as given) or leaves it empty
(auto): the launcher then gives it ``num_processes`` GPUs that no other running run holds, and keeps it queued
until that many are free. :func:`allocate_gpus` is that decision as a pure function.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Sequence

_SMI_LINE = re.compile(r"^GPU\s+(\d+):")


class GpuAllocationError(ValueError):
    """A run asks for more GPUs than the machine has: it can never start."""


def parse_gpu_list(text: str | None) -> list[str]:
    """``"0, 1,,2"`` -> ``["0", "1", "2"]``: the ids of a ``CUDA_VISIBLE_DEVICES``-style list, blanks dropped."""
    return [part.strip() for part in (text or "").split(",") if part.strip()]


def parse_nvidia_smi_list(output: str) -> list[str]:
    """The GPU indices in ``nvidia-smi -L`` output (``GPU 0: NVIDIA H100 (UUID: GPU-...)`` lines), in order."""
    return [match.group(1) for line in output.splitlines() if (match := _SMI_LINE.match(line.strip()))]


def machine_gpus(timeout_s: float = 10.0) -> list[str]:
    """The GPU indices this process may use: ``nvidia-smi -L``, narrowed to ``$CUDA_VISIBLE_DEVICES`` if that is set.

    Returns an empty list where ``nvidia-smi`` is missing, fails or lists nothing (a machine without GPUs).
    """
    executable = shutil.which("nvidia-smi")
    if executable is None:
        return []
    try:
        result = subprocess.run([executable, "-L"], capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.SubprocessError):
        return []
    if result.returncode != 0:
        return []
    gpus = parse_nvidia_smi_list(result.stdout)
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        allowed = parse_gpu_list(visible)
        gpus = [g for g in gpus if g in allowed]
    return gpus


def gpus_needed(config: dict) -> int:
    """GPUs a run config needs: one per process, none when it trains on the CPU."""
    if str(config.get("device", "auto")) == "cpu":
        return 0
    return max(1, int(config.get("num_processes", 1) or 1))


def allocate_gpus(
    requested: str | None, needed: int, available: Sequence[str], in_use: Iterable[str]
) -> list[str] | None:
    """The GPUs to give a run (its ``CUDA_VISIBLE_DEVICES``), or ``None`` to keep it waiting.

    Args:
        requested: the run's ``gpus`` field; a non-empty list is used as given, whoever else uses those GPUs.
        needed: GPUs the run needs (:func:`gpus_needed`); 0 for a CPU run.
        available: the machine's GPUs (:func:`machine_gpus`); empty on a machine without GPUs.
        in_use: GPUs held by runs training now.

    Returns:
        ``[]`` when nothing is to be assigned (a CPU run, or no GPUs on the machine: the worker sees what the
        dashboard sees); the first ``needed`` free GPUs, in the machine's order; ``None`` when fewer are free.

    Raises:
        GpuAllocationError: ``needed`` exceeds the machine's GPUs, so the run could never start.
    """
    explicit = parse_gpu_list(requested)
    if explicit:
        return explicit
    if needed <= 0 or not available:
        return []
    if needed > len(available):
        raise GpuAllocationError(
            f"the run needs {needed} GPUs (one per process) but this machine has {len(available)}"
        )
    busy = set(in_use)
    free = [gpu for gpu in available if gpu not in busy]
    if len(free) < needed:
        return None
    return free[:needed]
