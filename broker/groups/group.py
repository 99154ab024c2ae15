"""One consumer group as a pure state machine (Kafka's classic protocol).

No asyncio, no clock, no I/O: every method takes `now` (ms) and returns what
must happen next as *effects*, which the coordinator carries out:

- `JoinReply(member_id, result)` / `SyncReply(member_id, result)`: answer that
  member's parked JoinGroup / SyncGroup request;
- `StoreGroup(value, on_done)`: append this GroupMetadataValue to
  __consumer_offsets, then call `on_done(error, now)` for the next effects.

A request that is answered at once comes back as `reply`; otherwise the
caller parks under `member_id` and its answer arrives as a JoinReply /
SyncReply, possibly in the very same effect list.

Time is a set of deadlines the group keeps (member sessions, the join phase,
the sync phase, MEMBER_ID_REQUIRED ids); `next_deadline()` says when to call
`on_timer(now)`.

States and transitions (Kafka's ClassicGroupState)::

    Empty ──prepare_rebalance──► PreparingRebalance ──join_completed──► CompletingRebalance
      ▲                            │    ▲      ▲                              │
      └──────join_completed_empty──┘    │      └──────prepare_rebalance───────┤
                                        └──prepare_rebalance── Stable ◄──assignment_stored
    any state ──remove──► Dead  (group deleted or its partition unloaded)

The precedent for every rule is Kafka's GroupCoordinator / ClassicGroup
(named in the comments); KIP-345 (static membership), KIP-394 (member id
required), KIP-814 (static leader skips assignment).
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.errors import IllegalTransition
from tinystream.broker.groups.records import GroupMetadataValue, MemberMetadata
from tinystream.broker.groups.results import (
    DescribedMember,
    GroupDescription,
    GroupListing,
    JoinGroupMember,
    JoinGroupResult,
    LeftMember,
    SyncGroupResult,
)
from tinystream.broker.groups.stats import GroupStats, RebalanceCause

__all__ = [
    "NEW_MEMBER_JOIN_TIMEOUT_MS",
    "CommittedOffset",
    "Effect",
    "Group",
    "GroupEvent",
    "GroupState",
    "JoinOutcome",
    "JoinReply",
    "LeaveOutcome",
    "Member",
    "StoreGroup",
    "SyncOutcome",
    "SyncReply",
    "next_state",
]

# Kafka GroupCoordinator.NewMemberJoinTimeoutMs (KIP-394): a member that joined
# but has not yet received its first JoinGroup answer expires after 5 minutes,
# so a client that disconnected mid-rebalance does not linger forever.
NEW_MEMBER_JOIN_TIMEOUT_MS = 300_000

_OK = ErrorCode.none


class GroupState(enum.Enum):
    """Kafka's state names (what DescribeGroups and ListGroups show)."""

    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"


class GroupEvent(enum.Enum):
    PREPARE_REBALANCE = "prepare_rebalance"
    JOIN_COMPLETED = "join_completed"  # the join phase ended with members
    JOIN_COMPLETED_EMPTY = "join_completed_empty"  # ... with nobody left
    ASSIGNMENT_STORED = "assignment_stored"  # the leader's assignment is durable
    REMOVE = "remove"  # deleted, or its __consumer_offsets partition moved away


_S = GroupState
_E = GroupEvent
_TRANSITIONS: dict[tuple[GroupState, GroupEvent], GroupState] = {
    (_S.EMPTY, _E.PREPARE_REBALANCE): _S.PREPARING_REBALANCE,
    (_S.STABLE, _E.PREPARE_REBALANCE): _S.PREPARING_REBALANCE,
    (_S.COMPLETING_REBALANCE, _E.PREPARE_REBALANCE): _S.PREPARING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED): _S.COMPLETING_REBALANCE,
    (_S.PREPARING_REBALANCE, _E.JOIN_COMPLETED_EMPTY): _S.EMPTY,
    (_S.COMPLETING_REBALANCE, _E.ASSIGNMENT_STORED): _S.STABLE,
    **{(state, _E.REMOVE): _S.DEAD for state in GroupState},
}


def next_state(group_id: str, state: GroupState, event: GroupEvent) -> GroupState:
    """The state after `event`, or IllegalTransition naming group, state and event."""
    try:
        return _TRANSITIONS[(state, event)]
    except KeyError:
        raise IllegalTransition(group_id, state.value, event.value) from None


# --------------------------------------------------------------------------- data


