"""Who may call the controller API: bearer tokens derived from one cluster secret.

Without credentials anyone who could reach the controller port could register
a broker, fence the real ones and move partitions to a host of their choosing.
Every caller now presents `Authorization: Bearer <token>`, where

    token = "<principal>.<base64url(HMAC-SHA256(secret, principal))>"

and the principal is `admin` (the operator, the CLI, dashboards) or
`broker-<id>` (one broker, which may act only as itself). The controller holds
the secret and checks a token by recomputing its MAC, so no token store is
needed and a leaked broker token cannot be turned into another broker's or the
admin's. What each principal may do is decided by the API (http_api.py).

On Kubernetes a broker proves who it is with its pod's own service-account token instead (projected,
audience `tinystream-controller`, expiring, rotated by the kubelet; the operator asks the API server,
operator/k8s/broker_identity.py): `TokenFile` re-reads such a token when the kubelet replaces it.

    secret = new_secret()
    token = token_for(secret, broker_principal(3))
    principal_of(secret, token)  -> "broker-3"
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import os
import secrets
from pathlib import Path

ADMIN = "admin"
_BROKER_PREFIX = "broker-"
_CONTEXT = b"tinystream-controller-token:"  # domain separation: this MAC signs nothing else


def broker_principal(broker_id: int) -> str:
    return f"{_BROKER_PREFIX}{broker_id}"


def broker_id_of(principal: str) -> int | None:
    """The broker id of a `broker-<id>` principal; None for any other principal."""
    if not principal.startswith(_BROKER_PREFIX):
        return None
    digits = principal[len(_BROKER_PREFIX):]
    return int(digits) if digits.isdigit() else None


def new_secret() -> str:
    return secrets.token_urlsafe(32)


def _mac(secret: str, principal: str) -> str:
    digest = hmac.new(secret.encode(), _CONTEXT + principal.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


def token_for(secret: str, principal: str) -> str:
    if not principal or "." in principal:
        raise ValueError(f"a principal is a non-empty name without dots, not {principal!r}")
    return f"{principal}.{_mac(secret, principal)}"


def principal_of(secret: str, token: str) -> str | None:
    """The principal a token was made for, or None when the secret did not make it."""
    principal, dot, mac = token.partition(".")
    if not dot or not principal:
        return None
    return principal if hmac.compare_digest(mac.encode(), _mac(secret, principal).encode()) else None


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header value."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


def read_secret(path: str | Path) -> str:
    """A secret or token kept in a file (whitespace around it ignored); refuses an empty one."""
    text = Path(path).read_text().strip()
    if not text:
        raise ValueError(f"{path} is empty: expected a controller secret or token")
    return text


def ensure_secret_file(path: str | Path) -> str:
    """The secret in `path`, made (owner-only, 0600) when the file does not exist yet."""
    path = Path(path)
    if path.exists():
        return read_secret(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = new_secret()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(secret + "\n")
    return secret


def write_token_file(path: str | Path, token: str) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(token + "\n")


class TokenFile:
    """A bearer token kept in a file that its issuer replaces (the kubelet rotates a projected
    service-account token before it expires): read again whenever the file changed."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._seen: tuple[int, int] | None = None  # (mtime_ns, inode) of the file last read
        self._token = ""

    def __call__(self) -> str:
        try:
            stat = self.path.stat()
            if (stat.st_mtime_ns, stat.st_ino) != self._seen:
                self._token = read_secret(self.path)
                self._seen = (stat.st_mtime_ns, stat.st_ino)
        except (OSError, ValueError):
            if not self._token:
                raise  # never read: the start stops with the file's name
            # caught mid-replacement: the last token read is still valid for a while
        return self._token
