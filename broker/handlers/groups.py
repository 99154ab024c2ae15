"""Classic consumer groups: FindCoordinator (10), JoinGroup (11), Heartbeat (12),
LeaveGroup (13), SyncGroup (14), DescribeGroups (15), ListGroups (16),
OffsetCommit (8), OffsetFetch (9), DeleteGroups (42).

Thin wiring: each handler turns the request (at whatever version) into a
`GroupCoordinator` call and its frozen result back into the response. The
protocol decisions live in `tinystream.broker.groups`. Version notes:

- JoinGroup: v0 has no rebalance timeout (the session timeout serves); v4+
  requires a known member id (KIP-394: MEMBER_ID_REQUIRED first); protocol
  names are non-nullable before v7 ("" for none).
- LeaveGroup v0-2 name one member and answer one error; v3+ batch members.
- OffsetCommit: committed offsets for topics that do not exist are refused
  with UNKNOWN_TOPIC_OR_PARTITION (Kafka checks the metadata cache too).
- OffsetFetch v8 batches groups; before v2 a group error goes into every
  partition, as there is no top-level error field.
- FindCoordinator v4 batches keys. Key type 1 finds a transaction
  coordinator: the leader of the id's __transaction_state partition (the
  topic is created on first use, as Kafka does).

Authorization (authz.RULES, Kafka's): READ on the group to join, sync,
heartbeat, leave and commit (plus READ on each committed topic); DESCRIBE on
it to find its coordinator, fetch offsets (topics the caller may not DESCRIBE
are left out or refused) and describe it; DELETE to delete it. ListGroups
lists everything with DESCRIBE on the cluster, else the groups it may DESCRIBE.
"""

from __future__ import annotations

from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.results import GroupDescription
from tinystream.broker.handlers.described_group import RowLayout, describable, described_group
from tinystream.broker.handlers.shared import authz, topic_routing
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.metadata.topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from tinystream.broker.protocol.codec import millis, to_millis
from tinystream.broker.storage.topic_partition import TopicPartition

GROUP_KEY = 0
TRANSACTION_KEY = 1


def _coordinator(ctx: BrokerContext) -> Any:
    return ctx.groups.coordinator


# -- FindCoordinator ---------------------------------------------------------------------


async def handle_find_coordinator(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    key_type = getattr(body, "key_type", GROUP_KEY)
    keys = list(body.coordinator_keys) if hasattr(body, "coordinator_keys") else [body.key]
    answers = [await _find(ctx, call, key_type, key) for key in keys]
    if hasattr(body, "coordinator_keys"):
        coordinators = tuple(
            call.make("Coordinator", key=key, node_id=node, host=host, port=port, error_code=error, error_message=message)
            for key, (error, message, node, host, port) in zip(keys, answers)
        )
        return call.respond(throttle_time=millis(0), coordinators=coordinators)
    error, message, node, host, port = answers[0]
    return call.respond(
        throttle_time=millis(0), error_code=error, error_message=message, node_id=node, host=host, port=port
    )


async def _find(ctx: BrokerContext, call: Call, key_type: int, key: str) -> tuple[ErrorCode, str | None, int, str, int]:
    listener = call.client.listener  # the coordinator's address on the listener the client came in on
    if key_type == TRANSACTION_KEY:
        if not authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.TXN, key):
            return ErrorCode.transactional_id_authorization_failed, None, -1, "", -1
        return await _find_transaction_coordinator(ctx, key, listener)
    if key_type != GROUP_KEY:
        return ErrorCode.invalid_request, f"unknown coordinator key type {key_type}", -1, "", -1
    if not authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.GROUP, key):
        return ErrorCode.group_authorization_failed, None, -1, "", -1
    if ctx.control is None:
        error, message = ctx.groups.ensure_offsets_topic()
        if error != ErrorCode.none:
            return ErrorCode.coordinator_not_available, message, -1, "", -1
        me = ctx.cluster.local.on(listener) or ctx.cluster.local
        return ErrorCode.none, None, me.broker_id, me.host, me.port
    # Replicated: the coordinator is the leader of the group's __consumer_offsets partition.
    result = await topic_routing.ensure_offsets_topic(ctx)
    if result.error != ErrorCode.none:
        return ErrorCode.coordinator_not_available, result.message, -1, "", -1
    state = ctx.topics.partition_state(TopicPartition(OFFSETS_TOPIC, ctx.groups.partition_for(key)))
    leader = ctx.cluster.broker(state.leader, listener) if state.leader >= 0 else None
    if leader is None:
        return ErrorCode.coordinator_not_available, "the coordinator's partition has no live leader", -1, "", -1
    return ErrorCode.none, None, leader.broker_id, leader.host, leader.port


