"""GroupCoordinator: the one object the broker talks to; a facade over the two managers.

Kafka's new group coordinator draws the same line: groups and membership (`group_manager`,
Kafka's GroupMetadataManager) and committed offsets (`offset_manager`, its OffsetMetadataManager),
both over one runtime (`runtime`: which __consumer_offsets partitions are coordinated here, the
request gate, ordered appends). This class wires them and keeps the API the handlers call; what
it does itself is the partition lifecycle, which touches both halves:

- `load_partition` reads the partition's log (yielding to the event loop as it goes), folds it
  with the pure `replay`, then installs open transactions, then groups with their offsets, and
  only then answers requests for them (COORDINATOR_LOAD_IN_PROGRESS meanwhile); transaction
  markers that landed during the load complete after it.
- `unload_partition` drops both halves' state of the partition; parked requests get NOT_COORDINATOR.

Precedent throughout: Kafka's GroupCoordinator.scala (3.x) and the group-coordinator module's
GroupCoordinatorService / GroupCoordinatorShard.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable, Sequence

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.assignors import DEFAULT_ASSIGNOR
from tinystream.broker.groups.consumer_group import ConsumerGroup, HeartbeatRequest, HeartbeatResult, TopicImage
from tinystream.broker.groups.group_manager import GroupManager, NoTopics
from tinystream.broker.groups.offset_manager import OffsetManager
from tinystream.broker.groups.offsets import OffsetRequest
from tinystream.broker.groups.persistence import OffsetsTopic
from tinystream.broker.groups.replay import PartitionReplay
from tinystream.broker.groups.results import (
    ConsumerGroupDescription,
    FetchOffsetsResult,
    GroupDescription,
    GroupListing,
    JoinGroupResult,
    LeaveGroupResult,
    SyncGroupResult,
)
from tinystream.broker.groups.runtime import CoordinatorRuntime, partition_for_group
from tinystream.broker.groups.stats import GroupStats
from tinystream.broker.groups.timers import LoopScheduler, Scheduler

__all__ = ["GroupCoordinator", "partition_for_group"]

log = logging.getLogger(__name__)

_LOAD_YIELD_EVERY = 1000  # records read between two yields to the event loop while loading


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


def _new_member_id(client_id: str) -> str:
    # Kafka: clientId + "-" + UUID
    return f"{client_id}-{uuid.uuid4()}"


class GroupCoordinator:
    """Coordinates the consumer groups of the loaded __consumer_offsets partitions."""

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
        self._runtime = CoordinatorRuntime(offsets_topic=offsets_topic, num_partitions=num_partitions, clock=clock)
        self._groups = GroupManager(
            runtime=self._runtime,
            scheduler=scheduler if scheduler is not None else LoopScheduler(),
            initial_rebalance_delay_ms=initial_rebalance_delay_ms,
            min_session_timeout_ms=min_session_timeout_ms,
            max_session_timeout_ms=max_session_timeout_ms,
            member_id_factory=member_id_factory,
            topic_image=topic_image if topic_image is not None else NoTopics(),
            consumer_session_timeout_ms=consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=consumer_heartbeat_interval_ms,
            consumer_assignors=consumer_assignors,
        )
        self._offsets = OffsetManager(runtime=self._runtime, groups=self._groups,
                                      metadata_max_bytes=offset_metadata_max_bytes)

    # ================================================================ lifecycle

    async def start(self) -> None:
        """Start answering requests (for the partitions loaded so far and later)."""
        self._runtime.active = True

    async def stop(self, *, drain_timeout_s: float = 5.0) -> None:
        """Stop: parked requests get NOT_COORDINATOR (the client rediscovers and
        retries), timers are cancelled, in-flight appends get `drain_timeout_s`."""
        self._runtime.active = False
        for partition in self._runtime.partitions():
            await self.unload_partition(partition)
        await self._runtime.drain(drain_timeout_s)

    async def load_partition(self, partition: int) -> None:
        """Become coordinator for `partition`: rebuild its groups and offsets from the log.

        Requests for its groups get COORDINATOR_LOAD_IN_PROGRESS meanwhile. A
        record we cannot decode is skipped with a warning. If reading fails
        the partition is dropped (NOT_COORDINATOR) and the error re-raised.
        """
        self._runtime.check_partition(partition)
        token = self._runtime.begin_load(partition)
        if token is None:
            return
        replay = await self._read(partition, token)
        if replay is None or not self._runtime.load_current(partition, token):
            return  # unloaded (or reloaded) while we read
        now = self._runtime.clock()
        self._offsets.install(replay)
        self._groups.install(replay, now)
        self._runtime.finish_load(partition)
        self._offsets.loaded(partition)
        log.info("__consumer_offsets-%d loaded: %d groups", partition, self._groups.count_in(partition))

    async def _read(self, partition: int, token: int) -> PartitionReplay | None:
        """Fold the partition's log, yielding to the event loop every so many records so a long log
        does not stall the other partitions' requests; None when the partition was unloaded meanwhile."""
        replay = PartitionReplay(partition)
        try:
            for count, entry in enumerate(self._runtime.offsets_topic.read(partition), 1):
                if replay.add(entry) and count % _LOAD_YIELD_EVERY == 0:
                    await asyncio.sleep(0)
                    if not self._runtime.load_current(partition, token):
                        return None
        except Exception:
            self._runtime.abandon_load(partition, token)
            raise
        return replay

    async def unload_partition(self, partition: int) -> None:
        """Stop coordinating `partition`: its groups go Dead, parked requests get NOT_COORDINATOR."""
        self._runtime.forget(partition)
        self._groups.unload(partition)
        self._offsets.unload(partition)

    def loading_partitions(self) -> frozenset[int]:
        """Partitions still loading (ListGroups answers COORDINATOR_LOAD_IN_PROGRESS while any are)."""
        return self._runtime.loading_partitions()

    def owned_partitions(self) -> frozenset[int]:
        """Partitions loaded or loading here."""
        return self._runtime.owned_partitions()

    # ================================================================ groups: JoinGroup, SyncGroup, Heartbeat, LeaveGroup

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
        return await self._groups.join_group(
            group_id=group_id, member_id=member_id, group_instance_id=group_instance_id,
            protocol_type=protocol_type, protocols=protocols, session_timeout_ms=session_timeout_ms,
            rebalance_timeout_ms=rebalance_timeout_ms, client_id=client_id, client_host=client_host,
            require_known_member_id=require_known_member_id,
        )

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
        return await self._groups.sync_group(
            group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, protocol_type=protocol_type, protocol_name=protocol_name,
            assignments=assignments,
        )

    async def heartbeat(
        self, *, group_id: str, generation_id: int, member_id: str, group_instance_id: str | None
    ) -> ErrorCode:
        return await self._groups.heartbeat(group_id=group_id, generation_id=generation_id, member_id=member_id,
                                            group_instance_id=group_instance_id)

    async def leave_group(self, *, group_id: str, members: list[tuple[str, str | None]]) -> LeaveGroupResult:
        return await self._groups.leave_group(group_id=group_id, members=members)

    # ================================================================ consumer groups (KIP-848)

    async def consumer_group_heartbeat(self, group_id: str, request: HeartbeatRequest) -> HeartbeatResult:
        """ConsumerGroupHeartbeat: answered at once, after the group epoch (if it moved) is durable."""
        return await self._groups.consumer_group_heartbeat(group_id, request)

    async def consumer_group_describe(self, group_ids: list[str]) -> list[ConsumerGroupDescription]:
        """ConsumerGroupDescribe (Kafka: GROUP_ID_NOT_FOUND for an unknown id or a classic group)."""
        return await self._groups.consumer_group_describe(group_ids)

    def consumer_group(self, group_id: str) -> ConsumerGroup | None:
        """A KIP-848 group coordinated here (read-only use: metrics, admin HTTP)."""
        return self._groups.consumer_group(group_id)

    # ================================================================ offsets

    async def commit_offsets(
        self,
        *,
        group_id: str,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: OffsetRequest,
        api_version: int = 9,
    ) -> dict[tuple[str, int], ErrorCode]:
        """OffsetCommit: (offset, leader epoch, metadata) per partition; answered once durable.

        For a consumer group (KIP-848) `generation_id` is the member epoch (OffsetCommit v9+).
        """
        return await self._offsets.commit_offsets(
            group_id=group_id, generation_id=generation_id, member_id=member_id,
            group_instance_id=group_instance_id, offsets=offsets, api_version=api_version,
        )

    async def txn_offset_commit(
        self,
        *,
        group_id: str,
        producer_id: int,
        producer_epoch: int,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
        offsets: OffsetRequest,
    ) -> dict[tuple[str, int], ErrorCode]:
        """TxnOffsetCommit: offsets appended inside the producer's transaction, visible on its COMMIT marker."""
        return await self._offsets.txn_offset_commit(
            group_id=group_id, producer_id=producer_id, producer_epoch=producer_epoch, generation_id=generation_id,
            member_id=member_id, group_instance_id=group_instance_id, offsets=offsets,
        )

    def complete_txn(self, partition: int, producer_id: int, commit: bool) -> int:
        """The marker of `producer_id`'s transaction is in __consumer_offsets-`partition`:
        apply (COMMIT) or drop (ABORT) its pending offsets there; returns how many groups changed."""
        return self._offsets.complete_txn(partition, producer_id, commit)

    def has_pending_txn_offset(self, group_id: str, tp: tuple[str, int]) -> bool:
        return self._offsets.has_pending_txn_offset(group_id, tp)

    async def fetch_offsets(
        self,
        *,
        group_id: str,
        partitions: list[tuple[str, int]] | None,
        require_stable: bool = False,
        member_id: str | None = None,
        member_epoch: int = -1,
    ) -> FetchOffsetsResult:
        """OffsetFetch; `partitions=None` means every partition the group committed."""
        return await self._offsets.fetch_offsets(group_id=group_id, partitions=partitions,
                                                 require_stable=require_stable, member_id=member_id,
                                                 member_epoch=member_epoch)

    def committed(self, group_id: str) -> dict[tuple[str, int], int]:
        """Committed offsets of a group coordinated here (for lag reporting); {} otherwise."""
        return self._offsets.committed(group_id)

    def stats(self, group_id: str) -> GroupStats | None:
        """Joins, leaves, rebalances and commits of a group coordinated here (for metrics and the dashboard)."""
        return self._groups.stats(group_id)

    # ================================================================ admin: list, describe, delete

    def list_groups(
        self, states_filter: list[str] | None = None, types_filter: list[str] | None = None
    ) -> list[GroupListing]:
        """Groups of the loaded partitions, filtered by Kafka's state names (KIP-518) and group
        types (KIP-848, ListGroups v5); loading partitions are left out (see `loading_partitions`)."""
        return self._groups.list_groups(states_filter, types_filter)

    def group_type(self, group_id: str) -> str:
        """ "consumer" for a KIP-848 group, "classic" otherwise (ListGroups v5's GroupType)."""
        return self._groups.group_type(group_id)

    async def describe_groups(self, group_ids: list[str]) -> list[GroupDescription]:
        return await self._groups.describe_groups(group_ids)

    async def delete_groups(self, group_ids: list[str]) -> dict[str, ErrorCode]:
        """DeleteGroups: only Empty groups; their metadata and offsets get tombstones."""
        return await self._groups.delete_groups(group_ids)
