"""Typed views of the custom resources, with the CRD's defaults.

The API server applies the CRD's defaults before the operator sees an
object, but an object stored before a default was added (or one from a test
server that does no defaulting) may lack them, so they are applied here
again, from the same numbers as the CRD.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tinystream.operator.k8s.ca_lifecycle import CLIENTS, CLUSTER, CaKind, CaSpec
from tinystream.operator.k8s.pod_template import PodTemplate

GROUP = "tinystream.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CLUSTER_KIND = "TinyStreamCluster"
CLUSTER_PLURAL = "tinystreamclusters"
TOPIC_KIND = "Topic"
TOPIC_PLURAL = "topics"

DEFAULT_KAFKA_PORT = 9092
DEFAULT_ADMIN_PORT = 8080
DASHBOARD_PORT = 3200
CONTROLLER_PORT = 9091

ConfigValue = str | int | float | bool

#: A new value on a TinyStreamCluster renews its broker certificate at once (as Strimzi's force-renew).
RENEW_CERTIFICATES_ANNOTATION = "tinystream.io/renew-certificates"
#: "enabled": the cluster's brokers are its TinyStreamNodePools' (node_pools.py), as Strimzi's strimzi.io/node-pools.
NODE_POOLS_ANNOTATION = "tinystream.io/node-pools"
#: A new value on a TinyStreamCluster rotates its cluster CA (as Strimzi's strimzi.io/force-renew on the CA Secret).
FORCE_RENEW_CA_ANNOTATION = CLUSTER.force_annotation
#: A new value rotates its clients CA (the CA of tls TinyStreamUsers' certificates).
FORCE_RENEW_CLIENTS_CA_ANNOTATION = CLIENTS.force_annotation


# Secure by default: a spec that says nothing about security gets all of it (the CRD's defaults say the
# same, for objects the API server has seen; these are for bodies it has not, as in unit tests).
DEFAULT_TLS = True
DEFAULT_AUTHENTICATION = "scram-sha-512"
DEFAULT_AUTHORIZATION = "simple"
NONE = "none"  # the explicit opt-out of listeners.authentication.type and authorization.type


def _super_users(authorization: Mapping[str, Any] | None) -> tuple[str, ...] | None:
    """spec.authorization.superUsers as Kafka principals; None when authorization.type is none."""
    authorization = authorization if authorization is not None else {"type": DEFAULT_AUTHORIZATION}
    if authorization.get("type", DEFAULT_AUTHORIZATION) == NONE:
        return None
    return tuple(u if u.startswith("User:") else f"User:{u}" for u in authorization.get("superUsers") or ())


def _authentication(listeners: Mapping[str, Any]) -> str | None:
    """listeners.authentication.type; None when it is none (every client anonymous)."""
    kind = (listeners.get("authentication") or {"type": DEFAULT_AUTHENTICATION}).get("type") or DEFAULT_AUTHENTICATION
    return None if kind == NONE else str(kind)


def _ca_spec(meta: Mapping[str, Any], security: Mapping[str, Any], kind: CaKind = CLUSTER) -> CaSpec:
    """spec.security.clusterCa or .clientsCa (as Strimzi's): a provided CA's Secret is <name>-cluster-ca
    (<name>-clients-ca) by default."""
    ca = security.get(kind.status_field) or {}
    generate = bool(ca.get("generateCertificateAuthority", True))
    default_secret = f"{meta['name']}-{kind.title.split()[0]}-ca"
    return CaSpec(generate=generate, validity_days=int(ca.get("validityDays", 365)),
                  renewal_days=int(ca.get("renewalDays", 30)),
                  secret_name="" if generate else str(ca.get("secretName") or default_secret),
                  force_token=str((meta.get("annotations") or {}).get(kind.force_annotation) or ""))


NODEPORT = "nodeport"
LOADBALANCER = "loadbalancer"


@dataclass(frozen=True, slots=True)
class ExternalBroker:
    """One entry of listeners.external[].brokers: what the user fixes for one broker."""

    broker: int
    node_port: int | None = None
    advertised_host: str | None = None
    advertised_port: int | None = None


@dataclass(frozen=True, slots=True)
class ExternalListener:
    """One entry of spec.listeners.external (Strimzi's nodeport / loadbalancer listener)."""

    name: str  # lower case, as written; the broker's listener is name.upper()
    port: int
    type: str = NODEPORT  # nodeport or loadbalancer
    tls: bool = DEFAULT_TLS
    authentication: str | None = DEFAULT_AUTHENTICATION  # scram-sha-512, tls; None: none
    bootstrap_node_port: int | None = None
    brokers: tuple[ExternalBroker, ...] = ()

    @property
    def listener(self) -> str:
        return self.name.upper()

    @property
    def security_protocol(self) -> str:
        sasl = self.authentication == "scram-sha-512"
        return {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                (True, True): "SASL_SSL"}[(self.tls, sasl)]

    def overrides(self, broker: int) -> ExternalBroker:
        return next((b for b in self.brokers if b.broker == broker), ExternalBroker(broker))

    @classmethod
    def from_spec(cls, item: Mapping[str, Any]) -> ExternalListener:
        brokers = tuple(
            ExternalBroker(broker=int(b["broker"]),
                           node_port=int(b["nodePort"]) if b.get("nodePort") else None,
                           advertised_host=str(b["advertisedHost"]) if b.get("advertisedHost") else None,
                           advertised_port=int(b["advertisedPort"]) if b.get("advertisedPort") else None)
            for b in item.get("brokers") or ())
        node_port = (item.get("bootstrap") or {}).get("nodePort")
        return cls(name=str(item["name"]), port=int(item["port"]), type=str(item.get("type") or NODEPORT),
                   tls=bool(item.get("tls", DEFAULT_TLS)), authentication=_authentication(item),
                   bootstrap_node_port=int(node_port) if node_port else None, brokers=brokers)


#: The claim template of the single-volume storage (spec.storage.size): its claims are data-<statefulset>-<n>.
SINGLE_VOLUME_CLAIM = "data"


@dataclass(frozen=True, slots=True)
class StorageVolume:
    """One broker volume: spec.storage.volumes[] (Strimzi's jbod), or the single spec.storage.size one.

    Each volume is one claim template, one mount and one `log.dirs` entry. The single volume keeps the
    names clusters had before volumes existed (claim template `data`, mounted at the data directory),
    so an existing cluster's StatefulSet and claims are never renamed; a listed volume is `data-<id>`.
    """

    id: int
    size: str
    storage_class: str | None = None
    delete_claim: bool = False
    listed: bool = False  # from spec.storage.volumes (True) or the single spec.storage.size (False)

    @property
    def claim(self) -> str:
        """The StatefulSet's claim template (and pod volume) name."""
        return f"data-{self.id}" if self.listed else SINGLE_VOLUME_CLAIM

    @property
    def field(self) -> str:
        """Where the spec sets its size, for messages."""
        return f"spec.storage.volumes[id={self.id}].size" if self.listed else "spec.storage.size"


REGISTRY_PORT = 8081  # Confluent's


@dataclass(frozen=True, slots=True)
class RegistrySpec:
    """spec.schemaRegistry: the registry the operator deploys for the cluster (schema_registry.py)."""

    replicas: int = 1  # the StatefulSet's; several instances elect one writer (schema_registry.py)
    resources: Mapping[str, Any] = field(default_factory=dict)
    compatibility: str = "BACKWARD"
    pod_template: PodTemplate = field(default_factory=PodTemplate)  # spec.schemaRegistry.template.pod

    @classmethod
    def from_spec(cls, item: Mapping[str, Any] | None) -> RegistrySpec | None:
        if item is None:
            return None
        return cls(replicas=int(item.get("replicas", 1)), resources=dict(item.get("resources") or {}),
                   compatibility=str(item.get("compatibility") or "BACKWARD"),
                   pod_template=PodTemplate.from_spec((item.get("template") or {}).get("pod")))


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    name: str
    namespace: str
    uid: str
    generation: int = 1
    brokers: int = 3
    image: str | None = None
    image_pull_policy: str = "IfNotPresent"
    storage_size: str = "10Gi"
    storage_class: str | None = None
    delete_claim: bool = False
    volumes: tuple[StorageVolume, ...] = ()  # spec.storage.volumes (JBOD); empty: the one storage_size volume
    resources: Mapping[str, Any] = field(default_factory=dict)
    rack_topology_key: str | None = None
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    kafka_port: int = DEFAULT_KAFKA_PORT
    admin_port: int = DEFAULT_ADMIN_PORT
    dashboard: bool = True
    # Dataclass defaults are the insecure values (tests build specs field by field); from_resource gives a
    # spec without security fields the secure defaults above.
    tls: bool = False  # spec.listeners.tls: TLS on the Kafka port with the cluster CA's certificate
    authentication: str | None = None  # spec.listeners.authentication.type: scram-sha-512 or tls; None: none
    super_users: tuple[str, ...] | None = None  # spec.authorization.superUsers; None: type none, no authorizer
    external: tuple[ExternalListener, ...] = ()  # spec.listeners.external
    cert_validity_days: int = 365
    cert_renewal_days: int = 30
    renew_token: str = ""  # the tinystream.io/renew-certificates annotation: a new value renews now
    created: str = ""  # metadata.creationTimestamp (the cluster CA's validity starts there)
    cluster_ca: CaSpec = field(default_factory=CaSpec)  # spec.security.clusterCa (ca_lifecycle.py)
    ca_status: Mapping[str, Any] = field(default_factory=dict)  # status.clusterCa as last written: who signs
    ca_marker: str = ""  # the pod template's CA annotation, set by the reconciler after the CA step
    clients_ca: CaSpec = field(default_factory=CaSpec)  # spec.security.clientsCa: signs tls users' certificates
    clients_ca_status: Mapping[str, Any] = field(default_factory=dict)  # status.clientsCa as last written
    clients_ca_marker: str = ""  # the pod template's clients-CA annotation (ca_lifecycle.CLIENTS)
    pod_template: PodTemplate = field(default_factory=PodTemplate)  # spec.template.pod (pod_template.py)
    schema_registry: RegistrySpec | None = None  # spec.schemaRegistry; None: no registry (schema_registry.py)
    registry_certificate: str = ""  # the serial of the registry's HTTPS certificate, set by the reconciler
    node_pools: bool = False  # NODE_POOLS_ANNOTATION: the brokers are the pools' StatefulSets, none of its own
    # With node_pools: (broker id, pod name) of every pool broker, from the pools' status.nodeIds; set by the
    # reconciler (external listeners make one Service per pool broker, external.external_services).
    pool_brokers: tuple[tuple[int, str], ...] = ()

    @property
    def storage_volumes(self) -> tuple[StorageVolume, ...]:
        """Every broker volume by id: spec.storage.volumes, or the single spec.storage.size one.

        By id, not spec order: the first log dir holds the broker's metadata (LogManager.metadata_dir), so
        reordering the list must not move it."""
        single = StorageVolume(0, self.storage_size, self.storage_class, self.delete_claim)
        return tuple(sorted(self.volumes, key=lambda v: v.id)) or (single,)

    @property
    def security_protocol(self) -> str:
        """The Kafka listener's protocol, from spec.listeners.tls and .authentication."""
        sasl = self.authentication == "scram-sha-512"
        return {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT",
                (True, True): "SASL_SSL"}[(self.tls, sasl)]

    @property
    def insecure(self) -> tuple[str, ...]:
        """What the spec turned off of the secure default, each said as its consequence (status says so)."""
        found = []
        if not self.tls:
            found.append("listeners.tls is false: clients talk to brokers in plain text")
        if self.authentication is None:
            found.append("listeners.authentication is none: every client is anonymous")
        if self.super_users is None:
            found.append("authorization is none: every client may do anything")
        for listener in self.external:
            if not listener.tls:
                found.append(f"listeners.external {listener.name} has no tls: clients outside talk in plain text")
            if listener.authentication is None:
                found.append(f"listeners.external {listener.name} authentication is none: "
                             "every client from outside is anonymous")
        return tuple(found)

    @property
    def replication_protocol(self) -> str:
        """The REPLICATION listener's protocol: mTLS with the broker certificate when the cluster has TLS,
        else SCRAM as the inter-broker user; never unauthenticated (only a proven broker may replicate)."""
        return "SSL" if self.tls else "SASL_PLAINTEXT"

    @property
    def tls_clients(self) -> bool:
        """Whether a listener authenticates clients by certificate (of the clients CA, ca_lifecycle.CLIENTS)."""
        return self.tls and (self.authentication == "tls" or any(
            listener.tls and listener.authentication == "tls" for listener in self.external))

    @property
    def needs_scram_users(self) -> bool:
        """Whether brokers mount the SCRAM users Secret: clients use SCRAM, or brokers replicate with it."""
        return (self.authentication == "scram-sha-512" or self.replication_protocol == "SASL_PLAINTEXT"
                or any(listener.authentication == "scram-sha-512" for listener in self.external))

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> ClusterSpec:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        storage = spec.get("storage") or {}
        listeners = spec.get("listeners") or {}
        certificates = spec.get("certificates") or {}
        return cls(
            name=meta["name"],
            namespace=meta.get("namespace") or "default",
            uid=meta.get("uid") or "",
            generation=int(meta.get("generation") or 1),
            brokers=int(spec.get("brokers", 3)),
            image=spec.get("image") or None,
            image_pull_policy=spec.get("imagePullPolicy") or "IfNotPresent",
            storage_size=str(storage.get("size") or "10Gi"),
            storage_class=storage.get("storageClass") or None,
            delete_claim=bool(storage.get("deleteClaim", False)),
            volumes=parse_volumes(storage),
            resources=dict(spec.get("resources") or {}),
            rack_topology_key=(spec.get("rack") or {}).get("topologyKey") or None,
            config=dict(spec.get("config") or {}),
            kafka_port=int(listeners.get("kafka", DEFAULT_KAFKA_PORT)),
            admin_port=int(listeners.get("admin", DEFAULT_ADMIN_PORT)),
            dashboard=bool((spec.get("dashboard") or {}).get("enabled", True)),
            tls=bool(listeners.get("tls", DEFAULT_TLS)),
            authentication=_authentication(listeners),
            super_users=_super_users(spec.get("authorization")),
            external=tuple(ExternalListener.from_spec(item) for item in listeners.get("external") or ()),
            cert_validity_days=int(certificates.get("validityDays", 365)),
            cert_renewal_days=int(certificates.get("renewalDays", 30)),
            renew_token=str((meta.get("annotations") or {}).get(RENEW_CERTIFICATES_ANNOTATION) or ""),
            created=str(meta.get("creationTimestamp") or ""),
            cluster_ca=_ca_spec(meta, spec.get("security") or {}),
            ca_status=dict((body.get("status") or {}).get("clusterCa") or {}),
            clients_ca=_ca_spec(meta, spec.get("security") or {}, CLIENTS),
            clients_ca_status=dict((body.get("status") or {}).get("clientsCa") or {}),
            pod_template=PodTemplate.from_spec((spec.get("template") or {}).get("pod")),
            schema_registry=RegistrySpec.from_spec(spec.get("schemaRegistry")),
            node_pools=(meta.get("annotations") or {}).get(NODE_POOLS_ANNOTATION) == "enabled",
        )


def parse_volumes(storage: Mapping[str, Any]) -> tuple[StorageVolume, ...]:
    """spec.storage.volumes; a volume without deleteClaim takes spec.storage.deleteClaim (the CRD makes them
    all agree: a StatefulSet has one claim retention policy)."""
    default_delete = bool(storage.get("deleteClaim", False))
    return tuple(StorageVolume(id=int(v["id"]), size=str(v.get("size") or "10Gi"),
                               storage_class=v.get("storageClass") or None,
                               delete_claim=bool(v.get("deleteClaim", default_delete)), listed=True)
                 for v in storage.get("volumes") or ())


@dataclass(frozen=True, slots=True)
class TopicSpec:
    name: str  # the Topic object's name
    namespace: str
    uid: str
    cluster: str
    partitions: int
    replication_factor: int = 1
    topic_name: str = ""  # the Kafka topic name (spec.topicName or metadata.name)
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    generation: int = 1

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> TopicSpec:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return cls(
            name=meta["name"],
            namespace=meta.get("namespace") or "default",
            uid=meta.get("uid") or "",
            cluster=str(spec.get("cluster") or ""),
            partitions=int(spec.get("partitions", 1)),
            replication_factor=int(spec.get("replicationFactor", 1)),
            topic_name=str(spec.get("topicName") or meta["name"]),
            config=_topic_config(spec),
            generation=int(meta.get("generation") or 1),
        )


@dataclass(frozen=True, slots=True)
class PartitionView:
    """One partition as the controller core has it: what the cluster and Topic decisions read."""

    topic: str
    partition: int
    leader: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader_epoch: int = 0
    adding: tuple[int, ...] = ()  # a reassignment under way (KIP-455): replicas joining ...
    removing: tuple[int, ...] = ()  # ... and leaving once they have

    @property
    def under_replicated(self) -> bool:
        return not set(self.replicas) <= set(self.isr)

    @property
    def target(self) -> tuple[int, ...]:
        """The replicas once a reassignment under way is done."""
        return tuple(r for r in self.replicas if r not in self.removing)


VALUE_SCHEMA_KEY = "tinystream.value.schema"


def _topic_config(spec: Mapping[str, Any]) -> dict[str, ConfigValue]:
    """spec.config, plus spec.schema (a JSON Schema written as YAML) as `tinystream.value.schema`.

    The schema is serialized canonically (sorted keys, no spaces) so the text
    the controller stores compares equal on the next reconcile.
    """
    config: dict[str, ConfigValue] = dict(spec.get("config") or {})
    schema = spec.get("schema")
    if schema is not None:
        config[VALUE_SCHEMA_KEY] = json.dumps(schema, sort_keys=True, separators=(",", ":"))
    return config


@dataclass(frozen=True, slots=True)
class OperatorContext:
    """Facts about the running operator that the owned objects depend on."""

    broker_image: str = "tinystream:0.2.0"
    #: Fully qualified DNS name of the operator's Service: it is the target of ExternalName Services,
    #: and a resolver does not search-expand a CNAME target (found on a real cluster: `x.ns.svc` did not resolve).
    operator_service: str = "tinystream.tinystream.svc.cluster.local"
    controller_port: int = CONTROLLER_PORT
    controller_tls: bool = True  # the controller API is served over TLS (controller_tls.py)
    dashboard_port: int = DASHBOARD_PORT  # the operator's dashboard (and its Service's port)
    #: Brokers serve /metrics without their admin token (admin.metrics.public): the chart's broker
    #: ServiceMonitor is on, and it scrapes every cluster without any cluster's token.
    broker_metrics_public: bool = False
    #: The chart's ClusterRole that may get nodes: a spec.rack cluster's brokers are bound to it (rack.py).
    broker_rack_role: str = "tinystream-broker-rack"

    @property
    def cluster_domain(self) -> str:
        """The cluster's DNS domain, as the operator's own Service name ends (cluster.local by default)."""
        _, sep, domain = self.operator_service.partition(".svc.")
        return domain if sep and domain else "cluster.local"


USER_KIND = "TinyStreamUser"
USER_PLURAL = "tinystreamusers"
REBALANCE_PLURAL = "tinystreamrebalances"
POOL_KIND = "TinyStreamNodePool"  # node_pools.py
POOL_PLURAL = "tinystreamnodepools"


@dataclass(frozen=True, slots=True)
class UserAcl:
    """One entry of spec.authorization.acls, as written (Strimzi's KafkaUser words)."""

    resource_type: str  # topic, group, cluster, transactionalId
    name: str  # "" for the cluster
    pattern_type: str  # literal, prefix
    operations: tuple[str, ...]  # Read, Write, ...
    host: str = "*"
    allow: bool = True


#: spec.quotas (Strimzi's KafkaUser words) -> Kafka's quota keys.
USER_QUOTA_KEYS = {"producerByteRate": "producer_byte_rate", "consumerByteRate": "consumer_byte_rate",
                   "requestPercentage": "request_percentage", "controllerMutationRate": "controller_mutation_rate"}


@dataclass(frozen=True, slots=True)
class UserSpec:
    name: str  # the SCRAM user, the certificate's CN and the Secret's name
    namespace: str
    uid: str
    cluster: str
    authentication: str  # scram-sha-512 or tls
    acls: tuple[UserAcl, ...] = ()
    generation: int = 1
    quotas: tuple[tuple[str, float], ...] = ()  # (Kafka's key, value), sorted; the CRD schema checked them

    @property
    def principal(self) -> str:
        return f"User:CN={self.name}" if self.authentication == "tls" else f"User:{self.name}"

    @property
    def quota_user(self) -> str:
        """The name Kafka's quotas know the user by: the principal's, "alice" or "CN=alice"."""
        return self.principal.removeprefix("User:")

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> UserSpec:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        acls = tuple(
            UserAcl(resource_type=str((a.get("resource") or {}).get("type", "topic")),
                    name=str((a.get("resource") or {}).get("name") or ""),
                    pattern_type=str((a.get("resource") or {}).get("patternType") or "literal"),
                    operations=tuple(a.get("operations") or ()), host=str(a.get("host") or "*"),
                    allow=(a.get("type") or "allow") == "allow")
            for a in ((spec.get("authorization") or {}).get("acls") or ()))
        return cls(name=meta["name"], namespace=meta.get("namespace") or "default", uid=meta.get("uid") or "",
                   cluster=str(spec.get("cluster") or ""),
                   authentication=str((spec.get("authentication") or {}).get("type") or "scram-sha-512"),
                   acls=acls, generation=int(meta.get("generation") or 1),
                   quotas=tuple(sorted((USER_QUOTA_KEYS[k], float(v)) for k, v in (spec.get("quotas") or {}).items()
                                       if k in USER_QUOTA_KEYS and v is not None)))


SCHEMA_KIND = "TinyStreamSchema"
SCHEMA_PLURAL = "tinystreamschemas"


@dataclass(frozen=True, slots=True)
class SchemaReference:
    name: str
    subject: str
    version: int


@dataclass(frozen=True, slots=True)
class SchemaSpec:
    """A TinyStreamSchema: one schema registered under a subject of its cluster's registry (schemas.py)."""

    name: str
    namespace: str
    cluster: str
    subject: str
    schema: str
    schema_type: str = "AVRO"
    references: tuple[SchemaReference, ...] = ()
    compatibility: str | None = None  # None: the subject keeps the registry's (or its own earlier) level
    deletion_policy: str = "Keep"  # Keep or Delete (soft-delete the subject when the resource goes)
    generation: int = 1

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> SchemaSpec:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return cls(name=meta["name"], namespace=meta.get("namespace") or "default",
                   cluster=str(spec.get("cluster") or ""), subject=str(spec.get("subject") or meta["name"]),
                   schema=str(spec.get("schema") or ""), schema_type=str(spec.get("schemaType") or "AVRO"),
                   references=tuple(SchemaReference(str(r["name"]), str(r["subject"]), int(r["version"]))
                                    for r in spec.get("references") or ()),
                   compatibility=spec.get("compatibility") or None,
                   deletion_policy=str(spec.get("deletionPolicy") or "Keep"),
                   generation=int(meta.get("generation") or 1))
