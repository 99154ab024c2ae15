"""The objects a TinyStreamCluster owns, built from its spec: pure functions.

For a cluster `demo` in namespace `ns`:

    ConfigMap          demo-config       broker.toml: broker settings by Kafka name
    Service (headless) demo-brokers      stable DNS per broker: demo-broker-N.demo-brokers.ns.svc
    Service            demo-kafka        client bootstrap (any ready broker)
    Service            demo-controller   ExternalName -> the operator's Service (controller API)
    Service            demo-dashboard    ExternalName -> the operator's dashboard on 3200 (when dashboard.enabled)
    PodDisruptionBudget demo-broker      maxUnavailable 1: a drain never takes two brokers
    NetworkPolicy      demo-broker       (secured clusters) the replication port admits broker pods only
    StatefulSet        demo-broker       the brokers, one PVC each
    ServiceAccount     demo-broker       (spec.rack) the brokers' own account (rack.py)
    ClusterRoleBinding tinystream-ns-demo-rack  (spec.rack) that account may get nodes (rack.py)
    Service            demo-<l>-bootstrap, demo-<l>-N   per external listener <l> (external.py)

Every object carries an owner reference to the cluster (controller=true), so
deleting the cluster deletes them (Kubernetes' garbage collector), and the
operator needs no delete rights on them; the ClusterRoleBinding alone, being
cluster-scoped, cannot, and the operator deletes it (cluster_handlers.py).

Broker identity comes from the pod: broker.id is the StatefulSet ordinal
(the `apps.kubernetes.io/pod-index` label, Kubernetes >= 1.28), the
advertised host is the pod's DNS name under the headless Service. Shared
settings live in the ConfigMap; its hash is a pod-template annotation, so a
config change makes a new StatefulSet revision and the operator rolls it;
so does a change of spec.template.pod (pod_template.py), which adds the
user's scheduling fields, labels and annotations to the broker pods.
The StatefulSet uses updateStrategy OnDelete: the operator, not the
StatefulSet controller, decides when each broker restarts (reconcile.py).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from tinystream.config.settings import BrokerSettings
from tinystream.operator.k8s.ca_lifecycle import CA_ANNOTATION, CLIENTS_CA_ANNOTATION
from tinystream.operator.k8s.external import (
    ADDRESSES_FILE,
    BROKER_LABEL,
    LISTENER_LABEL,
    ExternalAddresses,
    ExternalService,
    external_services,
    listener_config,
    start_command,
)
from tinystream.operator.k8s.model import (
    API_VERSION,
    CLUSTER_KIND,
    ClusterSpec,
    ConfigValue,
    OperatorContext,
    StorageVolume,
)
from tinystream.operator.k8s.pod_template import pod_annotations, pod_labels, scheduling, spread_constraints
from tinystream.operator.k8s.rack import (
    broker_mount,
    cluster_role_binding,
    init_container,
    rack_file_setting,
    service_account,
    service_account_name,
)
from tinystream.operator.k8s.rack import volumes as rack_volumes

DATA_DIR = "/var/lib/tinystream"
CONFIG_DIR = "/etc/tinystream"
CONFIG_FILE = "broker.toml"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"
CONFIG_HASH_ANNOTATION = "tinystream.io/config-hash"
RACK_KEY_ANNOTATION = "tinystream.io/rack-topology-key"
# On the StatefulSet (not its pods): spec.template.pod's digest, so removing a template field re-applies it.
POD_TEMPLATE_ANNOTATION = "tinystream.io/pod-template"
MANAGED_BY = "tinystream-operator"
# Every broker pod of every cluster the operator manages: the pods it watches (pod_handlers.py).
BROKER_POD_LABELS = {"app.kubernetes.io/managed-by": MANAGED_BY, "app.kubernetes.io/component": "broker"}
BROKER_POD_SELECTOR = ",".join(f"{k}={v}" for k, v in BROKER_POD_LABELS.items())
IDENTITY_MOUNT = "/var/run/secrets/tinystream"  # the pod's own projected token for the controller API
IDENTITY_FILE = "controller-token"
IDENTITY_AUDIENCE = "tinystream-controller"  # broker_identity.AUDIENCE: a token for nothing else
IDENTITY_LIFETIME_S = 3600
TOKENS_MOUNT = "/etc/tinystream-auth"  # the brokers' controller API tokens; not inside CONFIG_DIR: a mount point
# cannot be made inside a read-only volume (found by the image test: runc "read-only file system")
CONTROLLER_CA_FILE = "controller-ca.crt"  # in the tokens Secret: the CA of the controller API's certificate
ADMIN_TOKEN_FILE = "admin-token"  # in the tokens Secret: what the brokers' admin HTTP asks of its callers
RUN_AS = 10001  # the image's non-root user (Dockerfile)
CONTAINER_SECURITY = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                      "capabilities": {"drop": ["ALL"]}}
TLS_MOUNT = "/etc/tinystream-tls"  # the broker certificate (cluster_tls.py renews it; the listener reloads it)
CLIENTS_CA_FILE = "clients-ca.crt"  # in the broker TLS Secret: the clients CA bundle client certificates verify against
USERS_MOUNT = "/etc/tinystream-users"  # salted SCRAM credentials of the inter-broker user, and its password

# Keys the operator sets itself; the CRD refuses them in spec.config as well.
OPERATOR_OWNED_KEYS = frozenset({
    "broker.id", "broker.rack", "broker.rack.file", "host", "port", "admin.port", "advertised.host", "advertised.port",
    "log.dirs", "controller.url", "controller.token.file", "controller.ssl.truststore.location", "admin.token.file",
    # from spec.listeners / spec.authorization (cluster_tls.py makes the files)
    "listeners", "ssl.keystore.location", "ssl.truststore.location", "ssl.client.auth", "sasl.users.file",
    "sasl.enabled.mechanisms", "inter.broker.sasl.username", "inter.broker.sasl.password.file", "super.users",
    "authorizer.class.name", "listener.security.protocol.map", "inter.broker.listener.name",
})
REPLICATION_PORT = 9093  # a secured cluster's replication listener (brokers only: mTLS or the inter-broker user)
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"  # Kafka's name; ACLs in the controller's image


@dataclass(frozen=True, slots=True)
class Names:
    statefulset: str
    headless: str
    client: str
    controller: str
    dashboard: str
    config: str
    pdb: str
    broker_tls: str  # Secret: broker.pem (certificate chain + key), ca.crt
    ca_cert: str  # Secret: ca.crt only, for clients to trust the brokers
    broker_users: str  # Secret: users.json (salted SCRAM), broker-password

    @classmethod
    def of(cls, cluster: ClusterSpec) -> Names:
        n = cluster.name
        return cls(statefulset=f"{n}-broker", headless=f"{n}-brokers", client=f"{n}-kafka",
                   controller=f"{n}-controller", dashboard=f"{n}-dashboard", config=f"{n}-config",
                   pdb=f"{n}-broker", broker_tls=f"{n}-broker-tls", ca_cert=f"{n}-cluster-ca-cert",
                   broker_users=f"{n}-broker-users")

    def pod(self, ordinal: int) -> str:
        return f"{self.statefulset}-{ordinal}"


def selector_labels(cluster: ClusterSpec) -> dict[str, str]:
    return {"tinystream.io/cluster": cluster.name, "app.kubernetes.io/component": "broker"}


def labels(cluster: ClusterSpec, component: str = "broker") -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "tinystream",
        "app.kubernetes.io/instance": cluster.name,
        "app.kubernetes.io/component": component,
        "app.kubernetes.io/managed-by": MANAGED_BY,
        "app.kubernetes.io/part-of": "tinystream",
        "tinystream.io/cluster": cluster.name,
    }


def label_selector_string(cluster: ClusterSpec) -> str:
    """The selector as the scale subresource reports it (`status.labelSelector`)."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(cluster).items()))


