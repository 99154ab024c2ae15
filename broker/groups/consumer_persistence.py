"""A KIP-848 consumer group in __consumer_offsets: the records that let a new coordinator take over.

Kafka's GroupMetadataManager writes, for each change a heartbeat makes:
ConsumerGroupMemberMetadata (a member's subscription), ConsumerGroupMetadata
(the group epoch), ConsumerGroupTargetAssignmentMember (+ Metadata: the
assignment epoch) and ConsumerGroupCurrentMemberAssignment (a member's epochs,
state and partitions); a removed member gets tombstones for its three keys.
`records_for` turns a `ConsumerGroup.take_changes()` into those records, in
that order; `ConsumerGroupLog` collects them while a partition loads (last
record per key wins, tombstones delete) and rebuilds the groups, whose
members then go on heartbeating at their epochs without a rebalance.

The records name topics by id (as Kafka's do); the group state machine by
name. A topic deleted since a record was written is dropped on load (the
next heartbeat's metadata check bumps the epoch and reassigns).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from tinystream.broker.groups.consumer_group import (
    MEMBER_STATE_CODES,
    Changes,
    ConsumerGroup,
    ConsumerMember,
    MemberState,
    TopicImage,
)
from tinystream.broker.groups.persistence import Record
from tinystream.broker.groups.records import (
    CURRENT_MEMBER_ASSIGNMENT,
    MEMBER_METADATA,
    TARGET_ASSIGNMENT_MEMBER,
    ConsumerCurrentAssignmentValue,
    ConsumerGroupMetadataKey,
    ConsumerGroupMetadataValue,
    ConsumerMemberKey,
    ConsumerMemberMetadataValue,
    ConsumerTargetMemberValue,
    ConsumerTargetMetadataKey,
    ConsumerTargetMetadataValue,
    TopicIdPartitions,
    encode_key,
    encode_value,
)

__all__ = ["ConsumerGroupLog", "records_for", "tombstones_for"]

_STATES = {code: MemberState(name) for name, code in MEMBER_STATE_CODES.items()}


def _by_id(assignment: Mapping[str, frozenset[int]], topics: TopicImage) -> TopicIdPartitions:
    out = []
    for name, parts in sorted(assignment.items()):
        topic_id = topics.topic_id(name)
        if topic_id is not None and parts:
            out.append((topic_id, tuple(sorted(parts))))
    return tuple(out)


def _by_name(partitions: TopicIdPartitions, topics: TopicImage) -> dict[str, frozenset[int]]:
    out: dict[str, frozenset[int]] = {}
    for topic_id, parts in partitions:
        name = topics.topic_name(topic_id)
        if name is not None and parts:
            out[name] = out.get(name, frozenset()) | frozenset(parts)
    return out


def records_for(group: ConsumerGroup, changes: Changes, *, epoch_changed: bool, topics: TopicImage) -> list[Record]:
    """The records that persist `changes` (and the group epoch when it moved), Kafka's order."""
    gid = group.group_id
    records: list[Record] = []

    def put(key: ConsumerMemberKey | ConsumerGroupMetadataKey | ConsumerTargetMetadataKey, value: object) -> None:
        records.append((encode_key(key), encode_value(value)))  # type: ignore[arg-type]

    for mid in sorted(changes.removed):
        for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA):
            records.append((encode_key(ConsumerMemberKey(kind, gid, mid)), None))
    for mid in sorted(changes.members):
        m = group.members[mid]
        put(ConsumerMemberKey(MEMBER_METADATA, gid, mid), ConsumerMemberMetadataValue(
            instance_id=m.instance_id, rack_id=m.rack_id, client_id=m.client_id, client_host=m.client_host,
            subscribed_topic_names=m.subscribed_topic_names, subscribed_topic_regex=m.subscribed_topic_regex,
            rebalance_timeout_ms=m.rebalance_timeout_ms, server_assignor=m.server_assignor))
    if epoch_changed:
        put(ConsumerGroupMetadataKey(gid), ConsumerGroupMetadataValue(group.group_epoch))
    for mid in sorted(changes.targets):
        put(ConsumerMemberKey(TARGET_ASSIGNMENT_MEMBER, gid, mid),
            ConsumerTargetMemberValue(_by_id(group.target.get(mid, {}), topics)))
    if changes.target_epoch:
        put(ConsumerTargetMetadataKey(gid), ConsumerTargetMetadataValue(group.assignment_epoch))
    for mid in sorted(changes.current):
        m = group.members[mid]
        put(ConsumerMemberKey(CURRENT_MEMBER_ASSIGNMENT, gid, mid), ConsumerCurrentAssignmentValue(
            member_epoch=m.member_epoch, previous_member_epoch=m.previous_member_epoch,
            state=MEMBER_STATE_CODES[m.state.value], assigned=_by_id(m.assigned, topics),
            pending_revocation=_by_id(m.pending_revocation, topics)))
    return records