@dataclass(slots=True, kw_only=True)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocols: tuple[tuple[str, bytes], ...]  # in the member's order of preference
    assignment: bytes = b""
    awaiting_join: bool = False  # a JoinGroup of this member is parked
    awaiting_sync: bool = False  # a SyncGroup of this member is parked
    is_new: bool = False  # joined, not yet answered (KIP-394 join timeout applies)
    heartbeat_deadline: int = 0

    def metadata(self, protocol: str | None) -> bytes:
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        return b""

    def supports(self, protocol: str) -> bool:
        return any(name == protocol for name, _ in self.protocols)

    def matches(self, protocols: Sequence[tuple[str, bytes]]) -> bool:
        """Same protocols with the same metadata in the same order (Kafka MemberMetadata.matches)."""
        return tuple(protocols) == self.protocols

    @property
    def expiry_armed(self) -> bool:
        # Kafka MemberMetadata.hasSatisfiedHeartbeat: a parked member needs no
        # heartbeat, except a new one, which the join timeout still covers.
        return self.is_new or not (self.awaiting_join or self.awaiting_sync)


@dataclass(frozen=True, slots=True, kw_only=True)
class CommittedOffset:
    offset: int
    leader_epoch: int = -1
    metadata: str = ""
    commit_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class JoinReply:
    member_id: str
    result: JoinGroupResult


@dataclass(frozen=True, slots=True)
class SyncReply:
    member_id: str
    result: SyncGroupResult


def _no_effects(error: ErrorCode, now: int) -> list[Effect]:
    return []


@dataclass(frozen=True, slots=True)
class StoreGroup:
    value: GroupMetadataValue
    on_done: Callable[[ErrorCode, int], list[Effect]] = _no_effects


Effect = JoinReply | SyncReply | StoreGroup


@dataclass(frozen=True, slots=True)
class JoinOutcome:
    member_id: str  # the caller's member id (new ones included); parked under it if reply is None
    reply: JoinGroupResult | None
    effects: list[Effect] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class SyncOutcome:
    reply: SyncGroupResult | None
    effects: list[Effect] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class LeaveOutcome:
    error: ErrorCode
    members: list[LeftMember]
    effects: list[Effect] = field(default_factory=list)


def _join_error(member_id: str, error: ErrorCode) -> JoinOutcome:
    return JoinOutcome(member_id, JoinGroupResult(error=error, member_id=member_id))


def _sync_error(error: ErrorCode) -> SyncOutcome:
    return SyncOutcome(SyncGroupResult(error=error))


# --------------------------------------------------------------------------- the group