def owner_reference(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": CLUSTER_KIND,
        "name": cluster.name,
        "uid": cluster.uid,
        "controller": True,
        # Foreground deletion of the cluster waits for its objects. The operator's
        # RBAC grants update on tinystreamclusters/finalizers, which this needs
        # where the OwnerReferencesPermissionEnforcement admission plugin runs.
        "blockOwnerDeletion": True,
    }


def _metadata(cluster: ClusterSpec, name: str, component: str = "broker") -> dict[str, Any]:
    return {
        "name": name,
        "namespace": cluster.namespace,
        "labels": labels(cluster, component),
        "ownerReferences": [owner_reference(cluster)],
    }


# --- broker configuration -----------------------------------------------------------------

def controller_url(cluster: ClusterSpec, ctx: OperatorContext) -> str:
    """The cluster's controller API on the operator, by the name its certificate carries (controller_tls.py)."""
    names = Names.of(cluster)
    scheme = "https" if ctx.controller_tls else "http"
    return (f"{scheme}://{names.controller}.{cluster.namespace}.svc:{ctx.controller_port}"
            f"/clusters/{cluster.namespace}/{cluster.name}")


def tokens_name(cluster: str) -> str:
    """The Secret every broker pod mounts: the controller API's CA (controller_secret.py)."""
    return f"{cluster}-broker-tokens"


