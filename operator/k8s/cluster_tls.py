"""The Secrets a secured cluster's brokers mount: its CA's certificate, the broker certificate, SCRAM users.

For a cluster `demo` with spec.listeners.tls and/or .authentication:

    Secret demo-cluster-ca-cert   ca.crt                    clients trust the brokers with it
    Secret demo-broker-tls        broker.pem (chain + key), ca.crt    (tls) renewed in place
    Secret demo-broker-users      users.json, broker-password         (scram-sha-512) made once

The operator may create and patch Secrets but not read them, so everything it
needs again is derived from its master secret (controller_secret.py) and the
cluster's uid: the CA (certificates.derived_ca) and the inter-broker password;
what it issued is remembered in status.certificates. A renewal patches the
Secret's data; the kubelet updates the mounted files and the brokers reload
them for new connections, with no restart (certificates.py says when).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.certificates import (
    IssuedRecord,
    KeyPair,
    broker_dns_names,
    derived_ca,
    issue,
    renewal_reason,
)
from tinystream.operator.k8s.errors import Conflict
from tinystream.operator.k8s.model import ClusterSpec, OperatorContext
from tinystream.operator.k8s.resources import Names, broker_user, labels, owner_reference
from tinystream.scram_users import UserStore

CA_VALIDITY_DAYS = 3650


@dataclass(frozen=True, slots=True)
class SecurityOutcome:
    """What a pass did: the status to record, and a renewal to announce (an Event)."""

    certificates: dict[str, str] | None = None
    issued_because: str | None = None


def derived_secret(master: str, cluster: ClusterSpec, purpose: str) -> bytes:
    """A per-cluster secret for one purpose, the same after an operator restart (a new uid: a new one)."""
    return hmac.new(master.encode(), f"{cluster.namespace}/{cluster.name}/{cluster.uid}/{purpose}".encode(),
                    hashlib.sha256).digest()


def cluster_ca(master: str, cluster: ClusterSpec) -> KeyPair:
    created = (datetime.datetime.fromisoformat(cluster.created.replace("Z", "+00:00")) if cluster.created
               else datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC))
    return derived_ca(derived_secret(master, cluster, "cluster-ca"), cluster.name, cluster.namespace,
                      created=created, days=CA_VALIDITY_DAYS)


def broker_password(master: str, cluster: ClusterSpec) -> str:
    return base64.urlsafe_b64encode(derived_secret(master, cluster, "broker-password")).rstrip(b"=").decode()


def _secret(cluster: ClusterSpec, name: str, files: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": cluster.namespace, "labels": labels(cluster, "security"),
                         "ownerReferences": [owner_reference(cluster)]},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


async def create_secret(client: KubeClient, secret: dict[str, Any]) -> bool:
    """Create `secret`: True when made, False when it is there (Conflict; it cannot be read to compare)."""
    try:
        await client.create(secret)
    except Conflict:
        return False
    return True


async def replace_secret_data(client: KubeClient, secret: dict[str, Any]) -> None:
    """Patch the data of a Secret that is there (a renewal): the kubelet updates the mounted files."""
    meta = secret["metadata"]
    await client.patch("v1", "Secret", meta["name"], meta["namespace"], {"data": secret["data"]})


async def _create_once(client: KubeClient, secret: dict[str, Any]) -> None:
    await create_secret(client, secret)  # when there, made before from the same derived secrets


async def _create_or_replace_data(client: KubeClient, secret: dict[str, Any]) -> None:
    if not await create_secret(client, secret):
        await replace_secret_data(client, secret)


async def ensure_security(client: KubeClient, cluster: ClusterSpec, status: Mapping[str, Any] | None, *,
                          master: str, ctx: OperatorContext, now: datetime.datetime) -> SecurityOutcome:
    """Make (or renew) the Secrets spec.listeners asks for; nothing for a PLAINTEXT cluster."""
    if cluster.security_protocol == "PLAINTEXT":
        return SecurityOutcome()
    names = Names.of(cluster)
    if cluster.authentication == "scram-sha-512":
        users = UserStore()
        password = broker_password(master, cluster)
        users.set_password(broker_user(cluster), password)
        await _create_once(client, _secret(cluster, names.broker_users, {
            "users.json": json.dumps(users.to_json(), indent=1), "broker-password": password}))
    if not cluster.tls:
        return SecurityOutcome()
    ca = cluster_ca(master, cluster)
    await _create_once(client, _secret(cluster, names.ca_cert, {"ca.crt": ca.cert_pem}))
    dns = broker_dns_names(cluster.name, cluster.namespace, ctx.cluster_domain)
    current = IssuedRecord.from_status((status or {}).get("certificates"))
    reason = renewal_reason(current, ca=ca, dns_names=dns, renew_token=cluster.renew_token, now=now,
                            renewal_days=cluster.cert_renewal_days)
    if reason is None:
        assert current is not None
        return SecurityOutcome(certificates=current.to_status())
    broker = issue(ca, broker_user(cluster), dns, now=now, days=cluster.cert_validity_days)
    await _create_or_replace_data(client, _secret(cluster, names.broker_tls, {
        "broker.pem": broker.cert_pem + broker.key_pem, "ca.crt": ca.cert_pem}))
    record = IssuedRecord.of(broker, ca, dns, cluster.renew_token)
    return SecurityOutcome(certificates=record.to_status(), issued_because=reason)
