"""The auth file as the served dashboard keeps it: hashed passwords, written by a command, read again when it changes.

* :func:`add_login` / :func:`remove_login` write one entry (``grpo-dashboard auth add alice``): the password as a
  salted scrypt hash (:mod:`grpo_core.access.passwords`), the file replaced atomically with mode ``0600``.
* :func:`migrate_auth_file`: a line whose password is plain text is rewritten with its hash, in place (comments,
  marks and order kept), and a warning names the line; ``serve`` does it at start and whenever the file changes, so
  no password stays in plain text on disk. A file that cannot be rewritten refuses the start.
* :class:`LoginRegistry`: who may log in now. Gradio's login calls :meth:`LoginRegistry.verify`; the ingest API
  asks :meth:`LoginRegistry.is_live` before a token writes, so a login removed from the file loses its API tokens
  and its open sessions at once (no restart). The file is read again whenever its size, time or inode changes
  (checked at most every :data:`RECHECK_S`); a file that no longer parses keeps the last good logins, with a
  warning in the log. Marks (``[admin]``, ``[run-code]``) follow the file too.

Format of a line: ``[marks] user:scrypt$n$r$p$salt$hash`` (see docs/security.md).
"""

from __future__ import annotations

import logging
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from grpo_core.access.logins import (
    ADMIN_MARK,
    AUTH_MARKS,
    RUN_CODE_MARK,
    AccessError,
    _leading_marks,
    parse_credential,
)
from grpo_core.access.passwords import hash_password, is_password_hash, verify_password

log = logging.getLogger(__name__)

#: Least seconds between two looks at the auth file's size and time.
RECHECK_S = 0.5


@dataclass(frozen=True)
class Login:
    """One login: its stored password hash and marks."""

    user: str
    password_hash: str
    marks: frozenset[str] = frozenset()


def _parse_lines(text: str, path: Path) -> list[tuple[int, str, Login | None, str]]:
    """``(line number, line, login or None for a blank/comment line, the password as written)`` of each line."""
    parsed = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            parsed.append((number, line, None, ""))
            continue
        source = f"auth file {path}, line {number}"
        marks, rest = _leading_marks(line.rstrip("\r"), source)
        user, password = parse_credential(rest, source)
        parsed.append((number, line, Login(user, password if is_password_hash(password) else "", marks), password))
    return parsed


def _line(login: Login) -> str:
    marks = " ".join(mark for mark in AUTH_MARKS if mark in login.marks)
    return f"{marks} {login.user}:{login.password_hash}".lstrip()


def _write(path: Path, lines: Iterable[str]) -> None:
    """Replace ``path`` atomically with ``lines``, readable by its owner only."""
    path = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write("".join(f"{line}\n" for line in lines))
        os.chmod(temporary, 0o600)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _read(path: Path) -> str:
    try:
        return Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessError(f"auth file {path}: cannot be read ({exc.__class__.__name__}: {exc})") from None


def migrate_auth_file(path: str | Path) -> list[str]:
    """Rewrite each plain-text password of the file as its hash; returns one warning per line rewritten.

    Raises:
        AccessError: the file cannot be read or parsed, or cannot be rewritten (the message says so).
    """
    path = Path(path)
    parsed = _parse_lines(_read(path), path)
    plain = [number for number, _, login, _ in parsed if login is not None and not login.password_hash]
    if not plain:
        return []
    lines = [line if login is None or login.password_hash else
             _line(Login(login.user, hash_password(password), login.marks))
             for _, line, login, password in parsed]
    try:
        _write(path, lines)
    except OSError as exc:
        raise AccessError(f"auth file {path}: lines {plain} hold plain-text passwords and the file cannot be "
                          f"rewritten with their hashes ({exc}); write each with `grpo-dashboard auth add`") from None
    return [f"auth file {path}, line {number}: the password was stored in plain text; it is now a salted hash"
            for number in plain]


def add_login(path: str | Path, user: str, password: str, *, admin: bool = False, run_code: bool = False) -> bool:
    """Write ``user``'s entry (the password hashed) in the auth file, replacing its line if it has one, else
    appending; the file is created when missing. Returns whether the login was new.

    Raises:
        AccessError: a user name that is empty, holds white space or ``:`` or starts with ``[``; an empty password;
            a file that cannot be read or written.
    """
    path = Path(path)
    if not user or any(c.isspace() for c in user) or ":" in user or user.startswith(("[", "#")):
        raise AccessError(f"the user name {user[:80]!r} must be non-empty, without white space or ':', and not start "
                          "with '[' or '#'")
    try:
        entry = Login(user, hash_password(password),
                      frozenset(m for m, on in ((ADMIN_MARK, admin), (RUN_CODE_MARK, run_code)) if on))
    except ValueError as exc:
        raise AccessError(str(exc)) from None
    parsed = _parse_lines(_read(path), path) if path.exists() else []
    lines, new = [], True
    for _, line, login, _ in parsed:
        if login is not None and login.user == user:
            line, new = _line(entry), False
        lines.append(line)
    if new:
        lines.append(_line(entry))
    _write(path, lines)
    return new


