"""The schema registry spec.schemaRegistry deploys: pure builders of its objects.

For a cluster `demo` with spec.schemaRegistry:

    TinyStreamUser  demo-schema-registry        how it reaches the brokers: ACLs on _schemas and its election
                                                group only (the user reconciler makes its Secret, credential, ACLs)
    Secret          demo-schema-registry-users  users.json: the HTTP Basic logins (registry --users-file);
                                                rules.json: who may do what per subject (--rules-file)
    Secret          demo-schema-registry-tls    its HTTPS certificate from the cluster CA (listeners.tls)
    StatefulSet     demo-schema-registry        `tinystream schema-registry` on the cluster's bootstrap, each pod one
                                                instance of the group demo-schema-registry (one leader writes)
    Service         demo-schema-registry        port 8081 (Confluent's), what clients call: any pod
    Service         demo-schema-registry-headless  the pods' own names, demo-schema-registry-<n>.<this>.<ns>.svc:
                                                each pod's --advertised-url, where followers forward writes

Several pods elect one writer (tinystream/registry/leadership.py); a follower
forwards a write to the leader's advertised URL, over HTTPS with the cluster
CA as its trust (--forward-cafile; the certificate names *.<headless>.<ns>.svc,
registry_tls.py). A StatefulSet rather than a Deployment for those stable
names (Strimzi's choice for its brokers too): a pod IP changes on restart and
no certificate can name it ahead. Earlier releases ran a Deployment of that
name; the plan deletes it (stale_registry_keys).

Who may call it: the logins in users.json, the cluster's scram-sha-512
TinyStreamUsers (with their own passwords: clients use one credential for
Kafka and the registry, as the registry's auth.py intends) and the operator's
own login (it registers TinyStreamSchemas). The passwords are derived (the
operator never reads a Secret), and so are the salts here, so the same users
give byte-identical content and a patch that changes nothing. With a
listener that authenticates by certificate (ClusterSpec.tls_clients), the
registry also trusts the clients CA (demo-clients-ca-cert, mounted): a tls
TinyStreamUser calls it with the certificate of its Secret and is
`User:CN=<user>`, as on the brokers. A rotation of the clients CA restarts
the registry (the clients-CA annotation, as on the broker pods): it reads
the bundle once.

What a caller may do: with authorization on (ClusterSpec.super_users not
None), rules.json derived from the TinyStreamUsers' topic ACLs
(registry_rules.py; the registry reads it again when the kubelet swaps the
mounted file); with authorization none, every logged-in user may do everything, as on
the brokers.

All but the Secret carry the cluster's owner reference; removing
spec.schemaRegistry deletes them (the Secret, which the operator may not
delete, goes with the cluster).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import scramp

from tinystream.operator.k8s.ca_lifecycle import CLIENTS_CA_ANNOTATION
from tinystream.operator.k8s.model import API_VERSION, REGISTRY_PORT, USER_KIND, ClusterSpec, RegistrySpec, UserSpec
from tinystream.operator.k8s.pod_template import pod_annotations, pod_labels, scheduling
from tinystream.operator.k8s.registry_rules import rules_json
from tinystream.operator.k8s.resources import POD_TEMPLATE_ANNOTATION, RUN_AS, Names, labels, owner_reference

COMPONENT = "schema-registry"
TOPIC = "_schemas"
OPERATOR_LOGIN = "tinystream-operator"  # the operator's own HTTP login (TinyStreamSchema)
USERS_MOUNT = "/etc/tinystream-registry-users"
CREDENTIALS_MOUNT = "/etc/tinystream-registry-credentials"  # the TinyStreamUser's Secret
CA_MOUNT = "/etc/tinystream-cluster-ca"
TLS_MOUNT = "/etc/tinystream-registry-tls"  # its HTTPS certificate (registry_tls.py)
CLIENTS_CA_MOUNT = "/etc/tinystream-clients-ca"  # the clients CA bundle: tls users' certificates are logins
#: On the pod template: the serial of the HTTPS certificate; a renewal restarts the registry (it reads it once).
CERTIFICATE_ANNOTATION = "tinystream.io/registry-certificate"
MECHANISM = "SCRAM-SHA-512"
ITERATIONS = 4096  # Kafka's minimum, as `tinystream users add`
#: What the registry does on the cluster (tinystream/registry/store.py): create, read and write its topic.
TOPIC_OPERATIONS = ("Create", "Describe", "DescribeConfigs", "Read", "Write")
#: Joining the election's consumer group (JoinGroup, SyncGroup, Heartbeat need Read on the group).
GROUP_OPERATIONS = ("Describe", "Read")


@dataclass(frozen=True, slots=True)
class RegistryNames:
    statefulset: str  # also the consumer group its instances elect a leader in
    service: str
    headless: str  # the pods' DNS names: <statefulset>-<n>.<headless>.<ns>.svc
    legacy_deployment: str  # what earlier releases ran; deleted when found
    user: str  # the TinyStreamUser and its Secret
    users_secret: str
    tls_secret: str  # the HTTPS certificate (registry_tls.py), a cluster with listeners.tls

    @classmethod
    def of(cls, cluster: ClusterSpec) -> RegistryNames:
        name = f"{cluster.name}-schema-registry"
        return cls(statefulset=name, service=name, headless=f"{name}-headless", legacy_deployment=name, user=name,
                   users_secret=f"{name}-users", tls_secret=f"{name}-tls")


def group_id(cluster: ClusterSpec) -> str:
    """The consumer group the instances elect their writer in: named after the cluster's registry, not
    Confluent's `schema-registry` default, so a registry a user runs on the same cluster is no member."""
    return RegistryNames.of(cluster).statefulset


