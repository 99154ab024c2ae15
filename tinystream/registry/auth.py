"""HTTP Basic authentication against the cluster's SCRAM users (the broker's `sasl.users.file`).

A registry started with a users file answers 401 (with a Basic challenge) to
any call without valid credentials; the password is checked the way the
broker checks SASL/PLAIN, against the stored salted SCRAM keys, so one
`tinystream users add` serves both. What a user may then do is authz.py's
(a rules file), or everything without one. The file is read again when it changes.

Checking a password costs a PBKDF2 run (4096 rounds or more: ~5 ms, on the
event loop); a credential that passed is remembered as a salted digest until
the file changes, so a client's next calls cost one SHA-256. At most
`_REMEMBERED` of them are kept; a wrong password is never remembered.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from tinystream.scram_users import UserStore

_REMEMBERED = 1024


def parse_basic(header: str | None) -> tuple[str, str] | None:
    """(user, password) from an `Authorization: Basic ...` header, or None."""
    if not header or not header.startswith("Basic "):
        return None
    try:
        decoded = base64.b64decode(header[6:].strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, sep, password = decoded.partition(":")
    return (user, password) if sep and user else None


class BasicAuth:
    def __init__(self, users_file: str | Path) -> None:
        self.path = Path(users_file)
        self._mtime: float | None = None
        self._store = UserStore()
        self._salt = os.urandom(16)
        self._passed: set[bytes] = set()

    def _users(self) -> UserStore:
        mtime = self.path.stat().st_mtime
        if mtime != self._mtime:
            self._store, self._mtime = UserStore.load(self.path), mtime
            self._passed.clear()  # a removed user or a new password counts from now on
        return self._store

    def check(self, header: str | None) -> str | None:
        """The authenticated user name, or None."""
        credentials = parse_basic(header)
        if credentials is None:
            return None
        user, password = credentials
        users = self._users()
        digest = hashlib.sha256(self._salt + f"{len(user)}:{user}:{password}".encode()).digest()
        if digest in self._passed:
            return user
        if not users.check_plain(user, password):
            return None
        if len(self._passed) >= _REMEMBERED:
            self._passed.clear()
        self._passed.add(digest)
        return user