class Group:
    """A classic consumer group: members, generation, assignments, offsets."""

    def __init__(self, group_id: str, *, initial_rebalance_delay_ms: int, now: int) -> None:
        self.group_id = group_id
        self.state = GroupState.EMPTY
        self.state_timestamp = now
        self.protocol_type: str | None = None
        self.protocol_name: str | None = None
        self.generation_id = 0
        self.leader_id: str | None = None
        self.members: dict[str, Member] = {}
        self.static_members: dict[str, str] = {}  # group instance id -> member id
        self.pending_members: dict[str, int] = {}  # ids handed out with MEMBER_ID_REQUIRED -> expiry
        self.pending_sync: set[str] = set()  # joined the generation, SyncGroup not seen yet
        self.offsets: dict[tuple[str, int], CommittedOffset] = {}
        self.initial_rebalance_delay_ms = initial_rebalance_delay_ms
        self.join_deadline: int | None = None
        self.sync_deadline: int | None = None
        self._initial_phase = False  # Kafka InitialDelayedJoin
        self._initial_remaining_ms = 0
        self._new_member_added = False
        self.stats = GroupStats()

    def __repr__(self) -> str:
        return f"Group({self.group_id!r}, {self.state.value}, generation={self.generation_id}, members={list(self.members)})"

    # ----------------------------------------------------------------- loading

    @classmethod
    def from_metadata(
        cls,
        group_id: str,
        value: GroupMetadataValue,
        *,
        initial_rebalance_delay_ms: int,
        now: int,
    ) -> Group:
        """Rebuild a group from its last GroupMetadataValue (Kafka GroupMetadata.loadGroup).

        With members it is Stable at the stored generation, and every member
        gets a fresh session; without, it is Empty. Members only know the
        chosen protocol's metadata (that is all the record keeps).
        """
        group = cls(group_id, initial_rebalance_delay_ms=initial_rebalance_delay_ms, now=now)
        group.protocol_type = value.protocol_type or None
        group.generation_id = value.generation
        group.state_timestamp = value.current_state_timestamp if value.current_state_timestamp >= 0 else now
        if value.members and value.protocol is not None:
            for m in value.members:
                group.members[m.member_id] = Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    session_timeout_ms=m.session_timeout,
                    rebalance_timeout_ms=m.rebalance_timeout,
                    protocols=((value.protocol, m.subscription),),
                    assignment=m.assignment,
                    heartbeat_deadline=now + m.session_timeout,
                )
                if m.group_instance_id is not None:
                    group.static_members[m.group_instance_id] = m.member_id
            group.protocol_name = value.protocol
            group.leader_id = value.leader if value.leader in group.members else next(iter(group.members))
            group.state = GroupState.STABLE
        return group

    def metadata_value(self, now: int, assignment: dict[str, bytes] | None = None) -> GroupMetadataValue:
        """The GroupMetadataValue for this group (with `assignment` instead of the current one if given)."""
        members = tuple(
            MemberMetadata(
                member_id=m.member_id,
                group_instance_id=m.group_instance_id,
                client_id=m.client_id,
                client_host=m.client_host,
                rebalance_timeout=m.rebalance_timeout_ms,
                session_timeout=m.session_timeout_ms,
                subscription=m.metadata(self.protocol_name),
                assignment=m.assignment if assignment is None else assignment.get(m.member_id, b""),
            )
            for m in self.members.values()
        )
        return GroupMetadataValue(
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=self.protocol_name,
            leader=self.leader_id,
            current_state_timestamp=self.state_timestamp,
            members=members,
        )

    # ----------------------------------------------------------------- JoinGroup

    def join(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: Iterable[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        require_known_member_id: bool,
        new_member_id: str,
        now: int,
    ) -> JoinOutcome:
        """A JoinGroup (session timeout and coordinator checks were done by the caller).

        `new_member_id` is used if the caller needs a fresh id.
        """
        protos = tuple((name, bytes(metadata)) for name, metadata in protocols)
        if self.state is GroupState.DEAD:
            # Kafka: the group was just removed or moved; the client rediscovers.
            return _join_error(member_id, ErrorCode.coordinator_not_available)
        if not self._supports(protocol_type, protos):
            return _join_error(member_id, ErrorCode.inconsistent_group_protocol)
        args: dict[str, Any] = dict(
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            protocol_type=protocol_type,
            protocols=protos,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            now=now,
        )
        if member_id == "":
            if group_instance_id is not None:
                return self._join_new_static(new_member_id, **args)
            if require_known_member_id:
                # KIP-394: hand out an id and expect the client back with it; the id
                # counts as a pending member until then (for at most a session).
                self.pending_members[new_member_id] = now + session_timeout_ms
                result = JoinGroupResult(error=ErrorCode.member_id_required, member_id=new_member_id)
                return JoinOutcome(new_member_id, result)
            return self._add_member_and_rebalance(new_member_id, **args)

        if member_id in self.pending_members:
            if self._static_fenced(group_instance_id, member_id):
                return _join_error(member_id, ErrorCode.fenced_instance_id)
            return self._add_member_and_rebalance(member_id, **args)
        if self._static_fenced(group_instance_id, member_id):
            return _join_error(member_id, ErrorCode.fenced_instance_id)
        member = self.members.get(member_id)
        if member is None:
            return _join_error(member_id, ErrorCode.unknown_member_id)
        return self._rejoin(member, protos, session_timeout_ms, rebalance_timeout_ms, now)

    def _rejoin(
        self,
        member: Member,
        protos: tuple[tuple[str, bytes], ...],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now: int,
    ) -> JoinOutcome:
        """A known member joins again: a retry with nothing new is answered with this generation,
        anything else (new protocols, or the leader asking for a new assignment) rebalances."""
        member_id = member.member_id
        if self.state is GroupState.PREPARING_REBALANCE:
            return self._update_member_and_rebalance(member, protos, session_timeout_ms, rebalance_timeout_ms, now)
        if self.state is GroupState.COMPLETING_REBALANCE:
            if member.matches(protos):
                # A retried JoinGroup with nothing new: answer with this generation.
                return JoinOutcome(member_id, self._join_result(member_id))
            return self._update_member_and_rebalance(member, protos, session_timeout_ms, rebalance_timeout_ms, now)
        if self.state is GroupState.STABLE:
            if member_id == self.leader_id or not member.matches(protos):
                # The leader rejoining means it wants a new assignment (e.g. metadata changed).
                return self._update_member_and_rebalance(member, protos, session_timeout_ms, rebalance_timeout_ms, now)
            return JoinOutcome(member_id, self._join_result(member_id))
        return _join_error(member_id, ErrorCode.unknown_member_id)

    def _add_member_and_rebalance(
        self,
        member_id: str,
        *,
        group_instance_id: str | None,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now: int,
    ) -> JoinOutcome:
        if not self.members:
            self.protocol_type = protocol_type
        if self.state is GroupState.PREPARING_REBALANCE and self.generation_id == 0:
            self._new_member_added = True  # lets the initial delay stretch (InitialDelayedJoin)
        self.members[member_id] = Member(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            protocols=protocols,
            awaiting_join=True,
            is_new=True,
            heartbeat_deadline=now + NEW_MEMBER_JOIN_TIMEOUT_MS,
        )
        self.pending_members.pop(member_id, None)
        if group_instance_id is not None:
            self.static_members[group_instance_id] = member_id
        if self.leader_id is None:
            self.leader_id = member_id
        self.stats.joins += 1
        effects = self._maybe_prepare_rebalance(now, RebalanceCause.JOIN)
        effects += self._maybe_complete_join(now)
        return JoinOutcome(member_id, None, effects)

    def _update_member_and_rebalance(
        self,
        member: Member,
        protocols: tuple[tuple[str, bytes], ...],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now: int,
    ) -> JoinOutcome:
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.awaiting_join = True
        effects = self._maybe_prepare_rebalance(now, RebalanceCause.JOIN)
        effects += self._maybe_complete_join(now)
        return JoinOutcome(member.member_id, None, effects)

    def _join_new_static(
        self,
        new_member_id: str,
        *,
        group_instance_id: str,
        client_id: str,
        client_host: str,
        protocol_type: str,
        protocols: tuple[tuple[str, bytes], ...],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        now: int,
    ) -> JoinOutcome:
        """KIP-345: a static member (re)joins without a member id."""
        old_id = self.static_members.get(group_instance_id)
        if old_id is None:
            return self._add_member_and_rebalance(
                new_member_id,
                group_instance_id=group_instance_id,
                client_id=client_id,
                client_host=client_host,
                protocol_type=protocol_type,
                protocols=protocols,
                session_timeout_ms=session_timeout_ms,
                rebalance_timeout_ms=rebalance_timeout_ms,
                now=now,
            )
        # The instance restarted: the new member id replaces the old one, and
        # whatever the old id still has parked is fenced (Kafka replaceStaticMember).
        member = self.members[old_id]
        effects: list[Effect] = []
        if member.awaiting_join:
            effects.append(JoinReply(old_id, JoinGroupResult(error=ErrorCode.fenced_instance_id, member_id=old_id)))
        if member.awaiting_sync:
            effects.append(SyncReply(old_id, SyncGroupResult(error=ErrorCode.fenced_instance_id)))
        before = _MemberSnapshot.of(member)
        self._rename_member(old_id, new_member_id)
        member.awaiting_join = member.awaiting_sync = False
        member.protocols = protocols
        member.session_timeout_ms = session_timeout_ms
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.client_id = client_id
        member.client_host = client_host
        member.heartbeat_deadline = now + session_timeout_ms
        member.awaiting_join = True  # answered by the store below or by the rebalance

        if self.state is GroupState.STABLE:
            if self.protocol_name == self._select_protocol():
                # Nothing the group agreed on changes: persist the new member id
                # and answer without a rebalance.
                generation = self.generation_id

                def stored(error: ErrorCode, at: int) -> list[Effect]:
                    return self._static_replacement_stored(new_member_id, old_id, before, generation, error, at)

                effects.append(StoreGroup(self.metadata_value(now), stored))
                return JoinOutcome(new_member_id, None, effects)
            effects += self._prepare_rebalance(now, RebalanceCause.JOIN)
        elif self.state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old id: start over.
            effects += self._prepare_rebalance(now, RebalanceCause.JOIN)
        elif self.state is GroupState.PREPARING_REBALANCE:
            effects += self._maybe_complete_join(now)
        else:  # pragma: no cover - a static member implies members, so not Empty/Dead
            raise IllegalTransition(self.group_id, self.state.value, "static_member_join")
        return JoinOutcome(new_member_id, None, effects)

    def _static_replacement_stored(
        self,
        member_id: str,
        old_id: str,
        before: _MemberSnapshot,
        generation: int,
        error: ErrorCode,
        now: int,
    ) -> list[Effect]:
        member = self.members.get(member_id)
        if member is None or not member.awaiting_join:
            return []  # removed, or already answered by a rebalance
        if self.state is not GroupState.STABLE or self.generation_id != generation:
            return []  # a rebalance started meanwhile; it will answer this member
        member.awaiting_join = False
        if error is not _OK:
            # Kafka: revert to the old member id and fail the join.
            self._rename_member(member_id, old_id)
            before.restore(member)
            member.heartbeat_deadline = now + member.session_timeout_ms
            return [JoinReply(member_id, JoinGroupResult(error=error, member_id=member_id))]
        is_leader = member_id == self.leader_id
        # KIP-814: a static leader is told it leads (so it keeps its metadata
        # current) but must not compute a new assignment for a Stable group.
        return [JoinReply(member_id, self._join_result(member_id, skip_assignment=is_leader))]

    # ----------------------------------------------------------------- SyncGroup

    def sync(
        self,
        *,
        member_id: str,
        group_instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: Iterable[tuple[str, bytes]],
        now: int,
    ) -> SyncOutcome:
        if self.state is GroupState.DEAD:
            return _sync_error(ErrorCode.coordinator_not_available)
        if self._static_fenced(group_instance_id, member_id):
            return _sync_error(ErrorCode.fenced_instance_id)
        member = self.members.get(member_id)
        if member is None:
            return _sync_error(ErrorCode.unknown_member_id)
        if generation_id != self.generation_id:
            return _sync_error(ErrorCode.illegal_generation)
        if protocol_type is not None and protocol_type != self.protocol_type:
            return _sync_error(ErrorCode.inconsistent_group_protocol)
        if protocol_name is not None and protocol_name != self.protocol_name:
            return _sync_error(ErrorCode.inconsistent_group_protocol)
        if self.state is GroupState.EMPTY:
            return _sync_error(ErrorCode.unknown_member_id)
        if self.state is GroupState.PREPARING_REBALANCE:
            return _sync_error(ErrorCode.rebalance_in_progress)
        if self.state is GroupState.STABLE:
            # The assignment is settled (a follower that was late, or a retry).
            self._sync_received(member_id)
            member.heartbeat_deadline = now + member.session_timeout_ms
            return SyncOutcome(self._sync_result(member))

        # CompletingRebalance: park until the leader's assignment is durable.
        member.awaiting_sync = True
        self._sync_received(member_id)
        effects: list[Effect] = []
        if member_id == self.leader_id:
            assignment = {mid: b"" for mid in self.members}  # Kafka fills missing members with empty bytes
            for mid, data in assignments:
                if mid in assignment:
                    assignment[mid] = bytes(data)
            generation = self.generation_id

            def stored(error: ErrorCode, at: int) -> list[Effect]:
                return self._assignment_stored(generation, assignment, error, at)

            effects.append(StoreGroup(self.metadata_value(now, assignment), stored))
        return SyncOutcome(None, effects)

    def _assignment_stored(self, generation: int, assignment: dict[str, bytes], error: ErrorCode, now: int) -> list[Effect]:
        if self.state is not GroupState.COMPLETING_REBALANCE or generation != self.generation_id:
            return []  # a rebalance started meanwhile and already answered the parked syncs
        if error is not _OK:
            return (self._reset_and_propagate_assignment_error(error, now)
                    + self._maybe_prepare_rebalance(now, RebalanceCause.ASSIGNMENT_ERROR))
        effects: list[Effect] = []
        for member in self.members.values():
            member.assignment = assignment.get(member.member_id, b"")
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.heartbeat_deadline = now + member.session_timeout_ms
                effects.append(SyncReply(member.member_id, self._sync_result(member)))
        self._transition(GroupEvent.ASSIGNMENT_STORED, now)
        return effects

    def _sync_received(self, member_id: str) -> None:
        self.pending_sync.discard(member_id)
        if not self.pending_sync:
            self.sync_deadline = None

    # ----------------------------------------------------------------- Heartbeat, LeaveGroup

    def heartbeat(self, *, member_id: str, group_instance_id: str | None, generation_id: int, now: int) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self._static_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        if self.state is GroupState.EMPTY:
            return ErrorCode.unknown_member_id
        member.heartbeat_deadline = now + member.session_timeout_ms
        if self.state is GroupState.PREPARING_REBALANCE:
            return ErrorCode.rebalance_in_progress
        # Stable, and CompletingRebalance: members may heartbeat between their
        # JoinGroup answer and their SyncGroup (Kafka answers NONE there).
        return _OK

    def leave(self, members: Iterable[tuple[str, str | None]], now: int) -> LeaveOutcome:
        """LeaveGroup; an empty member id with an instance id removes that static member (KIP-345 admin)."""
        if self.state is GroupState.DEAD:
            return LeaveOutcome(ErrorCode.coordinator_not_available, [])
        results: list[LeftMember] = []
        effects: list[Effect] = []
        for member_id, group_instance_id in members:
            if member_id == "":
                current = self.static_members.get(group_instance_id) if group_instance_id is not None else None
                if current is None:
                    error = ErrorCode.unknown_member_id
                else:
                    effects += self._remove_member_and_update(current, now, RebalanceCause.LEAVE)
                    error = _OK
            elif member_id in self.pending_members:
                del self.pending_members[member_id]
                effects += self._maybe_complete_join(now)
                error = _OK
            elif self._static_fenced(group_instance_id, member_id):
                error = ErrorCode.fenced_instance_id
            elif member_id in self.members:
                effects += self._remove_member_and_update(member_id, now, RebalanceCause.LEAVE)
                error = _OK
            else:
                error = ErrorCode.unknown_member_id
            results.append(LeftMember(member_id, group_instance_id, error))
        return LeaveOutcome(_OK, results, effects)

    # ----------------------------------------------------------------- offsets

    def validate_commit(self, *, member_id: str, group_instance_id: str | None, generation_id: int, now: int) -> ErrorCode:
        """May this member commit offsets now? (Kafka GroupCoordinator.handleCommitOffsets)"""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if self._static_fenced(group_instance_id, member_id):
            return ErrorCode.fenced_instance_id
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return _OK  # a standalone consumer keeping offsets only
        member = self.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        if self.state is GroupState.COMPLETING_REBALANCE:
            # The member has its JoinGroup answer but no assignment yet.
            return ErrorCode.rebalance_in_progress
        # Stable or PreparingRebalance (the heartbeat tells it to rejoin).
        member.heartbeat_deadline = now + member.session_timeout_ms
        return _OK

    def apply_offsets(self, offsets: dict[tuple[str, int], CommittedOffset]) -> None:
        """Offsets stored in __consumer_offsets; counted as one commit (a first commit advances by nothing)."""
        self.stats.offsets_committed(
            [c.offset - self.offsets[tp].offset for tp, c in offsets.items() if tp in self.offsets]
        )
        self.offsets.update(offsets)

    # ----------------------------------------------------------------- deletion, unloading

    def deletion_error(self) -> ErrorCode:
        if self.state is GroupState.DEAD:
            return ErrorCode.group_id_not_found
        if self.state is not GroupState.EMPTY:
            return ErrorCode.non_empty_group
        return _OK

    def mark_dead(self, error: ErrorCode, now: int) -> list[Effect]:
        """Move to Dead; every parked request is answered with `error`."""
        effects: list[Effect] = []
        for member in self.members.values():
            if member.awaiting_join:
                member.awaiting_join = False
                effects.append(JoinReply(member.member_id, JoinGroupResult(error=error, member_id=member.member_id)))
            if member.awaiting_sync:
                member.awaiting_sync = False
                effects.append(SyncReply(member.member_id, SyncGroupResult(error=error)))
        self._transition(GroupEvent.REMOVE, now)
        self.join_deadline = self.sync_deadline = None
        self.pending_members.clear()
        self.pending_sync.clear()
        return effects

    def is_pristine(self) -> bool:
        """Never used for anything that needs keeping (a join that failed at once)."""
        return (
            self.state is GroupState.EMPTY
            and self.generation_id == 0
            and not self.members
            and not self.pending_members
            and not self.offsets
        )

    # ----------------------------------------------------------------- time

    def next_deadline(self) -> int | None:
        if self.state is GroupState.DEAD:
            return None
        deadlines = list(self.pending_members.values())
        deadlines += [m.heartbeat_deadline for m in self.members.values() if m.expiry_armed]
        if self.state is GroupState.PREPARING_REBALANCE and self.join_deadline is not None:
            deadlines.append(self.join_deadline)
        if self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE) and self.sync_deadline is not None:
            deadlines.append(self.sync_deadline)
        return min(deadlines, default=None)

    def on_timer(self, now: int) -> list[Effect]:
        """Act on every deadline that has passed by `now`."""
        effects: list[Effect] = []
        if self.state is GroupState.DEAD:
            return effects
        expired_pending = [mid for mid, deadline in self.pending_members.items() if deadline <= now]
        for member_id in expired_pending:
            del self.pending_members[member_id]
        if expired_pending:
            effects += self._maybe_complete_join(now)
        for member in list(self.members.values()):
            if member.member_id in self.members and member.expiry_armed and member.heartbeat_deadline <= now:
                # Session (or new-member join) timeout: the member is gone.
                effects += self._remove_member_and_update(member.member_id, now, RebalanceCause.SESSION_TIMEOUT)
        if (
            self.state is GroupState.PREPARING_REBALANCE
            and self.join_deadline is not None
            and self.join_deadline <= now
        ):
            if self._initial_phase and self._new_member_added and self._initial_remaining_ms > 0:
                # Kafka InitialDelayedJoin: someone joined during the delay, so wait
                # another delay, never beyond the rebalance timeout in total.
                self._new_member_added = False
                delay = min(self.initial_rebalance_delay_ms, self._initial_remaining_ms)
                self._initial_remaining_ms = max(self._initial_remaining_ms - delay, 0)
                self.join_deadline = now + delay
            else:
                effects += self._complete_join(now)
        if (
            self.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE)
            and self.sync_deadline is not None
            and self.sync_deadline <= now
        ):
            # Kafka's pending-sync timeout: members that got a JoinGroup answer but
            # never sent SyncGroup within the rebalance timeout are removed.
            self.sync_deadline = None
            missing = [mid for mid in self.pending_sync if mid in self.members]
            self.pending_sync.clear()
            for member_id in missing:
                if member_id in self.members:
                    effects += self._remove_member_and_update(member_id, now, RebalanceCause.SYNC_TIMEOUT)
        return effects

    # ----------------------------------------------------------------- views

    def describe(self) -> GroupDescription:
        """Kafka GroupMetadata.summary: metadata and assignments only when Stable."""
        stable = self.state is GroupState.STABLE
        members = [
            DescribedMember(
                m.member_id,
                m.group_instance_id,
                m.client_id,
                m.client_host,
                m.metadata(self.protocol_name) if stable else b"",
                m.assignment if stable else b"",
            )
            for m in self.members.values()
        ]
        return GroupDescription(
            error=_OK,
            group_id=self.group_id,
            state=self.state.value,
            protocol_type=self.protocol_type or "",
            protocol=(self.protocol_name or "") if stable else "",
            members=members,
        )

    def listing(self) -> GroupListing:
        return GroupListing(self.group_id, self.protocol_type or "", self.state.value)

    # ----------------------------------------------------------------- rebalance internals

    def _transition(self, event: GroupEvent, now: int) -> None:
        self.state = next_state(self.group_id, self.state, event)
        self.state_timestamp = now

    def _rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def _maybe_prepare_rebalance(self, now: int, cause: RebalanceCause) -> list[Effect]:
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY):
            return self._prepare_rebalance(now, cause)
        return []

    def _prepare_rebalance(self, now: int, cause: RebalanceCause) -> list[Effect]:
        self.stats.rebalance_started(cause, self.generation_id, now)
        effects: list[Effect] = []
        if self.state is GroupState.COMPLETING_REBALANCE:
            # Parked syncs of this generation will never get an assignment.
            effects += self._reset_and_propagate_assignment_error(ErrorCode.rebalance_in_progress, now)
        self.pending_sync.clear()
        self.sync_deadline = None
        if self.state is GroupState.EMPTY:
            # group.initial.rebalance.delay.ms: give the other members of a
            # starting application a chance to join the first generation.
            self._initial_phase = True
            self._new_member_added = False
            self._initial_remaining_ms = max(self._rebalance_timeout_ms() - self.initial_rebalance_delay_ms, 0)
            self.join_deadline = now + self.initial_rebalance_delay_ms
        else:
            self._initial_phase = False
            self.join_deadline = now + self._rebalance_timeout_ms()
        self._transition(GroupEvent.PREPARE_REBALANCE, now)
        # Kafka tryCompleteElseWatch: if nobody else is to be waited for, finish now.
        return effects + self._maybe_complete_join(now)

    def _all_joined(self) -> bool:
        return not self.pending_members and all(m.awaiting_join for m in self.members.values())

    def _maybe_complete_join(self, now: int) -> list[Effect]:
        if self.state is GroupState.PREPARING_REBALANCE and not self._initial_phase and self._all_joined():
            return self._complete_join(now)
        return []

    def _complete_join(self, now: int) -> list[Effect]:
        """Kafka onCompleteJoin: drop who did not rejoin, start the next generation."""
        for member in list(self.members.values()):
            if not member.awaiting_join:
                self._remove(member.member_id)
        self.join_deadline = None
        self._initial_phase = False
        self.generation_id += 1
        effects: list[Effect] = []
        if not self.members:
            self.protocol_name = None
            self.leader_id = None
            self._transition(GroupEvent.JOIN_COMPLETED_EMPTY, now)
            effects.append(StoreGroup(self.metadata_value(now)))
            return effects
        if self.leader_id not in self.members:
            self.leader_id = next(iter(self.members))
        self.protocol_name = self._select_protocol()
        self._transition(GroupEvent.JOIN_COMPLETED, now)
        for member in self.members.values():
            member.awaiting_join = False
            member.is_new = False
            member.heartbeat_deadline = now + member.session_timeout_ms
            self.pending_sync.add(member.member_id)
            effects.append(JoinReply(member.member_id, self._join_result(member.member_id)))
        self.sync_deadline = now + self._rebalance_timeout_ms()
        return effects

    def _reset_and_propagate_assignment_error(self, error: ErrorCode, now: int) -> list[Effect]:
        effects: list[Effect] = []
        for member in self.members.values():
            member.assignment = b""
            if member.awaiting_sync:
                member.awaiting_sync = False
                member.heartbeat_deadline = now + member.session_timeout_ms
                effects.append(SyncReply(member.member_id, SyncGroupResult(error=error)))
        return effects

    def _remove_member_and_update(self, member_id: str, now: int, cause: RebalanceCause) -> list[Effect]:
        member = self.members[member_id]
        self.stats.member_removed(cause)
        effects: list[Effect] = []
        if member.awaiting_join:
            effects.append(JoinReply(member_id, JoinGroupResult(error=ErrorCode.unknown_member_id, member_id=member_id)))
        if member.awaiting_sync:
            effects.append(SyncReply(member_id, SyncGroupResult(error=ErrorCode.unknown_member_id)))
        self._remove(member_id)
        if self.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            effects += self._prepare_rebalance(now, cause)
        elif self.state is GroupState.PREPARING_REBALANCE:
            effects += self._maybe_complete_join(now)
        return effects

    def _remove(self, member_id: str) -> None:
        member = self.members.pop(member_id)
        if member.group_instance_id is not None and self.static_members.get(member.group_instance_id) == member_id:
            del self.static_members[member.group_instance_id]
        self.pending_members.pop(member_id, None)
        self._sync_received(member_id)
        if self.leader_id == member_id:
            self.leader_id = next(iter(self.members), None)

    def _rename_member(self, old_id: str, new_id: str) -> None:
        """Swap a member's id in place, keeping its position (and leadership)."""
        self.members = {(new_id if mid == old_id else mid): m for mid, m in self.members.items()}
        member = self.members[new_id]
        member.member_id = new_id
        if member.group_instance_id is not None:
            self.static_members[member.group_instance_id] = new_id
        if self.leader_id == old_id:
            self.leader_id = new_id
        if old_id in self.pending_sync:
            self.pending_sync.discard(old_id)
            self.pending_sync.add(new_id)

    def _select_protocol(self) -> str | None:
        """Kafka ClassicGroup.selectProtocol: every member votes for its most
        preferred protocol that all members support; most votes wins. Ties go
        to the leader's preference order (Kafka leaves them to map order)."""
        if not self.members:
            return None
        members = list(self.members.values())
        first = self.members.get(self.leader_id) if self.leader_id is not None else None
        order = [name for name, _ in (first or members[0]).protocols]
        candidates = [name for name in order if all(m.supports(name) for m in members)]
        if not candidates:
            return None
        votes = {name: 0 for name in candidates}
        for member in members:
            for name, _ in member.protocols:
                if name in votes:
                    votes[name] += 1
                    break
        return max(candidates, key=lambda name: (votes[name], -candidates.index(name)))

    def _supports(self, protocol_type: str, protocols: tuple[tuple[str, bytes], ...]) -> bool:
        """Kafka ClassicGroup.supportsProtocols."""
        if not protocol_type or not protocols:
            return False
        if not self.members:
            return True
        if protocol_type != self.protocol_type:
            return False
        members = list(self.members.values())
        return any(all(m.supports(name) for m in members) for name, _ in protocols)

    def _static_fenced(self, group_instance_id: str | None, member_id: str) -> bool:
        if group_instance_id is None:
            return False
        current = self.static_members.get(group_instance_id)
        return current is not None and current != member_id

    def _join_result(self, member_id: str, *, skip_assignment: bool = False) -> JoinGroupResult:
        is_leader = member_id == self.leader_id
        members = [
            JoinGroupMember(m.member_id, m.group_instance_id, m.metadata(self.protocol_name))
            for m in self.members.values()
        ] if is_leader else []
        return JoinGroupResult(
            error=_OK,
            generation_id=self.generation_id,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            leader=self.leader_id or "",
            member_id=member_id,
            members=members,
            skip_assignment=skip_assignment,
        )

    def _sync_result(self, member: Member) -> SyncGroupResult:
        return SyncGroupResult(
            error=_OK,
            protocol_type=self.protocol_type,
            protocol_name=self.protocol_name,
            assignment=member.assignment,
        )


@dataclass(frozen=True, slots=True)
class _MemberSnapshot:
    """What a static replacement changed, to undo it if the store fails."""

    protocols: tuple[tuple[str, bytes], ...]
    session_timeout_ms: int
    rebalance_timeout_ms: int
    client_id: str
    client_host: str

    @classmethod
    def of(cls, member: Member) -> _MemberSnapshot:
        return cls(member.protocols, member.session_timeout_ms, member.rebalance_timeout_ms, member.client_id, member.client_host)

    def restore(self, member: Member) -> None:
        member.protocols = self.protocols
        member.session_timeout_ms = self.session_timeout_ms
        member.rebalance_timeout_ms = self.rebalance_timeout_ms
        member.client_id = self.client_id
        member.client_host = self.client_host
