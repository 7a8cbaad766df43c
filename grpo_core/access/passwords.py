"""Passwords of the auth file as salted scrypt hashes: make one, check one in constant time, tell one from plain text.

A stored password reads ``scrypt$<n>$<r>$<p>$<salt>$<hash>`` (salt and hash in URL-safe base64 without padding):
the standard library's :func:`hashlib.scrypt` (RFC 7914) with a random 16-byte salt per entry and a 32-byte key. The
cost (``n = 2**14``, ``r = 8``, ``p = 1``, 16 MiB and about 50 ms a check) is OWASP's minimum for scrypt; the
parameters are stored with each hash, so a file written with other costs still verifies. Pure functions.

Source: RFC 7914; OWASP Password Storage Cheat Sheet (scrypt parameters).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets

SCHEME = "scrypt"
#: scrypt's CPU/memory cost, block size and parallelism for new hashes.
COST_N, BLOCK_R, PARALLEL_P = 2**14, 8, 1
SALT_BYTES, KEY_BYTES = 16, 32
#: The most costly parameters a stored hash may name (a hostile file must not make each check take minutes).
MAX_COST_N, MAX_BLOCK_R, MAX_PARALLEL_P = 2**20, 32, 16
MAX_PASSWORD_CHARS = 1024

_HASH = re.compile(r"scrypt\$(\d{1,8})\$(\d{1,3})\$(\d{1,3})\$([A-Za-z0-9_-]{16,88})\$([A-Za-z0-9_-]{32,88})")
#: A hash of a random password, checked against when a login is unknown (so both answers take the same time).
_DUMMY: list[str] = []


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, length: int) -> bytes:
    return hashlib.scrypt(password.encode("utf-8", "surrogatepass"), salt=salt, n=n, r=r, p=p, dklen=length,
                          maxmem=256 * r * (n + p + 2) + 1024 * 1024)


def hash_password(password: str) -> str:
    """``password`` as a stored hash ``scrypt$n$r$p$salt$hash`` (a fresh salt each call).

    Raises:
        ValueError: an empty password or one over :data:`MAX_PASSWORD_CHARS`.
    """
    if not password or len(password) > MAX_PASSWORD_CHARS:
        raise ValueError(f"a password must have 1 to {MAX_PASSWORD_CHARS} characters")
    salt = secrets.token_bytes(SALT_BYTES)
    key = _scrypt(password, salt, COST_N, BLOCK_R, PARALLEL_P, KEY_BYTES)
    return f"{SCHEME}${COST_N}${BLOCK_R}${PARALLEL_P}${_b64(salt)}${_b64(key)}"


def is_password_hash(text: str) -> bool:
    """Whether ``text`` is a stored hash (as :func:`hash_password` writes), not a plain password."""
    match = _HASH.fullmatch(text)
    if match is None:
        return False
    n, r, p = (int(match.group(i)) for i in (1, 2, 3))
    return 2 <= n <= MAX_COST_N and n & (n - 1) == 0 and 1 <= r <= MAX_BLOCK_R and 1 <= p <= MAX_PARALLEL_P


def verify_password(password: str, stored: str | None) -> bool:
    """Whether ``password`` matches the stored hash; the key is compared in constant time (:func:`hmac.compare_digest`).

    ``stored`` ``None`` (an unknown login) or not a hash still costs one scrypt, so an answer does not tell which.
    """
    if stored is None or not is_password_hash(stored):
        if not _DUMMY:
            _DUMMY.append(hash_password(secrets.token_urlsafe(16)))
        stored, known = _DUMMY[0], False
    else:
        known = True
    if not isinstance(password, str) or not password or len(password) > MAX_PASSWORD_CHARS:
        password, known = "\0", False
    _, n, r, p, salt, key = stored.split("$")
    expected = _unb64(key)
    actual = _scrypt(password, _unb64(salt), int(n), int(r), int(p), len(expected))
    return hmac.compare_digest(actual, expected) and known
