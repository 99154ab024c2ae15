"""Issue 21, item 4: broker-only requests are never served to a client that has not proven it is a broker.

Before: on a single PLAINTEXT listener the inter-broker listener authenticated no one, so every client
passed the broker check: an anonymous WriteTxnMarkers wrote a COMMIT marker, and a Fetch with a made-up
replica_id was taken for a follower's and moved the high watermark. Now a listener that authenticates no
one has no broker principals (BrokerContext.from_broker): such requests are refused as Kafka refuses
them without ClusterAction, and brokers replicate on their own authenticated listener
(tinystream/dev/replication.py), where a client logged in as anyone but the broker user is refused too.
"""

from __future__ import annotations

import asyncio

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient, SaslLogin, SaslRefused
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.dev.replication import BROKER_USER, ensure_credentials
from tinystream.scram_users import UserStore
from tinystream.testing.broker import (
    create_topics_request,
    entity,
    fetch_request,
    now_batch,
    produce_request,
    request,
    test_settings,
)
from tinystream.testing.waiting import wait_until_async

from ..conftest import Cluster


def commit_marker(topic: str) -> object:
    return request(27, 1, markers=(entity(27, 1, "WritableTxnMarker", producer_id=5, producer_epoch=0,
                                          transaction_result=True, coordinator_epoch=0, topics=(
                                              entity(27, 1, "WritableTxnMarkerTopic", name=topic,
                                                     partition_indexes=(0,)),)),))


PLAINTEXT_ONLY = {"listeners": "PLAINTEXT://127.0.0.1:0", "offsets.topic.replication.factor": 1}


async def two_brokers_with(cluster: Cluster, topic: tuple, **overrides):
    """Brokers 1 and 2 (each with `overrides`), a topic by its create_topics_request row; returns
    (the partition's leader broker, the other broker's id) once the partition has a leader."""
    await asyncio.gather(cluster.start(1, **overrides), cluster.start(2, **overrides))
    await wait_until_async(lambda: all(len(b.cluster.brokers()) == 2 for b in cluster.brokers.values()),
                           what="2 live brokers")
    client = await cluster.client(1)
    created = await client.request(create_topics_request([topic]))
    assert created.topics[0].error_code == ErrorCode.none
    tp = TopicPartition(topic[0], 0)
    await wait_until_async(lambda: any((p := b.replicas.get(tp)) is not None and p.is_leader
                                       for b in cluster.brokers.values()), what="a leader")
    leader = next(b for b in cluster.brokers.values() if (p := b.replicas.get(tp)) and p.is_leader)
    return leader, next(i for i in cluster.brokers if cluster.brokers[i] is not leader)


async def test_an_anonymous_client_on_a_plaintext_listener_writes_no_marker(tmp_path):
    broker = Broker(test_settings(tmp_path / "b"))  # one PLAINTEXT listener, Kafka's default
    await broker.start()
    try:
        assert broker.info is not None
        client = await KafkaClient.connect(broker.info.host, broker.info.port)
        assert (await client.request(create_topics_request([("t", 1, 1)]))).topics[0].error_code == ErrorCode.none
        answer = await client.request(commit_marker("t"))
        assert answer.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        assert broker.replicas.get(TopicPartition("t", 0)).log_end_offset == 0  # no COMMIT marker written
        verify = request(24, 4, transactions=(entity(24, 4, "AddPartitionsToTxnTransaction", transactional_id="x",
                                                     producer_id=5, producer_epoch=0, verify_only=True, topics=()),))
        assert (await client.request(verify)).error_code == ErrorCode.cluster_authorization_failed
        await client.close()
    finally:
        await broker.stop()


async def test_a_made_up_replica_id_on_a_plaintext_cluster_moves_no_high_watermark(tmp_path, controller):
    cluster = Cluster(tmp_path, controller)
    try:  # the old layout: one PLAINTEXT listener, replication on it too
        leader, follower_id = await two_brokers_with(cluster, ("spoofed", 1, 2), **PLAINTEXT_ONLY)
        tp = TopicPartition("spoofed", 0)
        writer = await KafkaClient.connect(leader.info.host, leader.info.port)
        done = await writer.request(produce_request("spoofed", 0, now_batch([(None, b"x")]), acks=1))
        assert done.responses[0].partition_responses[0].error_code == ErrorCode.none
        partition = leader.replicas.get(tp)
        assert partition.high_watermark == 0  # the real follower is refused too: it cannot prove it is one

        spoof = fetch_request([("spoofed", 0, 1)], replica_id=follower_id)  # "I have it all"
        answer = await writer.request(spoof)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        await asyncio.sleep(0.2)
        assert partition.high_watermark == 0 and follower_id in partition.state.isr
        await writer.close()
    finally:
        await cluster.close()


