"""CreateAcls (30), DescribeAcls (29), DeleteAcls (31), v1-3 (v2+ flexible, KIP-290 prefixed patterns).

Who may: ALTER on the CLUSTER to create or delete, DESCRIBE on it to list
(`authz.RULES`); a refusal is CLUSTER_AUTHORIZATION_FAILED per entry (top
level for DescribeAcls). Without an authorizer Kafka answers SECURITY_DISABLED,
and so does this broker.

Each creation and filter is checked here (`tinystream.acls`): a bad one gets
INVALID_REQUEST with the reason, the others go on. Changes take effect through
`ctx.access` (the controller's image, or the broker's own file without one,
control/access.py); DescribeAcls reads the authorizer's applied set, which
every broker holds alike.
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclBinding, AclBindingFilter, AclOperation, validate_binding, validate_filter
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis

_DISABLED = "no authorizer is configured on the broker (authorizer.class.name)"


def _refusal(ctx: BrokerContext, call: Call, operation: AclOperation) -> tuple[ErrorCode, str] | None:
    if ctx.authorizer is None:
        return ErrorCode.security_disabled, _DISABLED
    if not authz.allowed_cluster(ctx, call, operation):
        return ErrorCode.cluster_authorization_failed, f"{operation.name} on the cluster is not allowed"
    return None


async def handle_create_acls(ctx: BrokerContext, call: Call) -> Any:
    creations = call.body.creations
    refused = _refusal(ctx, call, AclOperation.ALTER)
    results: list[tuple[ErrorCode, str | None]] = []
    valid: list[AclBinding] = []
    for c in creations:
        if refused:
            results.append(refused)
            continue
        b = AclBinding.of(c.resource_type, c.resource_name, c.resource_pattern_type, c.principal, c.host,
                          c.operation, c.permission_type)
        problem = validate_binding(b)
        results.append((ErrorCode.invalid_request, problem) if problem else (ErrorCode.none, None))
        if not problem:
            valid.append(b)
    if valid:
        outcome = await ctx.access.create_acls(valid)
        if outcome.error != ErrorCode.none:
            results = [(outcome.error, outcome.message) if r[0] == ErrorCode.none else r for r in results]
    rows = tuple(call.make("AclCreationResult", error_code=e, error_message=m) for e, m in results)
    return call.respond(throttle_time=millis(0), results=rows)


def _filter(item: Any, *, prefix: str) -> AclBindingFilter:
    return AclBindingFilter.of(
        getattr(item, f"{prefix}resource_type_filter"), getattr(item, f"{prefix}resource_name_filter"),
        getattr(item, f"{prefix}pattern_type_filter", 3), getattr(item, f"{prefix}principal_filter"),
        getattr(item, f"{prefix}host_filter"), item.operation, item.permission_type)


async def handle_describe_acls(ctx: BrokerContext, call: Call) -> Any:
    refused = _refusal(ctx, call, AclOperation.DESCRIBE)
    f = _filter(call.body, prefix="")
    problem = validate_filter(f)
    if refused or problem:
        error, message = refused or (ErrorCode.invalid_request, problem)
        return call.respond(throttle_time=millis(0), error_code=error, error_message=message, resources=())
    assert ctx.authorizer is not None
    by_pattern: dict[tuple[int, str, int], list[AclBinding]] = {}
    for b in ctx.authorizer.acls:
        if f.matches(b):
            by_pattern.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    resources = tuple(
        call.make("DescribeAclsResource", resource_type=rt, resource_name=name, pattern_type=pt, acls=tuple(
            call.make("AclDescription", principal=b.principal, host=b.host, operation=b.operation,
                      permission_type=b.permission) for b in bs))
        for (rt, name, pt), bs in by_pattern.items()
    )
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, error_message=None, resources=resources)


async def handle_delete_acls(ctx: BrokerContext, call: Call) -> Any:
    refused = _refusal(ctx, call, AclOperation.ALTER)
    results: list[tuple[ErrorCode, str | None, tuple[AclBinding, ...]]] = []
    valid: list[tuple[int, AclBindingFilter]] = []
    for i, item in enumerate(call.body.filters):
        if refused:
            results.append((*refused, ()))
            continue
        f = _filter(item, prefix="")
        problem = validate_filter(f)
        results.append((ErrorCode.invalid_request, problem, ()) if problem else (ErrorCode.none, None, ()))
        if not problem:
            valid.append((i, f))
    if valid:
        outcome = await ctx.access.delete_acls([f for _, f in valid])
        for n, (i, _) in enumerate(valid):
            matched = outcome.matched[n] if n < len(outcome.matched) else ()
            results[i] = (outcome.error, outcome.message, matched)
    rows = tuple(
        call.make("DeleteAclsFilterResult", error_code=e, error_message=m, matching_acls=tuple(
            call.make("DeleteAclsMatchingAcl", error_code=ErrorCode.none, error_message=None,
                      resource_type=b.resource_type, resource_name=b.resource_name, pattern_type=b.pattern_type,
                      principal=b.principal, host=b.host, operation=b.operation, permission_type=b.permission)
            for b in matched))
        for e, m, matched in results
    )
    return call.respond(throttle_time=millis(0), filter_results=rows)