def advertised_url(cluster: ClusterSpec) -> str:
    """Each pod's own URL, with $(POD_NAME) that the kubelet expands from the pod's env (the downward API)."""
    scheme = "https" if cluster.tls else "http"
    return f"{scheme}://$(POD_NAME).{RegistryNames.of(cluster).headless}.{cluster.namespace}.svc:{REGISTRY_PORT}"


def registry_url(cluster: ClusterSpec) -> str:
    """Where the registry answers inside the Kubernetes cluster."""
    scheme = "https" if cluster.tls else "http"
    return f"{scheme}://{RegistryNames.of(cluster).service}.{cluster.namespace}.svc:{REGISTRY_PORT}"


def selector(cluster: ClusterSpec) -> dict[str, str]:
    return {"tinystream.io/cluster": cluster.name, "app.kubernetes.io/component": COMPONENT}


def _metadata(cluster: ClusterSpec, name: str) -> dict[str, Any]:
    return {"name": name, "namespace": cluster.namespace, "labels": labels(cluster, COMPONENT),
            "ownerReferences": [owner_reference(cluster)]}


def registry_user(cluster: ClusterSpec) -> dict[str, Any] | None:
    """The registry's TinyStreamUser, authenticated as the cluster's listener asks; None without authentication."""
    if cluster.authentication is None:
        return None
    acls = [{"resource": {"type": "topic", "name": TOPIC, "patternType": "literal"},
             "operations": list(TOPIC_OPERATIONS)},
            {"resource": {"type": "group", "name": group_id(cluster), "patternType": "literal"},
             "operations": list(GROUP_OPERATIONS)}]
    return {"apiVersion": API_VERSION, "kind": USER_KIND, "metadata": _metadata(cluster, RegistryNames.of(cluster).user),
            "spec": {"cluster": cluster.name, "authentication": {"type": cluster.authentication},
                     "authorization": {"acls": acls}}}


def _bootstrap(cluster: ClusterSpec) -> str:
    return f"{Names.of(cluster).client}.{cluster.namespace}.svc:{cluster.kafka_port}"


