"""GroupCoordinator: the asyncio layer over the pure group state machine.

Flow of one request: check that this broker coordinates the group (its
__consumer_offsets partition is loaded here), call the pure `Group`, carry
out the effects it returns, and answer. JoinGroup and SyncGroup may park: the
caller awaits a future kept under (group id, member id) that a later effect
resolves - when the last member rejoins, when a timer fires, when the leader's
assignment is durable. Everything else answers at once (offset commits after
their append).

Persistence: every append to __consumer_offsets goes through `_append`, which
starts a task at once, so appends reach the OffsetsTopic in the order the
state machine produced them (a delete's tombstones never overtake an earlier
commit of the same group). Offsets are appended before the commit is
answered; group metadata after every completed rebalance (Kafka's storeGroup).

Transactional offsets (KIP-98, KIP-447): TxnOffsetCommit appends the offsets
inside the producer's transaction and keeps them pending under (producer id,
group); `complete_txn`, called when the transaction coordinator's marker
lands in the group's __consumer_offsets partition, makes them the committed
offsets (COMMIT) or drops them (ABORT). Loading does the same from the log.
OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for a
partition with a pending transactional offset.

Timers: one per group, armed at the group's next deadline; an injected
`Scheduler` and clock make tests deterministic.

Consumer groups of the next-generation protocol (KIP-848) live beside the
classic ones, one dict each (a group id is in at most one):
ConsumerGroupHeartbeat runs the pure `ConsumerGroup`, persists the group
epoch (a ConsumerGroupMetadata record) when it moves, and answers at once -
nothing parks. Offsets are shared: OffsetCommit / OffsetFetch / TxnOffsetCommit
reach whichever group holds the id, checked by member epoch for a consumer
group. An empty group of one type turns into the other on the other type's
first join (Kafka's online upgrade / downgrade of empty groups); a non-empty
one refuses (GROUP_ID_NOT_FOUND for a heartbeat, INCONSISTENT_GROUP_PROTOCOL
for a JoinGroup). Every change a heartbeat makes is appended (Kafka's
member, epoch and assignment records, `consumer_persistence`) before it is
answered, so a new coordinator loads the members at their epochs and they go
on without a rebalance; a member it does not know gets UNKNOWN_MEMBER_ID and
rejoins with epoch 0.

Precedent throughout: Kafka's GroupCoordinator.scala (3.x) and the
group-coordinator module's ClassicGroup, ConsumerGroup and GroupMetadataManager.
"""

from __future__ import annotations