def token_file_setting() -> str:
    """The brokers' controller.token.file: the pod's own service-account token (broker_identity.py)."""
    return f"{IDENTITY_MOUNT}/{IDENTITY_FILE}"


def identity_volume() -> dict[str, Any]:
    """A token the kubelet makes for this pod alone: bound to it (void once it is deleted), for the
    controller API only (its audience), an hour's life, rotated before it ends (the broker re-reads it)."""
    return {"name": "controller-identity", "projected": {"defaultMode": 0o440, "sources": [
        {"serviceAccountToken": {"audience": IDENTITY_AUDIENCE, "expirationSeconds": IDENTITY_LIFETIME_S,
                                 "path": IDENTITY_FILE}}]}}


def broker_admin_url(cluster: ClusterSpec, ordinal: int) -> str:
    """A broker's admin HTTP API through the headless Service (pod DNS; broker id = ordinal)."""
    return pod_admin_url(cluster, Names.of(cluster).pod(ordinal))


def pod_admin_url(cluster: ClusterSpec, pod: str) -> str:
    """The admin HTTP API of broker pod `pod` (of the StatefulSet or of a node pool) by its DNS name."""
    return f"http://{pod}.{Names.of(cluster).headless}.{cluster.namespace}.svc:{cluster.admin_port}"


def broker_user(cluster: ClusterSpec) -> str:
    """The inter-broker SCRAM user (and the CN of the broker certificate)."""
    return f"{cluster.name}-broker"


