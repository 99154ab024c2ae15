"""Replication end to end: a real controller service and three brokers over real sockets."""

from __future__ import annotations

import asyncio

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.storage.batch import decode_records, split_batches
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import create_topics_request, fetch_request, now_batch, produce_request
from tinystream.testing.waiting import wait_until_async

LAG_TIME_MS = 2000  # conftest's replica.lag.time.max.ms


async def create(cluster, name: str, *, partitions: int = 1, min_isr: int = 2) -> None:
    """Through a broker's CreateTopics, forwarded to the controller."""
    client = await cluster.client(next(iter(cluster.brokers)))
    response = await client.request(create_topics_request(
        [(name, partitions, 3, {"min.insync.replicas": str(min_isr)})]
    ))
    assert response.topics[0].error_code == ErrorCode.none, response.topics[0].error_message


async def produce(cluster, leader: int, topic: str, values: list[bytes], *, acks: int = -1) -> list:
    client = await cluster.client(leader)
    out = []
    for v in values:
        r = await client.request(produce_request(topic, 0, now_batch([(None, v)]), acks=acks))
        out.append(r.responses[0].partition_responses[0])
    return out


def values_in(broker, topic: str) -> list[bytes]:
    partition = broker.replicas.get(TopicPartition(topic, 0))
    data = partition.log.read(0, 1 << 20, max_offset=None, min_one=True).data
    return [r.value for b in split_batches(bytes(data)) for r in decode_records(b)]


async def test_rf3_topic_gets_a_leader_and_followers_and_acks_all_reaches_every_replica(cluster):
    await create(cluster, "orders", partitions=3)
    for index in range(3):
        state = await cluster.partition("orders", index)
        assert sorted(state["replicas"]) == [1, 2, 3]
        await wait_until_async(lambda: all(cluster.replica(b, "orders", index) is not None for b in (1, 2, 3)))  # noqa: B023
        roles = {b: cluster.replica(b, "orders", index).is_leader for b in (1, 2, 3)}
        assert [b for b, leads in roles.items() if leads] == [state["leader"]]
    leader = (await cluster.partition("orders", 0))["leader"]
    answers = await produce(cluster, leader, "orders", [b"a", b"b", b"c"])
    assert [a.error_code for a in answers] == [ErrorCode.none] * 3
    # acks=all answered: every ISR member has the records, and the leader's HW covers them.
    assert cluster.replica(leader, "orders", 0).high_watermark == 3
    for b in (1, 2, 3):
        assert cluster.replica(b, "orders", 0).log_end_offset == 3
        await wait_until_async(lambda: cluster.replica(b, "orders", 0).high_watermark == 3, what="follower HW")  # noqa: B023
        assert values_in(cluster.brokers[b], "orders") == [b"a", b"b", b"c"]
    # Consumers before Fetch v11 read from the leader only; a follower says NOT_LEADER_OR_FOLLOWER (KIP-392:
    # v11+ may read a follower, test_follower_fetching.py).
    follower = next(b for b in (1, 2, 3) if b != leader)
    fetched = await (await cluster.client(follower)).request(fetch_request([("orders", 0, 0)], version=10))
    assert fetched.responses[0].partitions[0].error_code == ErrorCode.not_leader_or_follower
    # Metadata from any broker names the same leader and every broker.
    from tinystream.testing.broker import request
    md = await (await cluster.client(follower)).request(request(3, 9, topics=None, allow_auto_topic_creation=False,
                                                                 include_topic_authorized_operations=False,
                                                                 include_cluster_authorized_operations=False))
    assert sorted(b.node_id for b in md.brokers) == [1, 2, 3]
    orders = next(t for t in md.topics if t.name == "orders")
    assert next(p for p in orders.partitions if p.partition_index == 0).leader_id == leader


