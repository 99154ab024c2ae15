"""Each cluster's controller API secret, derived from the operator's own; the Secret broker pods mount.

The operator holds one master secret (on Kubernetes the Secret `<release>-controller-secret`
it reads and makes once, master_secret.py; locally `controller.secret.file`). A cluster's secret is

    HMAC-SHA256(master, "<namespace>/<name>/<uid>")

so the operator never reads a cluster's Secret back (its RBAC may create and
patch Secrets, and get only its own master secret by name: reading every Secret
in every namespace is what an operator should not be able to do), an operator restart derives the same secret, and a cluster
re-created under the same name (a new uid) gets a new one. On Kubernetes it
signs the admin's tokens only (the operator's own dashboard): a broker proves
who it is with its pod's own service-account token (broker_identity.py).

`<cluster>-broker-tokens` (the name kept from when it held a token per broker
id, which every broker pod could read and use) now carries
`controller-ca.crt`, the bundle of the cluster CA generations the controller
API's certificate may come from (cluster_tls.controller_ca, derived too, and
rewritten by the CA step as a rotation moves on): brokers verify the
controller API's certificate with it (controller_tls.py); and `admin-token`, what the brokers' admin HTTP asks of
its callers (derived from the cluster's secret: the operator's dashboard
sends it). A Secret made before has its data replaced, so the old tokens are
gone from it (the API stopped believing them anyway).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.cluster_tls import controller_ca, create_secret, replace_secret_data
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, ClusterSpec
from tinystream.operator.k8s.resources import ADMIN_TOKEN_FILE, CONTROLLER_CA_FILE, tokens_name

SecretSource = Callable[[KubeClient, ClusterKey], Awaitable[str]]


def derive_cluster_secret(master: str, cluster: ClusterKey, uid: str) -> str:
    mac = hmac.new(master.encode(), f"{cluster.namespace}/{cluster.name}/{uid}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def broker_admin_token(cluster_secret: str) -> str:
    """The token the cluster's brokers ask of callers of their admin HTTP (/api/*, /metrics), derived
    from the cluster's secret so that the operator's dashboard holds it without reading any Secret."""
    mac = hmac.new(cluster_secret.encode(), b"tinystream broker admin http", hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def tokens_secret(cluster: ClusterKey, uid: str, controller_ca: str, admin_token: str) -> dict[str, Any]:
    """The Secret every broker pod mounts: the CAs its controller API's certificate may come from (PEM) and
    the brokers' admin HTTP token (admin.token.file). Brokers prove who they are with their pod's own
    token (broker_identity.py); the Secret once held a token per broker id, which any broker pod could
    use (a pass replaces its data)."""
    data = {CONTROLLER_CA_FILE: base64.b64encode(controller_ca.encode()).decode(),
            ADMIN_TOKEN_FILE: base64.b64encode(admin_token.encode()).decode()}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": data, "metadata": {
        "name": tokens_name(cluster.name), "namespace": cluster.namespace,
        "labels": {"app.kubernetes.io/managed-by": "tinystream-operator", "tinystream.io/cluster": cluster.name},
        "ownerReferences": [{"apiVersion": API_VERSION, "kind": CLUSTER_KIND, "name": cluster.name, "uid": uid,
                             "controller": True, "blockOwnerDeletion": True}]}}


def derived_secrets(master: str) -> SecretSource:
    """The OperatorController's secret source: derive the cluster's secret, make its tokens Secret once."""

    async def cluster_secret(client: KubeClient, cluster: ClusterKey) -> str:
        resource = await client.get(API_VERSION, CLUSTER_KIND, cluster.name, cluster.namespace)
        if resource is None:
            raise LookupError(f"{cluster} does not exist")
        uid = resource["metadata"]["uid"]
        secret = derive_cluster_secret(master, cluster, uid)
        _, bundle = controller_ca(master, ClusterSpec.from_resource(resource))
        body = tokens_secret(cluster, uid, bundle, broker_admin_token(secret))
        if not await create_secret(client, body):  # made before: the same CA, and no broker tokens any more
            await replace_secret_data(client, body)
        return secret

    return cluster_secret