def registry_args(cluster: ClusterSpec, registry: RegistrySpec) -> list[str]:
    """`tinystream schema-registry`'s command line in the pod (docs/schema-registry.md lists the flags)."""
    names = RegistryNames.of(cluster)
    args = ["schema-registry", "--bootstrap", _bootstrap(cluster), "--host", "0.0.0.0", "--port", str(REGISTRY_PORT),
            "--users-file", f"{USERS_MOUNT}/users.json", "--replication-factor", str(min(3, max(1, cluster.brokers))),
            "--compatibility", registry.compatibility, "--security-protocol", cluster.security_protocol,
            "--group-id", group_id(cluster), "--advertised-url", advertised_url(cluster)]
    if cluster.authentication == "scram-sha-512":
        args += ["--sasl-mechanism", MECHANISM, "--sasl-username", names.user,
                 "--sasl-password-file", f"{CREDENTIALS_MOUNT}/password"]
    if cluster.tls:  # the cluster CA signs the brokers' certificates and the other instances'
        args += ["--ssl-cafile", f"{CA_MOUNT}/ca.crt", "--forward-cafile", f"{CA_MOUNT}/ca.crt",
                 "--tls-certfile", f"{TLS_MOUNT}/registry.crt", "--tls-keyfile", f"{TLS_MOUNT}/registry.key"]
    if cluster.tls and cluster.authentication == "tls":
        args += ["--ssl-certfile", f"{CREDENTIALS_MOUNT}/user.crt", "--ssl-keyfile", f"{CREDENTIALS_MOUNT}/user.key"]
    if cluster.tls_clients:
        args += ["--tls-client-cafile", f"{CLIENTS_CA_MOUNT}/ca.crt"]
    if cluster.super_users is not None:
        args += ["--rules-file", f"{USERS_MOUNT}/rules.json"]
    return args


def _volumes(cluster: ClusterSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    names = RegistryNames.of(cluster)
    volumes = [{"name": "users", "secret": {"secretName": names.users_secret, "defaultMode": 0o440}},
               {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}]
    mounts = [{"name": "users", "mountPath": USERS_MOUNT, "readOnly": True}, {"name": "tmp", "mountPath": "/tmp"}]
    if cluster.authentication is not None:
        volumes.append({"name": "credentials", "secret": {"secretName": names.user, "defaultMode": 0o440}})
        mounts.append({"name": "credentials", "mountPath": CREDENTIALS_MOUNT, "readOnly": True})
    if cluster.tls:
        volumes.append({"name": "cluster-ca", "secret": {"secretName": Names.of(cluster).ca_cert, "defaultMode": 0o440}})
        mounts.append({"name": "cluster-ca", "mountPath": CA_MOUNT, "readOnly": True})
        volumes.append({"name": "tls", "secret": {"secretName": names.tls_secret, "defaultMode": 0o440}})
        mounts.append({"name": "tls", "mountPath": TLS_MOUNT, "readOnly": True})
    if cluster.tls_clients:
        volumes.append({"name": "clients-ca", "secret": {"secretName": clients_ca_secret(cluster), "defaultMode": 0o440}})
        mounts.append({"name": "clients-ca", "mountPath": CLIENTS_CA_MOUNT, "readOnly": True})
    return volumes, mounts


def clients_ca_secret(cluster: ClusterSpec) -> str:
    """The public clients CA bundle (cluster_tls._ensure_clients_ca writes it)."""
    return f"{cluster.name}-clients-ca-cert"


def _container(cluster: ClusterSpec, registry: RegistrySpec, *, image: str,
               mounts: list[dict[str, Any]]) -> dict[str, Any]:
    probe = {"tcpSocket": {"port": "http"}, "periodSeconds": 10}  # every HTTP call needs a login, a probe has none
    container: dict[str, Any] = {
        "name": COMPONENT, "image": image, "imagePullPolicy": cluster.image_pull_policy,
        "args": registry_args(cluster, registry),
        # $(POD_NAME) in --advertised-url: the kubelet expands it from here.
        "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}],
        "ports": [{"name": "http", "containerPort": REGISTRY_PORT, "protocol": "TCP"}],
        "readinessProbe": probe, "livenessProbe": {**probe, "failureThreshold": 6},
        "volumeMounts": mounts,
        "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]}},
    }
    if registry.resources:
        container["resources"] = dict(registry.resources)
    return container


def _pod_spec(cluster: ClusterSpec, registry: RegistrySpec, *, image: str) -> dict[str, Any]:
    volumes, mounts = _volumes(cluster)
    template = registry.pod_template
    pod: dict[str, Any] = {
        "containers": [_container(cluster, registry, image=image, mounts=mounts)], "volumes": volumes,
        "enableServiceLinks": False, "automountServiceAccountToken": False,
        # template.pod.securityContext replaces it whole, as for the brokers (pod_template.py).
        "securityContext": dict(template.security_context or {
            "runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS,
            # fsGroup: the Secret volumes (mode 0440) are the registry user's group, else it cannot read them
            "fsGroup": RUN_AS, "seccompProfile": {"type": "RuntimeDefault"}}),
        **scheduling(template),
    }
    if template.affinity:
        pod["affinity"] = dict(template.affinity)
    if template.topology_spread_constraints:
        pod["topologySpreadConstraints"] = [dict(c) for c in template.topology_spread_constraints]
    return pod


def statefulset(cluster: ClusterSpec, registry: RegistrySpec, *, image: str, certificate: str = "") -> dict[str, Any]:
    """`certificate`: the serial of the HTTPS certificate in force (CERTIFICATE_ANNOTATION)."""
    restart_on = {CERTIFICATE_ANNOTATION: certificate} if certificate else {}
    if cluster.tls_clients and cluster.clients_ca_marker:  # it reads the clients CA bundle once
        restart_on[CLIENTS_CA_ANNOTATION] = cluster.clients_ca_marker
    template = registry.pod_template
    names = RegistryNames.of(cluster)
    meta = _metadata(cluster, names.statefulset)
    meta["annotations"] = {POD_TEMPLATE_ANNOTATION: template.digest}  # a removed template field is seen too
    return {
        "apiVersion": "apps/v1", "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "replicas": registry.replicas,
            "serviceName": names.headless,
            "selector": {"matchLabels": selector(cluster)},
            # The group elects the writer whatever the order: start and replace pods in parallel; a rolling
            # update still restarts one pod at a time (a write during a leader's restart waits for the next).
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": pod_labels(template, labels(cluster, COMPONENT)),
                             "annotations": pod_annotations(template, restart_on)},
                "spec": _pod_spec(cluster, registry, image=image),
            },
        },
    }