async def test_crashed_follower_leaves_the_isr_and_min_insync_is_enforced(cluster):
    await create(cluster, "isr", min_isr=2)
    state = await cluster.partition("isr", 0)
    leader = state["leader"]
    followers = [b for b in state["replicas"] if b != leader]
    await wait_until_async(lambda: all(cluster.replica(b, "isr", 0) is not None for b in (1, 2, 3)))
    assert [a.error_code for a in await produce(cluster, leader, "isr", [b"1"])] == [ErrorCode.none]

    await cluster.stop(followers[0], crash=True)
    # acks=all waits for the dead follower until the ISR drops it (lag time / session expiry).
    answers = await produce(cluster, leader, "isr", [b"2"])
    assert answers[0].error_code == ErrorCode.none
    await wait_until_async(lambda: followers[0] not in cluster.replica(leader, "isr", 0).state.isr,
                           timeout=LAG_TIME_MS / 1000 + 6, what="ISR shrink")
    assert [a.error_code for a in await produce(cluster, leader, "isr", [b"3"])] == [ErrorCode.none]

    await cluster.stop(followers[1], crash=True)
    await wait_until_async(lambda: cluster.replica(leader, "isr", 0).state.isr == (leader,),
                           timeout=LAG_TIME_MS / 1000 + 6, what="ISR of the leader alone")
    answers = await produce(cluster, leader, "isr", [b"4"])
    assert answers[0].error_code == ErrorCode.not_enough_replicas
    assert [a.error_code for a in await produce(cluster, leader, "isr", [b"5"], acks=1)] == [ErrorCode.none]

    # A follower that comes back catches up and rejoins the ISR.
    await cluster.start(followers[0])
    await wait_until_async(lambda: followers[0] in cluster.replica(leader, "isr", 0).state.isr, timeout=10, what="ISR expand")
    assert [a.error_code for a in await produce(cluster, leader, "isr", [b"6"])] == [ErrorCode.none]
    assert values_in(cluster.brokers[followers[0]], "isr") == [b"1", b"2", b"3", b"5", b"6"]


@pytest.mark.slow
async def test_leader_loss_elects_a_new_leader_and_a_returning_replica_truncates_its_divergent_tail(cluster):
    await create(cluster, "fo", min_isr=1)
    state = await cluster.partition("fo", 0)
    a = state["leader"]
    b, c = [x for x in state["replicas"] if x != a]
    await wait_until_async(lambda: all(cluster.replica(x, "fo", 0) is not None for x in (1, 2, 3)))
    assert all(r.error_code == ErrorCode.none for r in await produce(cluster, a, "fo", [b"x0", b"x1"]))
    await wait_until_async(lambda: cluster.replica(b, "fo", 0).log_end_offset == 2)

    # b gets a tail nobody else has (as if it had led epoch E and crashed before replicating), then crashes.
    tail = cluster.replica(b, "fo", 0)
    tail.log.append(now_batch([(None, b"lost")]), leader_epoch=state["leader_epoch"] + 1, now_ms=0)
    await cluster.stop(b, crash=True)
    # The leader goes away cleanly: c takes over, with a higher epoch, and takes writes.
    await cluster.stop(a)
    await wait_until_async(lambda: cluster.replica(c, "fo", 0).is_leader, timeout=10, what="c to lead")
    assert all(r.error_code == ErrorCode.none for r in await produce(cluster, c, "fo", [b"y2", b"y3"]))

    await cluster.start(b)
    await wait_until_async(lambda: cluster.replica(b, "fo", 0).log_end_offset == 4, timeout=10, what="b to catch up")
    assert values_in(cluster.brokers[b], "fo") == [b"x0", b"x1", b"y2", b"y3"]


@pytest.mark.slow
async def test_kafka_python_producer_survives_a_leader_failover_without_losing_acknowledged_records(cluster):
    kafka = pytest.importorskip("kafka")
    await create(cluster, "kp", min_isr=2)
    leader = (await cluster.partition("kp", 0))["leader"]
    await wait_until_async(lambda: all(cluster.replica(x, "kp", 0) is not None for x in (1, 2, 3)))
    bootstrap = cluster.bootstrap()
    acked: list[bytes] = []
    stop = asyncio.Event()

    def produce_loop(loop) -> None:
        producer = kafka.KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=50,
                                       retry_backoff_ms=200, request_timeout_ms=8000, linger_ms=0,
                                       max_in_flight_requests_per_connection=1, api_version=(2, 5, 0))
        try:
            i = 0
            while not stop.is_set() and i < 400:
                value = b"v%d" % i
                try:
                    producer.send("kp", value, partition=0).get(timeout=20)
                    acked.append(value)
                except Exception:
                    pass
                i += 1
        finally:
            producer.close(timeout=5)

    loop = asyncio.get_running_loop()
    worker = loop.run_in_executor(None, produce_loop, loop)
    await wait_until_async(lambda: len(acked) >= 20, timeout=20, what="first acks")
    await cluster.stop(leader)
    before = len(acked)
    await wait_until_async(lambda: len(acked) >= before + 20, timeout=20, what="acks after failover")
    stop.set()
    await worker
    new_leader = (await cluster.partition("kp", 0))["leader"]
    assert new_leader != leader
    stored = values_in(cluster.brokers[new_leader], "kp")
    assert set(acked) <= set(stored), "an acknowledged record was lost"
