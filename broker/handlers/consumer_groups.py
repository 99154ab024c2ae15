"""Consumer groups of the next-generation protocol (KIP-848): ConsumerGroupHeartbeat (68)
and ConsumerGroupDescribe (69).

Thin wiring, like `groups`: the request becomes a `HeartbeatRequest` for the
coordinator and its result the response. The wire speaks topic ids, the
group state machine topic names: owned partitions of unknown topic ids are
dropped (the topic is gone; the member will be told its new assignment),
and an assignment names each topic by the id the Metadata API gives it.

Versions: ConsumerGroupHeartbeat v0 lets the coordinator pick the member id
(an empty one on join gets a new UUID); v1 (Kafka 4.0, KIP-1082) has the
client generate it, so an empty one is INVALID_REQUEST. ConsumerGroupDescribe
v1 adds MemberType (1 = a consumer-protocol member).

Who may call: any client of a client listener (after SASL authentication
where the listener asks for it), as for the classic group APIs; Kafka's
ACLs (READ on the group for the heartbeat, DESCRIBE for describe) come with
the authorizer.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Mapping
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.consumer_group import HeartbeatRequest
from tinystream.broker.groups.results import ConsumerGroupDescription, ConsumerMemberDescription
from tinystream.broker.handlers.described_group import RowLayout, describable, described_group
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis, to_millis

CONSUMER_MEMBER_TYPE = 1  # ConsumerGroupDescribe v1 MemberType: 0 classic, 1 consumer


def _new_member_id() -> str:
    """What Kafka's Uuid.randomUuid().toString() looks like: URL-safe base64 of 16 bytes, unpadded."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _owned_by_name(ctx: BrokerContext, owned: Any) -> dict[str, frozenset[int]] | None:
    if owned is None:
        return None
    out: dict[str, frozenset[int]] = {}
    for tp in owned:
        spec = ctx.topics.store.by_id(tp.topic_id) if tp.topic_id is not None else None
        if spec is not None:
            out[spec.name] = out.get(spec.name, frozenset()) | frozenset(tp.partitions)
    return out


def _by_id(ctx: BrokerContext, assignment: Mapping[str, frozenset[int]]) -> list[tuple[uuid.UUID, str, list[int]]]:
    out = []
    for name, parts in sorted(assignment.items()):
        spec = ctx.topics.get(name)
        if spec is not None and parts:
            out.append((spec.topic_id, name, sorted(parts)))
    return out


async def handle_consumer_group_heartbeat(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if not authz.allowed(ctx, call, AclOperation.READ, authz.GROUP, body.group_id):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.group_authorization_failed,
                            error_message=None, member_id=None, member_epoch=0, heartbeat_interval=millis(0),
                            assignment=None)
    member_id = body.member_id
    if call.version == 0 and not member_id and body.member_epoch == 0:
        member_id = _new_member_id()  # v0: the coordinator names new members
    rebalance_ms = to_millis(body.rebalance_timeout)
    result = await ctx.groups.coordinator.consumer_group_heartbeat(
        body.group_id,
        HeartbeatRequest(
            member_id=member_id,
            member_epoch=body.member_epoch,
            instance_id=body.instance_id,
            rack_id=body.rack_id,
            rebalance_timeout_ms=rebalance_ms,
            subscribed_topic_names=tuple(body.subscribed_topic_names)
            if body.subscribed_topic_names is not None else None,
            subscribed_topic_regex=getattr(body, "subscribed_topic_regex", None),
            server_assignor=body.server_assignor,
            owned=_owned_by_name(ctx, body.topic_partitions),
            client_id=call.header.client_id or "",
            client_host=f"/{call.client.host}",
            may_describe=authz.topic_filter(ctx, call, AclOperation.DESCRIBE) if ctx.authorizer is not None else None,
        ),
    )
    assignment = None
    if result.error == ErrorCode.none and result.assignment is not None:
        assignment = call.make("Assignment", topic_partitions=tuple(
            call.make("TopicPartitions", topic_id=topic_id, partitions=tuple(parts))
            for topic_id, _, parts in _by_id(ctx, result.assignment)
        ))
    ok = result.error == ErrorCode.none
    return call.respond(
        throttle_time=millis(0),
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id if ok else None,
        member_epoch=result.member_epoch if ok else 0,
        heartbeat_interval=millis(result.heartbeat_interval_ms if ok else 0),
        assignment=assignment,
    )


def _described_assignment(ctx: BrokerContext, call: Call, assignment: Mapping[str, frozenset[int]]) -> Any:
    return call.make("Assignment", topic_partitions=tuple(
        call.make("TopicPartitions", topic_id=topic_id, topic_name=name, partitions=tuple(parts))
        for topic_id, name, parts in _by_id(ctx, assignment)
    ))


_DESCRIBED = RowLayout(
    group={"error_code": "error", "error_message": "error_message", "group_id": "group_id", "group_state": "state",
           "group_epoch": "group_epoch", "assignment_epoch": "assignment_epoch", "assignor_name": "assignor"},
    member_class="Member",
    member={name: name for name in ("member_id", "instance_id", "rack_id", "member_epoch", "client_id", "client_host",
                                    "subscribed_topic_names", "subscribed_topic_regex")},
)


def _hiding_no_topic(ctx: BrokerContext, call: Call, group: ConsumerGroupDescription) -> ConsumerGroupDescription:
    """The group as described, or TOPIC_AUTHORIZATION_FAILED when it names a topic (subscribed or assigned)
    the caller may not DESCRIBE: a group's description never reveals a topic Metadata would hide (Kafka's
    answer, and message, in handleConsumerGroupDescribe)."""
    if ctx.authorizer is None or group.error != ErrorCode.none:
        return group
    may_see = authz.topic_filter(ctx, call, AclOperation.DESCRIBE)
    named = {t for m in group.members for t in (*m.subscribed_topic_names, *m.assignment, *m.target_assignment)}
    if all(may_see(t) for t in named):
        return group
    return ConsumerGroupDescription(
        error=ErrorCode.topic_authorization_failed, group_id=group.group_id,
        error_message="The group has described topic(s) that the client is not authorized to describe.")


async def handle_consumer_group_describe(ctx: BrokerContext, call: Call) -> Any:
    asked = list(call.body.group_ids)
    may = describable(ctx, call, asked)
    described = [_hiding_no_topic(ctx, call, d) for d in await ctx.groups.coordinator.consumer_group_describe(may)]
    refused = [ConsumerGroupDescription(error=ErrorCode.group_authorization_failed, group_id=g)
               for g in asked if g not in may]

    def not_as_held(m: ConsumerMemberDescription) -> dict[str, Any]:  # assignments by topic id; the member type
        return {"assignment": _described_assignment(ctx, call, m.assignment),
                "target_assignment": _described_assignment(ctx, call, m.target_assignment),
                "member_type": CONSUMER_MEMBER_TYPE}

    return call.respond(throttle_time=millis(0), groups=tuple(
        described_group(call, _DESCRIBED, d, not_as_held) for d in [*refused, *described]))
