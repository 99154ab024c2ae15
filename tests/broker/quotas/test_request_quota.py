"""A client over its request_percentage (KIP-124) is throttled; another client beside it is not.

Real clients on a real socket to an in-process broker with quota.window.num=3
windows of 1 s (Kafka: 11), so a fresh rate's burst is short. The throttled
client-id "slow" may use 1 % of one thread (10 ms of handler time a second);
two confluent-kafka (librdkafka) clients ask for metadata in a loop at the same
time, and the counts are compared loosely (a loaded 2-core machine only slows
both): the slow one is served at most half what the free one is, and is told
it was throttled (throttle_time_ms in its answers); the free one never is. A
raw client reads the throttle_time_ms field of the answers itself.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from types import SimpleNamespace

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.handlers.shared.context import Call
from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.client import KafkaClient
from tinystream.broker.protocol.codec import to_millis
from tinystream.broker.security.peer import ClientInfo, ConnectionAuth
from tinystream.broker.server import request_quota
from tinystream.testing.broker import BrokerThread, create_topic, request, test_settings
from tinystream.testing.broker import alter_client_quotas_request as alter

confluent_kafka = pytest.importorskip("confluent_kafka")
admin_mod = pytest.importorskip("confluent_kafka.admin")

PERCENT = 1.0  # of one thread
METADATA = request(3, 12, topics=None, allow_auto_topic_creation=False, include_topic_authorized_operations=False)
RUN_S = 4.0


@pytest.fixture
def broker(tmp_path):
    broker = BrokerThread(test_settings(tmp_path, **{"quota.window.num": 3}))
    broker.start()

    async def setup(_b):
        client = await KafkaClient.connect(broker.info.host, broker.info.port)
        try:
            await create_topic(client, "rq-t", 3)
            return await client.request(alter(([("client-id", "slow")], [("request_percentage", PERCENT, False)])))
        finally:
            await client.close()

    try:
        reply = broker.call(setup)
        assert [e.error_code for e in reply.entries] == [ErrorCode.none]
        yield broker
    finally:
        broker.stop()


def metadata_loop(bootstrap: str, client_id: str, seconds: float, out: dict) -> None:
    throttles: list[float] = []
    admin = admin_mod.AdminClient({"bootstrap.servers": bootstrap, "client.id": client_id,
                                   "throttle_cb": lambda event: throttles.append(event.throttle_time)})
    served = 0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            admin.list_topics(topic="rq-t", timeout=5)
            served += 1
        except confluent_kafka.KafkaException:
            pass
        admin.poll(0)  # throttle callbacks
    admin.poll(0.2)
    out.update(served=served, throttles=throttles)


def test_a_client_over_its_request_percentage_is_throttled_and_one_beside_it_is_not(broker):
    slow: dict = {}
    free: dict = {}
    threads = [threading.Thread(target=metadata_loop, args=(broker.bootstrap, "slow", RUN_S, slow)),
               threading.Thread(target=metadata_loop, args=(broker.bootstrap, "free", RUN_S, free))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    metrics = broker.call(lambda b: b.metrics.exposition().decode())
    print(f"\nrequest_percentage {PERCENT}: over {RUN_S:.0f} s the throttled client was served {slow['served']} "
          f"metadata requests ({len(slow['throttles'])} throttle events, max {max(slow['throttles'] or [0]):.3f} s), "
          f"the free one {free['served']}")
    assert free["served"] >= 40, free
    assert slow["served"] <= free["served"] / 2, (slow["served"], free["served"])
    assert slow["throttles"] and max(slow["throttles"]) > 0
    assert not free["throttles"], free["throttles"]
    assert 'tinystream_quota_throttled_total{quota="request"}' in metrics


def test_the_answers_carry_throttle_time_ms_and_the_connection_waits_it_out(broker):
    async def hammer(_b):
        client = await KafkaClient.connect(broker.info.host, broker.info.port, client_id="slow")
        try:
            answers = []
            start = time.monotonic()
            while time.monotonic() - start < 3.0 and len(answers) < 2000:
                reply = await client.request(METADATA)
                answers.append((time.monotonic(), to_millis(reply.throttle_time)))
            return answers
        finally:
            await client.close()

    answers = broker.call(hammer)
    throttled = [(t, ms) for t, ms in answers if ms > 0]
    assert throttled, f"{len(answers)} answers, none throttled"
    assert all(ms <= 1000 for _, ms in throttled)  # capped at one window (Kafka's request quota)
    # The connection was muted for the throttle: the next answer came no sooner (a little slack for the clock).
    t0, ms0 = throttled[0]
    later = [t for t, _ in answers if t > t0]
    if later:
        assert later[0] - t0 >= ms0 / 1000 * 0.8, (later[0] - t0, ms0)


def test_the_sasl_exchange_and_brokers_are_exempt_and_uncovered_clients_are_not_measured(broker):
    """Kafka's exemptions: the authenticator's requests and ClusterAction callers (here: brokers)."""
    def meter(api_key: int, client_id: str, *, principal: str = "User:ANONYMOUS", listener: str = "PLAINTEXT"):
        ctx = dataclasses.replace(broker.broker.ctx, inter_broker_listener="REPLICATION",
                                  broker_principals=frozenset({"User:broker-1"}))
        client = ClientInfo(1, "127.0.0.1", 1, ConnectionAuth(principal=principal), listener)
        call = Call(SimpleNamespace(api_key=api_key, client_id=client_id), None, None, client)
        return request_quota.measure(ctx, call, 0.25)

    assert meter(api_versions.METADATA, "slow").seconds == 0.25  # starts with its decode time
    assert meter(api_versions.METADATA, "free") is None
    assert meter(api_versions.SASL_HANDSHAKE, "slow") is None
    assert meter(api_versions.SASL_AUTHENTICATE, "slow") is None
    assert meter(api_versions.FETCH, "slow", principal="User:broker-1", listener="REPLICATION") is None
    assert meter(api_versions.FETCH, "slow", principal="User:broker-1", listener="PLAINTEXT") is not None
