"""Runs the group coordinator on this broker and tells it which offsets partitions it leads.

The coordinator (`tinystream.broker.groups`) is pure of I/O apart from its
`OffsetsTopic`; this module gives it `LogOffsetsTopic`, creates
__consumer_offsets on first use (FindCoordinator, as Kafka does), and loads a
partition's groups into the coordinator whenever this broker opens (leads)
that partition — at start, on creation, and later on leader changes. Consumer
groups (KIP-848) read the topics through `TopicsView`, to assign partitions.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from typing import Any

from tinystream.broker.coordinators.offsets_topic import LogOffsetsTopic
from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.coordinator import GroupCoordinator, partition_for_group
from tinystream.broker.metadata.topics import OFFSETS_TOPIC, TopicSpec
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.topics.manager import TopicManager
from tinystream.config.settings import BrokerSettings

log = logging.getLogger(__name__)


class TopicsView:
    """The broker's topics as KIP-848 consumer groups see them (the groups package's TopicImage)."""

    def __init__(self, topics: TopicManager) -> None:
        self._topics = topics

    def partition_count(self, topic: str) -> int | None:
        spec = self._topics.get(topic)
        return spec.partitions if spec is not None else None

    def topic_names(self) -> list[str]:
        return [spec.name for spec in self._topics.topics()]

    def topic_id(self, topic: str) -> uuid.UUID | None:
        spec = self._topics.get(topic)
        return spec.topic_id if spec is not None else None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        spec = self._topics.store.by_id(topic_id)
        return spec.name if spec is not None else None


class GroupService:
    def __init__(
        self,
        *,
        settings: BrokerSettings,
        topics: TopicManager,
        replicas: ReplicaManager,
        clock: Callable[[], int],
    ) -> None:
        self._topics = topics
        self._replicas = replicas
        existing = topics.get(OFFSETS_TOPIC)
        self.num_partitions = existing.partitions if existing is not None else settings.offsets_topic_num_partitions
        self.offsets_topic = LogOffsetsTopic(replicas, clock)
        self.coordinator = GroupCoordinator(
            offsets_topic=self.offsets_topic,
            num_partitions=self.num_partitions,
            clock=clock,
            initial_rebalance_delay_ms=settings.group_initial_rebalance_delay_ms,
            min_session_timeout_ms=settings.group_min_session_timeout_ms,
            max_session_timeout_ms=settings.group_max_session_timeout_ms,
            topic_image=TopicsView(topics),
            consumer_session_timeout_ms=settings.group_consumer_session_timeout_ms,
            consumer_heartbeat_interval_ms=settings.group_consumer_heartbeat_interval_ms,
            consumer_assignors=[name.strip() for name in settings.group_consumer_assignors.split(",")],
        )
        self._loads: set[asyncio.Task[Any]] = set()
        topics.on_partitions_opened.append(self._on_partitions_opened)

    async def start(self) -> None:
        await self.coordinator.start()
        spec = self._topics.get(OFFSETS_TOPIC)
        if spec is not None:
            self._on_partitions_opened(spec, range(spec.partitions))

    async def stop(self) -> None:
        for task in list(self._loads):
            task.cancel()
        await asyncio.gather(*self._loads, return_exceptions=True)
        await self.coordinator.stop()

    def partition_for(self, group_id: str) -> int:
        return partition_for_group(group_id, self.num_partitions)

    def ensure_offsets_topic(self) -> tuple[ErrorCode, str | None]:
        """Create __consumer_offsets if it is missing (its partitions then start loading)."""
        result = self._topics.ensure_offsets_topic()
        return result.error, result.message

    def _on_partitions_opened(self, spec: TopicSpec, indexes: range) -> None:
        if spec.name != OFFSETS_TOPIC:
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return  # opened before the loop runs (start-up): `start` loads them
        for index in indexes:
            partition = self._replicas.get(TopicPartition(OFFSETS_TOPIC, index))
            if partition is None or not partition.is_leader:
                continue
            task = asyncio.ensure_future(self._load(index))
            self._loads.add(task)
            task.add_done_callback(self._loads.discard)

    async def _load(self, index: int) -> None:
        try:
            await self.coordinator.load_partition(index)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("loading __consumer_offsets-%d into the group coordinator failed", index)
