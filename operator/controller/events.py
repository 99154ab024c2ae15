"""Events: everything that can happen to the controller, as frozen messages.

Drivers turn HTTP requests, Kubernetes changes and timers into these and pass
them to `apply` with the current time. Each event maps to a KRaft RPC or
controller-internal trigger:

    RegisterBroker        BrokerRegistration (KIP-631)
    BrokerHeartbeat       BrokerHeartbeat (KIP-631)
    UnregisterBroker      UnregisterBroker (KIP-631)
    AllocateProducerIds   AllocateProducerIds (KIP-730): a block of producer ids
    ExpireSession         a driver-observed death (e.g. the pod is gone)
    AdvanceTime           the controller's periodic session check
    ControllerActivated   a driver (re)loaded the state: restart all sessions
    DrainBroker           controlled shutdown (KIP-841), persistent until
    UndrainBroker         ...undone, for rolls and scale-down
    CreateTopic           CreateTopics
    CreatePartitions      CreatePartitions
    DeleteTopic           DeleteTopics
    AlterTopicConfig      IncrementalAlterConfigs / AlterConfigs on a topic
    AlterPartition        AlterPartition from a partition leader (KIP-497)
    ElectPreferredLeaders ElectLeaders(PREFERRED), and the periodic
                          auto.leader.rebalance tick
    ReassignPartitions    AlterPartitionReassignments (KIP-455)
    CreateAcls            CreateAcls (forwarded by a broker)
    DeleteAcls            DeleteAcls (forwarded by a broker)
    AlterScramCredentials AlterUserScramCredentials (forwarded by a broker)
    AlterClientQuotas     AlterClientQuotas (forwarded by a broker, or a TinyStreamUser's spec.quotas)
    AlterBrokerConfigs    IncrementalAlterConfigs on BROKER resources (forwarded by a broker)

Plain form: `{"type": "<class name>", <field>: <value>, ...}` with the
codec's JSON types (tuples as lists); `Event.from_dict` checks every field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeVar

from tinystream.operator.controller.codec import from_plain, frozen_mapping, to_plain
from tinystream.operator.controller.errors import StateFormatError
from tinystream.operator.controller.image import (
    AclRecord,
    LeaderRecoveryState,
    ListenerEndpoint,
    ScramCredentialRecord,
    TopicPartition,
)
from tinystream.operator.controller.topic_config import ConfigValue


@dataclass(frozen=True, slots=True)
class Event:
    """Base of all events."""

    registry: ClassVar[dict[str, type[Event]]] = {}

    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, **to_plain(self)}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Event:
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            raise StateFormatError("$: an event needs a string 'type'")
        cls = Event.registry.get(data["type"])
        if cls is None:
            raise StateFormatError(f"$.type: unknown event type {data['type']!r}")
        event: Event = from_plain(cls, data, ignore=frozenset({"type"}))
        return event


E = TypeVar("E", bound=Event)


def _event(cls: type[E]) -> type[E]:
    Event.registry[cls.__name__] = cls
    return cls


@dataclass(frozen=True, slots=True, kw_only=True)
class ReplicaAssignment:
    """A partition's target replicas (None cancels its reassignment, KIP-455)."""

    topic: str
    partition: int
    replicas: tuple[int, ...] | None

    def __post_init__(self) -> None:
        if self.replicas is not None:
            object.__setattr__(self, "replicas", tuple(self.replicas))


# -- brokers -----------------------------------------------------------------


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterBroker(Event):
    broker_id: int
    incarnation_id: str
    host: str  # the inter-broker listener's advertised address
    port: int
    rack: str | None = None
    endpoints: tuple[ListenerEndpoint, ...] = ()  # every advertised listener (older brokers send none)


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerHeartbeat(Event):
    """`metadata_version`: the image version the broker has applied (-1: none)."""

    broker_id: int
    broker_epoch: int
    metadata_version: int
    want_fence: bool = False


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class UnregisterBroker(Event):
    broker_id: int


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateProducerIds(Event):
    """A registered broker asks for the next block of producer ids (KIP-730)."""

    broker_id: int
    broker_epoch: int


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ExpireSession(Event):
    broker_id: int


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AdvanceTime(Event):
    """Check every session against `now_ms`; send about once a second."""


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerActivated(Event):
    """Restart every broker session at `now_ms` (after loading a state)."""


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class DrainBroker(Event):
    """Controlled shutdown (KIP-841): leaders move to other ISR members, no new replicas land here.

    `until_restart`: the drain ends when the broker registers again with a new
    incarnation (a rolling update's restart); otherwise only UndrainBroker ends
    it (a broker being scaled away). Kept in the image, so a controller restart
    mid-roll keeps both kinds."""

    broker_id: int
    until_restart: bool = False
    scale_down: bool = False  # the operator removing the broker (lasting); an id a pool takes again ends it


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class UndrainBroker(Event):
    broker_id: int