def security_config(cluster: ClusterSpec) -> dict[str, ConfigValue]:
    """The listeners' security settings from spec.listeners and spec.authorization.

    Every cluster has two listeners, as Kafka's: CLIENT on the Kafka port (TLS and/or SASL, as asked, or
    PLAINTEXT) and REPLICATION on REPLICATION_PORT, where alone a request may act as a broker (a Fetch's
    replica_id, WriteTxnMarkers). REPLICATION always authenticates: with TLS, brokers replicate over mTLS
    with the broker certificate (principal User:CN=<cluster>-broker); without it, on SASL_PLAINTEXT as the
    inter-broker SCRAM user. A NetworkPolicy (network_policy) admits only broker pods to REPLICATION.
    """
    protocol, replication = cluster.security_protocol, cluster.replication_protocol
    external, external_protocols, external_settings = listener_config(cluster)
    config: dict[str, ConfigValue] = {
        "listeners": ",".join([f"CLIENT://0.0.0.0:{cluster.kafka_port}", f"REPLICATION://0.0.0.0:{REPLICATION_PORT}",
                               *external]),
        "listener.security.protocol.map": ",".join([f"CLIENT:{protocol}", f"REPLICATION:{replication}",
                                                    *external_protocols]),
        "inter.broker.listener.name": "REPLICATION",
        **external_settings,
    }
    principals = []
    if cluster.tls:
        config["ssl.keystore.location"] = f"{TLS_MOUNT}/broker.pem"
        config["ssl.truststore.location"] = f"{TLS_MOUNT}/ca.crt"
        config["listener.name.replication.ssl.client.auth"] = "required"
        principals.append(f"User:CN={broker_user(cluster)}")
    if cluster.authentication == "tls":
        config["ssl.client.auth"] = "required"
    if cluster.tls_clients:  # client certificates verify against the clients CA; brokers' against the cluster CA
        for listener in ("client", *(x.name for x in cluster.external if x.tls and x.authentication == "tls")):
            if listener != "client" or cluster.authentication == "tls":
                config[f"listener.name.{listener}.ssl.truststore.location"] = f"{TLS_MOUNT}/{CLIENTS_CA_FILE}"
    if cluster.needs_scram_users:
        config.update({"sasl.enabled.mechanisms": "SCRAM-SHA-512", "sasl.users.file": f"{USERS_MOUNT}/users.json"})
    if replication == "SASL_PLAINTEXT":
        config.update({"sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
                       "inter.broker.sasl.username": broker_user(cluster),
                       "inter.broker.sasl.password.file": f"{USERS_MOUNT}/broker-password"})
        principals.append(f"User:{broker_user(cluster)}")
    principals += cluster.super_users or ()
    config["super.users"] = ";".join(principals)
    if cluster.super_users is not None:  # spec.authorization: every other principal needs ACLs (TinyStreamUser)
        config["authorizer.class.name"] = AUTHORIZER
    return config


def network_policy(cluster: ClusterSpec) -> dict[str, Any]:
    """Every cluster's brokers: the Kafka and admin ports open, the replication port to its brokers only."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(cluster, Names.of(cluster).statefulset),
        "spec": {
            "podSelector": {"matchLabels": selector_labels(cluster)},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"ports": [{"port": cluster.kafka_port, "protocol": "TCP"},
                           {"port": cluster.admin_port, "protocol": "TCP"},
                           *({"port": listener.port, "protocol": "TCP"} for listener in cluster.external)]},
                {"ports": [{"port": REPLICATION_PORT, "protocol": "TCP"}],
                 "from": [{"podSelector": {"matchLabels": selector_labels(cluster)}}]},
            ],
        },
    }


def broker_config(cluster: ClusterSpec, ctx: OperatorContext) -> dict[str, ConfigValue]:
    """Settings shared by every broker, by Kafka name (per-pod ones come from the environment)."""
    owned: dict[str, ConfigValue] = {
        "host": "0.0.0.0",
        "port": cluster.kafka_port,
        "admin.port": cluster.admin_port,
        "log.dirs": ",".join(log_dir(v) for v in cluster.storage_volumes),
        "controller.url": controller_url(cluster, ctx),
        "controller.token.file": token_file_setting(),
        # /api/* and /metrics need the cluster's admin token (the probes stay open); /metrics is open when the
        # chart's broker ServiceMonitor, which holds no cluster's token, scrapes it.
        "admin.token.file": f"{TOKENS_MOUNT}/{ADMIN_TOKEN_FILE}",
        **({"admin.metrics.public": True} if ctx.broker_metrics_public else {}),
        **({"controller.ssl.truststore.location": f"{TOKENS_MOUNT}/{CONTROLLER_CA_FILE}"} if ctx.controller_tls else {}),
        **security_config(cluster),
        # spec.rack: the `rack` init container writes the node's label there (rack.py)
        **({"broker.rack.file": rack_file_setting()} if cluster.rack_topology_key else {}),
    }
    user = {k: v for k, v in cluster.config.items() if k not in OPERATOR_OWNED_KEYS}
    return {**dict(sorted(user.items())), **owned}


def broker_config_problems(config: Mapping[str, ConfigValue]) -> list[str]:
    """Why the broker would refuse `config` at start-up (unknown key, wrong type or range)."""
    problems = [f"{k}: set by the operator" for k in sorted(config) if k in OPERATOR_OWNED_KEYS]
    try:
        BrokerSettings.model_validate({k: v for k, v in config.items() if k not in OPERATOR_OWNED_KEYS})
    except ValidationError as exc:
        for err in exc.errors():
            key = ".".join(str(p) for p in err["loc"])
            problems.append(f"{key}: {err['msg']}")
    return problems


def _toml_value(value: ConfigValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    return json.dumps(str(value))  # a TOML basic string: JSON's escapes are TOML's


def render_toml(cluster: ClusterSpec, config: Mapping[str, ConfigValue]) -> str:
    lines = [
        f"# Written by the TinyStream operator from TinyStreamCluster {cluster.namespace}/{cluster.name};",
        "# edit the cluster's spec.config instead: changes here are overwritten.",
        "[broker]",
    ]
    lines += [f"{json.dumps(key)} = {_toml_value(value)}" for key, value in config.items()]
    return "\n".join(lines) + "\n"


def config_map(cluster: ClusterSpec, ctx: OperatorContext,
               addresses: ExternalAddresses | None = None) -> dict[str, Any]:
    """broker.toml, and with external listeners each broker's advertised external addresses (external.py)."""
    data = {CONFIG_FILE: render_toml(cluster, broker_config(cluster, ctx))}
    if cluster.external:
        data[ADDRESSES_FILE] = (addresses or ExternalAddresses()).render()
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _metadata(cluster, Names.of(cluster).config),
        "data": data,
    }