async def _find_transaction_coordinator(ctx: BrokerContext, key: str,
                                        listener: str | None) -> tuple[ErrorCode, str | None, int, str, int]:
    if ctx.transactions is None:
        return ErrorCode.coordinator_not_available, "this broker runs no transaction coordinator", -1, "", -1
    if not key:
        return ErrorCode.invalid_request, "a transactional id is required", -1, "", -1
    result = await topic_routing.ensure_transaction_state_topic(ctx)
    if result.error != ErrorCode.none:
        return ErrorCode.coordinator_not_available, result.message, -1, "", -1
    state = ctx.topics.partition_state(TopicPartition(TRANSACTION_STATE_TOPIC, ctx.transactions.partition_for(key)))
    leader = ctx.cluster.broker(state.leader, listener) if state.leader >= 0 else None
    if leader is None:
        return ErrorCode.coordinator_not_available, "the coordinator's partition has no live leader", -1, "", -1
    return ErrorCode.none, None, leader.broker_id, leader.host, leader.port


# -- membership ------------------------------------------------------------------------------


def _may_read_group(ctx: BrokerContext, call: Call) -> bool:
    return authz.allowed(ctx, call, AclOperation.READ, authz.GROUP, call.body.group_id)


async def handle_join_group(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if not _may_read_group(ctx, call):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.group_authorization_failed,
                            generation_id=-1, protocol_type=None, protocol_name=None if call.version >= 7 else "",
                            leader="", skip_assignment=False, member_id=body.member_id, members=())
    session_ms = to_millis(body.session_timeout)
    rebalance = getattr(body, "rebalance_timeout", None)
    result = await _coordinator(ctx).join_group(
        group_id=body.group_id,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=body.protocol_type,
        protocols=[(p.name, bytes(p.metadata)) for p in body.protocols],
        session_timeout_ms=session_ms,
        rebalance_timeout_ms=to_millis(rebalance) if rebalance is not None else session_ms,
        client_id=call.header.client_id or "",
        client_host=f"/{call.client.host}",
        require_known_member_id=call.version >= 4,
    )
    members = tuple(
        call.make("JoinGroupResponseMember", member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata)
        for m in result.members
    )
    nullable = call.version >= 7
    return call.respond(
        throttle_time=millis(0),
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name if nullable or result.protocol_name is not None else "",
        leader=result.leader,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=members,
    )


