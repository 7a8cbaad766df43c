"""The pool of unused uids a root host runs sandboxed children under, one uid per concurrent execution.

As root, each child runs under a uid/gid of its own, taken from otherwise unused ids (mapped in this user
namespace, not 65534/65535, no known user, no running process), with no supplementary groups. That is what makes
file permissions, ``kill`` and ``/proc/<pid>/environ`` protect the host, and what makes ``RLIMIT_NPROC`` (counted
per *user*, and not enforced for root) bound a fork bomb. A uid that still owns processes after its execution was
cleaned up is retired for a fresh one (:meth:`UidPool.release`).
"""

from __future__ import annotations

import logging
import queue
import threading

import psutil

logger = logging.getLogger(__name__)

UID_POOL_SIZE = 256
"""Number of distinct uids the sandbox uses when running as root (= most concurrent executions)."""


class UidPool:
    """A blocking pool of unused uids (equal gids), one per concurrent execution.

    A uid that still owns processes after its execution was cleaned up (typically zombies of a fork bomb that
    the system's init has not reaped yet; they count towards ``RLIMIT_NPROC``) is retired and replaced by a
    fresh one, counting down from below the pool.
    """

    def __init__(self, uids: list[int], lowest_fresh: int = 1000):
        self.uids = tuple(uids)
        self._free: queue.SimpleQueue[int] = queue.SimpleQueue()
        for uid in uids:
            self._free.put(uid)
        self._next_fresh = min(uids) - 1
        self._lowest_fresh = lowest_fresh
        self._lock = threading.Lock()

    def acquire(self) -> int:
        """A free uid; blocks until one is released when all are in use."""
        return self._free.get()

    def release(self, uid: int, *, retire: bool = False) -> None:
        """Give ``uid`` back; ``retire``: it still owns processes, so a fresh uid takes its place (if one is left)."""
        if retire:
            with self._lock:
                fresh = self._fresh_uid()
            if fresh is not None:
                uid = fresh
            else:
                logger.warning("sandbox: no fresh uid left; reusing uid %d although it still owns processes", uid)
        self._free.put(uid)

    def _fresh_uid(self) -> int | None:
        known = uids_in_use()
        while self._next_fresh >= self._lowest_fresh:
            uid = self._next_fresh
            self._next_fresh -= 1
            if uid not in known and uid not in (65_534, 65_535):
                return uid
        return None


def uids_in_use() -> set[int]:
    """Uids of every running process and of every user in the password database."""
    used: set[int] = set()
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids:
            used.update(uids)
    try:
        import pwd

        used.update(entry.pw_uid for entry in pwd.getpwall())
    except (ImportError, OSError):  # pragma: no cover - pwd is always there on Linux
        pass
    return used


def uid_has_processes(uid: int) -> bool:
    """Whether any process runs under ``uid`` (real, effective or saved)."""
    for proc in psutil.process_iter(["uids"]):
        uids = proc.info.get("uids")
        if uids and uid in uids:
            return True
    return False


def mapped_ranges(path: str) -> list[tuple[int, int]]:
    """``(first, count)`` id ranges usable in this user namespace (``/proc/self/uid_map``)."""
    try:
        with open(path) as fh:
            rows = [line.split() for line in fh if line.strip()]
        return [(int(row[0]), int(row[2])) for row in rows]
    except (OSError, ValueError, IndexError):
        return [(0, 65_536)]


def pick_uids(size: int) -> list[int]:
    """``size`` uids that are mapped (uid and gid), not 65534/65535, not a known user and run no process."""
    uid_ranges = mapped_ranges("/proc/self/uid_map")
    gid_ranges = mapped_ranges("/proc/self/gid_map")

    def mapped(first: int, ranges: list[tuple[int, int]]) -> bool:
        return any(start <= first and first + size <= start + count for start, count in ranges)

    candidates = [1_800_000_000] + [start + count - size - 2 for start, count in uid_ranges]
    base = next(
        (b for b in candidates if b >= 1000 and mapped(b, uid_ranges) and mapped(b, gid_ranges)),
        None,
    )
    if base is None:
        return []
    used = uids_in_use()
    return [uid for uid in range(base, base + size) if uid not in used and uid not in (65_534, 65_535)]


def new_pool(size: int = UID_POOL_SIZE) -> UidPool | None:
    """A pool of up to ``size`` uids picked now (:func:`pick_uids`), ``None`` when no mapped range has room.

    Fresh uids for retired ones count down from the pool to the start of its mapped range (never below 1000).
    """
    uids = pick_uids(size)
    if not uids:
        return None
    lowest = min(start for start, count in mapped_ranges("/proc/self/uid_map") if start <= uids[0])
    return UidPool(uids, lowest_fresh=max(lowest, 1000))
