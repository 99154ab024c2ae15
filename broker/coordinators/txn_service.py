"""Runs the transaction coordinator on this broker and tells it which __transaction_state partitions it leads.

The coordinator (`tinystream.broker.transactions`) does no I/O of its own;
this module gives it `LogTxnStateTopic` (its state, appended acks=all to
the compacted internal topic), `MarkerChannel` (WriteTxnMarkers to partition
leaders), producer ids from the broker's `ProducerIdManager`, and Kafka's
partitioning of transactional ids (the group id hash: Utils.abs(hashCode) %
transaction.state.log.num.partitions). __transaction_state is created on
first use (FindCoordinator with key type 1, as Kafka does), and a partition
is loaded whenever this broker becomes its leader (at start, on creation,
on leader changes from the controller's image), at a coordinator epoch equal
to the partition's leader epoch, so markers from a deposed coordinator are
refused (TRANSACTION_COORDINATOR_FENCED).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from tinystream.broker.coordinators.group_service import GroupService
from tinystream.broker.coordinators.offsets_topic import LogTxnStateTopic
from tinystream.broker.coordinators.producer_ids import ProducerIdManager
from tinystream.broker.coordinators.txn_markers import MarkerChannel
from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.coordinator import partition_for_group
from tinystream.broker.metadata.cluster import ClusterView
from tinystream.broker.metadata.topics import TRANSACTION_STATE_TOPIC, TopicSpec
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.topics.manager import TopicManager
from tinystream.broker.transactions.coordinator import TransactionCoordinator
from tinystream.config.settings import BrokerSettings

log = logging.getLogger(__name__)


class TransactionService:
    def __init__(
        self,
        *,
        settings: BrokerSettings,
        topics: TopicManager,
        replicas: ReplicaManager,
        cluster: ClusterView,
        producer_ids: Callable[[], ProducerIdManager],
        groups: GroupService | None,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._replicas = replicas
        self._broker_id = settings.broker_id
        existing = topics.get(TRANSACTION_STATE_TOPIC)
        self.num_partitions = (
            existing.partitions if existing is not None else settings.transaction_state_log_num_partitions
        )
        self.markers = MarkerChannel(replicas=replicas, topics=topics, cluster=cluster, groups=groups)

        async def next_producer_id() -> int:
            return await producer_ids().next_id()  # looked up late: a controller session swaps the manager

        self.coordinator = TransactionCoordinator(
            state_log=LogTxnStateTopic(replicas, clock),
            markers=self.markers,
            next_producer_id=next_producer_id,
            partition_for=self.partition_for,
            clock=clock,
            max_timeout_ms=settings.transaction_max_timeout_ms,
            abort_check_interval_ms=settings.transaction_abort_timed_out_transaction_cleanup_interval_ms,
            id_expiration_ms=settings.transactional_id_expiration_ms,
        )
        self._loads: set[asyncio.Task[Any]] = set()
        topics.on_partitions_opened.append(self._on_partitions_opened)

    def partition_for(self, transactional_id: str) -> int:
        """Kafka's TransactionStateManager.partitionFor: the same hash as group ids."""
        return partition_for_group(transactional_id, self.num_partitions)

    async def start(self, *, load_local: bool = True) -> None:
        await self.coordinator.start()
        spec = self._topics.get(TRANSACTION_STATE_TOPIC)
        if load_local and spec is not None:
            self._on_partitions_opened(spec, range(spec.partitions))

    async def stop(self) -> None:
        for task in list(self._loads):
            task.cancel()
        await asyncio.gather(*self._loads, return_exceptions=True)
        await self.coordinator.stop()
        await self.markers.close()

    async def verify(
        self, *, transactional_id: str, producer_id: int, producer_epoch: int, partitions: list[tuple[str, int]]
    ) -> dict[tuple[str, int], ErrorCode]:
        """KIP-890: is each partition in the id's Ongoing transaction? The local coordinator answers at once;
        another broker's is asked (AddPartitionsToTxn verify_only)."""
        coordinator = self.coordinator
        if coordinator.coordinates(transactional_id):
            return coordinator.verify_partitions(transactional_id=transactional_id, producer_id=producer_id,
                                                 producer_epoch=producer_epoch, partitions=partitions)
        state = self._topics.partition_state(TopicPartition(TRANSACTION_STATE_TOPIC, self.partition_for(transactional_id)))
        if state.leader < 0 or state.leader == self._broker_id:
            return {tp: ErrorCode.coordinator_not_available for tp in partitions}
        return await self.markers.verify(state.leader, transactional_id=transactional_id, producer_id=producer_id,
                                         producer_epoch=producer_epoch, partitions=partitions)

    def leadership_changed(self, index: int, *, leader: bool, leader_epoch: int) -> None:
        """The controller's image made this broker leader (or not) of __transaction_state-`index`."""
        if leader:
            self._spawn_load(index, leader_epoch)
        else:
            self.coordinator.unload_partition(index)

    def _on_partitions_opened(self, spec: TopicSpec, indexes: range) -> None:
        if spec.name != TRANSACTION_STATE_TOPIC:
            return
        self.num_partitions = spec.partitions
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # opened before the loop runs (start-up): `start` loads them
        for index in indexes:
            partition = self._replicas.get(TopicPartition(TRANSACTION_STATE_TOPIC, index))
            if partition is None or not partition.is_leader:
                continue
            self._spawn_load(index, partition.leader_epoch)

    def _spawn_load(self, index: int, epoch: int) -> None:
        task = asyncio.ensure_future(self._load(index, epoch))
        self._loads.add(task)
        task.add_done_callback(self._loads.discard)

    async def _load(self, index: int, epoch: int) -> None:
        try:
            await self.coordinator.load_partition(index, epoch)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading __transaction_state-%d into the transaction coordinator failed", index)
