"""Control traffic for the benchmarks over a raw connection: topics, offsets and client quotas.

Create a topic and wait for its leaders, read partition counts, read end
offsets (ListOffsets "latest", timestamp -1), set a client-id's quota. Kept
to the versions every target serves: Metadata v1, CreateTopics v4,
CreatePartitions v1, ListOffsets v1, AlterClientQuotas v0.
"""

from __future__ import annotations

import asyncio
import datetime
import time

from kio.schema.alter_client_quotas.v0.request import (
    AlterClientQuotasRequest,
    EntityData,
    EntryData,
    OpData,
)
from kio.schema.alter_client_quotas.v0.response import AlterClientQuotasResponse
from kio.schema.create_partitions.v1.request import CreatePartitionsRequest, CreatePartitionsTopic
from kio.schema.create_partitions.v1.response import CreatePartitionsResponse
from kio.schema.create_topics.v4.request import (
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from kio.schema.create_topics.v4.response import CreateTopicsResponse
from kio.schema.list_offsets.v1.request import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from kio.schema.list_offsets.v1.response import ListOffsetsResponse
from kio.schema.metadata.v1.request import MetadataRequest, MetadataRequestTopic
from kio.schema.metadata.v1.response import MetadataResponse
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import f64, i16, i32, i32Timedelta, i64

from tinystream.bench.wire_client import WireConnection

TOPIC_ALREADY_EXISTS = 36
LATEST = -1
# KRaft refuses a request that makes more than 10,000 metadata records ("excessively large batch
# operation"): a topic with more partitions is created in steps.
PARTITIONS_PER_REQUEST = 5000


class ControlError(RuntimeError):
    pass


async def partition_count(conn: WireConnection, topic: str) -> int:
    """Partitions with a leader (0 if the topic is unknown)."""
    response = await conn.request(MetadataRequest(topics=(MetadataRequestTopic(name=TopicName(topic)),)),
                                  MetadataResponse)
    for t in response.topics:
        if t.name == topic and t.error_code == 0:
            return sum(1 for p in t.partitions if p.leader_id >= 0 and p.error_code == 0)
    return 0


async def ensure_topic(conn: WireConnection, topic: str, partitions: int, *, config: dict[str, str] | None = None,
                       timeout: float = 30.0) -> bool:
    """Create `topic` unless it exists; wait until every partition has a leader. True if created."""
    request = CreateTopicsRequest(
        topics=(CreatableTopic(
            name=TopicName(topic), num_partitions=i32(min(partitions, PARTITIONS_PER_REQUEST)),
            replication_factor=i16(1), assignments=(),
            configs=tuple(CreatableTopicConfig(name=k, value=v) for k, v in (config or {}).items()),
        ),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=timeout)),
        validate_only=False,
    )
    response = await conn.request(request, CreateTopicsResponse)
    (result,) = response.topics
    created = result.error_code == 0
    if not created and result.error_code != TOPIC_ALREADY_EXISTS:
        raise ControlError(f"CreateTopics {topic}: error {int(result.error_code)} {result.error_message}")
    if created:
        for count in range(2 * PARTITIONS_PER_REQUEST, partitions + PARTITIONS_PER_REQUEST, PARTITIONS_PER_REQUEST):
            await _grow(conn, topic, min(count, partitions), timeout)
    deadline = time.monotonic() + timeout
    while await partition_count(conn, topic) < partitions:
        if time.monotonic() > deadline:
            raise ControlError(f"topic {topic} has no leader for every partition after {timeout}s")
        await asyncio.sleep(0.1)
    return created


RETRIABLE = {3, 5, 6}  # UNKNOWN_TOPIC_OR_PARTITION, LEADER_NOT_AVAILABLE, NOT_LEADER_OR_FOLLOWER


async def _grow(conn: WireConnection, topic: str, count: int, timeout: float) -> None:
    request = CreatePartitionsRequest(
        topics=(CreatePartitionsTopic(name=TopicName(topic), count=i32(count), assignments=None),),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=timeout)), validate_only=False)
    (result,) = (await conn.request(request, CreatePartitionsResponse)).results
    if result.error_code != 0:
        raise ControlError(f"CreatePartitions {topic} to {count}: error {int(result.error_code)} {result.error_message}")


async def end_offsets(conn: WireConnection, topic: str, partitions: int, *, timeout: float = 30.0) -> dict[int, int]:
    """partition -> end offset; retries while a new topic's partitions are still coming up."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await _end_offsets_once(conn, topic, partitions)
        except _Retriable:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.1)


class _Retriable(ControlError):
    pass


async def _end_offsets_once(conn: WireConnection, topic: str, partitions: int) -> dict[int, int]:
    request = ListOffsetsRequest(
        replica_id=BrokerId(-1),
        topics=(ListOffsetsTopic(name=TopicName(topic), partitions=tuple(
            ListOffsetsPartition(partition_index=i32(p), timestamp=i64(LATEST)) for p in range(partitions))),),
    )
    response = await conn.request(request, ListOffsetsResponse)
    out: dict[int, int] = {}
    for t in response.topics:
        for p in t.partitions:
            if p.error_code in RETRIABLE:
                raise _Retriable(f"ListOffsets {topic}-{p.partition_index}: error {int(p.error_code)}")
            if p.error_code != 0:
                raise ControlError(f"ListOffsets {topic}-{p.partition_index}: error {int(p.error_code)}")
            out[int(p.partition_index)] = int(p.offset)
    return out


async def set_client_quota(conn: WireConnection, client_id: str, key: str, value: float | None) -> None:
    """Set (or, with value None, remove) one quota of the entity client-id=`client_id` (KIP-546)."""
    op = OpData(key=key, value=f64(0.0 if value is None else value), remove=value is None)
    request = AlterClientQuotasRequest(entries=(EntryData(
        entity=(EntityData(entity_type="client-id", entity_name=client_id),), ops=(op,)),), validate_only=False)
    response = await conn.request(request, AlterClientQuotasResponse)
    for entry in response.entries:
        if entry.error_code != 0:
            raise ControlError(f"AlterClientQuotas client-id={client_id} {key}: error {int(entry.error_code)} "
                               f"{entry.error_message}")