# -- topics ------------------------------------------------------------------


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopic(Event):
    """None for `partitions` / `replication_factor` takes the controller's
    defaults (num.partitions, default.replication.factor). A
    `replica_assignment` (one replica list per partition) replaces placement."""

    topic: str
    partitions: int | None = None
    replication_factor: int | None = None
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    replica_assignment: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", frozen_mapping(self.config))
        if self.replica_assignment is not None:
            object.__setattr__(self, "replica_assignment", tuple(tuple(r) for r in self.replica_assignment))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitions(Event):
    """Grow `topic` to `count` partitions in total."""

    topic: str
    count: int
    replica_assignment: tuple[tuple[int, ...], ...] | None = None

    def __post_init__(self) -> None:
        if self.replica_assignment is not None:
            object.__setattr__(self, "replica_assignment", tuple(tuple(r) for r in self.replica_assignment))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteTopic(Event):
    topic: str


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AlterTopicConfig(Event):
    """Merge `config` into the topic's (a None value deletes the key), or with
    `replace` make it the whole config (AlterConfigs, or a Topic resource's spec)."""

    topic: str
    config: Mapping[str, ConfigValue | None]
    replace: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "config", frozen_mapping(self.config))


# -- partitions --------------------------------------------------------------


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartition(Event):
    """A leader asks for a new ISR, naming the epochs it knows."""

    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED

    def __post_init__(self) -> None:
        object.__setattr__(self, "isr", tuple(self.isr))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ElectPreferredLeaders(Event):
    """Preferred-leader election for these partitions, or all (None)."""

    partitions: tuple[TopicPartition, ...] | None = None

    def __post_init__(self) -> None:
        if self.partitions is not None:
            object.__setattr__(self, "partitions", tuple(self.partitions))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignPartitions(Event):
    """Start (or with replicas None, cancel) reassignments; all or nothing."""

    assignments: tuple[ReplicaAssignment, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "assignments", tuple(self.assignments))


# -- access: ACLs and SCRAM credentials --------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class AclFilter:
    """DeleteAcls' filter (Kafka's AclBindingFilter by enum names); None matches anything."""

    resource_type: str = "ANY"
    resource_name: str | None = None
    pattern_type: str = "ANY"
    principal: str | None = None
    host: str | None = None
    operation: str = "ANY"
    permission: str = "ANY"


@dataclass(frozen=True, slots=True, kw_only=True)
class ScramDeletion:
    user: str
    mechanism: str


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAcls(Event):
    acls: tuple[AclRecord, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "acls", tuple(self.acls))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAcls(Event):
    filters: tuple[AclFilter, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "filters", tuple(self.filters))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AlterScramCredentials(Event):
    """Set (upsert) and remove users' salted credentials; a (user, mechanism) at most once in all."""

    upsertions: tuple[ScramCredentialRecord, ...] = ()
    deletions: tuple[ScramDeletion, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "upsertions", tuple(self.upsertions))
        object.__setattr__(self, "deletions", tuple(self.deletions))


# -- client quotas (KIP-546) -------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaOp:
    """Set `key` to `value`, or with `remove` drop it (AlterClientQuotas' OpData)."""

    key: str
    value: float = 0.0
    remove: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class QuotaAlteration:
    """One entity's ops; `entity` maps "user" and/or "client-id" to a name, None being the default."""

    entity: Mapping[str, str | None]
    ops: tuple[QuotaOp, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "entity", frozen_mapping(self.entity))
        object.__setattr__(self, "ops", tuple(self.ops))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AlterClientQuotas(Event):
    """Change client quotas, all or nothing; an entity at most once. An entity left with no key goes."""

    alterations: tuple[QuotaAlteration, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "alterations", tuple(self.alterations))


# -- dynamic broker configs (KRaft's ConfigRecord for BROKER resources) -------------


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfigOp:
    """IncrementalAlterConfigs' op on one key: "SET" (with a value), "DELETE", "APPEND" or "SUBTRACT" (the
    last two are refused: no dynamic broker config is a list)."""

    key: str
    op: str = "SET"
    value: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfigAlteration:
    """One BROKER resource's ops: `resource` "" is the cluster default, else a broker id ("2")."""

    resource: str
    ops: tuple[BrokerConfigOp, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))


@_event
@dataclass(frozen=True, slots=True, kw_only=True)
class AlterBrokerConfigs(Event):
    """Change dynamic broker configs, all or nothing; a resource at most once."""

    alterations: tuple[BrokerConfigAlteration, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "alterations", tuple(self.alterations))