def config_hash(config_map_obj: Mapping[str, Any]) -> str:
    data = json.dumps(config_map_obj.get("data", {}), sort_keys=True).encode()
    return hashlib.sha256(data).hexdigest()[:16]


# --- services -----------------------------------------------------------------------------

def headless_service(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(cluster, Names.of(cluster).headless),
        "spec": {
            "clusterIP": "None",
            # Brokers find each other (replication) before they are ready.
            "publishNotReadyAddresses": True,
            "selector": selector_labels(cluster),
            "ports": [
                {"name": "kafka", "port": cluster.kafka_port, "targetPort": "kafka", "protocol": "TCP"},
                {"name": "admin", "port": cluster.admin_port, "targetPort": "admin", "protocol": "TCP"},
                {"name": "replication", "port": REPLICATION_PORT, "targetPort": "replication", "protocol": "TCP"},
            ],
        },
    }


def client_service(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(cluster, Names.of(cluster).client),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(cluster),
            "ports": [{"name": "kafka", "port": cluster.kafka_port, "targetPort": "kafka", "protocol": "TCP"}],
        },
    }


def external_service(cluster: ClusterSpec, service: ExternalService) -> dict[str, Any]:
    """A Service of an external listener: the bootstrap (every broker) or one broker's (its pod alone, by the
    StatefulSet's pod-name label). externalTrafficPolicy Cluster: a node port answers on every node."""
    listener = service.listener
    meta = _metadata(cluster, service.name, "external")
    meta["labels"][LISTENER_LABEL] = listener.name
    selector = selector_labels(cluster)
    if service.broker is not None:
        meta["labels"][BROKER_LABEL] = str(service.broker)
        pod = service.pod or Names.of(cluster).pod(service.broker)  # a pool broker's pod is its pool's
        selector = {**selector, "statefulset.kubernetes.io/pod-name": pod}
    port: dict[str, Any] = {"name": listener.name, "port": listener.port, "targetPort": listener.port,
                            "protocol": "TCP"}
    if service.node_port is not None:
        port["nodePort"] = service.node_port
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        # A broker's own Service reaches it before it is ready, as the headless Service does.
        "spec": {"type": service.service_type, "selector": selector, "ports": [port],
                 "publishNotReadyAddresses": service.broker is not None},
    }


