"""Metadata (key 3, v0-12): brokers, cluster id, controller, topics and their partitions.

Topic selection: v0 with an empty list and v1+ with a null list mean every
topic; v10+ may name a topic by id instead of by name. A missing topic is
created when the request allows it (v4+ `allow_auto_topic_creation`; always
before v4) and `auto.create.topics.enable` is on; creation happens before the
answer, so the client sees the topic ready instead of LEADER_NOT_AVAILABLE.

Authorization (authz.RULES): "every topic" leaves out those the caller may
not DESCRIBE; a topic asked by name that it may not DESCRIBE is
TOPIC_AUTHORIZATION_FAILED (whether or not it exists, so nothing leaks); a
missing one is auto-created only with CREATE on the cluster or the topic,
else TOPIC_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz, topic_routing
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.metadata.topics import InvalidTopicName, TopicSpec, validate_topic_name
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage.topic_partition import TopicPartition

#: Kafka's "authorized operations not requested / unknown" marker.
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)


async def handle_metadata(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    requested = body.topics
    everything = requested is None or (call.version == 0 and not requested)
    allow_auto = bool(getattr(body, "allow_auto_topic_creation", True)) and ctx.settings.auto_create_topics_enable
    entries = []
    if everything:
        may_describe = authz.topic_filter(ctx, call, AclOperation.DESCRIBE)
        entries = [_topic_entry(ctx, call, spec) for spec in ctx.topics.topics() if may_describe(spec.name)]
    else:
        for item in requested:
            entries.append(await _lookup(ctx, call, item, allow_auto))
    brokers = tuple(
        call.make("MetadataResponseBroker", node_id=b.broker_id, host=b.host, port=b.port, rack=b.rack)
        for b in ctx.cluster.brokers(call.client.listener)  # that listener's endpoints (Kafka's rule)
    )
    return call.respond(
        throttle_time=millis(0),
        brokers=brokers,
        cluster_id=ctx.cluster.cluster_id,
        controller_id=ctx.cluster.controller_id,
        topics=tuple(entries),
        cluster_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


async def _lookup(ctx: BrokerContext, call: Call, item: Any, allow_auto: bool) -> Any:
    name = item.name
    if name is None:  # v10+: by topic id
        topic_id = getattr(item, "topic_id", None)
        spec = ctx.topics.store.by_id(topic_id) if topic_id is not None else None
        if spec is None:
            return _error_entry(call, None, ErrorCode.unknown_topic_id, topic_id=topic_id)
        if not authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.TOPIC, spec.name):
            return _error_entry(call, None, ErrorCode.topic_authorization_failed, topic_id=topic_id)
        return _topic_entry(ctx, call, spec)
    if not authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.TOPIC, name):
        return _error_entry(call, name, ErrorCode.topic_authorization_failed)
    spec = ctx.topics.get(name)
    if spec is not None:
        return _topic_entry(ctx, call, spec)
    try:
        validate_topic_name(name)
    except InvalidTopicName:
        return _error_entry(call, name, ErrorCode.invalid_topic_exception)
    if not allow_auto:
        return _error_entry(call, name, ErrorCode.unknown_topic_or_partition)
    if not (authz.allowed_cluster(ctx, call, AclOperation.CREATE)
            or authz.allowed(ctx, call, AclOperation.CREATE, authz.TOPIC, name)):
        return _error_entry(call, name, ErrorCode.topic_authorization_failed)
    result = await topic_routing.auto_create(ctx, name)
    if result.spec is None or result.error not in (ErrorCode.none, ErrorCode.topic_already_exists):
        error = result.error if result.error != ErrorCode.none else ErrorCode.unknown_topic_or_partition
        return _error_entry(call, name, error)
    spec = ctx.topics.get(name) or result.spec
    return _topic_entry(ctx, call, spec)


def _error_entry(call: Call, name: str | None, error: ErrorCode, topic_id: Any = None) -> Any:
    return call.make(
        "MetadataResponseTopic",
        error_code=error,
        name=name if name is not None or call.version >= 12 else "",
        topic_id=topic_id,
        is_internal=False,
        partitions=(),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )


def _topic_entry(ctx: BrokerContext, call: Call, spec: TopicSpec) -> Any:
    partitions = []
    for index in range(spec.partitions):
        state = ctx.topics.partition_state(TopicPartition(spec.name, index))
        partitions.append(
            call.make(
                "MetadataResponsePartition",
                error_code=ErrorCode.none if state.leader >= 0 else ErrorCode.leader_not_available,
                partition_index=index,
                leader_id=state.leader,
                leader_epoch=state.leader_epoch,
                replica_nodes=state.replicas,
                isr_nodes=state.isr,
                offline_replicas=(),
            )
        )
    return call.make(
        "MetadataResponseTopic",
        error_code=ErrorCode.none,
        name=spec.name,
        topic_id=spec.topic_id,
        is_internal=spec.internal,
        partitions=tuple(partitions),
        topic_authorized_operations=AUTHORIZED_OPERATIONS_OMITTED,
    )
