"""The two optional limits of a training process, for hosts shared with other work (CPU runs; CUDA maps more address
space than it uses): ``GRPO_WORKER_MAX_MEMORY_MB`` caps its address space (an allocation beyond it fails with
``MemoryError`` and the run fails "out of memory"), ``GRPO_WORKER_MAX_FILE_MB`` caps the size of any file it writes.
Applied by the training worker (:mod:`grpo_core.training.worker`) and by ``grpo-dashboard train``. Imports no torch.
"""

from __future__ import annotations

import os
import signal

ENV_MAX_MEMORY_MB = "GRPO_WORKER_MAX_MEMORY_MB"
ENV_MAX_FILE_MB = "GRPO_WORKER_MAX_FILE_MB"


def apply_resource_limits(env: dict[str, str] | None = None) -> list[str]:
    """Apply the ``GRPO_WORKER_MAX_MEMORY_MB`` / ``GRPO_WORKER_MAX_FILE_MB`` limits to this process.

    A file limit turns a write beyond it into an ``OSError`` (EFBIG) rather than the default SIGXFSZ kill, so the run
    fails with a message. Returns a description of each limit applied.

    Raises:
        ValueError: a limit is not a whole number of megabytes.
    """
    import resource

    env = os.environ if env is None else env
    applied = []
    for name, limit, label in ((ENV_MAX_MEMORY_MB, resource.RLIMIT_AS, "address space"),
                               (ENV_MAX_FILE_MB, resource.RLIMIT_FSIZE, "file size")):
        raw = (env.get(name) or "").strip()
        if not raw:
            continue
        try:
            megabytes = int(raw)
        except ValueError:
            raise ValueError(f"{name}={raw!r} is not a whole number of megabytes") from None
        size = megabytes * 1024 * 1024
        resource.setrlimit(limit, (size, resource.getrlimit(limit)[1]))
        if limit == resource.RLIMIT_FSIZE:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        applied.append(f"{label} {megabytes} MB")
    return applied
