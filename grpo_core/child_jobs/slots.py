"""Fair sharing of the web process's costly jobs between logins: a pool of slots with a per-login cap below it.

Gradio's concurrency groups bound a handler for every login together: with one rescoring slot, one login's
rescoring (a catastrophic regular expression, a huge selection) held it for all. A :class:`JobSlots` pool holds at
most ``total`` jobs, and at most ``per_login`` of one login; a request over its login's cap is refused at once with
a message (it never waits holding a Gradio worker), so the queue behind it drains and other logins' requests are
served. Give the Gradio concurrency group at least ``total`` (so a login's refused requests never sit in front of
others' in Gradio's queue for long). Without a login (``None``) only ``total`` applies. Pure threading; no gradio.

The pools the dashboard uses: :data:`RESCORE_SLOTS` (reward workbench, ``rescore_run``), :data:`MODEL_SLOTS`
(preflight, Try the model, merge), :data:`PREVIEW_SLOTS` (the Launch tab's try-out bench and reward-hacking probe),
:data:`PLUGIN_CHECK_SLOTS` (each child that imports a login's reward plugins, tool plugins or environment class to
check them: a launch's, a sweep's, the preflight's and the memory estimate's; held only while that child runs),
:data:`HUB_LOAD_SLOTS` (the Datasets tab's "Add from the hub": a child running ``datasets.load_dataset``).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager


class SlotsBusy(RuntimeError):
    """No slot for this login now: its own cap, or the whole pool, is taken. The message says which and what to do."""


class JobSlots:
    """At most ``total`` jobs at once, at most ``per_login`` of one login (thread-safe).

    Args:
        what: the jobs' name in messages (``"rescorings"``).
        total: slots of the pool (>= 1).
        per_login: slots one login may hold (1 <= per_login < total: one login never holds every slot).
        until: what a login over its share is told to wait for, in its refusal.
    """

    def __init__(self, what: str, total: int, per_login: int, until: str = "wait for it to end (or cancel it)") -> None:
        if not 1 <= per_login < total:
            raise ValueError(f"{what}: a login's share ({per_login}) must be at least 1 and below the pool ({total})")
        self.what, self.total, self.per_login, self.until = what, total, per_login, until
        self._lock = threading.Lock()
        self._held: Counter[str | None] = Counter()

    def running(self, login: str | None = None) -> int:
        """Jobs held now: all of them, or ``login``'s."""
        with self._lock:
            return self._held[login] if login is not None else sum(self._held.values())

    def acquire(self, login: str | None) -> None:
        """Take a slot for ``login`` (release it with :meth:`release`).

        Raises:
            SlotsBusy: ``login`` holds ``per_login`` already, or the pool is full.
        """
        with self._lock:
            if login is not None and self._held[login] >= self.per_login:
                raise SlotsBusy(f"{login} has {self._held[login]} {self.what} running, the most one login may run at "
                                f"once; {self.until} and try again")
            if sum(self._held.values()) >= self.total:
                raise SlotsBusy(f"{self.total} {self.what} are running, the most this dashboard runs at once; try "
                                "again in a moment")
            self._held[login] += 1

    def release(self, login: str | None) -> None:
        """Give back a slot ``login`` holds."""
        with self._lock:
            if self._held[login] > 0:
                self._held[login] -= 1
            if self._held[login] == 0:
                del self._held[login]

    @contextmanager
    def hold(self, login: str | None) -> Iterator[None]:
        """A slot for ``login`` during the block. Raises SlotsBusy (see :meth:`acquire`)."""
        self.acquire(login)
        try:
            yield
        finally:
            self.release(login)


#: Rescorings (reward workbench, ``rescore_run``): each a child process using the cores; 3 at once, 1 a login.
RESCORE_SLOTS = JobSlots("rescorings", total=3, per_login=1)
#: Handlers that load a model in a child process (preflight, Try the model, merge): 2 at once, 1 a login.
MODEL_SLOTS = JobSlots("model jobs", total=2, per_login=1)
#: The Launch tab's try-out bench and reward-hacking probe (scored in the web process or a short child).
PREVIEW_SLOTS = JobSlots("try-out scorings", total=8, per_login=2)
#: Children that import a login's own code to check it (:func:`grpo_core.reward_check.job.check_plugins`,
#: :func:`grpo_core.tools.job.check_tool_plugins`): a launch's, a sweep's points', the preflight's and the Launch tab's
#: memory estimate's. Each is light (one Python process: a tool plugin check, importing transformers' schema helper,
#: took 1.9 s of one core and 255 MB peak; a reward plugin check 0.2 s and 36 MB, plus what the plugin imports) but
#: runs the login's code for up to 60 s; 4 at once keep a small server's cores and memory for the runs, 2 a login
#: let one login's launch and estimate run together while the other 2 always serve another login. A slot is taken
#: only while such a child runs: a launch without plugins never waits for one.
PLUGIN_CHECK_SLOTS = JobSlots("plugin checks", total=4, per_login=2,
                              until="wait for one to end (a check takes seconds, at most a minute)")
#: The Datasets tab's "Add from the hub" (:func:`grpo_core.datasets.library.import_hub_dataset`): a child downloading
#: and converting a hub dataset, network- and disk-bound for up to 30 min; 2 at once, 1 a login.
HUB_LOAD_SLOTS = JobSlots("hub dataset loads", total=2, per_login=1, until="wait for it to end")
