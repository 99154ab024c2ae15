"""GroupManager: the asyncio layer over the group state machines (membership and group metadata).

Flow of one request: the runtime's gate (this broker coordinates the group, its partition is
loaded), then the pure `Group` or `ConsumerGroup`, then the effects it returns, then the answer.
JoinGroup and SyncGroup may park (`parking`); a ConsumerGroupHeartbeat answers at once, after what
it changed is durable. Group metadata is appended after every completed rebalance (Kafka's
storeGroup); a KIP-848 group's member, epoch and assignment records after every heartbeat that
changed them (`consumer_persistence`), so a new coordinator loads members at their epochs.

Classic and consumer groups (KIP-848) live side by side, one dict each (a group id is in at most
one). An empty group of one type turns into the other on the other type's first join (Kafka's
online upgrade / downgrade of empty groups; the offsets move with it); a non-empty one refuses
(GROUP_ID_NOT_FOUND for a heartbeat, INCONSISTENT_GROUP_PROTOCOL for a JoinGroup).

Timers: one per group, armed at the group's next deadline on an injected `Scheduler`.
Offsets are `offset_manager`'s; it reaches the groups through the public methods below.

Precedent: Kafka's GroupCoordinator.scala (3.x) and the group-coordinator module's
GroupMetadataManager, ClassicGroup and ConsumerGroup.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import defaultdict
from collections.abc import Callable, Sequence

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.assignors import ASSIGNORS
from tinystream.broker.groups.consumer_group import ConsumerGroup, HeartbeatRequest, HeartbeatResult, TopicImage
from tinystream.broker.groups.consumer_persistence import records_for, tombstones_for
from tinystream.broker.groups.errors import group_store_error
from tinystream.broker.groups.group import Effect, Group, GroupState, JoinReply, StoreGroup, SyncReply
from tinystream.broker.groups.offsets import offset_tombstones
from tinystream.broker.groups.parking import ParkedRequests
from tinystream.broker.groups.persistence import Record
from tinystream.broker.groups.records import GroupMetadataKey, encode_group_metadata_value, encode_key
from tinystream.broker.groups.replay import PartitionReplay
from tinystream.broker.groups.results import (
    ConsumerGroupDescription,
    GroupDescription,
    GroupListing,
    JoinGroupResult,
    LeaveGroupResult,
    LeftMember,
    SyncGroupResult,
)
from tinystream.broker.groups.runtime import CoordinatorRuntime
from tinystream.broker.groups.stats import GroupStats
from tinystream.broker.groups.timers import Scheduler, TimerHandle

__all__ = ["GroupManager", "NoTopics"]

log = logging.getLogger(__name__)

_OK = ErrorCode.none


class NoTopics:
    """The topic image of a coordinator wired without one (tests of classic groups): no topics."""

    def partition_count(self, topic: str) -> int | None:
        return None

    def topic_names(self) -> list[str]:
        return []

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None


class GroupManager:
    """The classic and KIP-848 groups of the partitions loaded here: membership, metadata, timers."""

    def __init__(
        self,
        *,
        runtime: CoordinatorRuntime,
        scheduler: Scheduler,
        initial_rebalance_delay_ms: int,
        min_session_timeout_ms: int,
        max_session_timeout_ms: int,
        member_id_factory: Callable[[str], str],
        topic_image: TopicImage,
        consumer_session_timeout_ms: int,
        consumer_heartbeat_interval_ms: int,
        consumer_assignors: Sequence[str],
    ) -> None:
        unknown = [name for name in consumer_assignors if name not in ASSIGNORS]
        if unknown or not consumer_assignors:
            raise ValueError(f"consumer group assignors {list(consumer_assignors)!r}: choose among {sorted(ASSIGNORS)}")
        self._runtime = runtime
        self._scheduler = scheduler
        self._initial_delay_ms = initial_rebalance_delay_ms
        self._min_session_ms = min_session_timeout_ms
        self._max_session_ms = max_session_timeout_ms
        self._member_id_factory = member_id_factory
        self._topic_image = topic_image
        self._consumer_session_ms = consumer_session_timeout_ms
        self._consumer_heartbeat_ms = consumer_heartbeat_interval_ms
        self._consumer_assignors = {name: ASSIGNORS[name] for name in consumer_assignors}
        self._consumer_assignor = consumer_assignors[0]
        self._groups: dict[str, Group] = {}
        self._consumer_groups: dict[str, ConsumerGroup] = {}
        self._joins: ParkedRequests[JoinGroupResult] = ParkedRequests()
        self._syncs: ParkedRequests[SyncGroupResult] = ParkedRequests()
        self._timers: dict[str, tuple[int, TimerHandle]] = {}

    # ================================================================ loading, unloading

    def install(self, replay: PartitionReplay, now: int) -> None:
        """The groups a partition's log left (`replay`), with their committed offsets."""
        consumer_log = replay.consumer_log
        for group_id in replay.group_ids():
            kept = replay.committed(group_id)
            if group_id in consumer_log.group_ids():
                # A KIP-848 group: members go on at their epochs, their sessions restarted.
                cgroup = consumer_log.build(group_id, lambda gid, epoch: self._new_consumer_group(gid, epoch=epoch),
                                            topics=self._topic_image, now=now)
                cgroup.offsets = kept
                self.reschedule(cgroup)
                continue
            value = replay.group_values.get(group_id)
            if value is None and not kept:
                continue  # deleted (tombstoned) group
            if value is None:
                # Offsets only: a standalone consumer, or a group with no members (Kafka loads it Empty).
                group = Group(group_id, initial_rebalance_delay_ms=self._initial_delay_ms, now=now)
            else:
                group = Group.from_metadata(group_id, value, initial_rebalance_delay_ms=self._initial_delay_ms, now=now)
            group.offsets = kept
            self._groups[group_id] = group
            self.reschedule(group)

    def count_in(self, partition: int) -> int:
        """Groups of both types in `partition` (for the load's log line)."""
        return sum(1 for g in [*self._groups, *self._consumer_groups] if self._runtime.partition(g) == partition)

    def unload(self, partition: int) -> None:
        """The partition's groups go Dead; their parked requests get NOT_COORDINATOR."""
        for group in [g for gid, g in self._groups.items() if self._runtime.partition(gid) == partition]:
            self._drop_group(group, ErrorCode.not_coordinator)
        for gid in [gid for gid in self._consumer_groups if self._runtime.partition(gid) == partition]:
            self._drop_consumer_group(gid)

    # ================================================================ JoinGroup, SyncGroup, Heartbeat, LeaveGroup

    async def join_group(
        self,
        *,
        group_id: str,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str,
        protocols: list[tuple[str, bytes]],
        session_timeout_ms: int,
        rebalance_timeout_ms: int,
        client_id: str,
        client_host: str,
        require_known_member_id: bool,
    ) -> JoinGroupResult:
        group, error = await self._group_to_join(group_id, member_id, session_timeout_ms)
        if error is not _OK or group is None:
            return JoinGroupResult(error=error, member_id=member_id)
        outcome = group.join(
            member_id=member_id,
            group_instance_id=group_instance_id,
            client_id=client_id,
            client_host=client_host,
            protocol_type=protocol_type,
            protocols=protocols,
            session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            require_known_member_id=require_known_member_id,
            new_member_id=self._member_id_factory(client_id),
            now=self._runtime.clock(),
        )
        if outcome.reply is not None:
            self._apply(group, outcome.effects)
            self.discard_if_pristine(group)
            return outcome.reply
        key = (group_id, outcome.member_id)
        future = self._joins.park(key, JoinGroupResult(error=ErrorCode.rebalance_in_progress, member_id=outcome.member_id))
        self._apply(group, outcome.effects)
        return await self._joins.wait(key, future)

    async def _group_to_join(self, group_id: str, member_id: str, session_timeout_ms: int) -> tuple[Group | None, ErrorCode]:
        """The classic group a JoinGroup goes to, made when a new member starts it (an empty consumer
        group is turned classic first), or the error that answers the join."""
        error = self._runtime.status(group_id, allow_empty_id=False)
        if error is _OK and not self._min_session_ms <= session_timeout_ms <= self._max_session_ms:
            error = ErrorCode.invalid_session_timeout
        cgroup = self._consumer_groups.get(group_id)
        if error is _OK and cgroup is not None:
            if not cgroup.is_empty():
                # Kafka (no online migration of a group with members): a classic member cannot join it.
                return None, ErrorCode.inconsistent_group_protocol
            error = await self._downgrade(cgroup)
        group = self._groups.get(group_id)
        if error is _OK and group is None:
            if member_id != "":
                # The group is gone (expired, deleted, moved): the member must start over.
                error = ErrorCode.unknown_member_id
            else:
                group = self.new_group(group_id)
        return group, error

    async def sync_group(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        protocol_type: str | None,
        protocol_name: str | None,
        assignments: list[tuple[str, bytes]],
    ) -> SyncGroupResult:
        error = self._runtime.status(group_id, allow_empty_id=False)
        group = self._groups.get(group_id)
        if error is _OK and group is None:
            error = ErrorCode.unknown_member_id
        if error is not _OK or group is None:
            return SyncGroupResult(error=error)
        outcome = group.sync(
            member_id=member_id,
            group_instance_id=group_instance_id,
            generation_id=generation_id,
            protocol_type=protocol_type,
            protocol_name=protocol_name,
            assignments=assignments,
            now=self._runtime.clock(),
        )
        if outcome.reply is not None:
            self._apply(group, outcome.effects)
            return outcome.reply
        key = (group_id, member_id)
        future = self._syncs.park(key, SyncGroupResult(error=ErrorCode.rebalance_in_progress))
        self._apply(group, outcome.effects)
        return await self._syncs.wait(key, future)

    async def heartbeat(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode:
        error = self._runtime.status(group_id, allow_empty_id=False)
        if error is not _OK:
            return error
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = group.heartbeat(
            member_id=member_id,
            group_instance_id=group_instance_id,
            generation_id=generation_id,
            now=self._runtime.clock(),
        )
        self.reschedule(group)
        return error

    async def leave_group(self, *, group_id: str, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        error = self._runtime.status(group_id, allow_empty_id=False)
        if error is not _OK:
            return LeaveGroupResult(error=error)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveGroupResult(
                error=_OK,
                members=[LeftMember(mid, iid, ErrorCode.unknown_member_id) for mid, iid in members],
            )
        outcome = group.leave(members, self._runtime.clock())
        self._apply(group, outcome.effects)
        return LeaveGroupResult(error=outcome.error, members=outcome.members)

    # ================================================================ consumer groups (KIP-848)

    async def consumer_group_heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: answered at once, after the group epoch (if it moved) is durable."""
        if not group_id.strip():
            return HeartbeatResult(error=ErrorCode.invalid_request, error_message="GroupId can't be empty.")
        error = self._runtime.status(group_id, allow_empty_id=False)
        if error is not _OK:
            return HeartbeatResult(error=error)
        cgroup = self._consumer_groups.get(group_id)
        classic = self._groups.get(group_id) if cgroup is None else None
        if cgroup is None:
            if classic is not None and classic.state not in (GroupState.EMPTY, GroupState.DEAD):
                return HeartbeatResult(error=ErrorCode.group_id_not_found,
                                       error_message=f"Group {group_id} is not a consumer group.")
            if request.member_epoch != 0:
                # Gone (expired or deleted): the member must rejoin with epoch 0.
                return HeartbeatResult(error=ErrorCode.unknown_member_id,
                                       error_message=f"Consumer group {group_id} not found.")
            cgroup = self._new_consumer_group(group_id)
            if classic is not None:
                cgroup.offsets = dict(classic.offsets)
        outcome = cgroup.heartbeat(request, topics=self._topic_image, now=self._runtime.clock())
        if outcome.result.error is not _OK:
            if classic is not None or (cgroup.is_empty() and cgroup.group_epoch == 0 and not cgroup.offsets):
                self._consumer_groups.pop(group_id, None)  # created by this failed request: forget it
            return outcome.result
        if classic is not None:
            # KIP-848 online upgrade of an empty classic group: the offsets move with it.
            self._groups.pop(group_id, None)
            self._cancel_timer(group_id)
        self.reschedule(cgroup)
        stored = await self._runtime.await_append(self._store_consumer_changes(cgroup, outcome.epoch_changed))
        if stored is not _OK:
            return HeartbeatResult(error=group_store_error(stored))
        return outcome.result

    async def consumer_group_describe(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        """ConsumerGroupDescribe (Kafka: GROUP_ID_NOT_FOUND for an unknown id or a classic group)."""
        out = []
        for group_id in group_ids:
            error = self._runtime.status(group_id, allow_empty_id=True)
            cgroup = self._consumer_groups.get(group_id)
            if error is not _OK:
                out.append(ConsumerGroupDescription(error=error, group_id=group_id))
            elif cgroup is not None:
                out.append(cgroup.describe())
            elif group_id in self._groups:
                out.append(ConsumerGroupDescription(error=ErrorCode.group_id_not_found, group_id=group_id,
                                                    error_message=f"Group {group_id} is not a consumer group."))
            else:
                out.append(ConsumerGroupDescription(error=ErrorCode.group_id_not_found, group_id=group_id,
                                                    error_message=f"Group {group_id} not found."))
        return out

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """A KIP-848 group coordinated here (read-only use: metrics, admin HTTP)."""
        return self._consumer_groups.get(group_id)

    def _new_consumer_group(self, group_id: str, *, epoch: int = 0) -> ConsumerGroup:
        cgroup = ConsumerGroup(
            group_id,
            group_epoch=epoch,
            session_timeout_ms=self._consumer_session_ms,
            heartbeat_interval_ms=self._consumer_heartbeat_ms,
            assignors=self._consumer_assignors,
            default_assignor=self._consumer_assignor,
        )
        self._consumer_groups[group_id] = cgroup
        return cgroup

    def _store_consumer_changes(self, cgroup: ConsumerGroup, epoch_changed: bool) -> asyncio.Task[ErrorCode]:
        """Append what the last heartbeat or timer changed (nothing to append: a done task)."""
        records = records_for(cgroup, cgroup.take_changes(), epoch_changed=epoch_changed, topics=self._topic_image)
        if not records:
            async def nothing() -> ErrorCode:
                return _OK

            return self._runtime.spawn(nothing())
        return self._runtime.append(self._runtime.partition(cgroup.group_id), records)

    async def _downgrade(self, cgroup: ConsumerGroup) -> ErrorCode:
        """An empty consumer group becomes classic (its offsets stay): tombstone its consumer record first."""
        group_id = cgroup.group_id
        append = self._runtime.append(self._runtime.partition(group_id), tombstones_for(group_id, []))
        error = await self._runtime.await_append(append)
        if error is not _OK:
            return group_store_error(error)
        if self._consumer_groups.get(group_id) is not cgroup or not cgroup.is_empty():
            return ErrorCode.rebalance_in_progress  # a consumer member joined meanwhile: retry
        self._drop_consumer_group(group_id)
        if group_id not in self._groups:
            self.new_group(group_id).offsets = dict(cgroup.offsets)
        return _OK

    def _drop_consumer_group(self, group_id: str) -> None:
        cgroup = self._consumer_groups.pop(group_id, None)
        if cgroup is not None:
            cgroup.dead = True
        self._cancel_timer(group_id)

    # ================================================================ admin: list, describe, delete

    def list_groups(
        self, states_filter: list[str] | None = None, types_filter: list[str] | None = None
    ) -> list[GroupListing]:
        """Groups of the loaded partitions; `states_filter` uses Kafka's state
        names, case-insensitively (KIP-518), `types_filter` the group types
        "classic" and "consumer" (KIP-848, ListGroups v5). Loading partitions
        are left out (see `loading_partitions`)."""
        if not self._runtime.active:
            return []
        wanted = {s.lower() for s in states_filter} if states_filter else None
        types = {t.lower() for t in types_filter} if types_filter else None
        out = []
        everything: list[tuple[str, Group | ConsumerGroup]] = [*self._groups.items(), *self._consumer_groups.items()]
        for group_id, group in everything:
            if not self._runtime.is_loaded(self._runtime.partition(group_id)):
                continue
            listing = group.listing()
            if listing.state == GroupState.DEAD.value:
                continue
            if wanted is not None and listing.state.lower() not in wanted:
                continue
            if types is not None and self.group_type(group_id) not in types:
                continue
            out.append(listing)
        return out

    def group_type(self, group_id: str) -> str:
        """ "consumer" for a KIP-848 group, "classic" otherwise (ListGroups v5's GroupType)."""
        return "consumer" if group_id in self._consumer_groups else "classic"

    async def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        out = []
        for group_id in group_ids:
            error = self._runtime.status(group_id, allow_empty_id=True)
            if error is not _OK:
                out.append(GroupDescription(error=error, group_id=group_id, state=""))
                continue
            group = self._groups.get(group_id)
            if group is None:
                # Kafka: an unknown group is described as Dead, without error; so is a consumer
                # group at DescribeGroups v0-5 (v6 would answer GROUP_ID_NOT_FOUND).
                out.append(GroupDescription(error=_OK, group_id=group_id, state=GroupState.DEAD.value))
            else:
                out.append(group.describe())
        return out

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: only Empty groups; their metadata and offsets get tombstones."""
        results: dict[str, ErrorCode] = {}
        tombstones: dict[int, list[Record]] = defaultdict(list)
        deleted: dict[int, list[str]] = defaultdict(list)
        now = self._runtime.clock()
        for group_id in dict.fromkeys(group_ids):
            error = self._runtime.status(group_id, allow_empty_id=True)
            results[group_id], records = self._delete_one(group_id, error, now)
            if records is not None:
                partition = self._runtime.partition(group_id)
                tombstones[partition].extend(records)
                deleted[partition].append(group_id)
        for partition, records in tombstones.items():
            error = await self._runtime.await_append(self._runtime.append(partition, records))
            if error is not _OK:
                # The group is already gone from memory (as in Kafka); tell the admin
                # the tombstones did not land so it can retry the deletion.
                for group_id in deleted[partition]:
                    results[group_id] = group_store_error(error)
        return results

    def _delete_one(self, group_id: str, error: ErrorCode, now: int) -> tuple[ErrorCode, list[Record] | None]:
        """Drop one group from memory if it may go, and the tombstones that make it gone for good
        (None when it stays): its metadata (classic) or consumer records (KIP-848), and its offsets."""
        cgroup = self._consumer_groups.get(group_id) if error is _OK else None
        if cgroup is not None:
            error = cgroup.deletion_error()
            if error is not _OK:
                return error, None
            records = tombstones_for(group_id, []) + offset_tombstones(group_id, cgroup.offsets)
            self._drop_consumer_group(group_id)
            return error, records
        group = self._groups.get(group_id)
        if error is _OK:
            error = ErrorCode.group_id_not_found if group is None else group.deletion_error()
        if error is not _OK or group is None:
            return error, None
        records = [(encode_key(GroupMetadataKey(group_id)), None), *offset_tombstones(group_id, group.offsets)]
        self._drop_group(group, ErrorCode.coordinator_not_available, now=now)
        return error, records

    # ================================================================ what offset_manager and metrics use

    def classic(self, group_id: str) -> Group | None:
        return self._groups.get(group_id)

    def lookup(self, group_id: str) -> Group | ConsumerGroup | None:
        """The group of either protocol that holds `group_id`."""
        group = self._groups.get(group_id)
        return group if group is not None else self._consumer_groups.get(group_id)

    def new_group(self, group_id: str) -> Group:
        group = Group(group_id, initial_rebalance_delay_ms=self._initial_delay_ms, now=self._runtime.clock())
        self._groups[group_id] = group
        return group

    def discard_if_pristine(self, group: Group) -> None:
        """Forget a group created by a request that then failed (nothing to keep)."""
        if self._groups.get(group.group_id) is group and group.is_pristine():
            del self._groups[group.group_id]
            self._cancel_timer(group.group_id)

    def stats(self, group_id: str) -> GroupStats | None:
        """Joins, leaves, rebalances and commits of a group coordinated here (for metrics and the dashboard)."""
        group = self.lookup(group_id)
        if group is None or not self._runtime.is_loaded(self._runtime.partition(group_id)):
            return None
        return group.stats

    def _drop_group(self, group: Group, error: ErrorCode, *, now: int | None = None) -> None:
        group_id = group.group_id
        effects = group.mark_dead(error, self._runtime.clock() if now is None else now)
        self._apply(group, effects)
        if self._groups.get(group_id) is group:
            del self._groups[group_id]
        self._cancel_timer(group_id)
        # Anything still parked under this group id (superseded or orphaned) is answered too.
        for key in self._joins.keys_of(group_id):
            self._joins.resolve(key, JoinGroupResult(error=error, member_id=key[1]))
        for key in self._syncs.keys_of(group_id):
            self._syncs.resolve(key, SyncGroupResult(error=error))

    # ---------------------------------------------------------------- effects

    def _apply(self, group: Group, effects: list[Effect]) -> None:
        group_id = group.group_id
        for effect in effects:
            if isinstance(effect, JoinReply):
                self._joins.resolve((group_id, effect.member_id), effect.result)
            elif isinstance(effect, SyncReply):
                self._syncs.resolve((group_id, effect.member_id), effect.result)
            elif isinstance(effect, StoreGroup):
                self._store_group(group, effect)
            else:  # pragma: no cover
                raise TypeError(f"unknown effect {effect!r}")
        self.reschedule(group)

    def _store_group(self, group: Group, effect: StoreGroup) -> None:
        records: list[Record] = [
            (encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(effect.value))
        ]
        append = self._runtime.append(self._runtime.partition(group.group_id), records)

        async def finish() -> None:
            error = await append
            if error is not _OK:
                error = group_store_error(error)
                log.warning("group %r: storing metadata failed: %s", group.group_id, error.name)
            if self._groups.get(group.group_id) is not group:
                return  # unloaded or deleted meanwhile; its parked requests were answered then
            self._apply(group, effect.on_done(error, self._runtime.clock()))

        self._runtime.spawn(finish())

    # ---------------------------------------------------------------- timers

    def reschedule(self, group: Group | ConsumerGroup) -> None:
        """Arm the group's timer at its next deadline (an earlier armed timer re-arms when it fires)."""
        group_id = group.group_id
        if self.lookup(group_id) is not group:
            return
        deadline = group.next_deadline()
        current = self._timers.get(group_id)
        if current is not None:
            if deadline is None or current[0] <= deadline:
                return  # the armed timer fires first; it re-arms for what is left then
            current[1].cancel()
            del self._timers[group_id]
        if deadline is None:
            return
        handle = self._scheduler.call_later(max(deadline - self._runtime.clock(), 0), lambda: self._on_timer(group))
        self._timers[group_id] = (deadline, handle)

    def _cancel_timer(self, group_id: str) -> None:
        current = self._timers.pop(group_id, None)
        if current is not None:
            current[1].cancel()

    def _on_timer(self, group: Group | ConsumerGroup) -> None:
        self._timers.pop(group.group_id, None)
        if self.lookup(group.group_id) is not group:
            return
        if isinstance(group, ConsumerGroup):
            expired, changed = group.on_timer(self._topic_image, self._runtime.clock())
            if expired:
                log.info("consumer group %r: members %s expired", group.group_id, ", ".join(expired))
            self._store_consumer_changes(group, changed)  # a failure is logged by the append
            self.reschedule(group)
            return
        self._apply(group, group.on_timer(self._runtime.clock()))
        self.discard_if_pristine(group)
