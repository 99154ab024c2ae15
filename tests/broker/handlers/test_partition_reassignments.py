"""Alter/ListPartitionReassignments: the answers per partition, standalone and forwarded under a controller.

Kafka's own kafka-reassign-partitions.sh against both brokers: tests/compat/test_cluster_admin.py.
"""

from __future__ import annotations

import datetime

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.partition_reassignments import Ongoing, check_target, ongoing_from_image
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import create_topic, entity, now_batch, produce_request, request
from tinystream.testing.waiting import wait_until_async

ms = datetime.timedelta


def alter(moves: dict[tuple[str, int], list[int] | None], *, allow_rf_change: bool = True, version: int = 1):
    topics: dict[str, list] = {}
    for (topic, index), replicas in moves.items():
        topics.setdefault(topic, []).append(entity(45, version, "ReassignablePartition", partition_index=index,
                                                   replicas=None if replicas is None else tuple(replicas)))
    extra = {"allow_replication_factor_change": allow_rf_change} if version >= 1 else {}
    return request(45, version, timeout=ms(seconds=30), **extra, topics=tuple(
        entity(45, version, "ReassignableTopic", name=t, partitions=tuple(ps)) for t, ps in topics.items()))


def listing(topics: dict[str, list[int]] | None = None):
    return request(46, 0, timeout=ms(seconds=30), topics=None if topics is None else tuple(
        entity(46, 0, "ListPartitionReassignmentsTopics", name=t, partition_indexes=tuple(ps))
        for t, ps in topics.items()))


def _answers(reply) -> dict[tuple[str, int], int]:
    return {(t.name, p.partition_index): p.error_code for t in reply.responses for p in t.partitions}


def _ongoing(reply) -> dict[tuple[str, int], tuple]:
    return {(t.name, p.partition_index): (p.replicas, p.adding_replicas, p.removing_replicas)
            for t in reply.topics for p in t.partitions}


@pytest.mark.parametrize(("current", "target", "reassigning", "allow", "expected"), [
    (None, (1,), False, True, ErrorCode.unknown_topic_or_partition),
    ((1, 2), None, False, True, ErrorCode.no_reassignment_in_progress),
    ((1, 2), None, True, True, None),  # cancel a running move
    ((1, 2), (), False, True, ErrorCode.invalid_replica_assignment),
    ((1, 2), (2, 2), False, True, ErrorCode.invalid_replica_assignment),
    ((1, 2), (2, 9), False, True, ErrorCode.invalid_replica_assignment),  # no broker 9
    ((1, 2), (1, 2, 3), False, False, ErrorCode.invalid_replication_factor),  # KIP-860: v1 said no
    ((1, 2), (1, 2, 3), False, True, None),
    ((1, 2), (3, 2), False, False, None),
])
def test_check_target(current, target, reassigning, allow, expected):
    refused = check_target(current, target, brokers={1, 2, 3}, reassigning=reassigning,
                           allow_replication_factor_change=allow)
    assert (refused.error if refused else None) == expected


def test_ongoing_moves_come_from_the_image_and_honour_the_filter():
    image = {"topics": [
        {"name": "a", "partitions": [
            {"partition": 0, "replicas": [3, 1, 2], "adding_replicas": [3], "removing_replicas": [2]},
            {"partition": 1, "replicas": [1, 2], "adding_replicas": [], "removing_replicas": []}]},
        {"name": "b", "partitions": [{"partition": 0, "replicas": [1]}]}]}
    assert ongoing_from_image(image, None) == {TopicPartition("a", 0): Ongoing((3, 1, 2), (3,), (2,))}
    assert ongoing_from_image(image, {"a": {1}, "b": {0}}) == {}
    assert ongoing_from_image(None, None) == {}


async def test_a_standalone_broker_accepts_only_its_own_assignment(broker, client):
    await create_topic(client, "solo", partitions=1)
    me = broker.settings.broker_id
    reply = await client.request(alter({("solo", 0): [me], ("solo", 1): [me], ("nope", 0): [me]}))
    assert reply.error_code == ErrorCode.none and reply.allow_replication_factor_change is True
    assert _answers(reply) == {("solo", 0): ErrorCode.none, ("solo", 1): ErrorCode.unknown_topic_or_partition,
                               ("nope", 0): ErrorCode.unknown_topic_or_partition}
    elsewhere = await client.request(alter({("solo", 0): [me + 1]}))
    assert _answers(elsewhere) == {("solo", 0): ErrorCode.invalid_replica_assignment}
    cancel = await client.request(alter({("solo", 0): None}, version=0))
    assert _answers(cancel) == {("solo", 0): ErrorCode.no_reassignment_in_progress}
    assert _ongoing(await client.request(listing())) == {}


@pytest.mark.timeout(120)
async def test_a_replica_moves_through_any_broker_and_the_data_follows(cluster):
    await cluster.admin.create_topic("move", partitions=2, replication_factor=2)
    before = (await cluster.partition("move", 0))["replicas"]
    spare = next(b for b in cluster.brokers if b not in before)
    target = [spare, before[0]]
    client = await cluster.client(before[1])
    # Records first, so the new replica has something to catch up on.
    leader = await cluster.client((await cluster.partition("move", 0))["leader"])
    for _ in range(5):
        produced = await leader.request(produce_request("move", 0, now_batch([(None, b"x" * 100)] * 20), acks=-1))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    bad_rf = await client.request(alter({("move", 0): [spare]}, allow_rf_change=False))
    assert _answers(bad_rf) == {("move", 0): ErrorCode.invalid_replication_factor}
    reply = await client.request(alter({("move", 0): target, ("move", 7): target}))
    assert _answers(reply) == {("move", 0): ErrorCode.none, ("move", 7): ErrorCode.unknown_topic_or_partition}

    async def moved() -> bool:
        p = await cluster.partition("move", 0)
        return p["replicas"] == target and not p.get("adding_replicas") and not p.get("removing_replicas")

    await wait_until_async(moved, timeout=60, what="the reassignment completed")
    assert _ongoing(await client.request(listing())) == {}
    replica = cluster.brokers[spare].replicas.get(TopicPartition("move", 0))
    await wait_until_async(lambda: replica.log.log_end_offset == 100, timeout=30, what="the new replica's copy")
    nothing = await client.request(alter({("move", 1): None}))
    assert _answers(nothing) == {("move", 1): ErrorCode.no_reassignment_in_progress}
