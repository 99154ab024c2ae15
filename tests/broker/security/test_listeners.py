"""Two listeners per broker, as Kafka runs them (issue 12): CLIENT (PLAINTEXT) and REPLICATION (SSL, mTLS).

A controller and two brokers on 127.0.0.1, each with
`listeners=CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0` and `inter.broker.listener.name=REPLICATION`;
the replication listener asks for client certificates (listener.name.replication.ssl.client.auth=required)
and names brokers by their certificate's CN (listener.name.replication.ssl.principal.mapping.rules).

- both endpoints reach the controller's image; Metadata answers each listener with its own endpoints;
- followers replicate over REPLICATION, presenting their certificates;
- a Fetch with a follower's replica_id is refused on CLIENT, and on REPLICATION from a non-broker
  certificate; the high watermark does not move (attack 2);
- 1000 idle sockets on CLIENT do not stop a follower from connecting and replicating (attack 3).
"""

from __future__ import annotations

import asyncio
import ssl

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import (
    ThrowawayPki,
    create_topics_request,
    fetch_request,
    now_batch,
    produce_request,
    request,
)
from tinystream.testing.waiting import wait_until_async

from ..conftest import Cluster


@pytest.fixture
def pki(tmp_path):
    pytest.importorskip("trustme")
    return ThrowawayPki(tmp_path / "pki")


def listener_settings(pki: ThrowawayPki, broker_id: int, **extra) -> dict:
    return {
        "listeners": "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
        "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:SSL",
        "inter.broker.listener.name": "REPLICATION",
        "ssl.keystore.location": str(pki.issue(f"broker-{broker_id}", common_name=f"broker-{broker_id}", unit="brokers")),
        "ssl.truststore.location": str(pki.ca_pem),
        "listener.name.replication.ssl.client.auth": "required",
        "listener.name.replication.ssl.principal.mapping.rules": "RULE:^CN=(.*?),.*$/$1/",
        "super.users": "User:broker-1;User:broker-2",
        "offsets.topic.replication.factor": 2,
        **extra,
    }


async def start_two(tmp_path, controller, pki, **extra) -> Cluster:
    cluster = Cluster(tmp_path, controller)
    for broker_id in (1, 2):
        await cluster.start(broker_id, **listener_settings(pki, broker_id, **extra))
    await wait_until_async(lambda: all(len(b.cluster.brokers()) == 2 for b in cluster.brokers.values()), what="2 live brokers")
    return cluster


def tls_to(pki: ThrowawayPki, certificate=None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(pki.ca_pem))
    if certificate is not None:
        context.load_cert_chain(str(certificate))
    return context


async def in_sync(cluster: Cluster, topic: str):
    """(leader, follower) once both replicas are in the ISR and the follower's fetcher is connected."""
    tp = TopicPartition(topic, 0)

    def both():
        leading = [b for b in cluster.brokers.values() if (p := b.replicas.get(tp)) is not None and p.is_leader]
        return leading and len(leading[0].replicas.get(tp).state.isr) == 2 and leading[0]

    await wait_until_async(both, timeout=15, what=f"{topic}: both replicas in the ISR")
    leader = both()
    follower = next(b for b in cluster.brokers.values() if b is not leader)
    await wait_until_async(lambda: leader.servers["REPLICATION"].connection_count >= 1, what="the follower connected")
    return leader, follower


async def test_each_listener_is_answered_with_its_own_endpoints_and_followers_use_replication(tmp_path, controller, pki):
    cluster = await start_two(tmp_path, controller, pki)
    try:
        b1, b2 = cluster.brokers[1], cluster.brokers[2]
        image = (await cluster.admin.metadata()).image
        registered = {b["broker_id"]: {e["name"]: (e["port"], e["security_protocol"]) for e in b["endpoints"]}
                      for b in image["brokers"]}
        assert registered[1] == {"CLIENT": (b1.info.endpoint("CLIENT")[1], "PLAINTEXT"),
                                 "REPLICATION": (b1.info.endpoint("REPLICATION")[1], "SSL")}

        client = await cluster.client(1)  # the client-facing listener: CLIENT
        assert (b1.info.host, b1.info.port) == b1.info.endpoint("CLIENT")
        seen = await client.request(request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert sorted(b.port for b in seen.brokers) == sorted(b.info.endpoint("CLIENT")[1] for b in (b1, b2))

        host, port = b1.info.endpoint("REPLICATION")
        as_broker = await KafkaClient.connect(host, port, ssl_context=tls_to(pki, pki.issue("b2-client", common_name="broker-2")))
        seen = await as_broker.request(request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False))
        assert sorted(b.port for b in seen.brokers) == sorted(b.info.endpoint("REPLICATION")[1] for b in (b1, b2))

        created = await client.request(create_topics_request([("orders", 1, 2, {"min.insync.replicas": "2"})]))
        assert created.topics[0].error_code == ErrorCode.none
        leader, follower = await in_sync(cluster, "orders")
        assert leader.servers["CLIENT"].connection_count <= 1  # the follower's fetcher is on REPLICATION
        host, port = leader.info.endpoint("CLIENT")
        writer = await KafkaClient.connect(host, port)
        done = await writer.request(produce_request("orders", 0, now_batch([(None, b"safe")]), acks=-1))
        assert done.responses[0].partition_responses[0].error_code == ErrorCode.none  # acks=all: replicated
        partition = leader.replicas.get(TopicPartition("orders", 0))
        hw = partition.high_watermark

        spoof = fetch_request([("orders", 0, 10_000)], replica_id=follower.settings.broker_id)
        answer = await writer.request(spoof)  # on CLIENT: nobody there is a broker
        assert answer.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        host, port = leader.info.endpoint("REPLICATION")
        alice = await KafkaClient.connect(host, port, ssl_context=tls_to(pki, pki.issue("alice", common_name="alice")))
        answer = await alice.request(spoof)  # on REPLICATION, but a certificate of no broker
        assert answer.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed
        assert partition.high_watermark == hw
        for c in (as_broker, writer, alice):
            await c.close()
    finally:
        await cluster.close()