import asyncio
import enum
import itertools
import logging
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Coroutine, Sequence
from typing import Any, TypeVar

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.assignors import ASSIGNORS, DEFAULT_ASSIGNOR
from tinystream.broker.groups.consumer_group import ConsumerGroup, HeartbeatRequest, HeartbeatResult, TopicImage
from tinystream.broker.groups.consumer_persistence import ConsumerGroupLog, records_for, tombstones_for
from tinystream.broker.groups.errors import (
    RecordDecodeError,
    append_failure_code,
    group_store_error,
    offset_commit_error,
)
from tinystream.broker.groups.group import (
    CommittedOffset,
    Effect,
    Group,
    GroupState,
    JoinReply,
    StoreGroup,
    SyncReply,
)
from tinystream.broker.groups.persistence import OffsetsTopic, Record, TxnMarker, TxnRecord
from tinystream.broker.groups.records import (
    ConsumerGroupMetadataKey,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from tinystream.broker.groups.results import (
    ConsumerGroupDescription,
    FetchOffsetsResult,
    GroupDescription,
    GroupListing,
    JoinGroupResult,
    LeaveGroupResult,
    LeftMember,
    OffsetAndMetadata,
    SyncGroupResult,
)
from tinystream.broker.groups.stats import GroupStats
from tinystream.broker.groups.timers import LoopScheduler, Scheduler, TimerHandle

__all__ = ["GroupCoordinator", "partition_for_group"]

log = logging.getLogger(__name__)

#: A parked request's answer type (JoinGroupResult or SyncGroupResult).
R = TypeVar("R")

_OK = ErrorCode.none
_LOAD_YIELD_EVERY = 1000  # records read between two yields to the event loop while loading


def _java_string_hash(s: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = s.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_for_group(group_id: str, num_partitions: int) -> int:
    """The __consumer_offsets partition of a group: Kafka's
    Utils.abs(groupId.hashCode) % offsets.topic.num.partitions, where
    Utils.abs(Integer.MIN_VALUE) is 0."""
    if num_partitions < 1:
        raise ValueError(f"num_partitions must be positive, got {num_partitions}")
    h = _java_string_hash(group_id)
    return (0 if h == -(1 << 31) else abs(h)) % num_partitions


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _new_member_id(client_id: str) -> str:
    # Kafka: clientId + "-" + UUID
    return f"{client_id}-{uuid.uuid4()}"


class _NoTopics:
    """The topic image of a coordinator wired without one (tests of classic groups): no topics."""

    def partition_count(self, topic: str) -> int | None:
        return None

    def topic_names(self) -> list[str]:
        return []

    def topic_id(self, topic: str) -> uuid.UUID | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None


class _Loading(enum.Enum):
    LOADING = "loading"
    LOADED = "loaded"


class GroupCoordinator:
    """Coordinates the classic consumer groups of the loaded __consumer_offsets partitions."""

    def __init__(
        self,
        *,
        offsets_topic: OffsetsTopic,
        num_partitions: int,
        clock: Callable[[], int] = _wall_clock_ms,
        initial_rebalance_delay_ms: int = 3000,  # group.initial.rebalance.delay.ms
        min_session_timeout_ms: int = 6000,  # group.min.session.timeout.ms
        max_session_timeout_ms: int = 1_800_000,  # group.max.session.timeout.ms
        offset_metadata_max_bytes: int = 4096,  # offset.metadata.max.bytes
        scheduler: Scheduler | None = None,
        member_id_factory: Callable[[str], str] = _new_member_id,
        topic_image: TopicImage | None = None,  # what consumer groups (KIP-848) assign
        consumer_session_timeout_ms: int = 45_000,  # group.consumer.session.timeout.ms
        consumer_heartbeat_interval_ms: int = 5_000,  # group.consumer.heartbeat.interval.ms
        consumer_assignors: Sequence[str] = (DEFAULT_ASSIGNOR, "range"),  # group.consumer.assignors; first: default
    ) -> None:
        if num_partitions < 1:
            raise ValueError(f"num_partitions must be positive, got {num_partitions}")
        self._offsets_topic = offsets_topic
        self._num_partitions = num_partitions
        self._clock = clock
        self._initial_delay_ms = initial_rebalance_delay_ms
        self._min_session_ms = min_session_timeout_ms
        self._max_session_ms = max_session_timeout_ms
        self._metadata_max = offset_metadata_max_bytes
        self._scheduler: Scheduler = scheduler if scheduler is not None else LoopScheduler()
        self._member_id_factory = member_id_factory
        unknown = [name for name in consumer_assignors if name not in ASSIGNORS]
        if unknown or not consumer_assignors:
            raise ValueError(f"consumer group assignors {list(consumer_assignors)!r}: choose among {sorted(ASSIGNORS)}")
        self._topic_image: TopicImage = topic_image if topic_image is not None else _NoTopics()
        self._consumer_session_ms = consumer_session_timeout_ms
        self._consumer_heartbeat_ms = consumer_heartbeat_interval_ms
        self._consumer_assignors = {name: ASSIGNORS[name] for name in consumer_assignors}
        self._consumer_assignor = consumer_assignors[0]
        self._consumer_groups: dict[str, ConsumerGroup] = {}
        self._active = False
        self._partitions: dict[int, _Loading] = {}
        self._load_tokens: dict[int, int] = {}
        self._tokens = itertools.count(1)
        self._groups: dict[str, Group] = {}
        self._join_waiters: dict[tuple[str, str], asyncio.Future[JoinGroupResult]] = {}
        self._sync_waiters: dict[tuple[str, str], asyncio.Future[SyncGroupResult]] = {}
        self._timers: dict[str, tuple[int, TimerHandle]] = {}
        self._tasks: set[asyncio.Task[Any]] = set()
        # Transactional offsets not yet committed: producer id -> group id -> partition -> offset.
        self._pending_txn: dict[int, dict[str, dict[tuple[str, int], CommittedOffset]]] = {}
        # Markers that landed while their partition was loading (the load's read may have ended before them).
        self._deferred_txn: dict[int, list[tuple[int, bool]]] = {}

    # ================================================================ lifecycle

    async def start(self) -> None:
        """Start answering requests (for the partitions loaded so far and later)."""
        self._active = True

    async def stop(self, *, drain_timeout_s: float = 5.0) -> None:
        """Stop: parked requests get NOT_COORDINATOR (the client rediscovers and
        retries), timers are cancelled, in-flight appends get `drain_timeout_s`."""
        self._active = False
        for partition in list(self._partitions):
            await self.unload_partition(partition)
        pending = [t for t in self._tasks if not t.done()]
        if pending:
            _, still = await asyncio.wait(pending, timeout=drain_timeout_s)
            for task in still:
                task.cancel()
            if still:
                await asyncio.gather(*still, return_exceptions=True)

    async def load_partition(self, partition: int) -> None:
        """Become coordinator for `partition`: rebuild its groups and offsets from the log.

        Requests for its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile. A
        record we cannot decode is skipped with a warning. If reading fails
        the partition is dropped (NOT_COORDINATOR) and the error re-raised.
        """
        self._check_partition(partition)
        if partition in self._partitions:
            return
        token = next(self._tokens)
        self._partitions[partition] = _Loading.LOADING
        self._load_tokens[partition] = token
        group_values: dict[str, GroupMetadataValue | None] = {}
        consumer_log = ConsumerGroupLog()  # KIP-848 groups: epochs, members, target assignments
        offsets: dict[str, dict[tuple[str, int], OffsetCommitValue | None]] = defaultdict(dict)
        pending: dict[int, dict[str, dict[tuple[str, int], OffsetCommitValue]]] = {}
        try:
            for count, entry in enumerate(self._offsets_topic.read(partition), 1):
                if isinstance(entry, TxnMarker):
                    done = pending.pop(entry.producer_id, {})
                    if entry.commit:
                        for gid, committed in done.items():
                            offsets[gid].update(committed)
                    continue
                producer_id = entry.producer_id if isinstance(entry, TxnRecord) else -1
                key_bytes, value_bytes = entry[0], entry[1]
                try:
                    key = decode_key(key_bytes)
                    value = decode_value(key, value_bytes)
                except RecordDecodeError as exc:
                    log.warning("__consumer_offsets-%d: skipping an unreadable record: %s", partition, exc)
                    continue
                if isinstance(key, OffsetCommitKey) and producer_id >= 0:
                    if isinstance(value, OffsetCommitValue):
                        pending.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = value
                elif isinstance(key, OffsetCommitKey):
                    assert value is None or isinstance(value, OffsetCommitValue)
                    offsets[key.group][(key.topic, key.partition)] = value
                elif isinstance(key, GroupMetadataKey):
                    assert value is None or isinstance(value, GroupMetadataValue)
                    group_values[key.group] = value
                    if value is not None:
                        consumer_log.forget(key.group)  # the group turned classic
                elif consumer_log.add(key, value):
                    if isinstance(key, ConsumerGroupMetadataKey) and value is not None:
                        group_values.pop(key.group, None)  # the group turned into a consumer group
                if count % _LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if self._load_tokens.get(partition) != token:
                        return  # unloaded (or reloaded) while we read
        except Exception:
            if self._load_tokens.get(partition) == token:
                del self._partitions[partition]
                del self._load_tokens[partition]
            raise
        if self._load_tokens.get(partition) != token:
            return
        now = self._clock()
        for producer_id, by_group in pending.items():  # transactions still open in this partition
            for gid, values in by_group.items():
                self._pending_txn.setdefault(producer_id, {})[gid] = {
                    tp: CommittedOffset(offset=v.offset, leader_epoch=v.leader_epoch, metadata=v.metadata,
                                        commit_timestamp=v.commit_timestamp)
                    for tp, v in values.items()
                }
        for group_id in (group_values.keys() | consumer_log.group_ids() | offsets.keys()
                         | {g for by in pending.values() for g in by}):
            value = group_values.get(group_id)
            kept = {
                tp: CommittedOffset(
                    offset=v.offset,
                    leader_epoch=v.leader_epoch,
                    metadata=v.metadata,
                    commit_timestamp=v.commit_timestamp,
                )
                for tp, v in offsets.get(group_id, {}).items()
                if v is not None
            }
            if group_id in consumer_log.group_ids():
                # A KIP-848 group: members go on at their epochs, their sessions restarted.
                cgroup = consumer_log.build(group_id, lambda gid, epoch: self._new_consumer_group(gid, epoch=epoch),
                                            topics=self._topic_image, now=now)
                cgroup.offsets = kept
                self._reschedule(cgroup)
                continue
            if value is None and not kept:
                continue  # deleted (tombstoned) group
            if value is None:
                # Offsets only: a standalone consumer, or a group with no members (Kafka loads it Empty).
                group = Group(group_id, initial_rebalance_delay_ms=self._initial_delay_ms, now=now)
            else:
                group = Group.from_metadata(group_id, value, initial_rebalance_delay_ms=self._initial_delay_ms, now=now)
            group.offsets = kept
            self._groups[group_id] = group
            self._reschedule(group)
        self._partitions[partition] = _Loading.LOADED
        for producer_id, commit in self._deferred_txn.pop(partition, []):
            self.complete_txn(partition, producer_id, commit)
        loaded = sum(1 for g in [*self._groups, *self._consumer_groups] if self._partition(g) == partition)
        log.info("__consumer_offsets-%d loaded: %d groups", partition, loaded)

    async def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition`: its groups go Dead, parked requests get NOT_COORDINATOR."""
        self._partitions.pop(partition, None)
        self._load_tokens.pop(partition, None)
        for group in [g for gid, g in self._groups.items() if self._partition(gid) == partition]:
            self._drop_group(group, ErrorCode.not_coordinator)
        for gid in [gid for gid in self._consumer_groups if self._partition(gid) == partition]:
            self._drop_consumer_group(gid)
        for by_group in self._pending_txn.values():
            for gid in [g for g in by_group if self._partition(g) == partition]:
                del by_group[gid]
        self._deferred_txn.pop(partition, None)

    def loading_partitions(self) -> frozenset[int]:
        """Partitions still loading (ListGroups answers COORDINATOR_LOAD_IN_PROGRESS while any are)."""
        return frozenset(p for p, s in self._partitions.items() if s is _Loading.LOADING)

    def owned_partitions(self) -> frozenset[int]:
        """Partitions loaded or loading here."""
        return frozenset(self._partitions)

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
        error = self._status(group_id, allow_empty_id=False)
        if error is _OK and not self._min_session_ms <= session_timeout_ms <= self._max_session_ms:
            error = ErrorCode.invalid_session_timeout
        cgroup = self._consumer_groups.get(group_id)
        if error is _OK and cgroup is not None:
            if not cgroup.is_empty():
                # Kafka (no online migration of a group with members): a classic member cannot join it.
                return JoinGroupResult(error=ErrorCode.inconsistent_group_protocol, member_id=member_id)
            error = await self._downgrade(cgroup)
        group = self._groups.get(group_id)
        if error is _OK and group is None:
            if member_id != "":
                # The group is gone (expired, deleted, moved): the member must start over.
                error = ErrorCode.unknown_member_id
            else:
                group = self._new_group(group_id)
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
            now=self._clock(),
        )
        if outcome.reply is not None:
            self._apply(group, outcome.effects)
            self._discard_if_pristine(group)
            return outcome.reply
        key = (group_id, outcome.member_id)
        superseded = JoinGroupResult(error=ErrorCode.rebalance_in_progress, member_id=outcome.member_id)
        future = self._park(self._join_waiters, key, superseded)
        self._apply(group, outcome.effects)
        return await self._wait(self._join_waiters, key, future)

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
        error = self._status(group_id, allow_empty_id=False)
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
            now=self._clock(),
        )
        if outcome.reply is not None:
            self._apply(group, outcome.effects)
            return outcome.reply
        key = (group_id, member_id)
        future = self._park(self._sync_waiters, key, SyncGroupResult(error=ErrorCode.rebalance_in_progress))
        self._apply(group, outcome.effects)
        return await self._wait(self._sync_waiters, key, future)

    async def heartbeat(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode:
        error = self._status(group_id, allow_empty_id=False)
        if error is not _OK:
            return error
        group = self._groups.get(group_id)
        if group is None:
            return ErrorCode.unknown_member_id
        error = group.heartbeat(
            member_id=member_id,
            group_instance_id=group_instance_id,
            generation_id=generation_id,
            now=self._clock(),
        )
        self._reschedule(group)
        return error

    async def leave_group(self, *, group_id: str, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        error = self._status(group_id, allow_empty_id=False)
        if error is not _OK:
            return LeaveGroupResult(error=error)
        group = self._groups.get(group_id)
        if group is None:
            return LeaveGroupResult(
                error=_OK,
                members=[LeftMember(mid, iid, ErrorCode.unknown_member_id) for mid, iid in members],
            )
        outcome = group.leave(members, self._clock())
        self._apply(group, outcome.effects)
        return LeaveGroupResult(error=outcome.error, members=outcome.members)

    # ================================================================ consumer groups (KIP-848)

    async def consumer_group_heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: answered at once, after the group epoch (if it moved) is durable."""
        if not group_id.strip():
            return HeartbeatResult(error=ErrorCode.invalid_request, error_message="GroupId can't be empty.")
        error = self._status(group_id, allow_empty_id=False)
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
        outcome = cgroup.heartbeat(request, topics=self._topic_image, now=self._clock())
        if outcome.result.error is not _OK:
            if classic is not None or (cgroup.is_empty() and cgroup.group_epoch == 0 and not cgroup.offsets):
                self._consumer_groups.pop(group_id, None)  # created by this failed request: forget it
            return outcome.result
        if classic is not None:
            # KIP-848 online upgrade of an empty classic group: the offsets move with it.
            self._groups.pop(group_id, None)
            self._cancel_timer(group_id)
        self._reschedule(cgroup)
        stored = await self._await_append(self._store_consumer_changes(cgroup, outcome.epoch_changed))
        if stored is not _OK:
            return HeartbeatResult(error=group_store_error(stored))
        return outcome.result

    async def consumer_group_describe(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        """ConsumerGroupDescribe (Kafka: GROUP_ID_NOT_FOUND for an unknown id or a classic group)."""
        out = []
        for group_id in group_ids:
            error = self._status(group_id, allow_empty_id=True)
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

            return self._spawn(nothing())
        return self._append(self._partition(cgroup.group_id), records)

    async def _downgrade(self, cgroup: ConsumerGroup) -> ErrorCode:
        """An empty consumer group becomes classic (its offsets stay): tombstone its consumer record first."""
        group_id = cgroup.group_id
        error = await self._await_append(self._append(self._partition(group_id), tombstones_for(group_id, [])))
        if error is not _OK:
            return group_store_error(error)
        if self._consumer_groups.get(group_id) is not cgroup or not cgroup.is_empty():
            return ErrorCode.rebalance_in_progress  # a consumer member joined meanwhile: retry
        self._drop_consumer_group(group_id)
        if group_id not in self._groups:
            self._new_group(group_id).offsets = dict(cgroup.offsets)
        return _OK

    def _drop_consumer_group(self, group_id: str) -> None:
        cgroup = self._consumer_groups.pop(group_id, None)
        if cgroup is not None:
            cgroup.dead = True
        self._cancel_timer(group_id)

    # ================================================================ offsets

    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
        api_version: int = 9,
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit: (offset, leader epoch, metadata) per partition; answered once durable.

        For a consumer group (KIP-848) `generation_id` is the member epoch (OffsetCommit v9+).
        """
        error = self._status(group_id, allow_empty_id=True)
        cgroup = self._consumer_groups.get(group_id) if error is _OK else None
        if cgroup is not None:
            error = cgroup.validate_commit(member_id=member_id, member_epoch=generation_id, api_version=api_version)
            if error is not _OK:
                return {tp: error for tp in offsets}
            results = await self._store_offsets(group_id, cgroup, offsets)
            self._reschedule(cgroup)
            return results
        group = self._groups.get(group_id)
        if error is _OK and group is None:
            if generation_id < 0:
                # Not using group management (standalone consumer): keep offsets only.
                group = self._new_group(group_id)
            else:
                # Kafka: a member of a generation of a group we do not know.
                error = ErrorCode.illegal_generation
        now = self._clock()
        if error is _OK and group is not None:
            error = group.validate_commit(
                member_id=member_id,
                group_instance_id=group_instance_id,
                generation_id=generation_id,
                now=now,
            )
        if error is not _OK or group is None:
            if group is not None:
                self._discard_if_pristine(group)
            return {tp: error for tp in offsets}
        results = await self._store_offsets(group_id, group, offsets)
        self._reschedule(group)
        self._discard_if_pristine(group)
        return results

    async def _store_offsets(
        self,
        group_id: str,
        group: Group | ConsumerGroup,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """Append the offsets, then make them the group's committed offsets; the error per partition."""
        now = self._clock()
        results: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata) > self._metadata_max:
                results[tp] = ErrorCode.offset_metadata_too_large
                continue
            accepted[tp] = CommittedOffset(
                offset=offset, leader_epoch=leader_epoch, metadata=metadata or "", commit_timestamp=now
            )
            results[tp] = _OK
        if accepted:
            records: list[Record] = [
                (
                    encode_key(OffsetCommitKey(group_id, topic, partition)),
                    encode_offset_commit_value(
                        OffsetCommitValue(
                            offset=c.offset,
                            leader_epoch=c.leader_epoch,
                            metadata=c.metadata,
                            commit_timestamp=c.commit_timestamp,
                        )
                    ),
                )
                for (topic, partition), c in accepted.items()
            ]
            append_error = await self._await_append(self._append(self._partition(group_id), records))
            if append_error is _OK:
                if self._lookup(group_id) is group:
                    group.apply_offsets(accepted)
            else:
                mapped = offset_commit_error(append_error)
                for tp in accepted:
                    results[tp] = mapped
        return {tp: results[tp] for tp in offsets}

    async def txn_offset_commit(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: dict[tuple[str, int], tuple[int, int, str | None]],
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: offsets appended inside the producer's transaction, visible on its COMMIT marker.

        KIP-447: a generation / member id, when given, is checked as for
        OffsetCommit; without one (generation -1) any group may be written,
        and an unknown group is created (Kafka's getOrMaybeCreateGroup).
        """
        error = self._status(group_id, allow_empty_id=False)
        group: Group | ConsumerGroup | None = self._lookup(group_id)
        if error is _OK and group is None:
            group = self._new_group(group_id)
        now = self._clock()
        if error is _OK and isinstance(group, ConsumerGroup):
            error = group.validate_commit(member_id=member_id, member_epoch=generation_id, api_version=9,
                                          transactional=True, instance_id=group_instance_id)
        elif error is _OK and isinstance(group, Group) and generation_id >= 0:
            error = group.validate_commit(
                member_id=member_id, group_instance_id=group_instance_id, generation_id=generation_id, now=now
            )
        if error is not _OK or group is None:
            if isinstance(group, Group):
                self._discard_if_pristine(group)
            return {tp: error for tp in offsets}
        results: dict[tuple[str, int], ErrorCode] = {}
        accepted: dict[tuple[str, int], CommittedOffset] = {}
        for tp, (offset, leader_epoch, metadata) in offsets.items():
            if metadata is not None and len(metadata) > self._metadata_max:
                results[tp] = ErrorCode.offset_metadata_too_large
                continue
            accepted[tp] = CommittedOffset(offset=offset, leader_epoch=leader_epoch, metadata=metadata or "",
                                           commit_timestamp=now)
            results[tp] = _OK
        if accepted:
            records: list[Record] = [
                (
                    encode_key(OffsetCommitKey(group_id, topic, partition)),
                    encode_offset_commit_value(OffsetCommitValue(
                        offset=c.offset, leader_epoch=c.leader_epoch, metadata=c.metadata,
                        commit_timestamp=c.commit_timestamp,
                    )),
                )
                for (topic, partition), c in accepted.items()
            ]
            partition = self._partition(group_id)

            async def run() -> ErrorCode:
                try:
                    await self._offsets_topic.append(partition, records, producer_id=producer_id,
                                                     producer_epoch=producer_epoch)
                except Exception as exc:
                    code = append_failure_code(exc)
                    if code is ErrorCode.unknown_server_error:
                        log.exception("__consumer_offsets-%d: transactional append failed", partition)
                    return code
                return _OK

            append_error = await self._await_append(self._spawn(run()))
            if append_error is _OK:
                self._pending_txn.setdefault(producer_id, {}).setdefault(group_id, {}).update(accepted)
            else:
                mapped = offset_commit_error(append_error)
                if append_error in (ErrorCode.invalid_producer_epoch, ErrorCode.invalid_txn_state):
                    mapped = append_error
                for tp in accepted:
                    results[tp] = mapped
        self._reschedule(group)
        return {tp: results[tp] for tp in offsets}

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> int:
        """The marker of `producer_id`'s transaction is in __consumer_offsets-`partition`:
        apply (COMMIT) or drop (ABORT) its pending offsets there; returns how many groups changed.

        While the partition is loading the completion waits for the load's end: the load's read of
        the log may have stopped before this marker, and its pending offsets are not installed yet.
        """
        if self._partitions.get(partition) is _Loading.LOADING:
            self._deferred_txn.setdefault(partition, []).append((producer_id, commit))
            return 0
        by_group = self._pending_txn.get(producer_id)
        if not by_group:
            return 0
        done = [gid for gid in by_group if self._partition(gid) == partition]
        for gid in done:
            offsets = by_group.pop(gid)
            group = self._lookup(gid)
            if commit and group is not None:
                group.apply_offsets(offsets)
                self._reschedule(group)
        if not by_group:
            del self._pending_txn[producer_id]
        return len(done)

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        return any(tp in by_group.get(group_id, {}) for by_group in self._pending_txn.values())

    async def fetch_offsets(
        self,
        *,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchOffsetsResult:
        """OffsetFetch; `partitions=None` means every partition the group committed.

        require_stable (KIP-447): a partition with a pending transactional
        offset answers UNSTABLE_OFFSET_COMMIT (retriable) instead of an offset.
        A member of a consumer group (OffsetFetch v9+) is checked by its member epoch.
        """
        error = self._status(group_id, allow_empty_id=True)
        group = self._lookup(group_id) if error is _OK else None
        if isinstance(group, ConsumerGroup):
            error = group.validate_fetch(member_id=member_id, member_epoch=member_epoch)
        if error is not _OK:
            return FetchOffsetsResult(error=error)
        committed = group.offsets if group is not None else {}
        if partitions is None:
            wanted = list(committed)
        else:
            wanted = list(partitions)
        out: dict[tuple[str, int], OffsetAndMetadata] = {}
        unstable: dict[tuple[str, int], ErrorCode] = {}
        for tp in wanted:
            c = committed.get(tp)
            # Kafka: nothing committed -> offset -1, no leader epoch, metadata "".
            out[tp] = OffsetAndMetadata(-1, -1, "") if c is None else OffsetAndMetadata(c.offset, c.leader_epoch, c.metadata)
            if require_stable and self.has_pending_txn_offset(group_id, tp):
                unstable[tp] = ErrorCode.unstable_offset_commit
        return FetchOffsetsResult(error=_OK, offsets=out, partition_errors=unstable)

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        """Committed offsets of a group coordinated here (for lag reporting); {} otherwise."""
        group = self._lookup(group_id)
        if group is None or self._partitions.get(self._partition(group_id)) is not _Loading.LOADED:
            return {}
        return {tp: c.offset for tp, c in group.offsets.items()}

    def stats(self, group_id: str) -> GroupStats | None:
        """Joins, leaves, rebalances and commits of a group coordinated here (for metrics and the dashboard)."""
        group = self._lookup(group_id)
        if group is None or self._partitions.get(self._partition(group_id)) is not _Loading.LOADED:
            return None
        return group.stats

    # ================================================================ admin: list, describe, delete

    def list_groups(
        self, states_filter: list[str] | None = None, types_filter: list[str] | None = None
    ) -> list[GroupListing]:
        """Groups of the loaded partitions; `states_filter` uses Kafka's state
        names, case-insensitively (KIP-518), `types_filter` the group types
        "classic" and "consumer" (KIP-848, ListGroups v5). Loading partitions
        are left out (see `loading_partitions`)."""
        if not self._active:
            return []
        wanted = {s.lower() for s in states_filter} if states_filter else None
        types = {t.lower() for t in types_filter} if types_filter else None
        out = []
        everything: list[tuple[str, Group | ConsumerGroup]] = [*self._groups.items(), *self._consumer_groups.items()]
        for group_id, group in everything:
            if self._partitions.get(self._partition(group_id)) is not _Loading.LOADED:
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
            error = self._status(group_id, allow_empty_id=True)
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
        now = self._clock()
        for group_id in dict.fromkeys(group_ids):
            error = self._status(group_id, allow_empty_id=True)
            cgroup = self._consumer_groups.get(group_id) if error is _OK else None
            if cgroup is not None:
                error = cgroup.deletion_error()
                results[group_id] = error
                if error is _OK:
                    partition = self._partition(group_id)
                    tombstones[partition].extend(tombstones_for(group_id, []))
                    tombstones[partition].extend(
                        (encode_key(OffsetCommitKey(group_id, topic, p)), None) for topic, p in cgroup.offsets
                    )
                    deleted[partition].append(group_id)
                    self._drop_consumer_group(group_id)
                continue
            group = self._groups.get(group_id)
            if error is _OK:
                error = ErrorCode.group_id_not_found if group is None else group.deletion_error()
            results[group_id] = error
            if error is not _OK or group is None:
                continue
            partition = self._partition(group_id)
            tombstones[partition].append((encode_key(GroupMetadataKey(group_id)), None))
            tombstones[partition].extend(
                (encode_key(OffsetCommitKey(group_id, topic, p)), None) for topic, p in group.offsets
            )
            deleted[partition].append(group_id)
            self._drop_group(group, ErrorCode.coordinator_not_available, now=now)
        for partition, records in tombstones.items():
            error = await self._await_append(self._append(partition, records))
            if error is not _OK:
                # The group is already gone from memory (as in Kafka); tell the admin
                # the tombstones did not land so it can retry the deletion.
                for group_id in deleted[partition]:
                    results[group_id] = group_store_error(error)
        return results

    # ================================================================ internals

    def _check_partition(self, partition: int) -> None:
        if not 0 <= partition < self._num_partitions:
            raise ValueError(f"partition {partition} is not in [0, {self._num_partitions})")

    def _partition(self, group_id: str) -> int:
        return partition_for_group(group_id, self._num_partitions)

    def _status(self, group_id: str, *, allow_empty_id: bool) -> ErrorCode:
        """Kafka validateGroupStatus: id, coordinator active, loading, ours."""
        if not group_id and not allow_empty_id:
            return ErrorCode.invalid_group_id
        if not self._active:
            return ErrorCode.coordinator_not_available
        status = self._partitions.get(self._partition(group_id))
        if status is None:
            return ErrorCode.not_coordinator
        if status is _Loading.LOADING:
            return ErrorCode.coordinator_load_in_progress
        return _OK

    def _lookup(self, group_id: str) -> Group | ConsumerGroup | None:
        """The group of either protocol that holds `group_id`."""
        group = self._groups.get(group_id)
        return group if group is not None else self._consumer_groups.get(group_id)

    def _new_group(self, group_id: str) -> Group:
        group = Group(group_id, initial_rebalance_delay_ms=self._initial_delay_ms, now=self._clock())
        self._groups[group_id] = group
        return group

    def _discard_if_pristine(self, group: Group) -> None:
        """Forget a group created by a request that then failed (nothing to keep)."""
        if self._groups.get(group.group_id) is group and group.is_pristine():
            del self._groups[group.group_id]
            self._cancel_timer(group.group_id)

    def _drop_group(self, group: Group, error: ErrorCode, *, now: int | None = None) -> None:
        group_id = group.group_id
        effects = group.mark_dead(error, self._clock() if now is None else now)
        self._apply(group, effects)
        if self._groups.get(group_id) is group:
            del self._groups[group_id]
        self._cancel_timer(group_id)
        # Anything still parked under this group id (superseded or orphaned) is answered too.
        for key in [k for k in self._join_waiters if k[0] == group_id]:
            self._resolve(self._join_waiters, key, JoinGroupResult(error=error, member_id=key[1]))
        for key in [k for k in self._sync_waiters if k[0] == group_id]:
            self._resolve(self._sync_waiters, key, SyncGroupResult(error=error))

    # ---------------------------------------------------------------- parking

    def _park(
        self, waiters: dict[tuple[str, str], asyncio.Future[R]], key: tuple[str, str], superseded: R
    ) -> asyncio.Future[R]:
        """A future for the caller; an older request of the same member parked
        under the same key is answered with `superseded` (its client retried)."""
        old = waiters.get(key)
        if old is not None and not old.done():
            old.set_result(superseded)
        future: asyncio.Future[R] = asyncio.get_running_loop().create_future()
        waiters[key] = future
        return future

    async def _wait(
        self, waiters: dict[tuple[str, str], asyncio.Future[R]], key: tuple[str, str], future: asyncio.Future[R]
    ) -> R:
        try:
            return await future
        finally:
            if waiters.get(key) is future:
                del waiters[key]

    @staticmethod
    def _resolve(waiters: dict[tuple[str, str], asyncio.Future[R]], key: tuple[str, str], result: R) -> None:
        future = waiters.pop(key, None)
        if future is not None and not future.done():
            future.set_result(result)

    # ---------------------------------------------------------------- effects

    def _apply(self, group: Group, effects: list[Effect]) -> None:
        group_id = group.group_id
        for effect in effects:
            if isinstance(effect, JoinReply):
                self._resolve(self._join_waiters, (group_id, effect.member_id), effect.result)
            elif isinstance(effect, SyncReply):
                self._resolve(self._sync_waiters, (group_id, effect.member_id), effect.result)
            elif isinstance(effect, StoreGroup):
                self._store_group(group, effect)
            else:  # pragma: no cover
                raise TypeError(f"unknown effect {effect!r}")
        self._reschedule(group)

    def _store_group(self, group: Group, effect: StoreGroup) -> None:
        records: list[Record] = [
            (encode_key(GroupMetadataKey(group.group_id)), encode_group_metadata_value(effect.value))
        ]
        append = self._append(self._partition(group.group_id), records)

        async def finish() -> None:
            error = await append
            if error is not _OK:
                error = group_store_error(error)
                log.warning("group %r: storing metadata failed: %s", group.group_id, error.name)
            if self._groups.get(group.group_id) is not group:
                return  # unloaded or deleted meanwhile; its parked requests were answered then
            self._apply(group, effect.on_done(error, self._clock()))

        self._spawn(finish())

    def _append(self, partition: int, records: list[Record]) -> asyncio.Task[ErrorCode]:
        """Start the append now (appends reach the topic in call order); the task
        yields the partition-level error code (NONE on success)."""

        async def run() -> ErrorCode:
            try:
                await self._offsets_topic.append(partition, records)
            except Exception as exc:  # translated at the boundary, never raised to a request
                code = append_failure_code(exc)
                if code is ErrorCode.unknown_server_error:
                    log.exception("__consumer_offsets-%d: append failed", partition)
                return code
            return _OK

        return self._spawn(run())

    @staticmethod
    async def _await_append(task: asyncio.Task[ErrorCode]) -> ErrorCode:
        """Await an append on behalf of a request. The append itself survives the
        request being cancelled (client gone); if `stop` cancelled the append,
        the request gets NOT_COORDINATOR."""
        try:
            return await asyncio.shield(task)
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if task.cancelled() and (current is None or not current.cancelling()):
                return ErrorCode.not_coordinator
            raise

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
        task = asyncio.get_running_loop().create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    # ---------------------------------------------------------------- timers

    def _reschedule(self, group: Group | ConsumerGroup) -> None:
        group_id = group.group_id
        if self._lookup(group_id) is not group:
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
        handle = self._scheduler.call_later(max(deadline - self._clock(), 0), lambda: self._on_timer(group))
        self._timers[group_id] = (deadline, handle)

    def _cancel_timer(self, group_id: str) -> None:
        current = self._timers.pop(group_id, None)
        if current is not None:
            current[1].cancel()

    def _on_timer(self, group: Group | ConsumerGroup) -> None:
        self._timers.pop(group.group_id, None)
        if self._lookup(group.group_id) is not group:
            return
        if isinstance(group, ConsumerGroup):
            expired, changed = group.on_timer(self._topic_image, self._clock())
            if expired:
                log.info("consumer group %r: members %s expired", group.group_id, ", ".join(expired))
            self._store_consumer_changes(group, changed)  # a failure is logged by the append
            self._reschedule(group)
            return
        self._apply(group, group.on_timer(self._clock()))
        self._discard_if_pristine(group)
