"""The metadata image: what every broker must know, with a version.

Brokers pull the image from the controller and act on it (lead, follow,
create or delete logs), so it holds exactly KRaft's metadata records in
folded form: broker registrations (KIP-631) and topics with their partition
registrations (replicas, ISR, leader, leader epoch, partition epoch, the
adding/removing replicas of KIP-455 reassignments and the leader recovery
state of KIP-704). `version` grows by one with every change; a broker that
has applied version N reports N in its heartbeat, which is how the controller
knows a newly registered broker has caught up (KIP-631).

Records are frozen; mappings are read-only copies. Dict shape (see
`MetadataImage.to_dict`)::

    {"schema_version": 1, "version": 7, "cluster_id": "...",
     "brokers": [{"broker_id": 1, "host": "...", "port": 9092, "rack": null,
                  "incarnation_id": "...", "epoch": 3, "fenced": false,
                  "drained": false,            # + "drained_until_restart": true during a roll
                  "endpoints": [{"name": "CLIENT", "host": "...", "port": 9092,
                                 "security_protocol": "SASL_SSL"}, ...]}, ...],
     "topics": [{"name": "orders", "topic_id": "uuid", "config": {...},
                 "partitions": [{"partition": 0, "replicas": [1, 2],
                                 "isr": [1, 2], "leader": 1,
                                 "leader_epoch": 0, "partition_epoch": 0,
                                 "adding_replicas": [], "removing_replicas": [],
                                 "leader_recovery_state": "RECOVERED"}]}],
     # written only when not empty (an older reader refuses unknown fields):
     "acls": [{"resource_type": "TOPIC", "resource_name": "orders", "pattern_type": "LITERAL",
               "principal": "User:alice", "host": "*", "operation": "READ", "permission": "ALLOW"}],
     "scram_credentials": [{"user": "alice", "mechanism": "SCRAM-SHA-512", "salt": "<b64>",
                            "stored_key": "<b64>", "server_key": "<b64>", "iterations": 8192}],
     "client_quotas": [{"entity": {"user": "alice", "client-id": null},   # null: <default>
                        "values": {"producer_byte_rate": 1048576.0}}],
     "broker_configs": {"default": {"log.retention.ms": "60000"},
                        "brokers": {"2": {"follower.replication.throttled.rate": "1048576"}}}}

ACLs and SCRAM credentials are cluster metadata as in KRaft (AccessControlEntryRecord,
UserScramCredentialRecord): kept here, every broker applies them from the image,
so all brokers authorize and authenticate alike. Credentials are salted (RFC 5802
StoredKey/ServerKey), never passwords. Client quotas are too (Kafka's
ClientQuotaRecord, KIP-546): one record per entity with its values, the shape
of a standalone broker's quotas.json, so every broker enforces the same ones.
Dynamic broker configs are too (ConfigRecord on BROKER resources): the cluster
default and each broker's layer, values as the text the client sent; every
broker applies the default and its own id's layer.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from tinystream.config.broker_configs import layer_problem
from tinystream.operator.controller.codec import (
    OMIT_DEFAULT,
    SCHEMA_VERSION,
    check_schema_version,
    convert,
    from_plain,
    frozen_mapping,
    to_plain,
)
from tinystream.operator.controller.errors import StateFormatError
from tinystream.operator.controller.topic_config import ConfigValue

NO_LEADER = -1


class LeaderRecoveryState(enum.Enum):
    """KIP-704: after an unclean election the new leader must recover first.

    While RECOVERING the ISR stays the leader alone; the leader reports
    RECOVERED through AlterPartition when its log is consistent again.
    """

    RECOVERED = "RECOVERED"
    RECOVERING = "RECOVERING"


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int


#: The security protocols a listener may have (Kafka's SecurityProtocol).
SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


@dataclass(frozen=True, slots=True, kw_only=True)
class ListenerEndpoint:
    """One advertised listener of a broker (KIP-631's BrokerEndpoint): clients are told the endpoint of
    the listener they came in on; brokers connect to each other on the inter-broker one."""

    name: str
    host: str
    port: int
    security_protocol: str = "PLAINTEXT"


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRecord:
    """A registered broker. `epoch` is the image version that registered it
    (KRaft's broker epoch is the offset of the RegisterBrokerRecord)."""

    broker_id: int
    host: str
    port: int
    rack: str | None = None
    incarnation_id: str
    epoch: int
    fenced: bool = True
    drained: bool = False
    # A roll's drain: ends at the next registration (DrainBroker). Written only when true (codec.OMIT_DEFAULT).
    drained_until_restart: bool = field(default=False, metadata=OMIT_DEFAULT)
    # A lasting drain a scale-down made (DrainBroker.scale_down), which a node pool taking the id again may end;
    # an admin's drain (the API's /drain) is never ended that way. Written only when true (codec.OMIT_DEFAULT).
    drained_by_scale_down: bool = field(default=False, metadata=OMIT_DEFAULT)
    # Every advertised listener; host:port above is the inter-broker one. Empty for a broker registered by an
    # older version (its host:port then serves every listener); written only when set (codec.OMIT_DEFAULT).
    endpoints: tuple[ListenerEndpoint, ...] = field(default=(), metadata=OMIT_DEFAULT)

    @property
    def live(self) -> bool:
        return not self.fenced


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionRecord:
    """One partition. `replicas` is ordered, the first is the preferred leader.

    During a reassignment (KIP-455) `replicas` is the target followed by the
    replicas being removed; `adding_replicas` are target members that were
    not replicas before, `removing_replicas` the old ones leaving.
    """

    partition: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0
    adding_replicas: tuple[int, ...] = ()
    removing_replicas: tuple[int, ...] = ()
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    def __post_init__(self) -> None:
        for name in ("replicas", "isr", "adding_replicas", "removing_replicas"):
            object.__setattr__(self, name, tuple(getattr(self, name)))

    @property
    def preferred_leader(self) -> int:
        return self.replicas[0]

    @property
    def offline(self) -> bool:
        return self.leader == NO_LEADER

    @property
    def reassigning(self) -> bool:
        return bool(self.adding_replicas or self.removing_replicas)

    @property
    def target_replicas(self) -> tuple[int, ...]:
        """The replicas once the running reassignment (if any) completes."""
        return tuple(r for r in self.replicas if r not in self.removing_replicas)

    @property
    def original_replicas(self) -> tuple[int, ...]:
        """The replicas before the running reassignment (if any) started."""
        return tuple(r for r in self.replicas if r not in self.adding_replicas)


@dataclass(frozen=True, slots=True, kw_only=True)
class TopicRecord:
    name: str
    topic_id: str
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    partitions: tuple[PartitionRecord, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", frozen_mapping(self.config))
        object.__setattr__(self, "partitions", tuple(self.partitions))


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class AclRecord:
    """One ACL (Kafka's AccessControlEntryRecord), by Kafka's enum names; `tinystream.acls` checks it."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission: str


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class ScramCredentialRecord:
    """One user's salted credential for one mechanism (Kafka's UserScramCredentialRecord); keys base64."""

    user: str
    mechanism: str
    salt: str
    stored_key: str
    server_key: str
    iterations: int


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotaRecord:
    """One quota entity's values (Kafka's ClientQuotaRecords folded): `entity` maps "user" and/or
    "client-id" to a name, None being the default; `values` maps quota keys to their values. Checked with
    tinystream.config.client_quotas (core.py)."""

    entity: Mapping[str, str | None]
    values: Mapping[str, float]

    def __post_init__(self) -> None:
        object.__setattr__(self, "entity", frozen_mapping(self.entity))
        object.__setattr__(self, "values", frozen_mapping(self.values))

    def key(self) -> tuple[bool, str, bool, str]:
        """The entity as a stable sort key (a default, None, sorts first), as the broker's listing orders."""
        user, client = self.entity.get("user"), self.entity.get("client-id")
        return ("user" in self.entity, user or "", "client-id" in self.entity, client or "")


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfigsRecord:
    """Dynamic broker configs (Kafka's ConfigRecords on BROKER resources, folded): `default` for every
    broker (resource name ""), `brokers` by broker id as text ("2"), each {dynamic key: value text}. Checked
    on load with tinystream.config.broker_configs; empty layers are not kept."""

    default: Mapping[str, str] = field(default_factory=dict)
    brokers: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "default", frozen_mapping(self.default))
        by_id = sorted(((str(b), v) for b, v in self.brokers.items()), key=lambda i: (len(i[0]), i[0]))
        object.__setattr__(self, "brokers", frozen_mapping({b: frozen_mapping(v) for b, v in by_id if v}))

    def __bool__(self) -> bool:
        return bool(self.default or self.brokers)

    def problem(self) -> str | None:
        """Why these layers cannot be in an image, or None."""
        problem = layer_problem(self.default)
        if problem is not None:
            return f"default: {problem}"
        for broker, values in self.brokers.items():
            if not (broker.isascii() and broker.isdigit() and str(int(broker)) == broker):
                return f"brokers: {broker!r} is not a broker id"
            problem = layer_problem(values)
            if problem is not None:
                return f"brokers.{broker}: {problem}"
        return None

    def to_plain(self) -> dict[str, Any]:
        return {"default": dict(self.default), "brokers": {b: dict(v) for b, v in self.brokers.items()}}