async def test_the_replication_listener_refuses_a_client_without_a_certificate(tmp_path, controller, pki):
    cluster = await start_two(tmp_path, controller, pki)
    try:
        host, port = cluster.brokers[1].info.endpoint("REPLICATION")
        with pytest.raises((ConnectionError, OSError, asyncio.TimeoutError)):
            anonymous = await KafkaClient.connect(host, port, ssl_context=tls_to(pki))
            await anonymous.request(request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False), timeout=5)
    finally:
        await cluster.close()


async def test_idle_sockets_on_the_client_listener_do_not_lock_a_follower_out(tmp_path, controller, pki):
    # Per-IP limits out of the way: one address may fill the broker-wide max.connections by itself.
    cluster = await start_two(tmp_path, controller, pki, **{"max.connections": 1000, "max.connections.per.ip": 5000})
    sockets = []
    clients = {}
    try:
        for broker in cluster.brokers.values():  # both full, so the follower meets a full broker whoever leads
            host, port = broker.info.endpoint("CLIENT")
            clients[broker.settings.broker_id] = await KafkaClient.connect(host, port)  # opened before the flood
            for _ in range(1000):
                sockets.append(await asyncio.open_connection(host, port))
            everyone = broker.servers["CLIENT"].quotas.broker_connections
            await wait_until_async(lambda everyone=everyone: everyone.count == 1000, what="max.connections reached")
            reader, _ = await asyncio.open_connection(host, port)
            assert await reader.read(1) == b""  # the client listener is full: a new client is closed at once

        created = await clients[1].request(create_topics_request([("busy", 1, 2, {"min.insync.replicas": "2"})]))
        assert created.topics[0].error_code == ErrorCode.none
        leader, follower = await in_sync(cluster, "busy")  # the follower connected to the full leader
        writer = clients[leader.settings.broker_id]
        done = await writer.request(produce_request("busy", 0, now_batch([(None, b"replicated")]), acks=-1))
        assert done.responses[0].partition_responses[0].error_code == ErrorCode.none
        await wait_until_async(lambda: follower.replicas.get(TopicPartition("busy", 0)).log_end_offset == 1,
                               what="the follower has the record")
    finally:
        for client in clients.values():
            await client.close()
        for _, writer in sockets:
            writer.close()
        await cluster.close()


@pytest.mark.parametrize("settings_overrides", [{
    "listeners": "CLIENT://127.0.0.1:0,REPLICATION://127.0.0.1:0",
    "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
    "inter.broker.listener.name": "REPLICATION", "listener.name.client.max.connections": 2}])
async def test_a_listeners_own_max_connections_counts_only_its_connections(broker, settings_overrides):
    host, port = broker.info.endpoint("CLIENT")
    kept = [await asyncio.open_connection(host, port) for _ in range(2)]
    await wait_until_async(lambda: broker.servers["CLIENT"].connection_count == 2, what="2 client connections")
    reader, _ = await asyncio.open_connection(host, port)
    assert await reader.read(1) == b""  # the third is closed at once
    other = await KafkaClient.connect(*broker.info.endpoint("REPLICATION"))  # another listener: its own count
    seen = await other.request(request(3, 12, topics=None, allow_auto_topic_creation=False,
                                       include_topic_authorized_operations=False))
    assert [b.port for b in seen.brokers] == [broker.info.endpoint("REPLICATION")[1]]
    await other.close()
    for _, writer in kept:
        writer.close()