def service(cluster: ClusterSpec) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(cluster, RegistryNames.of(cluster).service),
            "spec": {"type": "ClusterIP", "selector": selector(cluster),
                     "ports": [{"name": "http", "port": REGISTRY_PORT, "targetPort": "http", "protocol": "TCP"}]}}


def headless_service(cluster: ClusterSpec) -> dict[str, Any]:
    """The pods' DNS names. Not-ready pods are published too: a leader whose probe fails for a moment still
    receives the writes forwarded to it (as the brokers' headless Service)."""
    return {"apiVersion": "v1", "kind": "Service", "metadata": _metadata(cluster, RegistryNames.of(cluster).headless),
            "spec": {"clusterIP": "None", "selector": selector(cluster), "publishNotReadyAddresses": True,
                     "ports": [{"name": "http", "port": REGISTRY_PORT, "targetPort": "http", "protocol": "TCP"}]}}


def registry_objects(cluster: ClusterSpec, *, image: str) -> list[dict[str, Any]]:
    """What spec.schemaRegistry asks for (besides the Secrets), in creation order; [] without it. With TLS the
    StatefulSet waits for its certificate (ClusterSpec.registry_certificate, set by the reconciler)."""
    registry = cluster.schema_registry
    if registry is None:
        return []
    user = registry_user(cluster)
    objects = [*([user] if user is not None else []), service(cluster), headless_service(cluster)]
    if not cluster.tls or cluster.registry_certificate:
        objects.append(statefulset(cluster, registry, image=image, certificate=cluster.registry_certificate))
    return objects


def registry_keys(cluster: ClusterSpec) -> list[tuple[str, str, str]]:
    """(apiVersion, kind, name) of every object registry_objects can make, and the Deployment of earlier
    releases: observed, to delete when removed (stale_registry_keys)."""
    names = RegistryNames.of(cluster)
    return [(API_VERSION, USER_KIND, names.user), ("v1", "Service", names.service), ("v1", "Service", names.headless),
            ("apps/v1", "StatefulSet", names.statefulset), ("apps/v1", "Deployment", names.legacy_deployment)]


