"""Actions: what changed, for the driver to act on or report.

The image is the truth brokers follow; actions are the changes in one step
spelled out, so a driver can log them, emit Kubernetes Events, update a
Topic resource's status or tell brokers to delete logs (TopicDeleted)
without diffing images. Partition-level actions (LeaderChanged, IsrChanged,
PartitionsOffline, ReassignmentCompleted) carry the final values after the
step, with epochs already bumped.

Plain form: `{"type": "<class name>", <field>: <value>, ...}`.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from tinystream.operator.controller.codec import from_plain, to_plain
from tinystream.operator.controller.election import ElectionReason
from tinystream.operator.controller.errors import StateFormatError
from tinystream.operator.controller.image import AclRecord, TopicPartition


class FenceReason(enum.Enum):
    SESSION_EXPIRED = "SESSION_EXPIRED"  # no heartbeat within broker.session.timeout.ms, or ExpireSession
    RESTARTED = "RESTARTED"  # registered again with a new incarnation id
    REQUESTED = "REQUESTED"  # the broker's heartbeat asked to be fenced
    UNREGISTERED = "UNREGISTERED"


@dataclass(frozen=True, slots=True)
class Action:
    registry: ClassVar[dict[str, type[Action]]] = {}

    def to_dict(self) -> dict[str, Any]:
        return {"type": type(self).__name__, **to_plain(self)}

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Action:
        if not isinstance(data, Mapping) or not isinstance(data.get("type"), str):
            raise StateFormatError("$: an action needs a string 'type'")
        cls = Action.registry.get(data["type"])
        if cls is None:
            raise StateFormatError(f"$.type: unknown action type {data['type']!r}")
        action: Action = from_plain(cls, data, ignore=frozenset({"type"}))
        return action


A = TypeVar("A", bound=Action)


def _action(cls: type[A]) -> type[A]:
    Action.registry[cls.__name__] = cls
    return cls


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerRegistered(Action):
    broker_id: int
    incarnation_id: str
    epoch: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerFenced(Action):
    broker_id: int
    reason: FenceReason


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerUnfenced(Action):
    broker_id: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerDrained(Action):
    broker_id: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerUndrained(Action):
    broker_id: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerUnregistered(Action):
    broker_id: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class ProducerIdsAllocated(Action):
    """Producer ids [start, start + length) now belong to `broker_id` (KIP-730)."""

    broker_id: int
    producer_id_start: int
    producer_id_len: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class TopicCreated(Action):
    topic: str
    topic_id: str
    partitions: int
    replication_factor: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsCreated(Action):
    topic: str
    partitions: tuple[int, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class TopicDeleted(Action):
    """Brokers delete the topic's logs."""

    topic: str
    topic_id: str


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class TopicConfigChanged(Action):
    topic: str
    keys: tuple[str, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderChanged(Action):
    topic: str
    partition: int
    leader: int
    leader_epoch: int
    reason: ElectionReason


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class IsrChanged(Action):
    topic: str
    partition: int
    isr: tuple[int, ...]
    partition_epoch: int


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionsOffline(Action):
    """Partitions that lost their last eligible leader in this step."""

    partitions: tuple[TopicPartition, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignmentStarted(Action):
    topic: str
    partition: int
    target: tuple[int, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignmentCompleted(Action):
    topic: str
    partition: int
    replicas: tuple[int, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class ReassignmentCancelled(Action):
    topic: str
    partition: int
    replicas: tuple[int, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class AclsCreated(Action):
    acls: tuple[AclRecord, ...]  # those that were not there yet


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class AclsDeleted(Action):
    """`matched[i]`: the ACLs filter i of the DeleteAcls matched (and removed), as DeleteAcls answers."""

    matched: tuple[tuple[AclRecord, ...], ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class ScramCredentialsChanged(Action):
    users: tuple[str, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class ClientQuotasChanged(Action):
    """The entities whose quotas an AlterClientQuotas changed, as kafka-configs.sh names them."""

    entities: tuple[str, ...]


@_action
@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerConfigsChanged(Action):
    """The BROKER resources whose dynamic configs changed: "" the cluster default, else broker ids."""

    resources: tuple[str, ...]