def remove_login(path: str | Path, user: str) -> bool:
    """Remove ``user``'s line from the auth file; returns whether it had one.

    Raises:
        AccessError: the file cannot be read, parsed or written.
    """
    path = Path(path)
    parsed = _parse_lines(_read(path), path)
    kept = [line for _, line, login, _ in parsed if login is None or login.user != user]
    if len(kept) == len(parsed):
        return False
    _write(path, kept)
    return True


class LoginRegistry:
    """The logins a served dashboard accepts now: the ``--auth`` pair (fixed, hashed in memory) and the auth file's
    lines (read again when the file changes). Thread-safe.

    Args:
        fixed: ``(user, password or hash)`` pairs that do not come from the file (``--auth USER:PASSWORD``).
        path: the auth file, or ``None``.
    """

    def __init__(self, fixed: Iterable[tuple[str, str]] = (), path: str | Path | None = None) -> None:
        self.path = Path(path) if path else None
        self._fixed = {user: Login(user, secret if is_password_hash(secret) else hash_password(secret))
                       for user, secret in fixed}
        self._lock = threading.Lock()
        self._file: dict[str, Login] = {}
        self._stamp: tuple | None = None
        self._checked = 0.0
        self._listeners: list[Callable[[frozenset[str]], None]] = []
        if self.path is not None:
            self._load(force=True)

    @classmethod
    def from_settings(cls, settings) -> LoginRegistry | None:
        """The registry of :class:`grpo_core.settings.Settings`' ``auth`` and ``auth_file``; ``None`` without logins."""
        if not settings.auth:
            return None
        path = getattr(settings, "auth_file", None)
        in_file: set[str] = set()
        if path:
            in_file = {login.user for _, _, login, _ in _parse_lines(_read(Path(path)), Path(path)) if login}
        return cls([(u, p) for u, p in settings.auth if u not in in_file], path)

    # ------------------------------------------------------------------------------------------------ reading
    def _file_stamp(self) -> tuple | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns

    def _load(self, *, force: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            if not force and now - self._checked < RECHECK_S:
                return
            self._checked = now
            stamp = self._file_stamp()
            if not force and stamp == self._stamp:
                return
            before = set(self._file)
            try:
                for warning in migrate_auth_file(self.path):
                    log.warning("%s", warning)
                parsed = _parse_lines(_read(self.path), self.path)
                self._file = {login.user: login for _, _, login, _ in parsed if login is not None}
                self._stamp = self._file_stamp()
            except AccessError as exc:
                if force:
                    raise
                log.warning("the auth file changed but cannot be used (%s); the last good logins stay", exc)
                self._stamp = stamp
                return
            removed = frozenset(before - set(self._file) - set(self._fixed))
        if removed:
            log.warning("logins removed from the auth file: %s; their sessions and API tokens stop now",
                        ", ".join(sorted(removed)))
            for listener in list(self._listeners):
                listener(removed)

    def logins(self) -> dict[str, Login]:
        """Every login accepted now, by user."""
        if self.path is not None:
            self._load()
        with self._lock:
            return {**self._fixed, **self._file}

    def on_removed(self, listener: Callable[[frozenset[str]], None]) -> None:
        """Call ``listener(users)`` whenever logins disappear from the file (to end their sessions)."""
        self._listeners.append(listener)

    # ------------------------------------------------------------------------------------------------ asking
    def verify(self, user: str, password: str) -> bool:
        """Gradio's login check: ``user`` is listed now and ``password`` matches its hash (constant-time)."""
        login = self.logins().get(user) if isinstance(user, str) else None
        return verify_password(password, login.password_hash if login else None)

    def is_live(self, user: str | None) -> bool:
        """Whether ``user`` may log in now (is listed)."""
        return user is not None and user in self.logins()

    def admins(self) -> frozenset[str]:
        return frozenset(u for u, login in self.logins().items() if ADMIN_MARK in login.marks)

    def code_runners(self) -> frozenset[str]:
        return frozenset(u for u, login in self.logins().items() if RUN_CODE_MARK in login.marks)

    def watch(self, interval_s: float = 1.0) -> threading.Thread:
        """Look at the file every ``interval_s`` on a daemon thread (so removed logins' sessions end without a
        request naming them)."""
        def loop() -> None:
            while True:
                time.sleep(interval_s)
                try:
                    self.logins()
                except Exception:  # noqa: BLE001 - the watcher must outlive a bad moment of the file system
                    log.exception("reading the auth file failed")

        thread = threading.Thread(target=loop, name="auth-file-watch", daemon=True)
        if self.path is not None:
            thread.start()
        return thread
