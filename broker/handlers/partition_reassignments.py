"""AlterPartitionReassignments (45, v0-1) and ListPartitionReassignments (46, v0): KIP-455, as
`kafka-reassign-partitions.sh --execute / --verify / --cancel` and the admin clients use them.

Alter needs ALTER on the CLUSTER, List needs DESCRIBE (Kafka's rules). Under a
controller the moves are the controller's (operator/controller/reassignment.py:
new replicas catch up before old ones leave, so a move never drops below the
copies it had); a broker checks what it can answer alone (unknown partitions,
replica lists that name no live broker or a broker twice, a replication factor
change that v1 did not allow) and forwards the rest in one call, answered once
this broker applied the result. When the controller refuses the batch (it is
all or nothing), each partition is asked again on its own, so every partition
gets its own reason. A standalone broker has nowhere to move a replica: only
its own assignment is accepted (a no-op) and nothing is ever in progress.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage.topic_partition import TopicPartition

Target = tuple[int, ...] | None  # None cancels a running reassignment


@dataclass(frozen=True, slots=True)
class Outcome:
    error: ErrorCode
    message: str | None = None


OK = Outcome(ErrorCode.none)


@dataclass(frozen=True, slots=True)
class Ongoing:
    """A partition being moved, as ListPartitionReassignments shows it."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]


def check_target(current: Sequence[int] | None, target: Target, *, brokers: Collection[int], reassigning: bool,
                 allow_replication_factor_change: bool) -> Outcome | None:
    """Why `target` cannot be asked for (None: it can). `current`: the partition's replicas, None if it does
    not exist; during a move they are the target followed by the leaving replicas (so the original
    replication factor is len(current) - removing, which the caller folds into `current`)."""
    if current is None:
        return Outcome(ErrorCode.unknown_topic_or_partition, "no such partition")
    if target is None:
        return None if reassigning else Outcome(ErrorCode.no_reassignment_in_progress, "no reassignment to cancel")
    if not target:
        return Outcome(ErrorCode.invalid_replica_assignment, "the replica list is empty")
    if len(set(target)) != len(target):
        return Outcome(ErrorCode.invalid_replica_assignment, f"replicas {list(target)} name a broker twice")
    unknown = sorted(set(target) - set(brokers))
    if unknown:
        return Outcome(ErrorCode.invalid_replica_assignment, f"no live broker {unknown}")
    if not allow_replication_factor_change and len(target) != len(current):
        return Outcome(ErrorCode.invalid_replication_factor,
                       f"{len(target)} replicas for a partition of {len(current)} (allow_replication_factor_change "
                       "is false)")
    return None


def ongoing_from_image(image: Mapping[str, Any] | None, wanted: Mapping[str, Collection[int]] | None
                       ) -> dict[TopicPartition, Ongoing]:
    """The moves under way in a controller image, limited to `wanted` (None: every topic and partition)."""
    found: dict[TopicPartition, Ongoing] = {}
    for topic in (image or {}).get("topics", ()):
        name = topic["name"]
        if wanted is not None and name not in wanted:
            continue
        for p in topic.get("partitions", ()):
            adding, removing = tuple(p.get("adding_replicas", ())), tuple(p.get("removing_replicas", ()))
            if (adding or removing) and (wanted is None or p["partition"] in wanted[name]):
                found[TopicPartition(name, p["partition"])] = Ongoing(tuple(p["replicas"]), adding, removing)
    return found


def _requested(body: Any) -> dict[TopicPartition, Target]:
    return {TopicPartition(t.name, int(p.partition_index)): None if p.replicas is None else tuple(int(r) for r in p.replicas)
            for t in body.topics for p in t.partitions}


def _original_replicas(ctx: BrokerContext, tp: TopicPartition, moving: Mapping[TopicPartition, Ongoing]
                       ) -> tuple[tuple[int, ...] | None, bool]:
    """(the replicas before any running move, whether one runs); (None, False) for an unknown partition."""
    spec = ctx.topics.get(tp.topic)
    if spec is None or not 0 <= tp.partition < spec.partitions:
        return None, False
    move = moving.get(tp)
    if move is not None:
        return tuple(r for r in move.replicas if r not in move.adding), True
    return tuple(ctx.topics.partition_state(tp).replicas), False


