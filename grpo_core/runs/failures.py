"""The error text a failed run gets: the exception, with a plain first line for the failures a user can act on.

Out of memory (Python's ``MemoryError``, torch's ``OutOfMemoryError``, ``ENOMEM``) and a full disk (``ENOSPC``,
``EDQUOT``, ``EFBIG`` from a file size limit, and the same errors as torch and safetensors word them when they wrap
the ``OSError``) are recognised anywhere in the exception's chain. Some writers lose the ``OSError`` altogether
(torch's zip writer on a full disk says ``[enforce fail at inline_container.cc] unexpected pos``), so a write error
raised while the run folder has less than :data:`LOW_DISK_BYTES` free also counts as a full disk. Pure: imports no
torch; the caller measures the free space.
"""

from __future__ import annotations

import errno
import traceback

MAX_ERROR_CHARS = 4000

OUT_OF_MEMORY = "out of memory"
DISK_FULL = "disk full"

_DISK_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG}
_DISK_WORDS = ("no space left on device", "disk quota exceeded", "file too large", "storagefull")
_MEMORY_WORDS = ("out of memory", "cannot allocate memory", "unable to allocate")
_WRITE_WORDS = ("write", "unexpected pos", "inline_container", "serializ", "flush")

#: Free space below which a write error is taken for a full disk (bytes).
LOW_DISK_BYTES = 1 << 20

_HINTS = {
    OUT_OF_MEMORY: (
        "out of memory: the worker could not allocate memory; lower per_device_train_batch_size, num_generations or "
        "max_completion_length, enable gradient_checkpointing, or free memory held by other runs"
    ),
    DISK_FULL: (
        "disk full: the worker could not write to disk (run folder, checkpoints or store); free space under the "
        "data directory or lower save_steps, then Resume"
    ),
}


def _chain(exc: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not e for e in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def failure_kind(exc: BaseException, free_bytes: int | None = None) -> str | None:
    """:data:`OUT_OF_MEMORY`, :data:`DISK_FULL`, or ``None`` for any other failure.

    ``free_bytes``: free space where the run writes, if known; below :data:`LOW_DISK_BYTES` any ``OSError`` or
    error that speaks of writing counts as a full disk.
    """
    chain = _chain(exc)
    for item in chain:
        text = str(item).lower()
        if isinstance(item, MemoryError) or type(item).__name__ == "OutOfMemoryError":
            return OUT_OF_MEMORY
        if isinstance(item, OSError) and item.errno == errno.ENOMEM:
            return OUT_OF_MEMORY
        if isinstance(item, OSError) and item.errno in _DISK_ERRNOS:
            return DISK_FULL
        if any(word in text for word in _DISK_WORDS):
            return DISK_FULL
        if any(word in text for word in _MEMORY_WORDS):
            return OUT_OF_MEMORY
    if free_bytes is not None and free_bytes < LOW_DISK_BYTES:
        for item in chain:
            if isinstance(item, OSError) or any(word in str(item).lower() for word in _WRITE_WORDS):
                return DISK_FULL
    return None


def failure_text(exc: BaseException, max_chars: int = MAX_ERROR_CHARS, *, free_bytes: int | None = None) -> str:
    """The error stored with a failed run: a hint line for out-of-memory and disk-full failures (see
    :func:`failure_kind` for ``free_bytes``), then the exception as ``Type: message`` (the end of it, at most
    ``max_chars`` characters in all)."""
    detail = "".join(traceback.format_exception_only(type(exc), exc)).strip()
    if isinstance(exc, MemoryError) and not str(exc):
        detail = "MemoryError (no message)"
    kind = failure_kind(exc, free_bytes)
    hint = f"{_HINTS[kind]}\n" if kind is not None else ""
    room = max(0, max_chars - len(hint))
    return hint + detail[-room:] if room else hint[:max_chars]
