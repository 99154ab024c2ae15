"""CreateTopics (19, v2-7), DeleteTopics (20, v1-6), CreatePartitions (37, v0-3).

The checks and their error codes live in `TopicManager`; this module maps
requests onto it and results back. Changes are synchronous, so the request
timeout never expires and a success means the topic is ready. A name that
appears twice in one request is refused for both entries (INVALID_REQUEST),
as Kafka does.

Authorization (authz.RULES): CREATE on the cluster or the topic to create it
(its configs in the answer need DESCRIBE_CONFIGS, else the answer's
topic_config_error_code is TOPIC_AUTHORIZATION_FAILED as Kafka puts it),
DELETE on the topic to delete it, ALTER on it to add partitions; a refusal is
TOPIC_AUTHORIZATION_FAILED for that topic only.

controller_mutation_rate (KIP-599, shared/mutation_quota.py): after those
checks, a topic whose client is over its quota is THROTTLING_QUOTA_EXCEEDED on
new-enough versions; each change done spends its partitions.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.configs import describe_topic
from tinystream.broker.handlers.shared import authz, topic_routing
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.handlers.shared.mutation_quota import MESSAGE, MutationGate


async def handle_create_topics(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    counts = Counter(t.name for t in body.topics)
    cluster_create = authz.allowed_cluster(ctx, call, AclOperation.CREATE)
    quota = MutationGate(ctx, call)
    results = []
    for topic in body.topics:
        if counts[topic.name] > 1:
            results.append(_created(ctx, call, topic.name, ErrorCode.invalid_request, "topic named twice in one request"))
            continue
        if not cluster_create and not authz.allowed(ctx, call, AclOperation.CREATE, authz.TOPIC, topic.name):
            results.append(_created(ctx, call, topic.name, ErrorCode.topic_authorization_failed, None))
            continue
        if quota.refused():
            results.append(_created(ctx, call, topic.name, ErrorCode.throttling_quota_exceeded, MESSAGE))
            continue
        assignments = {a.partition_index: list(a.broker_ids) for a in topic.assignments} or None
        configs = {c.name: c.value for c in topic.configs}
        result = await topic_routing.create_topic(
            ctx,
            topic.name,
            num_partitions=topic.num_partitions,
            replication_factor=topic.replication_factor,
            configs=configs,
            assignments=assignments,
            validate_only=body.validate_only,
        )
        if result.error == ErrorCode.none and result.spec is not None and not body.validate_only:
            quota.spent(result.spec.partitions)
        results.append(_created(ctx, call, topic.name, result.error, result.message, result.spec))
    return call.respond(throttle_time=quota.throttle_time(), topics=tuple(results))


def _created(ctx: BrokerContext, call: Call, name: str, error: ErrorCode, message: str | None, spec: Any = None) -> Any:
    configs = None
    config_error = ErrorCode.none
    if spec is not None and not authz.allowed(ctx, call, AclOperation.DESCRIBE_CONFIGS, authz.TOPIC, name):
        config_error = ErrorCode.topic_authorization_failed  # Kafka: created, but its configs are not shown
    elif spec is not None and error == ErrorCode.none and call.version >= 5:  # v5+ report the topic's configs
        configs = tuple(
            call.make(
                "CreatableTopicConfigs",
                name=c.name,
                value=c.value,
                read_only=False,
                config_source=int(c.source),
                is_sensitive=False,
            )
            for c in describe_topic(ctx, spec.configs)
        )
    return call.make(
        "CreatableTopicResult",
        name=name,
        topic_id=spec.topic_id if spec is not None and error == ErrorCode.none else None,
        error_code=error,
        error_message=message if error != ErrorCode.none else None,
        num_partitions=spec.partitions if spec is not None and error == ErrorCode.none else -1,
        replication_factor=spec.replication_factor if spec is not None and error == ErrorCode.none else -1,
        configs=configs,
        topic_config_error_code=config_error,
    )


async def handle_delete_topics(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if hasattr(body, "topics"):  # v6: names or ids
        wanted = [(t.name, t.topic_id) for t in body.topics]
    else:
        wanted = [(name, None) for name in body.topic_names]
    counts = Counter(name for name, _ in wanted if name is not None)
    quota = MutationGate(ctx, call)
    responses = []
    for name, topic_id in wanted:
        if name is None:
            spec = ctx.topics.store.by_id(topic_id) if topic_id is not None else None
            if spec is None:
                responses.append(_deleted(call, None, topic_id, ErrorCode.unknown_topic_id, "no topic has this id"))
                continue
            name = spec.name
        elif counts[name] > 1:
            responses.append(_deleted(call, name, None, ErrorCode.invalid_request, "topic named twice in one request"))
            continue
        if not authz.allowed(ctx, call, AclOperation.DELETE, authz.TOPIC, name):
            responses.append(_deleted(call, name if topic_id is None else None, topic_id,
                                      ErrorCode.topic_authorization_failed, None))
            continue
        if quota.refused():
            responses.append(_deleted(call, name if topic_id is None else None, topic_id,
                                      ErrorCode.throttling_quota_exceeded, MESSAGE))
            continue
        result = await topic_routing.delete_topic(ctx, name)
        if result.error == ErrorCode.none and result.spec is not None:
            quota.spent(result.spec.partitions)
        responses.append(
            _deleted(call, name, result.spec.topic_id if result.spec else topic_id, result.error, result.message)
        )
    return call.respond(throttle_time=quota.throttle_time(), responses=tuple(responses))


def _deleted(call: Call, name: str | None, topic_id: Any, error: ErrorCode, message: str | None) -> Any:
    return call.make(
        "DeletableTopicResult",
        name=name if name is not None or call.version >= 6 else "",
        topic_id=topic_id,
        error_code=error,
        error_message=message if error != ErrorCode.none else None,
    )


async def handle_create_partitions(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    counts = Counter(t.name for t in body.topics)
    quota = MutationGate(ctx, call)
    results = []
    for topic in body.topics:
        if counts[topic.name] > 1:
            error, message = ErrorCode.invalid_request, "topic named twice in one request"
        elif not authz.allowed(ctx, call, AclOperation.ALTER, authz.TOPIC, topic.name):
            error, message = ErrorCode.topic_authorization_failed, None
        elif quota.refused():
            error, message = ErrorCode.throttling_quota_exceeded, MESSAGE
        else:
            assignments = [list(a.broker_ids) for a in topic.assignments] if topic.assignments is not None else None
            before = ctx.topics.store.get(topic.name)
            result = await topic_routing.create_partitions(
                ctx, topic.name, topic.count, assignments=assignments, validate_only=body.validate_only
            )
            error, message = result.error, result.message
            if error == ErrorCode.none and before is not None and not body.validate_only:
                quota.spent(topic.count - before.partitions)
        results.append(
            call.make(
                "CreatePartitionsTopicResult",
                name=topic.name,
                error_code=error,
                error_message=message if error != ErrorCode.none else None,
            )
        )
    return call.respond(throttle_time=quota.throttle_time(), results=tuple(results))
