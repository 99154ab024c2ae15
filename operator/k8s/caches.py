"""What the handlers remember between passes, per object uid: guards against a stale body.

A kopf timer may run on a body older than the status patch just written by
another handler. Status is the record that survives a restart; these small
maps hold what this process did since, so a stale body repeats neither an
Event nor a certificate. Each is forgotten when its object is deleted.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Mapping
from typing import Any

from tinystream.operator.k8s.certificates import IssuedRecord


def uid_of(body: Mapping[str, Any]) -> str:
    return (body.get("metadata") or {}).get("uid") or ""


class ReportedReasons:
    """The last Ready reason reported (as an Event) per object; status is the fallback after a restart."""

    def __init__(self) -> None:
        self._reasons: dict[str, str] = {}

    def changed(self, body: Mapping[str, Any], status: Any, reason: str) -> bool:
        """Record `reason` as reported; True when it differs from the one reported before."""
        uid = uid_of(body)
        conditions = (status or {}).get("conditions") or []
        written = next((c.get("reason") for c in conditions if c.get("type") == "Ready"), None)
        before = self._reasons.get(uid, written)
        self._reasons[uid] = reason
        return before != reason

    def forget(self, uid: str) -> None:
        self._reasons.pop(uid, None)


class IssuedCertificates:
    """The broker certificate (status.certificates) and CA state (status.clusterCa) each cluster was last
    given by this process: kopf's next body may not show the status patch yet."""

    def __init__(self) -> None:
        self._issued: dict[str, dict[str, str]] = {}
        self._ca: dict[str, dict[str, Any]] = {}
        self._clients_ca: dict[str, dict[str, Any]] = {}

    def latest(self, uid: str, status: Any) -> dict[str, Any]:
        """`status` with the certificates and CA state recorded here since in place of its own."""
        return {**(status or {}), "certificates": self._issued.get(uid) or (status or {}).get("certificates"),
                "clusterCa": self._ca.get(uid) or (status or {}).get("clusterCa"),
                "clientsCa": self._clients_ca.get(uid) or (status or {}).get("clientsCa")}

    def record(self, uid: str, certificates: dict[str, str]) -> None:
        self._issued[uid] = certificates

    def record_ca(self, uid: str, cluster_ca: dict[str, Any]) -> None:
        self._ca[uid] = cluster_ca

    def record_clients_ca(self, uid: str, clients_ca: dict[str, Any]) -> None:
        self._clients_ca[uid] = clients_ca

    def forget(self, uid: str) -> None:
        self._issued.pop(uid, None)
        self._ca.pop(uid, None)
        self._clients_ca.pop(uid, None)


class UserSecretPasses:
    """What this process last did to each user's Secret, and one pass at a time per user.

    The Secret timer runs beside the change handlers; a stale body would renew (or announce) twice.
    `issued[uid]` is the tls certificate in force after the last pass (None: a password user).
    """

    def __init__(self) -> None:
        self.issued: dict[str, IssuedRecord | None] = {}
        self.locks: collections.defaultdict[str, asyncio.Lock] = collections.defaultdict(asyncio.Lock)

    def recorded(self, uid: str, name: str, status: Any) -> bool:
        """True when the Secret was made: by this process, or as status says."""
        return uid in self.issued or (status or {}).get("secret") == name

    def current(self, uid: str, status: Any) -> IssuedRecord | None:
        if uid in self.issued:
            return self.issued[uid]
        return IssuedRecord.from_status((status or {}).get("certificate"))

    def forget(self, uid: str) -> None:
        self.issued.pop(uid, None)
        self.locks.pop(uid, None)
