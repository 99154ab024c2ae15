"""A TinyStreamUser's Secret: make it (again, when deleted by hand), renew a tls user's certificate.

users.plan_user_secret decides, `ensure_user_secret` acts. The Secret of a
scram-sha-512 user holds `password` and `sasl.jaas.config` (the Java
client's line); a tls user's holds `user.crt`, `user.key` and `ca.crt` (a
client certificate from the cluster's clients CA, CN=<user>, valid for the cluster's
spec.certificates.validityDays; status.certificate records its serial, notAfter and CA; ca.crt is the
cluster CA's bundle, which verifies the brokers). Passwords and the CA derive from the operator's master secret and
the uids, so the operator never reads a Secret back (its RBAC has create and
patch on Secrets, no get or list).
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.certificates import IssuedRecord, KeyPair, issue
from tinystream.operator.k8s.cluster_tls import create_secret, replace_secret_data, signing_ca
from tinystream.operator.k8s.model import API_VERSION, USER_KIND, ClusterSpec, UserSpec
from tinystream.operator.k8s.users import SecretChange, plan_user_secret, secret_change


def user_password(master: str, user: UserSpec) -> str:
    mac = hmac.new(master.encode(), f"{user.namespace}/{user.name}/{user.uid}/password".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def user_secret(user: UserSpec, files: Mapping[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "metadata": {
        "name": user.name, "namespace": user.namespace,
        "labels": {"app.kubernetes.io/managed-by": "tinystream-operator", "tinystream.io/cluster": user.cluster,
                   "tinystream.io/user": user.name},
        "ownerReferences": [{"apiVersion": API_VERSION, "kind": USER_KIND, "name": user.name, "uid": user.uid,
                             "controller": True, "blockOwnerDeletion": True}]},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


def password_files(user: UserSpec, password: str) -> dict[str, str]:
    return {"password": password, "sasl.jaas.config": (
        'org.apache.kafka.common.security.scram.ScramLoginModule required '
        f'username="{user.name}" password="{password}";')}


def certificate_files(bundle: str, cert: KeyPair) -> dict[str, str]:
    """A tls user's files: ca.crt is the cluster CA's trust bundle (two CAs while it rotates)."""
    return {"user.crt": cert.cert_pem, "user.key": cert.key_pem, "ca.crt": bundle}


@dataclass(frozen=True, slots=True)
class SecretPass:
    """What one pass over the user's Secret did, and the tls certificate in force after it."""

    change: SecretChange | None
    certificate: IssuedRecord | None = None
    because: str | None = None  # why the certificate was renewed


async def ensure_user_secret(client: KubeClient, user: UserSpec, cluster: ClusterSpec, *, master: str,
                             current: IssuedRecord | None, recorded: bool, now: datetime.datetime) -> SecretPass:
    """Try to create the Secret (a Conflict: it is there); replace a tls user's data when its certificate is due.

    A tls pass issues a key pair each time: it is the body to create with, and without `get` only a create
    tells whether the Secret is there (measured: 0.2 ms of CPU, the CA's derivation as much; dropped on a
    Conflict).
    """
    if user.authentication != "tls":
        plan = plan_user_secret(user, current=None, ca=None, now=now, renewal_days=cluster.cert_renewal_days)
        created = await create_secret(client, user_secret(user, password_files(user, user_password(master, user))))
        return SecretPass(secret_change(plan, recorded=recorded, created=created))
    signing = await signing_ca(client, master, cluster, now=now)
    if signing is None:  # the cluster's provided CA cannot be used now (its condition says why): next pass
        return SecretPass(None, current)
    ca, bundle = signing
    plan = plan_user_secret(user, current=current, ca=ca, now=now, renewal_days=cluster.cert_renewal_days)
    cert = issue(ca, user.name, frozenset(), now=now, days=cluster.cert_validity_days)
    secret = user_secret(user, certificate_files(bundle, cert))
    created = await create_secret(client, secret)
    if not created and plan.renew is not None:
        await replace_secret_data(client, secret)
    change = secret_change(plan, recorded=recorded, created=created)
    issued = IssuedRecord.of(cert, ca, frozenset(), "") if change is not None else current
    return SecretPass(change, issued, plan.renew if change is SecretChange.RENEWED else None)


def announcement(user: UserSpec, done: SecretPass) -> str:
    cert = done.certificate
    what = (f"certificate serial {cert.serial}, valid until {cert.not_after.isoformat()}" if cert is not None
            else "the same derived password")
    if done.change is SecretChange.RECREATED:
        return f"Secret {user.name} was missing: made again with {what}"
    if done.change is SecretChange.RENEWED:
        return f"Secret {user.name}: {what} ({done.because})"
    return f"Secret {user.name}"