def tombstones_for(group_id: str, member_ids: list[str]) -> list[Record]:
    """Everything of a KIP-848 group (deleted, or turned classic): its epoch, target epoch, members."""
    records: list[Record] = [
        (encode_key(ConsumerMemberKey(kind, group_id, mid)), None)
        for mid in member_ids
        for kind in (CURRENT_MEMBER_ASSIGNMENT, TARGET_ASSIGNMENT_MEMBER, MEMBER_METADATA)
    ]
    records.append((encode_key(ConsumerTargetMetadataKey(group_id)), None))
    records.append((encode_key(ConsumerGroupMetadataKey(group_id)), None))
    return records


@dataclass
class _Pending:
    epoch: int | None = None
    assignment_epoch: int | None = None
    metadata: dict[str, ConsumerMemberMetadataValue] = field(default_factory=dict)
    target: dict[str, ConsumerTargetMemberValue] = field(default_factory=dict)
    current: dict[str, ConsumerCurrentAssignmentValue] = field(default_factory=dict)


class ConsumerGroupLog:
    """KIP-848 records of one __consumer_offsets partition, in log order, folded to the last value per key."""

    def __init__(self) -> None:
        self._groups: dict[str, _Pending] = {}

    def add(self, key: object, value: object) -> bool:
        """Take a record if it is a KIP-848 one (True), else leave it to the caller (False)."""
        if isinstance(key, ConsumerGroupMetadataKey):
            pending = self._groups.setdefault(key.group, _Pending())
            pending.epoch = value.epoch if isinstance(value, ConsumerGroupMetadataValue) else None
            return True
        if isinstance(key, ConsumerTargetMetadataKey):
            pending = self._groups.setdefault(key.group, _Pending())
            pending.assignment_epoch = value.assignment_epoch if isinstance(value, ConsumerTargetMetadataValue) else None
            return True
        if not isinstance(key, ConsumerMemberKey):
            return False
        pending = self._groups.setdefault(key.group, _Pending())
        table: dict[str, object] = {MEMBER_METADATA: pending.metadata, TARGET_ASSIGNMENT_MEMBER: pending.target,
                                    CURRENT_MEMBER_ASSIGNMENT: pending.current}[key.kind]  # type: ignore[assignment]
        if value is None:
            table.pop(key.member_id, None)
        else:
            table[key.member_id] = value
        return True

    def forget(self, group_id: str) -> None:
        """The group turned classic after these records (a GroupMetadata record came later)."""
        self._groups.pop(group_id, None)

    def group_ids(self) -> set[str]:
        """Groups whose epoch record is live."""
        return {gid for gid, p in self._groups.items() if p.epoch is not None}

    def build(self, group_id: str, make: Callable[[str, int], ConsumerGroup], *, topics: TopicImage,
              now: int) -> ConsumerGroup:
        """The group as its records left it; `make(group_id, epoch)` creates the empty group."""
        pending = self._groups[group_id]
        assert pending.epoch is not None
        group = make(group_id, pending.epoch)
        members = []
        for mid, meta in pending.metadata.items():
            current = pending.current.get(mid)
            members.append(ConsumerMember(
                member_id=mid, instance_id=meta.instance_id, rack_id=meta.rack_id, client_id=meta.client_id,
                client_host=meta.client_host, rebalance_timeout_ms=meta.rebalance_timeout_ms,
                subscribed_topic_names=meta.subscribed_topic_names, subscribed_topic_regex=meta.subscribed_topic_regex,
                server_assignor=meta.server_assignor,
                member_epoch=current.member_epoch if current else 0,
                previous_member_epoch=current.previous_member_epoch if current else -1,
                state=_STATES.get(current.state, MemberState.STABLE) if current else MemberState.STABLE,
                assigned=_by_name(current.assigned, topics) if current else {},
                pending_revocation=_by_name(current.pending_revocation, topics) if current else {},
            ))
        target = {mid: _by_name(t.partitions, topics) for mid, t in pending.target.items()}
        assignment_epoch = pending.assignment_epoch if pending.assignment_epoch is not None else pending.epoch
        group.restore(members, target, assignment_epoch=assignment_epoch, topics=topics, now=now)
        return group
