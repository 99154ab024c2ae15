"""The operator's master secret, kept in one Secret of its own namespace that the operator makes itself.

Every cluster's CA, inter-broker password and controller API secret derive from it
(controller_secret.py, cluster_tls.py), so it must never change by itself. A chart that rendered it
(`randAlphaNum`, kept across upgrades with `lookup`) gave `helm template` users (Argo CD, Flux) a new one
at every render, which rotated every CA and password. So the chart renders none: at start-up the
operator reads its Secret, and makes it (a random value) only when it is not there; of all Secrets it
may read exactly this one (RBAC `get` with resourceNames). A Secret a previous chart made, of the same
name and key, is simply read.

    controller.secret.ref = <namespace>/<name>      key `secret` (the chart: <release namespace>/<fullname>-controller-secret)
    dashboard.login.ref   = <namespace>/<name>      key `token` (the chart: <release namespace>/<fullname>-dashboard-login)

The dashboard's login token is made the same way, in a Secret of its own (it is given to people who
must not hold the master secret).
"""

from __future__ import annotations

import base64
from typing import Any

from tinystream.controller_auth import new_secret
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.errors import Conflict

KEY = "secret"
LOGIN_KEY = "token"


def parse_ref(ref: str) -> tuple[str, str]:
    """"namespace/name" -> (namespace, name); a clear error for anything else."""
    namespace, slash, name = ref.partition("/")
    if not slash or not namespace or not name or "/" in name:
        raise ValueError(f"controller.secret.ref must be <namespace>/<name>, not {ref!r}")
    return namespace, name


def generated_secret_body(namespace: str, name: str, value: str, *, key: str = KEY,
                          component: str = "master-secret") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "tinystream-operator",
                                    "app.kubernetes.io/component": component}},
            "data": {key: base64.b64encode(value.encode()).decode()}}


def master_secret_body(namespace: str, name: str, value: str) -> dict[str, Any]:
    return generated_secret_body(namespace, name, value)


async def ensure_generated_secret(client: KubeClient, namespace: str, name: str, *, key: str = KEY,
                                  component: str = "master-secret") -> str:
    """The value under `key` of Secret `namespace/name`, made once (random) when missing; two operators
    starting at once both read the one that was made first."""
    found = await client.get("v1", "Secret", name, namespace)
    if found is None:
        try:
            await client.create(generated_secret_body(namespace, name, new_secret(), key=key, component=component))
        except Conflict:
            pass
        found = await client.get("v1", "Secret", name, namespace)
    value = base64.b64decode(((found or {}).get("data") or {}).get(key) or b"").decode().strip()
    if not value:
        raise ValueError(f"Secret {namespace}/{name} has no {key!r} key: it is not the operator's {component}")
    return value


async def ensure_master_secret(client: KubeClient, namespace: str, name: str) -> str:
    """The master secret in `namespace/name`, made once when missing."""
    return await ensure_generated_secret(client, namespace, name)


async def ensure_dashboard_login(client: KubeClient, namespace: str, name: str) -> str:
    """The dashboard's login token (operator/dashboard/login.py): its own Secret, made once like the master
    secret, so that the token can be handed to people who must not hold the master secret."""
    return await ensure_generated_secret(client, namespace, name, key=LOGIN_KEY, component="dashboard-login")
