"""Guessing passwords is slowed down: after :data:`MAX_FAILURES` wrong passwords for one login name within
:data:`WINDOW_S` seconds, that name's further attempts are refused without checking until the oldest failure leaves
the window; and at most :data:`MAX_CONCURRENT_CHECKS` scrypt checks run at once (16 MiB and about 50 ms each), so a
flood of attempts queues instead of taking every core from the runs and the other logins.

Gradio's ``/login`` gives the ``auth`` callable only the name and password (no client address), so the count is
kept by login name; unknown names are counted too, and at most :data:`MAX_NAMES` names are kept (the oldest
forgotten first). Before it, any client could try passwords as fast as scrypt ran, on every core. Pure Python, no
I/O. Source: OWASP Authentication Cheat Sheet (login throttling).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

#: Wrong passwords for one name within :data:`WINDOW_S` before its attempts are refused unchecked.
MAX_FAILURES = 10
WINDOW_S = 300.0
#: Password checks running at once (the rest wait their turn).
MAX_CONCURRENT_CHECKS = 2
#: Most login names whose failures are remembered.
MAX_NAMES = 10_000


class LoginThrottle:
    """Counts wrong passwords per login name and bounds concurrent checks (see the module docstring).

    Args:
        verify: ``verify(user, password) -> bool``, the real check (scrypt).
        clock: seconds, monotonic (tests pass their own).
    """

    def __init__(self, verify: Callable[[str, str], bool], *, clock: Callable[[], float] = time.monotonic,
                 max_failures: int = MAX_FAILURES, window_s: float = WINDOW_S) -> None:
        self._verify, self._clock = verify, clock
        self.max_failures, self.window_s = max_failures, window_s
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._lock = threading.Lock()
        self._checks = threading.BoundedSemaphore(MAX_CONCURRENT_CHECKS)

    def _recent(self, user: str, now: float) -> deque[float]:
        failures = self._failures.get(user)
        if failures is None:
            return deque()
        while failures and now - failures[0] >= self.window_s:
            failures.popleft()
        if not failures:
            del self._failures[user]
        return failures

    def blocked(self, user: str) -> bool:
        """Whether ``user``'s attempts are refused unchecked now."""
        with self._lock:
            return len(self._recent(user, self._clock())) >= self.max_failures

    def check(self, user: str, password: str) -> bool:
        """The password checked, unless the name is blocked (then ``False`` at once); a wrong one is counted."""
        if self.blocked(user):
            return False
        with self._checks:
            ok = bool(self._verify(user, password))
        if not ok:
            with self._lock:
                now = self._clock()
                failures = self._recent(user, now)
                failures.append(now)
                self._failures[user] = failures
                self._failures.move_to_end(user)
                while len(self._failures) > MAX_NAMES:
                    self._failures.popitem(last=False)
        return ok