async def handle_sync_group(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if not _may_read_group(ctx, call):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.group_authorization_failed,
                            protocol_type=None, protocol_name=None, assignment=b"")
    result = await _coordinator(ctx).sync_group(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
        protocol_type=getattr(body, "protocol_type", None),
        protocol_name=getattr(body, "protocol_name", None),
        assignments=[(a.member_id, bytes(a.assignment)) for a in body.assignments],
    )
    return call.respond(
        throttle_time=millis(0),
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def handle_heartbeat(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if not _may_read_group(ctx, call):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.group_authorization_failed)
    error = await _coordinator(ctx).heartbeat(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        group_instance_id=getattr(body, "group_instance_id", None),
    )
    return call.respond(throttle_time=millis(0), error_code=error)


async def handle_leave_group(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if hasattr(body, "members"):
        members = [(m.member_id, m.group_instance_id) for m in body.members]
    else:
        members = [(body.member_id, None)]
    if not _may_read_group(ctx, call):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.group_authorization_failed, members=())
    result = await _coordinator(ctx).leave_group(group_id=body.group_id, members=members)
    if not hasattr(body, "members"):
        error = result.error
        if error == ErrorCode.none and result.members:
            error = result.members[0].error
        return call.respond(throttle_time=millis(0), error_code=error)
    return call.respond(
        throttle_time=millis(0),
        error_code=result.error,
        members=tuple(
            call.make("MemberResponse", member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error)
            for m in result.members
        ),
    )


# -- offsets -----------------------------------------------------------------------------------


async def handle_offset_commit(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    offsets: dict[tuple[str, int], tuple[int, int, str | None]] = {}
    unknown: set[tuple[str, int]] = set()
    refused: dict[tuple[str, int], ErrorCode] = {}
    group_ok = _may_read_group(ctx, call)
    may_read = authz.topic_filter(ctx, call, AclOperation.READ)
    for topic in body.topics:
        spec = ctx.topics.get(topic.name)
        for p in topic.partitions:
            tp = (topic.name, p.partition_index)
            if not group_ok:
                refused[tp] = ErrorCode.group_authorization_failed
            elif not may_read(topic.name):
                refused[tp] = ErrorCode.topic_authorization_failed
            elif spec is None or not 0 <= p.partition_index < spec.partitions:
                unknown.add(tp)
                continue
            offsets[tp] = (p.committed_offset, getattr(p, "committed_leader_epoch", -1), p.committed_metadata)
    results: dict[tuple[str, int], ErrorCode] = {}
    if offsets:
        results = await _coordinator(ctx).commit_offsets(
            group_id=body.group_id,
            generation_id=body.generation_id_or_member_epoch,
            member_id=body.member_id,
            group_instance_id=getattr(body, "group_instance_id", None),
            offsets=offsets,
            api_version=call.version,
        )
    topics = []
    for topic in body.topics:
        parts = tuple(
            call.make(
                "OffsetCommitResponsePartition",
                partition_index=p.partition_index,
                error_code=refused.get((topic.name, p.partition_index))
                or (ErrorCode.unknown_topic_or_partition if (topic.name, p.partition_index) in unknown
                    else results.get((topic.name, p.partition_index), ErrorCode.none)),
            )
            for p in topic.partitions
        )
        topics.append(call.make("OffsetCommitResponseTopic", name=topic.name, partitions=parts))
    return call.respond(throttle_time=millis(0), topics=tuple(topics))


async def handle_offset_fetch(ctx: BrokerContext, call: Call) -> Any:
    body = call.body
    if hasattr(body, "groups"):  # v8: several groups
        groups = []
        for g in body.groups:
            error, topics = await _fetch_group(ctx, call, g.group_id, g.topics, "OffsetFetchResponseTopics",
                                               "OffsetFetchResponsePartitions",
                                               member=(getattr(g, "member_id", None), getattr(g, "member_epoch", -1)))
            groups.append(call.make("OffsetFetchResponseGroup", group_id=g.group_id, topics=topics, error_code=error))
        return call.respond(throttle_time=millis(0), groups=tuple(groups))
    error, topics = await _fetch_group(ctx, call, body.group_id, body.topics, "OffsetFetchResponseTopic",
                                       "OffsetFetchResponsePartition")
    return call.respond(throttle_time=millis(0), topics=topics, error_code=error)


async def _fetch_group(
    ctx: BrokerContext, call: Call, group_id: str, topics: Any, topic_class: str, partition_class: str,
    member: tuple[str | None, int] = (None, -1),
) -> tuple[ErrorCode, tuple]:
    wanted = None if topics is None else [(t.name, i) for t in topics for i in t.partition_indexes]
    require_stable = bool(getattr(call.body, "require_stable", False))  # v7+, KIP-447
    top_level_error = call.version >= 2
    may_describe = authz.topic_filter(ctx, call, AclOperation.DESCRIBE)
    if not authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.GROUP, group_id):
        error = ErrorCode.group_authorization_failed
        if top_level_error or wanted is None:
            return error, ()
        return error, _offset_rows(call, [((t, p), None) for t, p in wanted], {}, error, topic_class, partition_class)
    refused = {(t, p) for t, p in wanted or () if not may_describe(t)}
    asked = None if wanted is None else [tp for tp in wanted if tp not in refused]
    result = await _coordinator(ctx).fetch_offsets(group_id=group_id, partitions=asked, require_stable=require_stable,
                                                   member_id=member[0], member_epoch=member[1])  # v9+, KIP-848
    partition_error = ErrorCode.none if top_level_error else result.error
    if result.error != ErrorCode.none:
        if top_level_error or wanted is None:
            return result.error, ()
        entries = [((t, p), None) for t, p in wanted]
    else:
        entries = [(tp, c) for tp, c in result.offsets.items() if wanted is not None or may_describe(tp[0])]
        entries += [(tp, None) for tp in sorted(refused)]
    errors = {**result.partition_errors, **dict.fromkeys(refused, ErrorCode.topic_authorization_failed)}
    return result.error, _offset_rows(call, entries, errors, partition_error, topic_class, partition_class)


def _offset_rows(call: Call, entries: list, errors: dict, default_error: ErrorCode, topic_class: str,
                 partition_class: str) -> tuple:
    by_topic: dict[str, list[Any]] = {}
    for (topic, partition), committed in entries:
        by_topic.setdefault(topic, []).append(
            call.make(
                partition_class,
                partition_index=partition,
                committed_offset=committed.offset if committed else -1,
                committed_leader_epoch=committed.leader_epoch if committed else -1,
                metadata=committed.metadata if committed else "",
                error_code=errors.get((topic, partition), default_error),
            )
        )
    return tuple(call.make(topic_class, name=t, partitions=tuple(ps)) for t, ps in by_topic.items())


# -- admin ---------------------------------------------------------------------------------------


_DESCRIBED = RowLayout(
    group={"error_code": "error", "group_id": "group_id", "group_state": "state", "protocol_type": "protocol_type",
           "protocol_data": "protocol"},
    member_class="DescribedGroupMember",
    member={"member_id": "member_id", "group_instance_id": "group_instance_id", "client_id": "client_id",
            "client_host": "client_host", "member_metadata": "metadata", "member_assignment": "assignment"},
)


async def handle_describe_groups(ctx: BrokerContext, call: Call) -> Any:
    names = list(call.body.groups)
    allowed = describable(ctx, call, names)
    found = {d.group_id: d for d in await _coordinator(ctx).describe_groups(allowed)} if allowed else {}
    groups = tuple(
        described_group(call, _DESCRIBED, found[g] if g in found else
                        GroupDescription(error=ErrorCode.group_authorization_failed, group_id=g, state=""))
        for g in names
    )
    return call.respond(throttle_time=millis(0), groups=groups)


async def handle_list_groups(ctx: BrokerContext, call: Call) -> Any:
    coordinator = _coordinator(ctx)
    states = list(getattr(call.body, "states_filter", ()) or ()) or None
    types = list(getattr(call.body, "types_filter", ()) or ()) or None  # v5, KIP-848
    error = ErrorCode.coordinator_load_in_progress if coordinator.loading_partitions() else ErrorCode.none
    everything = authz.allowed_cluster(ctx, call, AclOperation.DESCRIBE)
    groups = tuple(
        call.make("ListedGroup", group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state,
                  group_type=coordinator.group_type(g.group_id))
        for g in coordinator.list_groups(states, types)
        if everything or authz.allowed(ctx, call, AclOperation.DESCRIBE, authz.GROUP, g.group_id)
    )
    return call.respond(throttle_time=millis(0), error_code=error, groups=groups)


async def handle_delete_groups(ctx: BrokerContext, call: Call) -> Any:
    names = list(call.body.groups_names)
    allowed = [g for g in names if authz.allowed(ctx, call, AclOperation.DELETE, authz.GROUP, g)]
    results = await _coordinator(ctx).delete_groups(allowed) if allowed else {}
    results = {**dict.fromkeys(set(names) - set(allowed), ErrorCode.group_authorization_failed), **results}
    return call.respond(
        throttle_time=millis(0),
        results=tuple(
            call.make("DeletableGroupResult", group_id=g, error_code=results.get(g, ErrorCode.none))
            for g in dict.fromkeys(names)
        ),
    )
