"""ListOffsets (key 2, v1-10) and OffsetForLeaderEpoch (key 23, v2-4).

ListOffsets timestamps (Kafka's ListOffsetsRequest):
  -2 EARLIEST: the log start offset;
  -4 EARLIEST_LOCAL (v8+, KIP-405): the first offset on local disk, which is
     the log start offset here (no tiered storage), as Kafka answers for a
     topic without remote storage;
  -5 EARLIEST_PENDING_UPLOAD (v9+, KIP-1005): nothing is pending upload
     without tiered storage: -1, as Kafka answers for such topics;
  -1 LATEST: the high watermark for read_uncommitted clients, the last
     stable offset for read_committed ones (isolation_level 1, v2+: KIP-98),
     the log end offset for a follower (replica_id >= 0);
  -3 MAX_TIMESTAMP (v7, KIP-734): the record with the largest timestamp; the
     winning batch is found from batch headers and only it is decoded;
  >= 0: the first RECORD whose timestamp is at or after it: the log's time
     index finds the batch, and only that batch is decoded (not the produce
     or fetch path); -1/-1 when none is below the high watermark.
The answer's leader_epoch (v4+) is the epoch that wrote the offset.

OffsetForLeaderEpoch answers (largest epoch <= the asked one, its end
offset), which followers use to truncate and consumers to detect truncation
after a leader change (KIP-101, KIP-320).
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode, code_for_log_error
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.replication.partition import Partition
from tinystream.broker.storage.base import LogError
from tinystream.broker.storage.batch import TIMESTAMP_TYPE_BIT, BatchHeader, decode_records
from tinystream.broker.storage.log_scan import scan_batches
from tinystream.broker.storage.topic_partition import TopicPartition

EARLIEST = -2
LATEST = -1
MAX_TIMESTAMP = -3
EARLIEST_LOCAL = -4
EARLIEST_PENDING_UPLOAD = -5


async def handle_list_offsets(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    for_replica = body.replica_id >= 0
    read_committed = getattr(body, "isolation_level", 0) == 1
    may_describe = authz.topic_filter(ctx, call, AclOperation.DESCRIBE)
    topics = []
    for topic in body.topics:
        parts = []
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if not may_describe(topic.name):
                error, timestamp, offset, epoch = ErrorCode.topic_authorization_failed, -1, -1, -1
            else:
                error, timestamp, offset, epoch = _answer(
                    ctx, tp, p.timestamp, getattr(p, "current_leader_epoch", -1), for_replica, read_committed
                )
            parts.append(
                call.make(
                    "ListOffsetsPartitionResponse",
                    partition_index=p.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=epoch,
                    old_style_offsets=(),
                )
            )
        topics.append(call.make("ListOffsetsTopicResponse", name=topic.name, partitions=tuple(parts)))
    return call.respond(throttle_time=millis(0), topics=tuple(topics))


def _answer(
    ctx: BrokerContext, tp: TopicPartition, timestamp: int, current_epoch: int, for_replica: bool,
    read_committed: bool = False,
) -> tuple[ErrorCode, int, int, int]:
    partition = ctx.replicas.get(tp)
    if partition is None:
        return ErrorCode.unknown_topic_or_partition, -1, -1, -1
    if not partition.is_leader:
        return ErrorCode.not_leader_or_follower, -1, -1, -1
    error = partition.check_leader_epoch(current_epoch)
    if error != ErrorCode.none:
        return error, -1, -1, -1
    try:
        if timestamp in (EARLIEST, EARLIEST_LOCAL):
            offset = partition.log_start_offset
            return ErrorCode.none, -1, offset, epoch_at(partition, offset)
        if timestamp == EARLIEST_PENDING_UPLOAD:
            return ErrorCode.none, -1, -1, -1
        if timestamp == LATEST:
            if for_replica:
                offset = partition.log_end_offset
            else:
                offset = partition.last_stable_offset if read_committed else partition.high_watermark
            return ErrorCode.none, -1, offset, partition.leader_epoch
        if timestamp == MAX_TIMESTAMP:
            found = max_timestamp_offset(partition)
            if found is None:
                return ErrorCode.none, -1, -1, -1
            ts, offset = found
            return ErrorCode.none, ts, offset, epoch_at(partition, offset)
        found_ts = partition.log.offset_for_timestamp(timestamp)
        limit = partition.log_end_offset if for_replica else partition.high_watermark
        if found_ts is None or found_ts.offset >= limit:
            return ErrorCode.none, -1, -1, -1
        ts, offset = first_record_at_or_after(partition, found_ts.offset, timestamp, found_ts.timestamp)
        if offset >= limit:
            return ErrorCode.none, -1, -1, -1
        return ErrorCode.none, ts, offset, epoch_at(partition, offset)
    except LogError as exc:
        return code_for_log_error(exc), -1, -1, -1


def epoch_at(partition: Partition, offset: int) -> int:
    """The leader epoch that wrote `offset` (the last epoch starting at or before it)."""
    epoch = -1
    for entry in partition.log.epoch_entries():
        if entry.start_offset <= offset:
            epoch = entry.epoch
        else:
            break
    return epoch if epoch >= 0 else partition.leader_epoch


def first_record_at_or_after(partition: Partition, offset: int, target: int, batch_ts: int) -> tuple[int, int]:
    """(timestamp, offset) of the first record at or after `offset` whose timestamp is >= `target`.

    The log's time index locates the batch (by its max timestamp); only that
    one batch is decoded here, so the produce and fetch paths never are. A
    LogAppendTime batch stamps every record with its max timestamp. If the
    batch cannot be decoded, the located offset stands (Kafka's pre-fix answer).
    """
    for header, batch in scan_batches(partition.log, offset, offset + 1):
        base = header.base_offset
        if header.attributes & TIMESTAMP_TYPE_BIT:
            return header.max_timestamp, max(base, offset)
        try:
            records = decode_records(batch)
        except LogError:
            return batch_ts, offset
        for index, record in enumerate(records):
            record_offset = base + (record.offset_delta if record.offset_delta is not None else index)
            record_ts = header.base_timestamp + record.timestamp_delta
            if record_offset >= offset and record_ts >= target:
                return record_ts, record_offset
        break
    return batch_ts, offset


def max_timestamp_offset(partition: Partition) -> tuple[int, int] | None:
    """(timestamp, offset) of the first record carrying the log's largest timestamp, below the HW."""
    best: BatchHeader | None = None
    best_batch: memoryview | None = None
    for header, batch in scan_batches(partition.log, partition.log_start_offset, partition.high_watermark):
        if best is None or header.max_timestamp > best.max_timestamp:
            best, best_batch = header, batch
    if best is None or best_batch is None or best.max_timestamp < 0:
        return None
    ts, base = best.max_timestamp, best.base_offset
    if best.attributes & TIMESTAMP_TYPE_BIT or best.last_offset_delta == 0:
        return ts, base  # LogAppendTime: every record carries it
    try:
        records = decode_records(best_batch)
    except LogError:
        return ts, base
    for record in records:
        if best.base_timestamp + record.timestamp_delta == ts:
            return ts, base + (record.offset_delta or 0)
    return ts, base


async def handle_offset_for_leader_epoch(ctx: BrokerContext, call: Call) -> Any:
    # A follower (replica_id >= 0, v3+) needs CLUSTER_ACTION; a consumer DESCRIBE on the topic (Kafka's rule).
    follower = getattr(call.body, "replica_id", -1) >= 0
    cluster_refused = follower and not authz.allowed_cluster(ctx, call, AclOperation.CLUSTER_ACTION)
    may_describe = authz.topic_filter(ctx, call, AclOperation.DESCRIBE)
    topics = []
    for topic in call.body.topics:
        parts = []
        for p in topic.partitions:
            tp = TopicPartition(topic.topic, p.partition)
            partition = ctx.replicas.get(tp)
            epoch, end = -1, -1
            if cluster_refused:
                error = ErrorCode.cluster_authorization_failed
            elif not follower and not may_describe(topic.topic):
                error = ErrorCode.topic_authorization_failed
            elif partition is None:
                error = ErrorCode.unknown_topic_or_partition
            elif not partition.is_leader:
                error = ErrorCode.not_leader_or_follower
            else:
                error = partition.check_leader_epoch(getattr(p, "current_leader_epoch", -1))
                if error == ErrorCode.none:
                    epoch, end = partition.end_offset_for_epoch(p.leader_epoch)
            parts.append(
                call.make("EpochEndOffset", error_code=error, partition=p.partition, leader_epoch=epoch, end_offset=end)
            )
        topics.append(call.make("OffsetForLeaderTopicResult", topic=topic.topic, partitions=tuple(parts)))
    return call.respond(throttle_time=millis(0), topics=tuple(topics))
