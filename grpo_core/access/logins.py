"""Who may use a served dashboard and what it accepts: login credentials, the exposure warning, the upload limit.

The dashboard can launch training (which runs plugin reward code) and shows every dataset, so one that others can
reach needs a login. Credentials come from ``--auth USER:PASSWORD`` / ``GRPO_AUTH`` and from a file of
``user:<scrypt hash>`` lines written by ``grpo-dashboard auth add`` (``--auth-file`` / ``GRPO_AUTH_FILE``; a plain
``user:password`` line is rewritten as its hash, :mod:`grpo_core.access.auth_file`); Gradio's own login
(``launch(auth=...)``) checks them. Below, ``user:password`` stands for either form of a line. A line may start with marks in brackets, each followed by white space: ``[admin] user:password`` marks an
admin, one who may cancel, resume, delete or annotate anyone's run (:mod:`grpo_core.access.ownership`);
``[run-code] user:password`` lets that login run code of its own choosing on the server (any reward plugin file or
module, ``trust_remote_code``; :mod:`grpo_core.access.boundary`). Both may be given (``[admin] [run-code] user:password``);
an unknown mark is refused. Binding an address other than loopback without any is allowed, with a warning. Pure
functions except :func:`read_auth_file`; no gradio here.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from pathlib import Path

from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError

Credentials = tuple[tuple[str, str], ...]
"""``((user, password), ...)``, as Gradio's ``launch(auth=[...])`` takes them."""

# Gradio's size units are binary (``"200mb"`` is 200 * 1024 * 1024 bytes): use the same so both checks agree.
BYTES_PER_MB = 1024 * 1024
DEFAULT_MAX_UPLOAD_MB = 200


class AccessError(ValueError):
    """Credentials or a limit that cannot be used; the message names where they came from, never a password."""


def parse_credential(text: str, source: str) -> tuple[str, str]:
    """``"user:password"`` as ``(user, password)``; the password may itself contain ``:``.

    Args:
        source: where ``text`` came from, for the message (``--auth``, ``GRPO_AUTH``, ``users.txt, line 3``).

    Raises:
        AccessError: no ``:``, or an empty user or password.
    """
    user, colon, password = text.partition(":")
    user = user.strip()
    if not colon or not user or not password:
        raise AccessError(f"{source}: expected USER:PASSWORD with a non-empty user and password")
    if any(c.isspace() for c in user):
        raise AccessError(f"{source}: the user name {user!r} contains white space")
    return user, password


ADMIN_MARK = "[admin]"
"""Written before ``user:password`` (then white space) on a line of the auth file to make that user an admin."""
RUN_CODE_MARK = "[run-code]"
"""Written before ``user:password`` (then white space) to let that login run code of its own on the server."""
AUTH_MARKS = (ADMIN_MARK, RUN_CODE_MARK)


def read_auth_file(path: str | Path) -> list[tuple[str, str]]:
    """The ``user:password`` lines of a file; blank lines and lines starting with ``#`` are skipped.

    A line's trailing newline and carriage return are dropped, nothing else: a password keeps its spaces. The
    :data:`ADMIN_MARK` of a line is dropped here (see :func:`read_auth_admins`).

    Raises:
        AccessError: the file cannot be read, a line is malformed (named by number), or it lists no user.
    """
    return [(user, password) for user, password, _ in _auth_file_entries(path)]


def read_auth_admins(path: str | Path) -> frozenset[str]:
    """The users of an auth file whose line starts with :data:`ADMIN_MARK` (may be empty).

    Raises:
        AccessError: as :func:`read_auth_file`.
    """
    return frozenset(user for user, _, marks in _auth_file_entries(path) if ADMIN_MARK in marks)


def read_auth_code_runners(path: str | Path) -> frozenset[str]:
    """The users of an auth file whose line carries :data:`RUN_CODE_MARK` (may be empty).

    Raises:
        AccessError: as :func:`read_auth_file`.
    """
    return frozenset(user for user, _, marks in _auth_file_entries(path) if RUN_CODE_MARK in marks)


