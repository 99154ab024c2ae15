"""What the coordinator answers: frozen dataclasses of plain values.

The request handlers turn these into kio response objects at whatever
version the client spoke. Errors are `tinystream.broker.errors.ErrorCode` members.
Version notes for the handlers: JoinGroup v0-v6 and SyncGroup v0-v4 have a
non-nullable protocol name (send "" for None); LeaveGroup v0-v2 carry one
member and a top-level error only (use the member's error when the top level
is NONE).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from tinystream.broker.errors import ErrorCode

__all__ = [
    "ConsumerGroupDescription",
    "ConsumerMemberDescription",
    "DescribedMember",
    "FetchOffsetsResult",
    "GroupDescription",
    "GroupListing",
    "JoinGroupMember",
    "JoinGroupResult",
    "LeaveGroupResult",
    "LeftMember",
    "OffsetAndMetadata",
    "SyncGroupResult",
]


class JoinGroupMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class JoinGroupResult:
    error: ErrorCode
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: list[JoinGroupMember] = field(default_factory=list)  # only the leader's answer has them
    skip_assignment: bool = False  # KIP-814: a static leader rejoined a Stable group


@dataclass(frozen=True, slots=True, kw_only=True)
class SyncGroupResult:
    error: ErrorCode
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


class LeftMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    error: ErrorCode


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaveGroupResult:
    error: ErrorCode
    members: list[LeftMember] = field(default_factory=list)


class OffsetAndMetadata(NamedTuple):
    offset: int  # -1: nothing committed
    leader_epoch: int  # -1: unknown
    metadata: str | None


@dataclass(frozen=True, slots=True, kw_only=True)
class FetchOffsetsResult:
    error: ErrorCode
    offsets: dict[tuple[str, int], OffsetAndMetadata] = field(default_factory=dict)
    partition_errors: dict[tuple[str, int], ErrorCode] = field(default_factory=dict)  # UNSTABLE_OFFSET_COMMIT


class DescribedMember(NamedTuple):
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes  # the chosen protocol's metadata; b"" unless the group is Stable
    assignment: bytes  # b"" unless the group is Stable


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupDescription:
    error: ErrorCode
    group_id: str
    state: str  # Kafka's names: Empty, PreparingRebalance, CompletingRebalance, Stable, Dead
    protocol_type: str = ""
    protocol: str = ""  # "" unless Stable (Kafka's GroupCoordinator.NoProtocol)
    members: list[DescribedMember] = field(default_factory=list)


class GroupListing(NamedTuple):
    group_id: str
    protocol_type: str
    state: str


class ConsumerMemberDescription(NamedTuple):
    """One KIP-848 member as ConsumerGroupDescribe shows it (topic names; the handler adds ids)."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: dict[str, frozenset[int]]
    target_assignment: dict[str, frozenset[int]]
    state: str  # the member's reconciliation state (stable, unrevoked_partitions, unreleased_partitions)


@dataclass(frozen=True, slots=True, kw_only=True)
class ConsumerGroupDescription:
    error: ErrorCode
    group_id: str
    error_message: str | None = None
    state: str = ""  # Empty, Assigning, Reconciling, Stable, Dead
    group_epoch: int = -1
    assignment_epoch: int = -1
    assignor: str = ""
    members: list[ConsumerMemberDescription] = field(default_factory=list)
