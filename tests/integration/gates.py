"""A reward rule that holds a training worker at a known step until the test lets it go.

Tests that cancel, kill or restart something "while the run trains" must not race the model: a tiny model on a fast
machine finishes a 4-step run before a poll loop notices step 2. A :class:`Gate` is a ``plugin`` reward rule (a
file the worker imports) that, when the trainer reaches ``global_step >= at_step`` (so during the scoring of step
``at_step + 1``), writes a ``reached`` file and then blocks until a ``release`` file exists. The test waits for
``reached``, does what it wants to do to the run at that exact point, and releases the gate. A worker started after
the release (a resumed run) passes straight through.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

_PLUGIN = """\
import os
import time


def gate(completions, trainer_state=None, **kwargs):
    if trainer_state is not None and trainer_state.global_step >= {at_step} and not os.path.exists({release!r}):
        with open({reached!r}, "a") as marker:
            marker.write(f"{{trainer_state.global_step}}\\n")
        while not os.path.exists({release!r}):
            time.sleep(0.05)
    return [0.5] * len(completions)
"""


@dataclass(frozen=True)
class Gate:
    """A reward rule that blocks the worker from step ``at_step + 1``'s scoring on until :meth:`release`.

    ``at_step`` counts completed optimizer steps (TRL's ``trainer_state.global_step``): ``at_step=2`` holds the run
    with steps 1 and 2 recorded and step 3 generated but not yet scored.
    """

    folder: Path
    at_step: int

    @classmethod
    def create(cls, folder: Path, at_step: int) -> Gate:
        """Write the plugin file under ``folder`` (which must exist) and return the gate."""
        gate = cls(folder=Path(folder), at_step=at_step)
        gate.plugin_path.write_text(
            _PLUGIN.format(at_step=at_step, reached=str(gate.reached_path), release=str(gate.release_path))
        )
        return gate

    @property
    def plugin_path(self) -> Path:
        return self.folder / f"gate_{self.at_step}.py"

    @property
    def reached_path(self) -> Path:
        return self.folder / f"gate_{self.at_step}.reached"

    @property
    def release_path(self) -> Path:
        return self.folder / f"gate_{self.at_step}.release"

    def rule(self, weight: float = 1.0) -> dict:
        """The reward spec of the gate (a ``plugin`` rule returning 0.5 for every completion)."""
        return {"rule": "plugin", "weight": weight, "params": {"target": f"{self.plugin_path}:gate"}}

    @property
    def reached(self) -> bool:
        return self.reached_path.exists()

    def wait_reached(self, timeout_s: float, launcher=None) -> None:
        """Block until a worker is held at the gate (ticking ``launcher`` meanwhile, as the web process would).

        Raises:
            AssertionError: no worker reached the gate within ``timeout_s`` seconds.
        """
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if launcher is not None:
                launcher.tick()
            if self.reached:
                return
            time.sleep(0.1)
        raise AssertionError(f"no worker reached the gate at step {self.at_step} within {timeout_s} s")

    def release(self) -> None:
        """Let the held worker (and every later one) through."""
        self.release_path.touch()