def _leading_marks(line: str, source: str) -> tuple[frozenset[str], str]:
    """The ``[mark]`` words at the start of an auth file line (each followed by white space) and the rest.

    A line whose user name itself starts with ``[`` but has no white space after the ``]`` keeps its old meaning
    (no mark), so files written before marks existed read the same.

    Raises:
        AccessError: a mark that is not one of :data:`AUTH_MARKS` (a typo must not pass silently).
    """
    marks: set[str] = set()
    while line.startswith("["):
        end = line.find("]")
        if end < 0 or not line[end + 1:end + 2].isspace():
            break
        mark = line[:end + 1]
        if mark not in AUTH_MARKS:
            raise AccessError(f"{source}: unknown mark {mark}; the marks are {', '.join(AUTH_MARKS)}")
        marks.add(mark)
        line = line[end + 1:].lstrip()
    return frozenset(marks), line


def _auth_file_entries(path: str | Path) -> list[tuple[str, str, frozenset[str]]]:
    """``(user, password, marks)`` of each login line of the file, in order."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise AccessError(f"auth file {path}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    pairs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        source = f"auth file {path}, line {number}"
        marks, text_line = _leading_marks(line.rstrip("\r"), source)
        user, password = parse_credential(text_line, source)
        pairs.append((user, password, marks))
    if not pairs:
        raise AccessError(f"auth file {path}: lists no user:password line")
    return pairs


def merge_credentials(pairs: Iterable[tuple[str, str]]) -> Credentials:
    """The pairs as :data:`Credentials`, in order.

    Raises:
        AccessError: a user is listed twice (one of the two passwords would silently stop working).
    """
    seen: dict[str, str] = {}
    for user, password in pairs:
        if user in seen:
            raise AccessError(f"the user {user!r} is listed twice in the login credentials")
        seen[user] = password
    return tuple(seen.items())


def load_credentials(auth: str | None = None, auth_file: str | Path | None = None) -> Credentials:
    """Credentials from one ``USER:PASSWORD`` and/or a file of them (both may be given); empty when neither is.

    Raises:
        AccessError: as :func:`parse_credential`, :func:`read_auth_file` and :func:`merge_credentials`.
    """
    pairs = []
    if auth:
        pairs.append(parse_credential(auth, "--auth / GRPO_AUTH"))
    if auth_file:
        pairs.extend(read_auth_file(auth_file))
    return merge_credentials(pairs)


def is_loopback(host: str) -> bool:
    """True when ``host`` is reachable from this machine only (``127.x.x.x``, ``::1``, ``localhost``)."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False  # a host name or "0.0.0.0"-like wildcard: others may reach it


def exposure_warnings(host: str, port: int, *, has_auth: bool) -> list[str]:
    """What to tell whoever serves the dashboard on ``host:port`` (empty on a loopback address).

    Without a login anyone who reaches the address can read every dataset and run, and launch training that
    executes plugin reward code; with one, Gradio's login still sends the password in clear over plain HTTP.
    """
    if is_loopback(host):
        return []
    where = f"{host}:{port}"
    if not has_auth:
        return [
            f"the dashboard listens on {where}, which other machines may reach, WITHOUT A LOGIN: anyone who can "
            "connect can read every dataset and run and launch training (which runs plugin reward code). Set "
            "--auth USER:PASSWORD, GRPO_AUTH or --auth-file, or bind 127.0.0.1 (--host)."
        ]
    return [
        f"the dashboard listens on {where} with a login over plain HTTP: passwords travel unencrypted unless an "
        "HTTPS proxy stands in front."
    ]


def max_upload_bytes(max_upload_mb: int) -> int:
    """The upload limit in bytes (binary megabytes, as Gradio counts them)."""
    return max_upload_mb * BYTES_PER_MB


def upload_too_large_message(source_name: str, size_bytes: int, max_upload_mb: int) -> str | None:
    """``"doubles.jsonl is 312 MB; the limit is 200 MB"`` when the file is over the limit, else None."""
    if size_bytes <= max_upload_bytes(max_upload_mb):
        return None
    size_mb = size_bytes / BYTES_PER_MB
    shown = f"{size_mb:.0f}" if size_mb >= 10 else f"{size_mb:.1f}"
    if shown == str(max_upload_mb):  # just over the limit: do not print "200 MB; the limit is 200 MB"
        shown = f"{size_mb:.2f}"
    return f"{source_name} is {shown} MB; the limit is {max_upload_mb} MB"


def redact_url(url: str) -> str:
    """A database URL fit to print: its password replaced by ``***`` (unparsable URLs are returned as they are)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url
