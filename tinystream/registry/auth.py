"""Who is calling: HTTP Basic against the cluster's SCRAM users, or a client certificate (mTLS).

HTTP Basic checks against the broker's `sasl.users.file`.

A registry started with a users file answers 401 (with a Basic challenge) to
any call without valid credentials; the password is checked the way the
broker checks SASL/PLAIN, against the stored salted SCRAM keys, so one
`tinystream users add` serves both. What a user may then do is authz.py's
(a rules file), or everything without one. The file is read again when it changes.

Checking a password costs a PBKDF2 run (4096 rounds or more: ~5 ms, on the
event loop); a credential that passed is remembered as a salted digest until
the file changes, so a client's next calls cost one SHA-256. At most
`_REMEMBERED` of them are kept; a wrong password is never remembered.

A client certificate (mTLS, on an HTTPS listener that trusts the clients CA,
app.server_tls) names the caller the way the broker names an mTLS client:
its subject DN through `ssl.principal.mapping.rules` (tinystream/tls_principal.py),
so `CN=alice` is `User:CN=alice` on both. The TLS handshake has verified the
certificate already; a certificate no rule maps is no login (401).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
from pathlib import Path

from tinystream.registry.authz import file_version
from tinystream.scram_users import UserStore
from tinystream.tls_principal import NoMatchingRule, PrincipalMapper, subject_dn

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
        self._mtime: tuple[str, int] | None = None
        self._store = UserStore()
        self._salt = os.urandom(16)
        self._passed: set[bytes] = set()

    def _users(self) -> UserStore:
        mtime = file_version(self.path)
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


class CertificateAuth:
    """The caller named by its verified client certificate (the TLS layer checked the chain)."""

    def __init__(self, mapper: PrincipalMapper) -> None:
        self.mapper = mapper

    def check(self, der: bytes | None) -> str | None:
        """The user name (the mapped DN, e.g. `CN=alice`), or None without a certificate or a rule for it."""
        if not der:
            return None
        try:
            return self.mapper.name(subject_dn(der))
        except (NoMatchingRule, ValueError):
            return None
