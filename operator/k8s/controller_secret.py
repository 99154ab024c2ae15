"""Each cluster's controller API secret, derived from the operator's own; broker tokens in a Secret.

The operator holds one master secret (the chart's `<release>-controller-secret`,
mounted at `controller.secret.file`). A cluster's secret is

    HMAC-SHA256(master, "<namespace>/<name>/<uid>")

so the operator never reads a Secret back (its RBAC may create Secrets but not
get them: reading every Secret in every namespace is what an operator should
not be able to do), an operator restart derives the same secret, and a cluster
re-created under the same name (a new uid) gets new tokens.

`<cluster>-broker-tokens` holds one token per broker id, broker-0 ... broker-99
(the CRD's maximum), owned by the cluster (deleted with it) and mounted into
the broker pods; a broker's controller.token.file is .../broker-{broker_id}.
Every pod mounts every broker's token (a StatefulSet has one pod template), so
a broken broker pod could act as another broker; an outsider without a token
can do nothing, which is the attack this closes. The same Secret carries
`controller-ca.crt`, the cluster CA's certificate (cluster_tls.cluster_ca,
derived too): brokers verify the controller API's certificate with it
(controller_tls.py). Secrets made before it are patched to add it.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Awaitable, Callable
from typing import Any

from tinystream.controller_auth import broker_principal, token_for
from tinystream.operator.k8s.api import KubeClient
from tinystream.operator.k8s.cluster_tls import cluster_ca, create_secret, patch_owned_secret
from tinystream.operator.k8s.controller_port import ClusterKey
from tinystream.operator.k8s.model import API_VERSION, CLUSTER_KIND, ClusterSpec
from tinystream.operator.k8s.resources import CONTROLLER_CA_FILE, tokens_name

MAX_BROKERS = 100  # the CRD's spec.brokers maximum

SecretSource = Callable[[KubeClient, ClusterKey], Awaitable[str]]


def derive_cluster_secret(master: str, cluster: ClusterKey, uid: str) -> str:
    mac = hmac.new(master.encode(), f"{cluster.namespace}/{cluster.name}/{uid}".encode(), hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def tokens_secret(cluster: ClusterKey, uid: str, secret: str, controller_ca: str) -> dict[str, Any]:
    """The broker tokens Secret of a cluster whose tokens `secret` signs, with the CA its controller
    API's certificate comes from (PEM)."""
    tokens = {broker_principal(i): base64.b64encode(token_for(secret, broker_principal(i)).encode()).decode()
              for i in range(MAX_BROKERS)}
    tokens[CONTROLLER_CA_FILE] = base64.b64encode(controller_ca.encode()).decode()
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque", "data": tokens, "metadata": {
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
        body = tokens_secret(cluster, uid, secret, cluster_ca(master, ClusterSpec.from_resource(resource)).cert_pem)
        if not await create_secret(client, body):  # made before from the same master and uid: the same tokens,
            # but one made before the CA was in it gets it
            await patch_owned_secret(client, body, [{"op": "add", "path": f"/data/{CONTROLLER_CA_FILE}",
                                                     "value": body["data"][CONTROLLER_CA_FILE]}])
        return secret

    return cluster_secret
