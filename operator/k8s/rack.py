"""A broker's rack on Kubernetes: its node's spec.rack.topologyKey label, read before the broker starts.

As Strimzi's kafka init container does: a cluster with spec.rack gets, in each broker pod,

    init container `rack`   same image; `python -m tinystream.operator.k8s.rack_init` reads the pod's node
                            (NODE_NAME from the downward API's spec.nodeName) with the pod's service account
                            and writes the label's value to RACK_DIR/RACK_FILE (empty: the node lacks it)
    volume `rack`           an emptyDir both containers mount; the broker reads it as broker.rack.file
    volume `rack-api`       a projected API token (and the API server's CA), in the init container only:
                            the broker container still holds no Kubernetes credential (issue 21)
    ServiceAccount          <cluster>-broker, the pods' own, owned by the cluster
    ClusterRoleBinding      tinystream-<namespace>-<cluster>-rack: that account to the chart's ClusterRole
                            (get nodes, nothing else). Cluster-scoped, so no owner reference can name the
                            cluster (the garbage collector refuses a namespaced owner): the operator deletes
                            it when the cluster goes (cluster_handlers.py).

A cluster without spec.rack gets none of this. Everything here is pure; rack_init.py does the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

RACK_DIR = "/var/run/tinystream-rack"
RACK_FILE = "rack"
API_MOUNT = "/var/run/secrets/tinystream-rack-api"  # the init container's token and the API server's CA
RACK_BINDING = ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
API_TOKEN_LIFETIME_S = 600  # the init container runs for a second; the kubelet's minimum is 10 minutes


def node_rack(node: Mapping[str, Any] | None, topology_key: str) -> str | None:
    """The node's value of `topology_key`, or None when the node has no such label (or an empty one)."""
    labels = ((node or {}).get("metadata") or {}).get("labels") or {}
    value = str(labels.get(topology_key) or "").strip()
    return value or None


def rack_file_text(rack: str | None) -> str:
    """What the init container writes: the rack and a newline, or nothing (no rack)."""
    return f"{rack}\n" if rack else ""


def service_account_name(cluster: str) -> str:
    return f"{cluster}-broker"


def binding_name(namespace: str, cluster: str) -> str:
    """Cluster-scoped, so the namespace is in the name (two clusters `demo` in two namespaces)."""
    return f"tinystream-{namespace}-{cluster}-rack"


def rack_file_setting() -> str:
    """The broker's broker.rack.file."""
    return f"{RACK_DIR}/{RACK_FILE}"


def init_container(*, image: str, pull_policy: str, topology_key: str,
                   security_context: Mapping[str, Any]) -> dict[str, Any]:
    """The `rack` init container: same image and hardening as the broker, a few MiB of memory."""
    return {
        "name": "rack",
        "image": image,
        "imagePullPolicy": pull_policy,
        "command": ["python", "-m", "tinystream.operator.k8s.rack_init",
                    "--topology-key", topology_key, "--out", rack_file_setting(), "--credentials", API_MOUNT],
        "env": [{"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "volumeMounts": [{"name": "rack", "mountPath": RACK_DIR},
                         {"name": "rack-api", "mountPath": API_MOUNT, "readOnly": True}],
        "securityContext": dict(security_context),
    }


def volumes() -> list[dict[str, Any]]:
    """The rack file's emptyDir, and the init container's API credentials (as the kubelet's own
    service-account volume, but mounted in one container)."""
    return [
        {"name": "rack", "emptyDir": {"sizeLimit": "1Mi"}},
        {"name": "rack-api", "projected": {"defaultMode": 0o440, "sources": [
            {"serviceAccountToken": {"expirationSeconds": API_TOKEN_LIFETIME_S, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        ]}},
    ]


def broker_mount() -> dict[str, Any]:
    return {"name": "rack", "mountPath": RACK_DIR, "readOnly": True}


def service_account(*, name: str, namespace: str, labels: Mapping[str, str],
                    owner: Mapping[str, Any]) -> dict[str, Any]:
    """The broker pods' account; no token of its own is mounted anywhere but in the init container."""
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels), "ownerReferences": [dict(owner)]},
        "automountServiceAccountToken": False,
    }


def cluster_role_binding(*, namespace: str, cluster: str, role: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The cluster's broker account bound to the chart's node-reading ClusterRole `role`."""
    return {
        "apiVersion": RACK_BINDING[0],
        "kind": RACK_BINDING[1],
        "metadata": {"name": binding_name(namespace, cluster),
                     "labels": {**labels, "tinystream.io/namespace": namespace}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"kind": "ServiceAccount", "name": service_account_name(cluster), "namespace": namespace}],
    }
