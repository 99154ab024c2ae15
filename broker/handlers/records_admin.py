"""DeleteRecords (key 21, v0-2): move a partition's log start offset forward.

Kafka's rules: offset -1 means "up to the high watermark"; an offset past the
high watermark is OFFSET_OUT_OF_RANGE; a lower one than the current log start
changes nothing. The answer's low_watermark is the log start afterwards.
DELETE on the topic is needed (else TOPIC_AUTHORIZATION_FAILED).
Whole segments below it are deleted by the log; the rest become unreadable.
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode, code_for_log_error
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage.base import LogError
from tinystream.broker.storage.topic_partition import TopicPartition

HIGH_WATERMARK = -1


async def handle_delete_records(ctx: BrokerContext, call: Call) -> Any:
    topics = []
    may_delete = authz.topic_filter(ctx, call, AclOperation.DELETE)
    for topic in call.body.topics:
        parts = []
        for p in topic.partitions:
            if not may_delete(topic.name):
                error, low = ErrorCode.topic_authorization_failed, -1
            else:
                error, low = _delete(ctx, TopicPartition(topic.name, p.partition_index), p.offset)
            parts.append(
                call.make("DeleteRecordsPartitionResult", partition_index=p.partition_index, low_watermark=low, error_code=error)
            )
        topics.append(call.make("DeleteRecordsTopicResult", name=topic.name, partitions=tuple(parts)))
    return call.respond(throttle_time=millis(0), topics=tuple(topics))


def _delete(ctx: BrokerContext, tp: TopicPartition, offset: int) -> tuple[ErrorCode, int]:
    partition = ctx.replicas.get(tp)
    if partition is None:
        return ErrorCode.unknown_topic_or_partition, -1
    if not partition.is_leader:
        return ErrorCode.not_leader_or_follower, -1
    hw = partition.high_watermark
    if offset == HIGH_WATERMARK:
        offset = hw
    if offset < 0 or offset > hw:
        return ErrorCode.offset_out_of_range, partition.log_start_offset
    try:
        if offset > partition.log_start_offset:
            partition.log.advance_log_start(offset)
    except LogError as exc:
        return code_for_log_error(exc), partition.log_start_offset
    return ErrorCode.none, partition.log_start_offset