def controller_service(cluster: ClusterSpec, ctx: OperatorContext) -> dict[str, Any]:
    """A name in the cluster's namespace for the operator's controller API (in another namespace)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(cluster, Names.of(cluster).controller, "controller"),
        "spec": {
            "type": "ExternalName",
            "externalName": ctx.operator_service,
            "ports": [{"name": "controller", "port": ctx.controller_port, "protocol": "TCP"}],
        },
    }


def dashboard_service(cluster: ClusterSpec, ctx: OperatorContext) -> dict[str, Any]:
    """The cluster's dashboard, by a name in its namespace: the operator serves it (dashboard_host.py)
    at http://<cluster>-dashboard:<dashboard port, 3200>/clusters/<namespace>/<cluster>/."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _metadata(cluster, Names.of(cluster).dashboard, "dashboard"),
        "spec": {
            "type": "ExternalName",
            "externalName": ctx.operator_service,
            "ports": [{"name": "dashboard", "port": ctx.dashboard_port, "protocol": "TCP"}],
        },
    }


def pod_disruption_budget(cluster: ClusterSpec) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _metadata(cluster, Names.of(cluster).pdb),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(cluster)}},
    }


# --- the StatefulSet ----------------------------------------------------------------------

def _probe(path: str, *, period: int, failures: int, initial: int = 0) -> dict[str, Any]:
    probe: dict[str, Any] = {"httpGet": {"path": path, "port": "admin"}, "periodSeconds": period,
                             "timeoutSeconds": 5, "failureThreshold": failures}
    if initial:
        probe["initialDelaySeconds"] = initial
    return probe


def _affinity(cluster: ClusterSpec) -> dict[str, Any]:
    """spec.template.pod.affinity if given (it replaces this default, as in Strimzi), else one broker per node,
    preferred, not required: a 4th broker on 3 nodes must still schedule (scale-up)."""
    if cluster.pod_template.affinity:
        return dict(cluster.pod_template.affinity)
    return {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
        "weight": 100,
        "podAffinityTerm": {"labelSelector": {"matchLabels": selector_labels(cluster)},
                            "topologyKey": "kubernetes.io/hostname"},
    }]}}


