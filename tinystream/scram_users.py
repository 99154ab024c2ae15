"""SCRAM credentials kept salted, as Kafka keeps them: salt, StoredKey, ServerKey, iterations.

A password never reaches the broker's disk: `tinystream users add` derives the
credentials (RFC 5802) and writes them to `sasl.users.file`:

    {"users": {"alice": {"SCRAM-SHA-512": {"salt": "<b64>", "stored_key": "<b64>",
                                           "server_key": "<b64>", "iterations": 4096}}}}

PLAIN is checked against the same credentials: the password it carries is
salted and hashed the same way and compared with StoredKey, so one file
serves every mechanism.

Two sources, one store: the file (bootstrap: the inter-broker and admin users,
there before any controller answers) and the credentials replicated in the
controller's metadata image (AlterUserScramCredentials, KIP-554), which
`replace_replicated` swaps in whole whenever the image changes. For a
(user, mechanism) in both, the image's wins: it is the latest change.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import scramp

from tinystream.atomic_file import write_atomically

SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
MIN_ITERATIONS = 4096  # Kafka's minimum
_HASH = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_password(cls, mechanism: str, password: str, *, iterations: int = MIN_ITERATIONS) -> ScramCredential:
        salt, stored_key, server_key, count = scramp.ScramMechanism(mechanism).make_auth_info(
            password, iteration_count=iterations)
        return cls(salt, stored_key, server_key, count)

    def matches_password(self, mechanism: str, password: str) -> bool:
        """Whether `password` (from PLAIN) is the one these credentials were made from."""
        digest = _HASH[mechanism]
        salted = hashlib.pbkdf2_hmac(digest().name, password.encode(), self.salt, self.iterations)
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        return hmac.compare_digest(digest(client_key).digest(), self.stored_key)

    def to_json(self) -> dict[str, Any]:
        b64 = base64.b64encode
        return {"salt": b64(self.salt).decode(), "stored_key": b64(self.stored_key).decode(),
                "server_key": b64(self.server_key).decode(), "iterations": self.iterations}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ScramCredential:
        b64 = base64.b64decode
        return cls(b64(data["salt"]), b64(data["stored_key"]), b64(data["server_key"]), int(data["iterations"]))


class UserStore:
    """user -> mechanism -> credential; loaded from (and saved to) `sasl.users.file`."""

    def __init__(self, users: dict[str, dict[str, ScramCredential]] | None = None,
                 *, file_only: frozenset[str] = frozenset()) -> None:
        self.users = users or {}  # from the file
        self.replicated: dict[str, dict[str, ScramCredential]] = {}  # from the controller's image
        # Users whose credentials come from the file alone (the inter-broker user): no credential
        # created through the Kafka API or the image can stand in for them.
        self.file_only = file_only

    def credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.mechanisms_of(user).get(mechanism)

    def mechanisms_of(self, user: str) -> dict[str, ScramCredential]:
        """Every credential `user` has, the image's over the file's (the file's alone for `file_only`)."""
        if user in self.file_only:
            return dict(self.users.get(user, {}))
        return {**self.users.get(user, {}), **self.replicated.get(user, {})}

    def user_names(self) -> list[str]:
        return sorted(set(self.users) | set(self.replicated))

    def replace_replicated(self, users: dict[str, dict[str, ScramCredential]]) -> None:
        self.replicated = users

    def set_password(self, user: str, password: str, *, mechanisms: tuple[str, ...] = SCRAM_MECHANISMS,
                     iterations: int = MIN_ITERATIONS) -> None:
        if not user or "," in user or "=" in user:
            raise ValueError(f"a SCRAM user name is non-empty without ',' or '=', not {user!r}")
        self.users[user] = {m: ScramCredential.from_password(m, password, iterations=iterations) for m in mechanisms}

    def check_plain(self, user: str, password: str) -> bool:
        creds = self.mechanisms_of(user)
        return any(c.matches_password(m, password) for m, c in creds.items())

    @classmethod
    def load(cls, path: str | Path) -> UserStore:
        return cls.from_json(json.loads(Path(path).read_text()))

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> UserStore:
        users = {name: {m: ScramCredential.from_json(c) for m, c in mechs.items() if m in SCRAM_MECHANISMS}
                 for name, mechs in (data.get("users") or {}).items()}
        return cls(users)

    def to_json(self) -> dict[str, Any]:
        """The `sasl.users.file` document (the operator puts it in a Secret)."""
        return {"users": {name: {m: c.to_json() for m, c in mechs.items()} for name, mechs in self.users.items()}}

    def save(self, path: str | Path) -> None:
        body = self.to_json()
        write_atomically(Path(path), json.dumps(body, indent=1).encode(), durable=False, mode=0o600, parents=True)
