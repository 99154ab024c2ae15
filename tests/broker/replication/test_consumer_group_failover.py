"""A KIP-848 consumer group across a coordinator crash: three brokers, __consumer_offsets at RF 3.

The member joins and commits at the coordinator (the leader of the group's
__consumer_offsets partition); that broker crashes; a new leader of the
partition loads the group from the replicated records, and the member goes
on heartbeating at its epoch there, with its assignment and offsets, without
rejoining.
"""

from __future__ import annotations

import asyncio

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import millis
from tinystream.testing.broker import create_topics_request, entity, request

GROUP = "failover-group"
RETRIABLE = {ErrorCode.not_coordinator, ErrorCode.coordinator_load_in_progress, ErrorCode.coordinator_not_available}


def heartbeat(member: str, epoch: int, *, join: bool = False):
    return request(68, 1, group_id=GROUP, member_id=member, member_epoch=epoch, instance_id=None, rack_id=None,
                   rebalance_timeout=millis(30_000 if join else -1),
                   subscribed_topic_names=("t",) if join else None, subscribed_topic_regex=None,
                   server_assignor=None, topic_partitions=() if join else None)


async def coordinator_of(cluster, asking: int) -> int:
    client = await cluster.client(asking)
    for _ in range(200):
        found = await client.request(request(10, 3, key=GROUP, key_type=0))
        if found.error_code == ErrorCode.none and found.node_id in cluster.brokers:
            return found.node_id
        await asyncio.sleep(0.1)
    raise AssertionError("no live coordinator found")


async def until_served(cluster, broker_id: int, body):
    client = await cluster.client(broker_id)
    for _ in range(200):
        answer = await client.request(body)
        if answer.error_code not in RETRIABLE:
            return answer
        await asyncio.sleep(0.1)
    raise AssertionError(f"broker {broker_id} kept answering {answer.error_code!r}")


async def test_the_member_goes_on_at_the_new_coordinator(cluster):
    client = await cluster.client(next(iter(cluster.brokers)))
    created = await client.request(create_topics_request([("t", 2, 3, {"min.insync.replicas": "2"})]))
    assert created.topics[0].error_code == ErrorCode.none
    first = await coordinator_of(cluster, next(iter(cluster.brokers)))
    joined = await until_served(cluster, first, heartbeat("m1", 0, join=True))
    assert (joined.error_code, joined.member_epoch) == (ErrorCode.none, 1)
    assert sorted(p for tp in joined.assignment.topic_partitions for p in tp.partitions) == [0, 1]
    committed = await (await cluster.client(first)).request(request(
        8, 9, group_id=GROUP, generation_id_or_member_epoch=1, member_id="m1", group_instance_id=None, topics=(
            entity(8, 9, "OffsetCommitRequestTopic", name="t", partitions=(
                entity(8, 9, "OffsetCommitRequestPartition", partition_index=1, committed_offset=33,
                       committed_leader_epoch=-1, committed_metadata=""),)),)))
    assert committed.topics[0].partitions[0].error_code == ErrorCode.none

    await cluster.stop(first, crash=True)
    survivor = next(iter(cluster.brokers))
    second = await coordinator_of(cluster, survivor)
    assert second != first
    went_on = await until_served(cluster, second, heartbeat("m1", 1))
    assert (went_on.error_code, went_on.member_epoch) == (ErrorCode.none, 1)  # no rejoin, no new epoch
    described = await (await cluster.client(second)).request(
        request(69, 1, group_ids=(GROUP,), include_authorized_operations=False))
    (member,) = described.groups[0].members
    assert (member.member_id, member.member_epoch) == ("m1", 1)
    assert sorted(p for tp in member.assignment.topic_partitions for p in tp.partitions) == [0, 1]
    fetched = await (await cluster.client(second)).request(request(9, 9, require_stable=True, groups=(
        entity(9, 9, "OffsetFetchRequestGroup", group_id=GROUP, member_id="m1", member_epoch=1, topics=None),)))
    assert [(p.partition_index, p.committed_offset) for t in fetched.groups[0].topics for p in t.partitions] == [
        (1, 33)]
