"""Replication on a SASL_SSL listener: followers log in as the inter-broker user; only they are followers.

Issue 12, attack 2: a Fetch whose replica_id named a known broker was taken
for that follower's, whoever sent it, and moved the high watermark. On an
authenticated listener replica_id is believed only from a broker principal
(the inter-broker user, or super.users).

Logins last one second here (connections.max.reauth.ms, KIP-368): followers
log in again on their connections and acks=all writes keep being replicated.
"""

from __future__ import annotations

import asyncio
import ssl
import time

import pytest

from tinystream.broker.app import Broker
from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient, SaslLogin
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.config.settings import ControllerSettings
from tinystream.controller_auth import broker_principal, read_secret, token_for, write_token_file
from tinystream.operator.service.app import ControllerServer
from tinystream.testing.broker import (
    create_topics_request,
    fetch_request,
    now_batch,
    produce_request,
    sasl_ssl_settings,
    throwaway_tls,
)


async def test_followers_authenticate_and_a_client_cannot_pose_as_one(tmp_path):
    pytest.importorskip("trustme")
    tls = throwaway_tls(tmp_path / "tls")
    (tmp_path / "broker.password").write_text("b")
    controller = ControllerServer(ControllerSettings(**{
        "port": 0, "state.file": str(tmp_path / "c" / "state.json"), "dashboard.enabled": False,
        "default.replication.factor": 2}))
    info = await controller.start()
    secret = read_secret(info.secret_file)
    brokers = []
    try:
        for broker_id in (1, 2):
            token = tmp_path / f"token-{broker_id}"
            write_token_file(token, token_for(secret, broker_principal(broker_id)))
            settings, truststore = sasl_ssl_settings(tmp_path / f"b{broker_id}", users={"alice": "a", "broker": "b"},
                                                     tls=tls, **{
                "broker.id": broker_id, "controller.url": info.url, "controller.token.file": str(token),
                "inter.broker.sasl.username": "broker",
                "inter.broker.sasl.password.file": str(tmp_path / "broker.password"),
                "broker.heartbeat.interval.ms": 200, "connections.max.reauth.ms": 1000})
            broker = Broker(settings)
            await broker.start()
            brokers.append(broker)
        context = ssl.create_default_context(cafile=str(truststore))

        async def login(broker: Broker, user: str, password: str) -> KafkaClient:
            return await KafkaClient.connect(broker.info.host, broker.info.port, ssl_context=context,
                                             sasl=SaslLogin("SCRAM-SHA-512", user, password))

        alice = await login(brokers[0], "alice", "a")
        created = await alice.request(create_topics_request([("replicated", 1, 2, {"min.insync.replicas": "2"})]))
        assert created.topics[0].error_code == ErrorCode.none
        tp = TopicPartition("replicated", 0)
        leader = follower = None
        for _ in range(200):  # both replicas in the ISR: the follower fetched over SASL_SSL
            leading = [b for b in brokers if (p := b.replicas.get(tp)) is not None and p.is_leader]
            if leading and len(leading[0].replicas.get(tp).state.isr) == 2:
                leader = leading[0]
                follower = brokers[1] if leader is brokers[0] else brokers[0]
                break
            await asyncio.sleep(0.05)
        assert leader is not None, "the follower never joined the ISR over SASL_SSL"
        writer = await login(leader, "alice", "a")
        done = await writer.request(produce_request("replicated", 0, now_batch([(None, b"safe")]), acks=-1))
        assert done.responses[0].partition_responses[0].error_code == ErrorCode.none  # acks=all: replicated

        spoof = fetch_request([("replicated", 0, 10_000)], replica_id=follower.settings.broker_id)
        answer = await writer.request(spoof)
        assert answer.responses[0].partitions[0].error_code == ErrorCode.topic_authorization_failed

        # Three session lifetimes of acks=all writes: the follower's connection logs in again, never expires.
        ends = time.monotonic() + 3.0
        while time.monotonic() < ends:
            done = await writer.request(produce_request("replicated", 0, now_batch([(None, b"more")]), acks=-1))
            assert done.responses[0].partition_responses[0].error_code == ErrorCode.none
            await asyncio.sleep(0.05)
        sample = leader.metrics.registry.get_sample_value
        assert sample("tinystream_expired_connections_killed_total") == 0
        assert sample("tinystream_sasl_reauthentications_total", {"result": "succeeded"}) >= 4  # follower + writer
        await alice.close()
        await writer.close()
    finally:
        for broker in brokers:
            await broker.stop()
        await controller.stop()