async def handle_alter_partition_reassignments(ctx: BrokerContext, call: Call) -> Any:
    requested = _requested(call.body)
    allow_rf_change = call.version < 1 or bool(call.body.allow_replication_factor_change)
    if not authz.allowed_cluster(ctx, call, AclOperation.ALTER):
        denied = Outcome(ErrorCode.cluster_authorization_failed, "ALTER on the cluster is not allowed")
        return _alter_reply(call, denied, {tp: denied for tp in requested})
    forwarding = ctx.forwarding
    image = forwarding.session.image if forwarding is not None else None
    moving = ongoing_from_image(image, None)
    brokers = {ctx.settings.broker_id, *(b.broker_id for b in ctx.cluster.brokers())}
    answers: dict[TopicPartition, Outcome] = {}
    send: dict[TopicPartition, Target] = {}
    for tp, target in requested.items():
        current, reassigning = _original_replicas(ctx, tp, moving)
        refused = check_target(current, target, brokers=brokers, reassigning=reassigning,
                               allow_replication_factor_change=allow_rf_change)
        if refused is not None:
            answers[tp] = refused
        elif forwarding is None:  # standalone: check_target left only this broker's own assignment
            answers[tp] = OK
        else:
            send[tp] = target
    if send:
        assert forwarding is not None
        answers.update(await _forward(forwarding, send))
    return _alter_reply(call, OK, answers)


async def _forward(forwarding: Any, send: Mapping[TopicPartition, Target]) -> dict[TopicPartition, Outcome]:
    """One call for the batch; if the controller refuses it, one call per partition for each one's reason."""
    error, message = await forwarding.reassign_partitions(send)
    if error == ErrorCode.none:
        return dict.fromkeys(send, OK)
    if len(send) == 1:
        return dict.fromkeys(send, Outcome(error, message))
    answers = {}
    for tp, target in send.items():
        one_error, one_message = await forwarding.reassign_partitions({tp: target})
        answers[tp] = Outcome(one_error, one_message) if one_error != ErrorCode.none else OK
    return answers


async def handle_list_partition_reassignments(ctx: BrokerContext, call: Call) -> Any:
    if not authz.allowed_cluster(ctx, call, AclOperation.DESCRIBE):
        return call.respond(throttle_time=millis(0), error_code=ErrorCode.cluster_authorization_failed,
                            error_message="DESCRIBE on the cluster is not allowed", topics=())
    wanted = None if call.body.topics is None else {
        t.name: frozenset(int(p) for p in t.partition_indexes) for t in call.body.topics}
    image = ctx.forwarding.session.image if ctx.forwarding is not None else None
    moves = ongoing_from_image(image, wanted)
    return call.respond(throttle_time=millis(0), error_code=ErrorCode.none, error_message=None, topics=tuple(
        call.make("OngoingTopicReassignment", name=topic, partitions=tuple(
            call.make("OngoingPartitionReassignment", partition_index=tp.partition, replicas=m.replicas,
                      adding_replicas=m.adding, removing_replicas=m.removing)
            for tp, m in sorted(moves.items()) if tp.topic == topic))
        for topic in sorted({tp.topic for tp in moves})))


def _alter_reply(call: Call, top: Outcome, answers: Mapping[TopicPartition, Outcome]) -> Any:
    fields: dict[str, Any] = {}
    if call.version >= 1:
        fields["allow_replication_factor_change"] = bool(call.body.allow_replication_factor_change)
    return call.respond(throttle_time=millis(0), error_code=top.error, error_message=top.message, **fields,
                        responses=tuple(
                            call.make("ReassignableTopicResponse", name=topic, partitions=tuple(
                                call.make("ReassignablePartitionResponse", partition_index=index, error_code=o.error,
                                          error_message=o.message)
                                for index, o in sorted(parts)))
                            for topic, parts in _by_topic(answers.items()).items()))


def _by_topic(answers: Iterable[tuple[TopicPartition, Outcome]]) -> dict[str, list[tuple[int, Outcome]]]:
    grouped: dict[str, list[tuple[int, Outcome]]] = {}
    for (topic, index), outcome in answers:
        grouped.setdefault(topic, []).append((index, outcome))
    return grouped
