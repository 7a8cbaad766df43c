"""Settings read once at an entry point (CLI flags, then environment variables, then defaults) and passed in."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from storage import sqlite_url

ENV_DATA_DIR = "GRPO_DATA_DIR"
ENV_DB_URL = "GRPO_DB_URL"
ENV_HOST = "GRPO_HOST"
ENV_PORT = "GRPO_PORT"
ENV_MAX_CONCURRENT_RUNS = "GRPO_MAX_CONCURRENT_RUNS"


@dataclass(frozen=True)
class Settings:
    """Where the dashboard keeps its state and how it serves.

    Attributes:
        data_dir: root of the store file, uploaded datasets, run folders and the converted-model cache.
        db_url: SQLAlchemy URL of the store (default: SQLite file ``<data_dir>/grpo.db``).
        host, port: where the web server listens.
        max_concurrent_runs: runs training at once; further runs wait as ``queued``.
        poll_interval_s: how often the launcher looks for queued, finished and dead runs (seconds).
        cancel_grace_s: seconds a cancelled run gets to stop at a step boundary before its process group is killed.
    """

    data_dir: Path
    db_url: str
    host: str = "127.0.0.1"
    port: int = 7860
    max_concurrent_runs: int = 1
    poll_interval_s: float = 2.0
    cancel_grace_s: float = 60.0

    @property
    def runs_dir(self) -> Path:
        """Folder holding one sub-folder per run (config YAML, log, checkpoints, adapter)."""
        return self.data_dir / "runs"

    @property
    def datasets_dir(self) -> Path:
        """Folder holding the normalised JSONL of each uploaded dataset."""
        return self.data_dir / "datasets"

    @property
    def model_cache_dir(self) -> Path:
        """Folder holding models converted from GGUF to safetensors, keyed by the GGUF's hash."""
        return self.data_dir / "models"

    def ensure_dirs(self) -> None:
        """Create the data folders if missing."""
        for path in (self.data_dir, self.runs_dir, self.datasets_dir, self.model_cache_dir):
            path.mkdir(parents=True, exist_ok=True)

    def with_overrides(self, **changes) -> Settings:
        """A copy with some fields changed."""
        return replace(self, **changes)


def load_settings(
    *,
    data_dir: str | Path | None = None,
    db_url: str | None = None,
    host: str | None = None,
    port: int | None = None,
    max_concurrent_runs: int | None = None,
) -> Settings:
    """Settings from explicit values, else ``GRPO_*`` environment variables, else defaults.

    Raises:
        ValueError: ``GRPO_PORT`` or ``GRPO_MAX_CONCURRENT_RUNS`` is not a whole number.
    """
    env = os.environ
    root = Path(data_dir or env.get(ENV_DATA_DIR) or "grpo_data").expanduser().resolve()
    url = db_url or env.get(ENV_DB_URL) or sqlite_url(root / "grpo.db")

    def _int(value: int | None, name: str, default: int) -> int:
        if value is not None:
            return int(value)
        raw = env.get(name)
        if raw is None or raw == "":
            return default
        try:
            return int(raw)
        except ValueError:
            raise ValueError(f"environment variable {name}={raw!r} is not a whole number") from None

    return Settings(
        data_dir=root,
        db_url=url,
        host=host or env.get(ENV_HOST) or "127.0.0.1",
        port=_int(port, ENV_PORT, 7860),
        max_concurrent_runs=max(1, _int(max_concurrent_runs, ENV_MAX_CONCURRENT_RUNS, 1)),
    )
