"""The local spool of a run recorded over HTTP: append-only record files that a sender empties in order.

A script's :class:`~grpo_core.integrations.DashboardCallback` never waits for the dashboard: each record (a training
step, the end of training) is numbered and appended to ``<spool>/records.jsonl`` by the recording thread, and
:class:`~grpo_core.integrations.sender.SpoolSender` sends what the dashboard has not acknowledged, in order, whenever
it answers. So memory stays bounded whatever the outage (everything waits on disk), and a script that ends while
the dashboard is down leaves a spool that ``grpo-dashboard sync DIR`` sends later.

A spool folder holds:

* ``meta.json``: the dashboard's address, the sender's ``client_key`` for the run and the create request (name,
  config, tags, provenance); after the first answer, the run's id. Never the token, only ``url_binding``: an HMAC
  of the address keyed by the token (:func:`grpo_core.integrations.sender.url_binding`), by which ``sync`` knows
  the address was written by a holder of the token.
* ``records.jsonl``: one JSON record per line, ``seq`` = 1, 2, 3, ... (:mod:`grpo_core.integrations.wire`).
* ``acked``: ``"<seq> <byte offset>"``: the last record the dashboard applied and where the next one starts.

Imports neither torch nor TRL (``grpo-dashboard sync`` uses it).
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

META_FILE = "meta.json"
RECORDS_FILE = "records.jsonl"
ACKED_FILE = "acked"


class SpoolError(ValueError):
    """A folder that is not a readable spool; the message says what is wrong."""


def _write_atomic(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


class Spool:
    """One run's spool folder (made with :meth:`create`, reopened with :meth:`open`). Thread-safe: the recording
    thread appends while the sender reads and acknowledges."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._meta: dict[str, Any] = json.loads((self.folder / META_FILE).read_text(encoding="utf-8"))
        self._last_seq, self._end = self._scan_end()
        self._acked, self._acked_offset = self._read_acked()

    @classmethod
    def create(cls, folder: str | Path, *, url: str, client_key: str, create: dict[str, Any],
               url_binding: str | None = None) -> Spool:
        """Make a new spool in ``folder`` (created; it must hold no spool yet).

        Raises:
            SpoolError: ``folder`` holds a spool already.
        """
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if (folder / META_FILE).exists():
            raise SpoolError(f"{folder} holds a spool already")
        _write_atomic(folder / META_FILE, json.dumps({"url": url, "client_key": client_key, "create": create,
                                                      "run_id": None, "url_binding": url_binding}))
        (folder / RECORDS_FILE).touch()
        return cls(folder)

    @classmethod
    def open(cls, folder: str | Path) -> Spool:
        """Reopen the spool in ``folder``.

        Raises:
            SpoolError: no spool there, or its files cannot be read.
        """
        folder = Path(folder)
        if not (folder / META_FILE).is_file():
            raise SpoolError(f"{folder} is not a spool folder (it has no {META_FILE})")
        try:
            return cls(folder)
        except (OSError, ValueError) as exc:
            raise SpoolError(f"{folder}: the spool cannot be read: {exc}") from exc

    # ------------------------------------------------------------------------------------------------ state
    @property
    def url(self) -> str:
        return str(self._meta["url"])

    @property
    def url_binding(self) -> str:
        """The HMAC of :attr:`url` under the token that made the spool (empty: none recorded)."""
        return str(self._meta.get("url_binding") or "")

    @property
    def client_key(self) -> str:
        return str(self._meta["client_key"])

    @property
    def create_request(self) -> dict[str, Any]:
        return dict(self._meta["create"])

    @property
    def run_id(self) -> int | None:
        return self._meta.get("run_id")

    def set_run_id(self, run_id: int) -> None:
        """Remember the run's id on the dashboard (its answer to the create request)."""
        with self._lock:
            if self._meta.get("run_id") != run_id:
                self._meta["run_id"] = int(run_id)
                _write_atomic(self.folder / META_FILE, json.dumps(self._meta))

    @property
    def last_seq(self) -> int:
        """The number of the last record appended (0: none)."""
        with self._lock:
            return self._last_seq

    @property
    def acked(self) -> int:
        """The number of the last record the dashboard applied."""
        with self._lock:
            return self._acked

    @property
    def finished(self) -> bool:
        """Whether every record appended so far is acknowledged."""
        with self._lock:
            return self._acked >= self._last_seq

    # --------------------------------------------------------------------------------------------- records
    def append(self, record: dict[str, Any]) -> int:
        """Number ``record`` (its ``seq`` is set) and append it as one line; returns its number."""
        with self._lock:
            seq = self._last_seq + 1
            line = json.dumps({**record, "seq": seq}, separators=(",", ":")) + "\n"
            with open(self.folder / RECORDS_FILE, "a", encoding="utf-8") as handle:
                handle.write(line)
            self._last_seq = seq
            self._end += len(line.encode("utf-8"))
            return seq

    def pending(self, *, max_records: int, max_bytes: int) -> list[dict[str, Any]]:
        """The records after the acknowledged one, oldest first: at most ``max_records``, and at most ``max_bytes``
        of JSON unless the first alone is larger."""
        with self._lock:
            offset, end = self._acked_offset, self._end
        records: list[dict[str, Any]] = []
        size = 0
        with open(self.folder / RECORDS_FILE, "rb") as handle:
            handle.seek(offset)
            while len(records) < max_records and handle.tell() < end:
                line = handle.readline()
                if not line.endswith(b"\n"):
                    break
                if records and size + len(line) > max_bytes:
                    break
                size += len(line)
                records.append(json.loads(line))
        return records

    def ack(self, seq: int) -> None:
        """The dashboard applied every record up to ``seq``: the next :meth:`pending` starts after it.

        A number below the acknowledged one (a dashboard whose store lost records) rewinds: they are sent again.
        """
        with self._lock:
            seq = max(0, min(int(seq), self._last_seq))
            if seq == self._acked:
                return
            start_seq, offset = (self._acked, self._acked_offset) if seq > self._acked else (0, 0)
            with open(self.folder / RECORDS_FILE, "rb") as handle:
                handle.seek(offset)
                for _ in range(seq - start_seq):
                    offset += len(handle.readline())
            self._acked, self._acked_offset = seq, offset
            _write_atomic(self.folder / ACKED_FILE, f"{seq} {offset}\n")

    def _read_acked(self) -> tuple[int, int]:
        path = self.folder / ACKED_FILE
        if not path.is_file():
            return 0, 0
        seq, offset = (int(part) for part in path.read_text(encoding="utf-8").split())
        if not (0 <= seq <= self._last_seq and 0 <= offset <= self._end):
            raise SpoolError(f"{path} says {seq} records were sent, but the spool holds {self._last_seq}")
        return seq, offset

    def _scan_end(self) -> tuple[int, int]:
        """The last record's number and the end of the last whole line (a line cut by a crash is dropped)."""
        path = self.folder / RECORDS_FILE
        last, end = 0, 0
        with open(path, "rb") as handle:
            for line in handle:
                if not line.endswith(b"\n"):
                    break
                last = int(json.loads(line)["seq"])
                end += len(line)
        if path.stat().st_size != end:  # a half-written last line: cut it, the next append starts clean
            with open(path, "r+b") as handle:
                handle.truncate(end)
        return last, end
