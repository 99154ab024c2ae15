"""DescribeConfigs (32, v1-4), AlterConfigs (33, v0-2), IncrementalAlterConfigs (44, v0-1).

Resources: topics (type 2) are described and altered here; this broker (type 4,
name "" for the cluster default or its id) and its loggers (type 8) in
broker_configs.py. Topic changes go through `TopicManager.set_configs`, which
validates them, persists them and applies them to the open logs at once.

IncrementalAlterConfigs operations (KIP-339): SET, DELETE (back to the
broker default), APPEND / SUBTRACT for list configs (cleanup.policy).
AlterConfigs replaces a topic's whole set of overrides, as Kafka does.

Authorization (authz.RULES): DESCRIBE_CONFIGS / ALTER_CONFIGS on the topic
(TOPIC_AUTHORIZATION_FAILED) or, for the broker resource, on the cluster
(CLUSTER_AUTHORIZATION_FAILED); broker loggers too, as in Kafka.
"""

from __future__ import annotations

import enum
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.broker_configs.dynamic import Op
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers import broker_configs
from tinystream.broker.handlers.shared import authz, topic_routing
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.topics.config import (
    TOPIC_CONFIGS,
    ConfigSource,
    ConfigType,
    DescribedConfig,
    describe,
)


class ResourceType(enum.IntEnum):
    TOPIC = 2
    BROKER = 4
    BROKER_LOGGER = 8


def _refused(ctx: BrokerContext, call: Call, operation: AclOperation, resource_type: int,
             name: str) -> tuple[ErrorCode, str | None] | None:
    """The authorization error for a config resource, or None (unknown types are refused later, as before)."""
    if resource_type == ResourceType.TOPIC:
        if not authz.allowed(ctx, call, operation, authz.TOPIC, name):
            return ErrorCode.topic_authorization_failed, None
    elif resource_type in (ResourceType.BROKER, ResourceType.BROKER_LOGGER):
        if not authz.allowed_cluster(ctx, call, operation):
            return ErrorCode.cluster_authorization_failed, None
    return None