def stale_registry_keys(cluster: ClusterSpec, observed: Collection[tuple[str, str]]) -> list[tuple[str, str, str]]:
    """What to delete of the `observed` (kind, name): all without spec.schemaRegistry; with it, the Deployment
    of earlier releases (its single writer and the StatefulSet's leader may overlap for a moment: the topic's
    first-record-wins rule keeps every id naming one schema, docs/schema-registry.md)."""
    keys = registry_keys(cluster)
    if cluster.schema_registry is not None:
        keys = [k for k in keys if k[1] == "Deployment"]
    return [k for k in keys if (k[1], k[2]) in observed]


def operator_password(master: str, cluster: ClusterSpec) -> str:
    """The operator's HTTP login password for this cluster's registry (derived: never stored to be read back)."""
    mac = hmac.new(master.encode(), f"{cluster.namespace}/{cluster.name}/{cluster.uid}/registry-login".encode(),
                   hashlib.sha256)
    return base64.urlsafe_b64encode(mac.digest()).rstrip(b"=").decode()


def _credential(master: str, login: str, password: str) -> dict[str, Any]:
    salt = hmac.new(master.encode(), f"registry-salt/{login}/{password}".encode(), hashlib.sha256).digest()[:16]
    salt_out, stored_key, server_key, iterations = scramp.ScramMechanism(MECHANISM).make_auth_info(
        password, iteration_count=ITERATIONS, salt=salt)
    b64 = base64.b64encode
    return {"salt": b64(salt_out).decode(), "stored_key": b64(stored_key).decode(),
            "server_key": b64(server_key).decode(), "iterations": iterations}


def users_json(master: str, cluster: ClusterSpec, logins: Iterable[tuple[str, str]]) -> str:
    """The registry's --users-file (tinystream.scram_users' layout): the operator's login and `logins`
    ((user, password) of the cluster's scram-sha-512 TinyStreamUsers), with derived salts: deterministic."""
    entries: dict[str, Any] = {OPERATOR_LOGIN: {MECHANISM: _credential(master, OPERATOR_LOGIN,
                                                                       operator_password(master, cluster))}}
    for user, password in sorted(logins):
        if user != OPERATOR_LOGIN:
            entries[user] = {MECHANISM: _credential(master, user, password)}
    return json.dumps({"users": entries}, indent=1, sort_keys=True)


def registry_admins(cluster: ClusterSpec) -> list[str]:
    """Who may do everything: the operator's login and the cluster's super users."""
    return [f"User:{OPERATOR_LOGIN}", *(cluster.super_users or ())]


def registry_rules(cluster: ClusterSpec, users: Iterable[UserSpec]) -> str | None:
    """rules.json (registry_rules.py) for the cluster's users; None when authorization is none."""
    if cluster.super_users is None:
        return None
    return rules_json([u for u in users if u.cluster == cluster.name], admins=registry_admins(cluster))


def users_secret(cluster: ClusterSpec, content: str, rules: str | None = None) -> dict[str, Any]:
    files = {"users.json": content, **({"rules.json": rules} if rules is not None else {})}
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": _metadata(cluster, RegistryNames.of(cluster).users_secret),
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in files.items()}}


def registry_status(cluster: ClusterSpec, certificate: Mapping[str, Any] | None = None) -> dict[str, Any] | None:
    """status.schemaRegistry; None (a merge patch's delete) without spec.schemaRegistry. `certificate`: the
    HTTPS certificate's record (registry_tls.py)."""
    if cluster.schema_registry is None:
        return None
    status: dict[str, Any] = {"url": registry_url(cluster)}
    if certificate:
        status["certificate"] = dict(certificate)
    if cluster.authentication is not None:
        status["user"] = RegistryNames.of(cluster).user
    return status


def scram_logins(users: Iterable[Mapping[str, Any]], cluster: ClusterSpec) -> list[tuple[str, Mapping[str, Any]]]:
    """The cluster's scram-sha-512 TinyStreamUsers (name, body), whose passwords become registry logins."""
    found = []
    for body in users:
        spec = body.get("spec") or {}
        kind = (spec.get("authentication") or {}).get("type") or "scram-sha-512"
        if spec.get("cluster") == cluster.name and kind == "scram-sha-512":
            found.append((str(body["metadata"]["name"]), body))
    return found