@dataclass(frozen=True, slots=True, kw_only=True)
class MetadataImage:
    version: int
    cluster_id: str
    brokers: Mapping[int, BrokerRecord] = field(default_factory=dict)
    topics: Mapping[str, TopicRecord] = field(default_factory=dict)
    acls: tuple[AclRecord, ...] = ()  # sorted, no duplicates
    scram_credentials: tuple[ScramCredentialRecord, ...] = ()  # sorted by (user, mechanism), one each
    client_quotas: tuple[ClientQuotaRecord, ...] = ()  # sorted by entity (ClientQuotaRecord.key), one each
    broker_configs: BrokerConfigsRecord = field(default_factory=BrokerConfigsRecord)

    def __post_init__(self) -> None:
        object.__setattr__(self, "brokers", frozen_mapping(self.brokers))
        object.__setattr__(self, "topics", frozen_mapping(self.topics))
        object.__setattr__(self, "acls", tuple(sorted(set(self.acls))))
        object.__setattr__(self, "scram_credentials", tuple(sorted(self.scram_credentials)))
        object.__setattr__(self, "client_quotas", tuple(sorted(self.client_quotas, key=ClientQuotaRecord.key)))

    @classmethod
    def empty(cls, *, cluster_id: str) -> MetadataImage:
        return cls(version=0, cluster_id=cluster_id)

    # -- queries -----------------------------------------------------------

    def broker(self, broker_id: int) -> BrokerRecord | None:
        return self.brokers.get(broker_id)

    def topic(self, name: str) -> TopicRecord | None:
        return self.topics.get(name)

    def partition(self, topic: str, partition: int) -> PartitionRecord | None:
        record = self.topics.get(topic)
        if record is None or not 0 <= partition < len(record.partitions):
            return None
        return record.partitions[partition]

    def iter_partitions(self) -> Iterator[tuple[str, PartitionRecord]]:
        """Every (topic name, partition), topics by name, partitions by index."""
        for name in sorted(self.topics):
            for record in self.topics[name].partitions:
                yield name, record

    def leaderships(self, broker_id: int) -> tuple[TopicPartition, ...]:
        """The partitions `broker_id` leads (empty once a drain is done)."""
        return tuple(TopicPartition(t, p.partition) for t, p in self.iter_partitions() if p.leader == broker_id)

    def offline_partitions(self) -> tuple[TopicPartition, ...]:
        return tuple(TopicPartition(t, p.partition) for t, p in self.iter_partitions() if p.offline)

    # -- plain dicts -------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "version": self.version,
            "cluster_id": self.cluster_id,
            "brokers": [to_plain(self.brokers[b]) for b in sorted(self.brokers)],
            "topics": [to_plain(self.topics[t]) for t in sorted(self.topics)],
            **({"acls": to_plain(self.acls)} if self.acls else {}),
            **({"scram_credentials": to_plain(self.scram_credentials)} if self.scram_credentials else {}),
            **({"client_quotas": to_plain(self.client_quotas)} if self.client_quotas else {}),
            **({"broker_configs": self.broker_configs.to_plain()} if self.broker_configs else {}),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> MetadataImage:
        check_schema_version(data, what="metadata image")
        unknown = sorted(set(data) - {"schema_version", "version", "cluster_id", "brokers", "topics", "acls",
                                      "scram_credentials", "client_quotas", "broker_configs"})
        if unknown:
            raise StateFormatError(f"$: unknown field(s) {unknown} for MetadataImage")
        version = convert(int, data.get("version"), path="$.version")
        cluster_id = convert(str, data.get("cluster_id"), path="$.cluster_id")
        brokers: dict[int, BrokerRecord] = {}
        for i, item in enumerate(convert(tuple[Any, ...], data.get("brokers", []), path="$.brokers")):
            record = from_plain(BrokerRecord, item, path=f"$.brokers[{i}]")
            if record.broker_id in brokers:
                raise StateFormatError(f"$.brokers[{i}]: broker {record.broker_id} appears twice")
            brokers[record.broker_id] = record
        topics: dict[str, TopicRecord] = {}
        for i, item in enumerate(convert(tuple[Any, ...], data.get("topics", []), path="$.topics")):
            record = from_plain(TopicRecord, item, path=f"$.topics[{i}]")
            if record.name in topics:
                raise StateFormatError(f"$.topics[{i}]: topic {record.name!r} appears twice")
            for index, part in enumerate(record.partitions):
                if part.partition != index:
                    raise StateFormatError(f"$.topics[{i}].partitions[{index}]: has index {part.partition}")
            topics[record.name] = record
        acls = convert(tuple[AclRecord, ...], data.get("acls", []), path="$.acls")
        scram = convert(tuple[ScramCredentialRecord, ...], data.get("scram_credentials", []),
                        path="$.scram_credentials")
        if len({(c.user, c.mechanism) for c in scram}) != len(scram):
            raise StateFormatError("$.scram_credentials: a (user, mechanism) appears twice")
        quotas = convert(tuple[ClientQuotaRecord, ...], data.get("client_quotas", []), path="$.client_quotas")
        if len({q.key() for q in quotas}) != len(quotas):
            raise StateFormatError("$.client_quotas: an entity appears twice")
        configs = from_plain(BrokerConfigsRecord, data.get("broker_configs", {}), path="$.broker_configs")
        problem = configs.problem()
        if problem is not None:
            raise StateFormatError(f"$.broker_configs.{problem}")
        return cls(version=version, cluster_id=cluster_id, brokers=brokers, topics=topics, acls=acls,
                   scram_credentials=scram, client_quotas=quotas, broker_configs=configs)