async def test_brokers_replicate_on_their_listener_and_only_the_broker_user_acts_as_one(tmp_path, controller):
    # A second SCRAM user in the brokers' users file: logged in on REPLICATION, but not a broker.
    users_file, _ = ensure_credentials(tmp_path / "replication")
    store = UserStore.load(users_file)
    store.set_password("mallory", "m")
    store.save(users_file)
    cluster = Cluster(tmp_path, controller)  # the default layout: replication_settings
    try:
        leader, follower_id = await two_brokers_with(cluster, ("safe", 1, 2, {"min.insync.replicas": "2"}))
        tp = TopicPartition("safe", 0)
        writer = await KafkaClient.connect(leader.info.host, leader.info.port)
        done = await writer.request(produce_request("safe", 0, now_batch([(None, b"x")]), acks=-1), timeout=15)
        assert done.responses[0].partition_responses[0].error_code == ErrorCode.none  # replicated, acks=all
        partition = leader.replicas.get(tp)
        assert partition.high_watermark == 1

        host, port = leader.info.endpoint("REPLICATION")
        with pytest.raises(SaslRefused):
            await KafkaClient.connect(host, port, sasl=SaslLogin("SCRAM-SHA-512", BROKER_USER, "guess"))
        mallory = await KafkaClient.connect(host, port, sasl=SaslLogin("SCRAM-SHA-512", "mallory", "m"))
        answer = await mallory.request(fetch_request([("safe", 0, 1)], replica_id=follower_id))
        assert answer.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        refused = await mallory.request(commit_marker("safe"))
        assert refused.markers[0].topics[0].partitions[0].error_code == ErrorCode.cluster_authorization_failed
        assert partition.log_end_offset == 1 and partition.high_watermark == 1
        for c in (writer, mallory):
            await c.close()
    finally:
        await cluster.close()


async def test_no_client_may_set_the_broker_users_credential(tmp_path):
    users_file, password_file = ensure_credentials(tmp_path / "replication")
    settings = test_settings(tmp_path / "b", **{"inter.broker.sasl.username": BROKER_USER,
                                                "inter.broker.sasl.password.file": str(password_file),
                                                "sasl.users.file": str(users_file)})
    broker = Broker(settings)  # one PLAINTEXT listener and no authorizer: anyone may alter credentials
    await broker.start()
    try:
        assert broker.info is not None
        client = await KafkaClient.connect(broker.info.host, broker.info.port)
        upsert = request(51, 0, deletions=(), upsertions=(
            entity(51, 0, "ScramCredentialUpsertion", name=BROKER_USER, mechanism=2, iterations=4096,
                   salt=b"s" * 16, salted_password=b"p" * 64),))
        answer = await client.request(upsert)
        assert answer.results[0].error_code == ErrorCode.unacceptable_credential
        assert "inter.broker.sasl.username" in answer.results[0].error_message
        assert broker.ctx.users is not None
        assert broker.ctx.users.mechanisms_of(BROKER_USER).keys() == {"SCRAM-SHA-512"}  # the file's alone
        broker.ctx.users.replace_replicated({BROKER_USER: {"SCRAM-SHA-512": object()}})  # type: ignore[dict-item]
        assert broker.ctx.users.credential(BROKER_USER, "SCRAM-SHA-512") == \
            UserStore.load(users_file).credential(BROKER_USER, "SCRAM-SHA-512")
        await client.close()
    finally:
        await broker.stop()


async def test_a_refused_follower_asks_again_on_its_own_and_does_not_spin(tmp_path, controller, monkeypatch):
    """A follower refused as a non-broker pauses (asking again at once spun the event loop) and asks again
    after REFUSED_RETRY_S, without waiting for metadata that a quiet cluster may never send."""
    from tinystream.broker.replication import replica_fetcher

    monkeypatch.setattr(replica_fetcher, "REFUSED_RETRY_S", 0.3)
    resumed: list[float] = []
    original = replica_fetcher.LeaderFetcher._resume

    def counting(self, tp, state):  # type: ignore[no-untyped-def]
        resumed.append(asyncio.get_running_loop().time())
        original(self, tp, state)

    monkeypatch.setattr(replica_fetcher.LeaderFetcher, "_resume", counting)
    cluster = Cluster(tmp_path, controller)
    try:
        await two_brokers_with(cluster, ("quiet", 1, 2), **PLAINTEXT_ONLY)
        await wait_until_async(lambda: len(resumed) >= 1, timeout=10, what="a first refusal and retry")
        first = len(resumed)
        await asyncio.sleep(1.5)
        asked = len(resumed) - first
        assert 2 <= asked <= 8, asked  # it keeps asking, about every 0.3 s: neither stuck nor spinning
    finally:
        await cluster.close()
