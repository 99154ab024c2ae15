"""ElectLeaders (43, v0-2, KIP-460): `kafka-leader-election.sh` moves leaders back to their preferred replica.

Needs ALTER on the CLUSTER (Kafka's rule). Preferred elections go to the
controller (forwarded like topic admin, answered once this broker applied the
result); each partition answers as Kafka does: ELECTION_NOT_NEEDED where the
preferred replica already leads, PREFERRED_LEADER_NOT_AVAILABLE where it is
not in sync, UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist.
A standalone broker leads every partition it has, so nothing is ever needed.
Unclean elections (type 1) are not served: the controller never elects an
out-of-sync replica (no data loss by request); each partition answers
INVALID_REQUEST saying so. Null partitions means every partition; as in
Kafka, only those that needed an election (and got one, or failed) are listed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.acls import AclOperation
from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared import authz
from tinystream.broker.handlers.shared.context import BrokerContext, Call
from tinystream.broker.protocol.codec import millis
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.storage.topic_partition import TopicPartition

PREFERRED, UNCLEAN = 0, 1


@dataclass(frozen=True, slots=True)
class Outcome:
    error: ErrorCode
    message: str | None = None


NOT_NEEDED = Outcome(ErrorCode.election_not_needed, "the preferred replica already leads")
UNKNOWN = Outcome(ErrorCode.unknown_topic_or_partition, "no such partition")


def before_election(states: Mapping[TopicPartition, PartitionState], wanted: Iterable[TopicPartition] | None
                    ) -> tuple[list[TopicPartition], dict[TopicPartition, Outcome]]:
    """(partitions to elect, the answers known without an election). `wanted` None: every partition,
    and the ones whose preferred replica leads are left out of the answer, as Kafka does."""
    elect: list[TopicPartition] = []
    known: dict[TopicPartition, Outcome] = {}
    for tp in sorted(states) if wanted is None else wanted:
        state = states.get(tp)
        if state is None or not state.replicas:
            known[tp] = UNKNOWN
        elif state.leader == state.replicas[0]:
            if wanted is not None:
                known[tp] = NOT_NEEDED
        elif state.replicas[0] not in state.isr:
            known[tp] = Outcome(ErrorCode.preferred_leader_not_available,
                                f"the preferred replica {state.replicas[0]} is not in sync")
        else:
            elect.append(tp)
    return elect, known


def after_election(states: Mapping[TopicPartition, PartitionState], elected: Iterable[TopicPartition]
                   ) -> dict[TopicPartition, Outcome]:
    """Each partition sent to the controller: led by its preferred replica now, or why not."""
    answers = {}
    for tp in elected:
        state = states.get(tp)
        if state is not None and state.replicas and state.leader == state.replicas[0]:
            answers[tp] = Outcome(ErrorCode.none)
        else:
            answers[tp] = Outcome(ErrorCode.preferred_leader_not_available,
                                  "the controller did not move the leader (its preferred replica left the ISR)")
    return answers


def _states(ctx: BrokerContext) -> dict[TopicPartition, PartitionState]:
    return {tp: ctx.topics.partition_state(tp)
            for spec in ctx.topics.topics() for tp in (TopicPartition(spec.name, i) for i in range(spec.partitions))}


def _wanted(body: Any) -> list[TopicPartition] | None:
    if body.topic_partitions is None:
        return None
    return list(dict.fromkeys(TopicPartition(t.topic, int(p)) for t in body.topic_partitions for p in t.partitions))


async def handle_elect_leaders(ctx: BrokerContext, call: Call) -> Any:
    wanted = _wanted(call.body)
    if not authz.allowed_cluster(ctx, call, AclOperation.ALTER):
        denied = Outcome(ErrorCode.cluster_authorization_failed, "ALTER on the cluster is not allowed")
        return _respond(call, ErrorCode.cluster_authorization_failed, {tp: denied for tp in wanted or ()})
    if call.version >= 1 and call.body.election_type == UNCLEAN:
        refused = Outcome(ErrorCode.invalid_request, "unclean leader election is not served by TinyStream")
        return _respond(call, ErrorCode.none, {tp: refused for tp in wanted or ()})
    elect, answers = before_election(_states(ctx), wanted)
    if elect:
        if ctx.forwarding is None:  # standalone: this broker leads all it has, so before_election elects nothing
            raise AssertionError("a standalone broker found a partition to elect")
        error, message = await ctx.forwarding.elect_preferred_leaders(elect)
        if error != ErrorCode.none:
            answers.update({tp: Outcome(error, message) for tp in elect})
        else:
            answers.update(after_election(_states(ctx), elect))
    return _respond(call, ErrorCode.none, answers)


def _respond(call: Call, error: ErrorCode, answers: Mapping[TopicPartition, Outcome]) -> Any:
    by_topic: dict[str, list[tuple[int, Outcome]]] = {}
    for (topic, index), outcome in answers.items():
        by_topic.setdefault(topic, []).append((index, outcome))
    return call.respond(throttle_time=millis(0), error_code=error, replica_election_results=tuple(
        call.make("ReplicaElectionResult", topic=topic, partition_result=tuple(
            call.make("PartitionResult", partition_id=index, error_code=o.error, error_message=o.message)
            for index, o in sorted(results)))
        for topic, results in by_topic.items()))
