"""Under a controller the brokers are one cluster: its cluster id, its producer-id blocks (KIP-730)."""

from __future__ import annotations

import time

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import millis
from tinystream.broker.storage import meta_properties
from tinystream.testing.broker import create_topics_request, now_batch, produce_request, request


async def _init_producer_id(client) -> int:
    reply = await client.request(request(22, 4, transactional_id=None, transaction_timeout=millis(60000),
                                         producer_id=-1, producer_epoch=-1))
    assert reply.error_code == ErrorCode.none
    return reply.producer_id


async def test_producer_ids_are_unique_across_brokers(cluster):
    ids = []
    for broker_id in (1, 2, 3):
        client = await cluster.client(broker_id)
        ids += [await _init_producer_id(client) for _ in range(2)]
    assert len(set(ids)) == len(ids), ids  # per-broker files handed out 0 on every broker


async def test_brokers_answer_the_controllers_cluster_id(cluster):
    expected = (await cluster.admin.health())["cluster_id"]
    for broker_id, broker in cluster.brokers.items():
        assert broker.cluster.cluster_id == expected
        md = await (await cluster.client(broker_id)).request(request(
            3, 9, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False,
            include_cluster_authorized_operations=False))
        assert md.cluster_id == expected
        assert meta_properties.read(broker.logs.log_dirs, broker_id) == expected


async def test_a_broker_refuses_log_dirs_of_another_cluster(cluster):
    await cluster.stop(3, crash=True)
    data = cluster.tmp_path / "broker-3"
    (data / "orders-0").mkdir(exist_ok=True)  # data of the other cluster
    (data / meta_properties.FILE_NAME).write_text("version=1\ncluster.id=someOtherCluster00000\nnode.id=3\n")
    with pytest.raises(meta_properties.InconsistentClusterIdError, match="someOtherCluster00000"):
        await cluster.start(3)


async def test_fresh_log_dirs_take_the_controllers_cluster_id(cluster):
    await cluster.stop(3)
    data = cluster.tmp_path / "broker-3"
    for child in data.iterdir():  # no partitions yet: nothing of another cluster to protect
        if child.is_dir():
            import shutil
            shutil.rmtree(child)
    (data / meta_properties.FILE_NAME).write_text("version=1\ncluster.id=someOtherCluster00000\nnode.id=3\n")
    broker = await cluster.start(3)
    assert broker.cluster.cluster_id == (await cluster.admin.health())["cluster_id"]


async def test_acks_all_completes_on_the_followers_next_fetch_not_after_a_poll_interval(cluster):
    client = await cluster.client(1)
    created = await client.request(create_topics_request([("fast", 1, 3, {"min.insync.replicas": "3"})]))
    assert created.topics[0].error_code == ErrorCode.none
    leader = (await cluster.partition("fast", 0))["leader"]
    producer = await cluster.client(leader)
    first = await producer.request(produce_request("fast", 0, now_batch([(None, b"warm")]), acks=-1))
    assert first.responses[0].partition_responses[0].error_code == ErrorCode.none
    took = []
    for i in range(20):
        start = time.perf_counter()
        r = await producer.request(produce_request("fast", 0, now_batch([(None, b"%d" % i)]), acks=-1))
        took.append(time.perf_counter() - start)
        assert r.responses[0].partition_responses[0].error_code == ErrorCode.none
    took.sort()
    # Followers long-poll (max_wait 500 ms) and are woken by the append; the leader's HW moves on the
    # fetch that shows they have the batch. Anything near the poll interval means a missed wake-up.
    assert took[len(took) // 2] < 0.05 and took[-1] < 0.25, took