async def handle_describe_configs(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    synonyms = bool(getattr(body, "include_synonyms", False))
    docs = bool(getattr(body, "include_documentation", False))
    results = []
    for resource in body.resources:
        refused = _refused(ctx, call, AclOperation.DESCRIBE_CONFIGS, resource.resource_type, resource.resource_name)
        if refused:
            error, message, described = refused[0], refused[1], []
        else:
            error, message, described = _describe(ctx, resource.resource_type, resource.resource_name)
        keys = resource.configuration_keys
        if keys is not None:
            wanted = set(keys)
            described = [d for d in described if d.name in wanted]
        configs = tuple(_config_entry(call, d, synonyms, docs, resource.resource_type) for d in described)
        results.append(
            call.make(
                "DescribeConfigsResult",
                error_code=error,
                error_message=message,
                resource_type=resource.resource_type,
                resource_name=resource.resource_name,
                configs=configs,
            )
        )
    return call.respond(throttle_time=millis(0), results=tuple(results))


def _describe(ctx: BrokerContext, resource_type: int, name: str) -> tuple[ErrorCode, str | None, list[DescribedConfig]]:
    if resource_type == ResourceType.TOPIC:
        spec = ctx.topics.get(name)
        if spec is None:
            return ErrorCode.unknown_topic_or_partition, f"topic {name!r} does not exist", []
        return ErrorCode.none, None, describe_topic(ctx, spec.configs)
    if resource_type == ResourceType.BROKER:
        return broker_configs.describe_broker(ctx, name)
    if resource_type == ResourceType.BROKER_LOGGER:
        return broker_configs.describe_loggers(ctx, name)
    return ErrorCode.invalid_request, f"resource type {resource_type} is not supported", []


def describe_topic(ctx: BrokerContext, overrides: Any) -> list[DescribedConfig]:
    """A topic's configs over this broker's current defaults (dynamic broker configs included)."""
    return describe(ctx.topics.settings, overrides, dynamic=broker_configs.dynamic_sources(ctx))


def _config_entry(call: Call, d: DescribedConfig, synonyms: bool, docs: bool, resource_type: int) -> Any:
    return call.make(
        "DescribeConfigsResourceResult",
        name=d.name,
        value=d.value,
        read_only=resource_type == ResourceType.BROKER and broker_configs.read_only(d.name),
        is_default=d.source == ConfigSource.DEFAULT_CONFIG,
        config_source=int(d.source),
        is_sensitive=False,
        synonyms=tuple(
            call.make("DescribeConfigsSynonym", name=n, value=v, source=int(s)) for n, v, s in d.synonyms
        )
        if synonyms
        else (),
        config_type=int(d.type),
        documentation=d.doc if docs and d.doc else None,
    )


async def handle_incremental_alter_configs(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    responses = []
    for resource in body.resources:
        refused = _refused(ctx, call, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
        error, message = refused or await _incremental(ctx, resource, body.validate_only)
        responses.append(_alter_entry(call, resource, error, message))
    return call.respond(throttle_time=millis(0), responses=tuple(responses))


async def _incremental(ctx: BrokerContext, resource: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    if resource.resource_type == ResourceType.BROKER:
        return await broker_configs.alter_broker(ctx, resource, validate_only)
    if resource.resource_type == ResourceType.BROKER_LOGGER:
        return broker_configs.alter_loggers(ctx, resource, validate_only)
    if resource.resource_type != ResourceType.TOPIC:
        return _not_alterable(resource.resource_type)
    spec = ctx.topics.get(resource.resource_name)
    if spec is None:
        return ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name!r} does not exist"
    names = [c.name for c in resource.configs]
    if len(names) != len(set(names)):
        return ErrorCode.invalid_request, "a config is named twice"
    overrides = dict(spec.configs)
    effective = {d.name: d.value for d in describe_topic(ctx, spec.configs)}
    for change in resource.configs:
        key = TOPIC_CONFIGS.get(change.name)
        if key is None:
            return ErrorCode.invalid_config, f"unknown topic config {change.name!r}"
        op = change.config_operation
        if op == Op.SET:
            if change.value is None:
                return ErrorCode.invalid_config, f"{change.name}: SET needs a value"
            overrides[change.name] = change.value
        elif op == Op.DELETE:
            overrides.pop(change.name, None)
        elif op in (Op.APPEND, Op.SUBTRACT):
            if key.type != ConfigType.LIST:
                return ErrorCode.invalid_config, f"{change.name} is not a list; APPEND/SUBTRACT do not apply"
            current = [v for v in (effective.get(change.name) or "").split(",") if v]
            items = [v.strip() for v in (change.value or "").split(",") if v.strip()]
            if op == Op.APPEND:
                current += [v for v in items if v not in current]
            else:
                current = [v for v in current if v not in items]
            if not current:
                return ErrorCode.invalid_config, f"{change.name} cannot become empty"
            overrides[change.name] = ",".join(current)
        else:
            return ErrorCode.invalid_request, f"unknown config operation {op}"
    result = await topic_routing.set_configs(ctx, spec.name, overrides, validate_only=validate_only)
    return result.error, result.message


async def handle_alter_configs(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    responses = []
    for resource in body.resources:
        refused = _refused(ctx, call, AclOperation.ALTER_CONFIGS, resource.resource_type, resource.resource_name)
        if refused:
            error, message = refused
        elif resource.resource_type != ResourceType.TOPIC:
            error, message = _not_alterable(resource.resource_type)
        else:
            names = [c.name for c in resource.configs]
            if len(names) != len(set(names)):
                error, message = ErrorCode.invalid_request, "a config is named twice"
            else:
                overrides = {c.name: c.value for c in resource.configs}
                if resource.resource_name not in ctx.topics.store:
                    error, message = ErrorCode.unknown_topic_or_partition, f"topic {resource.resource_name!r} does not exist"
                else:
                    result = await topic_routing.set_configs(
                        ctx, resource.resource_name, overrides, validate_only=body.validate_only
                    )
                    error, message = result.error, result.message
        responses.append(_alter_entry(call, resource, error, message))
    return call.respond(throttle_time=millis(0), responses=tuple(responses))


def _not_alterable(resource_type: int) -> tuple[ErrorCode, str]:
    if resource_type == ResourceType.BROKER:
        return ErrorCode.invalid_request, "AlterConfigs does not change broker configs; use IncrementalAlterConfigs"
    return ErrorCode.invalid_request, f"resource type {resource_type} cannot be altered"


def _alter_entry(call: Call, resource: Any, error: ErrorCode, message: str | None) -> Any:
    return call.make(
        "AlterConfigsResourceResponse",
        error_code=error,
        error_message=message if error != ErrorCode.none else None,
        resource_type=resource.resource_type,
        resource_name=resource.resource_name,
    )
