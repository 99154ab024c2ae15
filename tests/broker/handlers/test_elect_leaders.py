"""ElectLeaders: the answers per partition, on a standalone broker and forwarded under a controller."""

from __future__ import annotations

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.elect_leaders import after_election, before_election
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import create_topic, entity, request
from tinystream.testing.waiting import wait_until_async


def elect(partitions: dict[str, list[int]] | None, *, election_type: int = 0, version: int = 2):
    topics = None if partitions is None else tuple(
        entity(43, version, "TopicPartitions", topic=t, partitions=tuple(ps)) for t, ps in partitions.items())
    return request(43, version, election_type=election_type, topic_partitions=topics)


def _answers(reply) -> dict[tuple[str, int], int]:
    return {(r.topic, p.partition_id): p.error_code for r in reply.replica_election_results for p in r.partition_result}


A, B, C = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)
STATES = {
    A: PartitionState(leader=1, leader_epoch=3, replicas=(1, 2), isr=(1, 2)),  # preferred leads
    B: PartitionState(leader=2, leader_epoch=3, replicas=(1, 2), isr=(1, 2)),  # preferred in sync: elect
    C: PartitionState(leader=2, leader_epoch=3, replicas=(1, 2), isr=(2,)),  # preferred out of sync
}


def test_before_election_sorts_partitions_into_elect_and_known_answers():
    elect_now, known = before_election(STATES, [A, B, C, TopicPartition("gone", 0)])
    assert elect_now == [B]
    assert {tp: o.error for tp, o in known.items()} == {
        A: ErrorCode.election_not_needed, C: ErrorCode.preferred_leader_not_available,
        TopicPartition("gone", 0): ErrorCode.unknown_topic_or_partition}
    elect_all, known_all = before_election(STATES, None)  # all partitions: the balanced ones are not listed
    assert elect_all == [B] and set(known_all) == {C}


def test_after_election_reports_a_leader_that_did_not_move():
    moved = {**STATES, B: PartitionState(leader=1, leader_epoch=4, replicas=(1, 2), isr=(1, 2))}
    assert after_election(moved, [B])[B].error == ErrorCode.none
    assert after_election(STATES, [B])[B].error == ErrorCode.preferred_leader_not_available


async def test_a_standalone_broker_never_needs_an_election(broker, client):
    await create_topic(client, "solo", partitions=2)
    reply = await client.request(elect({"solo": [0, 1], "nope": [0]}))
    assert reply.error_code == ErrorCode.none
    assert _answers(reply) == {("solo", 0): ErrorCode.election_not_needed, ("solo", 1): ErrorCode.election_not_needed,
                               ("nope", 0): ErrorCode.unknown_topic_or_partition}
    assert _answers(await client.request(elect(None))) == {}
    unclean = await client.request(elect({"solo": [0]}, election_type=1))
    assert _answers(unclean) == {("solo", 0): ErrorCode.invalid_request}
    assert "unclean" in unclean.replica_election_results[0].partition_result[0].error_message


@pytest.mark.timeout(120)
async def test_leadership_returns_to_the_preferred_replica_through_any_broker(cluster):
    await cluster.admin.create_topic("pref", partitions=1, replication_factor=3)
    preferred = (await cluster.partition("pref", 0))["replicas"][0]
    await cluster.stop(preferred)
    await wait_until_async(lambda: _leader(cluster) not in (preferred, -1), what="leadership moved")
    await cluster.start(preferred)
    await wait_until_async(lambda: preferred in _isr(cluster), timeout=60, what="the preferred replica back in sync")
    other = next(b for b in cluster.brokers if b != preferred)
    client = await cluster.client(other)
    reply = await client.request(elect({"pref": [0]}))
    assert _answers(reply) == {("pref", 0): ErrorCode.none}
    assert cluster.brokers[other].topics.partition_state(TopicPartition("pref", 0)).leader == preferred
    again = await client.request(elect({"pref": [0]}))
    assert _answers(again) == {("pref", 0): ErrorCode.election_not_needed}


def _state(cluster) -> PartitionState:
    broker = next(iter(cluster.brokers.values()))
    return broker.topics.partition_state(TopicPartition("pref", 0))


def _leader(cluster) -> int:
    return _state(cluster).leader


def _isr(cluster) -> tuple[int, ...]:
    return _state(cluster).isr