def _broker_container(cluster: ClusterSpec, ctx: OperatorContext, names: Names) -> dict[str, Any]:
    env = [
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "TINYSTREAM_BROKER_ID",
         "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{POD_INDEX_LABEL}']"}}},
        {"name": "TINYSTREAM_ADVERTISED_HOST", "value": f"$(POD_NAME).{names.headless}.$(POD_NAMESPACE).svc"},
    ]
    if cluster.external:  # the node's address: a nodeport listener advertises it (external.START_SCRIPT)
        env.append({"name": "HOST_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}})
    container: dict[str, Any] = {
        "name": "broker",
        "image": cluster.image or ctx.broker_image,
        "imagePullPolicy": cluster.image_pull_policy,
        "args": ["broker", "--config", f"{CONFIG_DIR}/{CONFIG_FILE}"],
        "env": env,
        "ports": [{"name": "kafka", "containerPort": cluster.kafka_port, "protocol": "TCP"},
                  {"name": "admin", "containerPort": cluster.admin_port, "protocol": "TCP"},
                  {"name": "replication", "containerPort": REPLICATION_PORT, "protocol": "TCP"},
                  *({"name": f"x-{listener.name}", "containerPort": listener.port, "protocol": "TCP"}
                    for listener in cluster.external)],
        # Startup: log recovery after a crash scans the active segments; allow 10 minutes.
        "startupProbe": _probe("/healthz", period=5, failures=120),
        # Liveness: the process answers. Readiness: registered with the controller and caught up.
        "livenessProbe": _probe("/healthz", period=10, failures=3),
        "readinessProbe": _probe("/readyz", period=5, failures=3),
        "volumeMounts": [*({"name": v.claim, "mountPath": mount_path(v)} for v in cluster.storage_volumes),
                         {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
                         {"name": "controller-tokens", "mountPath": TOKENS_MOUNT, "readOnly": True},
                         {"name": "controller-identity", "mountPath": IDENTITY_MOUNT, "readOnly": True},
                         {"name": "tmp", "mountPath": "/tmp"}],
        "securityContext": dict(CONTAINER_SECURITY),
    }
    if cluster.rack_topology_key:
        container["volumeMounts"].append(broker_mount())
    if cluster.external:
        del container["args"]
        container["command"] = start_command(addresses_file=f"{CONFIG_DIR}/{ADDRESSES_FILE}",
                                             config_file=f"{CONFIG_DIR}/{CONFIG_FILE}")
    if cluster.resources:
        container["resources"] = dict(cluster.resources)
    if cluster.tls:
        container["volumeMounts"].append({"name": "tls", "mountPath": TLS_MOUNT, "readOnly": True})
    if cluster.needs_scram_users:
        container["volumeMounts"].append({"name": "users", "mountPath": USERS_MOUNT, "readOnly": True})
    return container


def _security_volumes(cluster: ClusterSpec, names: Names) -> list[dict[str, Any]]:
    volumes = []
    if cluster.tls:  # a whole-Secret volume (no subPath): the kubelet swaps in a renewed certificate
        volumes.append({"name": "tls", "secret": {"secretName": names.broker_tls, "defaultMode": 0o440}})
    if cluster.needs_scram_users:
        volumes.append({"name": "users", "secret": {"secretName": names.broker_users, "defaultMode": 0o440}})
    return volumes


def _pod_spec(cluster: ClusterSpec, ctx: OperatorContext, names: Names) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "containers": [_broker_container(cluster, ctx, names)],
        "volumes": [{"name": "config", "configMap": {"name": names.config}},
                    # The controller API's CA (controller_secret.py), made when the controller first opens.
                    {"name": "controller-tokens", "secret": {"secretName": tokens_name(cluster.name),
                                                             "defaultMode": 0o440}},
                    identity_volume(),
                    {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}}, *_security_volumes(cluster, names)],
        # spec.template.pod.securityContext replaces it whole (OpenShift's restricted SCC picks the user itself).
        "securityContext": dict(cluster.pod_template.security_context or {
            "runAsNonRoot": True, "runAsUser": RUN_AS, "runAsGroup": RUN_AS, "fsGroup": RUN_AS,
            "seccompProfile": {"type": "RuntimeDefault"}}),
        # A clean shutdown hands leadership over before the process exits.
        "terminationGracePeriodSeconds": 60,
        "affinity": _affinity(cluster),
        "enableServiceLinks": False,
        # A broker never calls the Kubernetes API: no service-account token in its pods (issue 21); with
        # spec.rack, the init container alone mounts one (rack.py).
        "automountServiceAccountToken": False,
        **scheduling(cluster.pod_template),
    }
    if cluster.rack_topology_key:  # the node's label becomes broker.rack before the broker starts (rack.py)
        pod_spec["initContainers"] = [init_container(
            image=cluster.image or ctx.broker_image, pull_policy=cluster.image_pull_policy,
            topology_key=cluster.rack_topology_key, security_context=CONTAINER_SECURITY)]
        pod_spec["volumes"] += rack_volumes()
        pod_spec["serviceAccountName"] = service_account_name(cluster.name)
    rack = [{
        "maxSkew": 1,
        "topologyKey": cluster.rack_topology_key,
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": selector_labels(cluster)},
    }] if cluster.rack_topology_key else []
    constraints = spread_constraints(cluster.pod_template, rack)
    if constraints:
        pod_spec["topologySpreadConstraints"] = constraints
    return pod_spec


def mount_path(volume: StorageVolume) -> str:
    """Where a volume is mounted: the data directory for the single volume (as before volumes existed),
    a directory per id under it for spec.storage.volumes."""
    return f"{DATA_DIR}/{volume.claim}" if volume.listed else DATA_DIR


def log_dir(volume: StorageVolume) -> str:
    """The volume's `log.dirs` entry: a directory inside the mount (a fresh file system's lost+found stays out)."""
    return f"{mount_path(volume)}/data"


def _data_claim(cluster: ClusterSpec, volume: StorageVolume) -> dict[str, Any]:
    claim: dict[str, Any] = {
        "metadata": {"name": volume.claim, "labels": labels(cluster)},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": volume.size}}},
    }
    if volume.storage_class:
        claim["spec"]["storageClassName"] = volume.storage_class
    return claim


def statefulset(cluster: ClusterSpec, ctx: OperatorContext, *, replicas: int, cfg_hash: str) -> dict[str, Any]:
    names = Names.of(cluster)
    # One retention policy per StatefulSet: the CRD makes every volume's deleteClaim agree; keep if any says keep.
    claim_policy = "Delete" if all(v.delete_claim for v in cluster.storage_volumes) else "Retain"
    own_annotations = {CONFIG_HASH_ANNOTATION: cfg_hash}
    if cluster.rack_topology_key:
        own_annotations[RACK_KEY_ANNOTATION] = cluster.rack_topology_key
    if cluster.tls and cluster.ca_marker:  # a CA rotation's phase: each one rolls the brokers (ca_lifecycle.py)
        own_annotations[CA_ANNOTATION] = cluster.ca_marker
    if cluster.tls_clients and cluster.clients_ca_marker:  # the clients CA's rotation rolls them too
        own_annotations[CLIENTS_CA_ANNOTATION] = cluster.clients_ca_marker
    template = cluster.pod_template
    meta = _metadata(cluster, names.statefulset)
    meta["annotations"] = {POD_TEMPLATE_ANNOTATION: template.digest}
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "serviceName": names.headless,
            "podManagementPolicy": "Parallel",
            "updateStrategy": {"type": "OnDelete"},
            "persistentVolumeClaimRetentionPolicy": {"whenDeleted": claim_policy, "whenScaled": claim_policy},
            "selector": {"matchLabels": selector_labels(cluster)},
            "template": {
                "metadata": {"labels": pod_labels(template, labels(cluster)),
                             "annotations": pod_annotations(template, own_annotations)},
                "spec": _pod_spec(cluster, ctx, names),
            },
            "volumeClaimTemplates": [_data_claim(cluster, v) for v in cluster.storage_volumes],
        },
    }


