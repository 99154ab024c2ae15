"""Request bodies of the controller API, as frozen dataclasses, decoded strictly.

A body is decoded by the core's plain-dict codec (the same one that reads the
state file), so the rules are the core's: every field has a JSON type, an
unknown field is an error (a typo must not be ignored silently), JSON `true`
is never an integer. `decode` turns every problem into a 400
INVALID_REQUEST naming the field, e.g. ``body.port: expected int, got 'x'``.

Kafka's "use the default" -1 for a topic's partitions and replication factor
(CreateTopics) is accepted as well as null, so a broker can forward a
CreateTopics request as it came.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from tinystream.operator.controller import (
    AclFilter,
    AclRecord,
    BrokerConfigAlteration,
    LeaderRecoveryState,
    ListenerEndpoint,
    QuotaAlteration,
    ReplicaAssignment,
    ScramCredentialRecord,
    ScramDeletion,
    StateFormatError,
    TopicPartition,
)
from tinystream.operator.controller.codec import from_plain
from tinystream.operator.controller.topic_config import ConfigValue
from tinystream.operator.service.errors import ApiError

T = TypeVar("T")


@dataclass(frozen=True, slots=True, kw_only=True)
class RegisterRequest:
    broker_id: int
    incarnation_id: str
    host: str  # the inter-broker listener's advertised address
    port: int
    rack: str | None = None
    endpoints: tuple[ListenerEndpoint, ...] = ()  # every advertised listener


@dataclass(frozen=True, slots=True, kw_only=True)
class HeartbeatRequest:
    broker_epoch: int
    metadata_version: int  # the image version the broker has applied (-1: none yet)
    want_fence: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AllocateProducerIdsRequest:
    broker_id: int
    broker_epoch: int


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    topic: str
    partition: int
    leader_epoch: int
    partition_epoch: int
    isr: tuple[int, ...]
    leader_recovery_state: LeaderRecoveryState = LeaderRecoveryState.RECOVERED


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateTopicRequest:
    name: str
    partitions: int | None = None  # None or -1: num.partitions
    replication_factor: int | None = None  # None or -1: default.replication.factor
    config: Mapping[str, ConfigValue] = field(default_factory=dict)
    replica_assignment: tuple[tuple[int, ...], ...] | None = None
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreateAclsRequest:
    acls: tuple[AclRecord, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class DeleteAclsRequest:
    filters: tuple[AclFilter, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterScramRequest:
    upsertions: tuple[ScramCredentialRecord, ...] = ()
    deletions: tuple[ScramDeletion, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterClientQuotasRequest:
    alterations: tuple[QuotaAlteration, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterBrokerConfigsRequest:
    alterations: tuple[BrokerConfigAlteration, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class CreatePartitionsRequest:
    count: int
    replica_assignment: tuple[tuple[int, ...], ...] | None = None
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class AlterConfigRequest:
    config: Mapping[str, ConfigValue | None]  # None deletes a key (IncrementalAlterConfigs DELETE)
    replace: bool = False
    validate_only: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class ElectLeadersRequest:
    partitions: tuple[TopicPartition, ...] | None = None  # None: every partition


@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignRequest:
    assignments: tuple[ReplicaAssignment, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionSize:
    topic: str
    partition: int
    size_bytes: int  # one replica's bytes on disk (DescribeLogDirs)


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceProposalRequest:
    mode: str  # full | add-brokers | remove-brokers
    brokers: tuple[int, ...] = ()  # the added or removed ids
    sizes: tuple[PartitionSize, ...] = ()  # measured; a partition left out counts 0 bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceMovesRequest:
    """A reviewed proposal's moves (execute, verify, stop); `throttle` adds the topics' throttled-replicas,
    `throttle_rate` (bytes/s) also the involved brokers' rates (verify and stop take the same to remove them)."""

    assignments: tuple[ReplicaAssignment, ...]
    throttle: bool = False
    throttle_rate: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class EmptyRequest:
    """Endpoints that take no body accept none, or `{}`."""


def decode(cls: type[T], data: Any, *, where: str) -> T:
    """Build request `cls` from a parsed JSON body; ApiError(400) names what is wrong."""
    if not isinstance(data, dict):
        raise ApiError.bad_request(f"{where}: the body must be a JSON object, got {_json_type(data)}")
    fields = dataclasses.fields(cls)  # type: ignore[arg-type]
    names = [f.name for f in fields]
    unknown = sorted(set(data) - set(names))
    if unknown:
        allowed = ", ".join(names) if names else "none"
        raise ApiError.bad_request(f"{where}: unknown field(s) {unknown}; the fields are: {allowed}")
    required = [
        f.name
        for f in fields
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING  # type: ignore[misc]
    ]
    missing = [name for name in required if name not in data]
    if missing:
        raise ApiError.bad_request(f"{where}: missing required field(s) {missing}")
    try:
        return from_plain(cls, data, path="body")
    except StateFormatError as exc:
        raise ApiError.bad_request(f"{where}: {exc}") from None


def default_if_negative_one(value: int | None) -> int | None:
    """Kafka's CreateTopics uses -1 for "the broker's default"."""
    return None if value == -1 else value


def _json_type(value: Any) -> str:
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    return "null" if value is None else type(value).__name__
