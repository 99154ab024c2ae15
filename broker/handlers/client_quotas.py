"""DescribeClientQuotas (48) and AlterClientQuotas (49), v0-1 (KIP-546): Kafka's client quotas.

Who may: DESCRIBE_CONFIGS on the CLUSTER to describe, ALTER_CONFIGS on it to
alter (Kafka's rule); a refusal is CLUSTER_AUTHORIZATION_FAILED (top level for
Describe, per entry for Alter). Entities are user, client-id or both, a null
name the default (quotas/entities.py); keys producer_byte_rate,
consumer_byte_rate, request_percentage, controller_mutation_rate. A bad
entity, key or value is INVALID_REQUEST for that entry, as Kafka's
ClientQuotaControlManager answers, and nothing of that entry is stored;
validate_only checks and stores nothing. Under a controller the valid
entries are forwarded to it in one call (all or none: a refusal is every
forwarded entry's answer), answered once this broker applied the image that
holds them; every broker enforces the image's quotas and Describe answers
from them. A standalone broker stores them in control/quotas.py's
quotas.json. They are enforced: producer_byte_rate on
Produce, consumer_byte_rate on Fetch, request_percentage on every request
(server/request_quota.py), controller_mutation_rate on topic changes
(handlers/shared/mutation_quota.py); docs/operations.md.
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.quotas.entities import Component, Entity, entity_error, filter_error, filter_matches, op_error


async def handle_describe_client_quotas(ctx: BrokerContext, call: Call) -> Any:
    if not authz.allowed_cluster(ctx, call, AclOperation.DESCRIBE_CONFIGS):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.cluster_authorization_failed,
                            error_message="DESCRIBE_CONFIGS on the cluster is not allowed", entries=None)
    components = [Component(c.entity_type, c.match_type, c.match) for c in call.body.components]
    problem = filter_error(components)
    if problem is not None:
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.invalid_request, error_message=problem,
                            entries=None)
    entries = tuple(
        call.make("EntryData",
                  entity=tuple(call.make("EntityData", entity_type=t, entity_name=n) for t, n in entity.components()),
                  values=tuple(call.make("ValueData", key=k, value=v) for k, v in sorted(values.items())))
        for entity, values in sorted(ctx.quotas.book.entries.items(), key=lambda item: item[0].sort_key())
        if filter_matches(entity, components, call.body.strict)
    )
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, error_message=None, entries=entries)


async def handle_alter_client_quotas(ctx: BrokerContext, call: Call) -> Any:
    allowed = authz.allowed_cluster(ctx, call, AclOperation.ALTER_CONFIGS)
    results: list[tuple[list[tuple[str, str | None]], ErrorCode, str | None]] = []
    changes: list[tuple[Entity, list[tuple[str, float, bool]]]] = []
    seen: set[Entity] = set()
    for entry in call.body.entries:
        components = [(e.entity_type, e.entity_name) for e in entry.entity]
        error, message = _entry_error(entry, components, allowed)
        if error == ErrorCode.none:
            entity = Entity.of(components)
            if entity in seen:
                error, message = ErrorCode.invalid_request, f"the entity {entity} is named more than once"
            else:
                seen.add(entity)
                changes.append((entity, [(op.key, op.value, op.remove) for op in entry.ops]))
        results.append((components, error, message))
    if changes and ctx.forwarding is not None:
        error, message = await ctx.forwarding.alter_client_quotas(changes, validate_only=call.body.validate_only)
        if error != ErrorCode.none:
            results = [(c, error, message) if e == ErrorCode.none else (c, e, m) for c, e, m in results]
    elif changes and not call.body.validate_only:
        try:
            ctx.quotas.alter(changes)
        except OSError as exc:  # the file could not be written: nothing changed
            results = [(c, ErrorCode.unknown_server_error if e == ErrorCode.none else e,
                        f"the quotas could not be stored: {exc}" if e == ErrorCode.none else m) for c, e, m in results]
    return call.respond(throttle_time=millis(0), entries=tuple(
        call.make("EntryData", error_code=error, error_message=message,
                  entity=tuple(call.make("EntityData", entity_type=t, entity_name=n) for t, n in components))
        for components, error, message in results))


def _entry_error(entry: Any, components: list[tuple[str, str | None]], allowed: bool) -> tuple[ErrorCode, str | None]:
    if not allowed:
        return ErrorCode.cluster_authorization_failed, "ALTER_CONFIGS on the cluster is not allowed"
    problem = entity_error(components)
    if problem is None:
        keys = [op.key for op in entry.ops]
        if len(set(keys)) != len(keys):
            problem = f"a quota key is named more than once: {keys}"
        else:
            problem = next((p for op in entry.ops if (p := op_error(op.key, op.value, op.remove)) is not None), None)
    return (ErrorCode.invalid_request, problem) if problem is not None else (ErrorCode.none, None)