def serves_dashboard(cluster: ClusterSpec, ctx: OperatorContext) -> bool:
    """The cluster wants a dashboard and the operator serves one (dashboard.port 0 turns the operator's off;
    a Service with port 0 is refused by the API server)."""
    return cluster.dashboard and ctx.dashboard_port > 0


def owned_objects(cluster: ClusterSpec, ctx: OperatorContext, *, replicas: int,
                  addresses: ExternalAddresses | None = None) -> list[dict[str, Any]]:
    """Every object the cluster should own, in a safe creation order (config before pods); `addresses`:
    the brokers' external addresses (external.advertised_addresses), for the ConfigMap."""
    cm = config_map(cluster, ctx, addresses)
    objects = [cm, headless_service(cluster), client_service(cluster), controller_service(cluster, ctx)]
    objects += [external_service(cluster, s) for s in external_services(cluster, replicas=replicas)]
    if serves_dashboard(cluster, ctx):
        objects.append(dashboard_service(cluster, ctx))
    objects.append(network_policy(cluster))
    objects.append(pod_disruption_budget(cluster))
    if cluster.rack_topology_key:  # before the pods, which need both (rack.py)
        objects.append(service_account(name=service_account_name(cluster.name), namespace=cluster.namespace,
                                       labels=labels(cluster), owner=owner_reference(cluster)))
        objects.append(cluster_role_binding(namespace=cluster.namespace, cluster=cluster.name,
                                            role=ctx.broker_rack_role, labels=labels(cluster)))
    if not cluster.node_pools:  # else the brokers are the pools' StatefulSets (node_pools.py)
        objects.append(statefulset(cluster, ctx, replicas=replicas, cfg_hash=config_hash(cm)))
    return objects
