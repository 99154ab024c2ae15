"""Replication throttles (KIP-73) on three in-process brokers: a reassignment that adds a replica to a
partition holding 2 MB, throttled to 500 KB/s, still copies every byte, and the throttle is seen to act.

Assertions are on what the throttles counted (bytes, held-back fetches), never on wall time.
Kafka's own kafka-reassign-partitions.sh --throttle against both brokers: tests/compat/test_cluster_admin.py.
"""

from __future__ import annotations

import datetime

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.testing.broker import entity, now_batch, produce_request, request
from tinystream.testing.waiting import wait_until_async

SET = 0
BROKER, TOPIC = 4, 2
RATE = 500_000  # bytes/s
BATCHES, RECORDS, RECORD_BYTES = 20, 100, 1000  # 2 MB


def alter(resource_type: int, name: str, changes: dict[str, str]):
    return request(44, 1, validate_only=False, resources=(
        entity(44, 1, "AlterConfigsResource", resource_type=resource_type, resource_name=name, configs=tuple(
            entity(44, 1, "AlterableConfig", name=k, config_operation=SET, value=v) for k, v in changes.items())),))


def reassign(topic: str, replicas: list[int]):
    return request(45, 0, timeout=datetime.timedelta(seconds=30), topics=(entity(
        45, 0, "ReassignableTopic", name=topic, partitions=(
            entity(45, 0, "ReassignablePartition", partition_index=0, replicas=tuple(replicas)),)),))


async def _set(client, resource_type: int, name: str, changes: dict[str, str]) -> None:
    response = (await client.request(alter(resource_type, name, changes))).responses[0]
    assert response.error_code == ErrorCode.none, response.error_message


def _counts(cluster) -> dict[str, int]:
    """Bytes and held-back fetches, both sides, summed over the brokers."""
    out = {"leader_bytes": 0, "follower_bytes": 0, "leader_held": 0, "follower_held": 0}
    for broker in cluster.brokers.values():
        t = broker.replicas.throttles
        out["leader_bytes"] += t.leader.recorded_bytes
        out["follower_bytes"] += t.follower.recorded_bytes
        out["leader_held"] += t.leader.held_back
        out["follower_held"] += t.follower.held_back
    return out


async def _fill_and_add_replica(cluster, topic: str, *, throttled: bool) -> tuple[dict[str, int], int]:
    """Create `topic` on brokers 1, 2, fill it, list it for throttling (or not), add broker 3; returns the
    throttles' counts during the move and the bytes the new replica holds."""
    await cluster.admin.create_topic(topic, partitions=1, replica_assignment=[[1, 2]])
    leader = await cluster.client(1)
    await wait_until_async(lambda: (p := cluster.replica(1, topic, 0)) is not None and p.is_leader,
                           timeout=30, what="broker 1 leads")
    for _ in range(BATCHES):
        batch = now_batch([(None, b"x" * RECORD_BYTES)] * RECORDS)
        produced = await leader.request(produce_request(topic, 0, batch, acks=-1))
        assert produced.responses[0].partition_responses[0].error_code == ErrorCode.none
    if throttled:  # as kafka-reassign-partitions.sh --throttle: current replicas lead, the new one follows
        await _set(leader, TOPIC, topic, {"leader.replication.throttled.replicas": "0:1,0:2",
                                          "follower.replication.throttled.replicas": "0:3"})
        await wait_until_async(lambda: all(
            "follower.replication.throttled.replicas" in b.topics.get(topic).configs
            for b in cluster.brokers.values()), timeout=30, what="every broker sees the throttled replicas")
    before = _counts(cluster)
    answer = (await leader.request(reassign(topic, [1, 2, 3]))).responses[0].partitions[0]
    assert answer.error_code == ErrorCode.none, answer.error_message

    async def moved() -> bool:
        p = await cluster.partition(topic, 0)
        return sorted(p["replicas"]) == [1, 2, 3] and not p.get("adding_replicas") and sorted(p["isr"]) == [1, 2, 3]

    await wait_until_async(moved, timeout=90, what="the reassignment completed")
    source, copy = cluster.replica(1, topic, 0), cluster.replica(3, topic, 0)
    await wait_until_async(lambda: copy.log_end_offset == source.log_end_offset, timeout=30, what="the full copy")
    assert copy.log_end_offset == BATCHES * RECORDS and copy.log.size_bytes() == source.log.size_bytes()  # nothing lost
    after = _counts(cluster)
    return {k: after[k] - before[k] for k in after}, copy.log.size_bytes()


@pytest.mark.timeout(180)
async def test_a_throttled_move_copies_everything_and_the_throttle_holds_it_back(cluster):
    for broker_id in (1, 2, 3):  # each broker's own rates, set on that broker (as Kafka's admin routes them)
        client = await cluster.client(broker_id)
        await _set(client, BROKER, str(broker_id), {"leader.replication.throttled.rate": str(RATE),
                                                    "follower.replication.throttled.rate": str(RATE)})
    assert all(b.replicas.throttles.follower.limit == RATE for b in cluster.brokers.values())

    counted, size = await _fill_and_add_replica(cluster, "slow", throttled=True)
    client = await cluster.client(2)  # a bad list, forwarded to the controller, is refused as Kafka refuses it
    bad = (await client.request(alter(TOPIC, "slow", {"leader.replication.throttled.replicas": "0-1"}))).responses[0]
    assert bad.error_code == ErrorCode.invalid_config and "must be the literal '*'" in bad.error_message
    assert size >= BATCHES * RECORDS * RECORD_BYTES
    # The new replica's fetcher counted every byte it copied; the leader every byte it served to it.
    assert counted["follower_bytes"] >= size and counted["leader_bytes"] >= size
    # 2 MB at 500 KB/s cannot pass without a side holding fetches back (each fetch may carry 1 MB).
    assert counted["leader_held"] + counted["follower_held"] > 0, counted
    exposition = cluster.brokers[3].metrics.exposition().decode()
    assert 'tinystream_replication_throttled_bytes_total{side="follower"}' in exposition

    # The same rates, but a topic that lists no replica: nothing is counted or held back.
    unlisted, _ = await _fill_and_add_replica(cluster, "free", throttled=False)
    assert unlisted == {"leader_bytes": 0, "follower_bytes": 0, "leader_held": 0, "follower_held": 0}
