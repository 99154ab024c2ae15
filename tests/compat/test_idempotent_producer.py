"""An idempotent producer whose acknowledgement is lost writes each record once.

The fault proxy (fault_proxy.py) forwards a Produce request to the broker,
throws the response away and closes the client's connection. The client
cannot know the batch was stored, so it retries it on a new connection with
the same producer id, epoch and sequence; the broker must recognise the
duplicate and answer with the original offset instead of appending again.

A control run with idempotence off shows that the proxy really forces a
retry: there the record is stored twice.
"""

from __future__ import annotations

import asyncio
from collections import Counter

import compat_helpers as ch
import pytest
from compat_helpers import client_params, require_client
from fault_proxy import FaultProxy

pytestmark = pytest.mark.compat

WARMUP = 20
AFTER = 50


def _values(prefix: str, start: int, count: int) -> list[bytes]:
    return [f"{prefix}-{i:04d}".encode() for i in range(start, start + count)]


def _send_confluent(proxy: FaultProxy, topic: str, idempotent: bool) -> None:
    from confluent_kafka import Producer

    conf = {"bootstrap.servers": proxy.bootstrap, "enable.idempotence": idempotent, "acks": "all",
            "linger.ms": 5, "retry.backoff.ms": 100, "message.timeout.ms": 30000}
    producer = Producer(conf)
    for v in _values("c", 0, WARMUP):
        producer.produce(topic, value=v, partition=0)
    assert producer.flush(20) == 0
    proxy.drop_next_produce_responses(1)
    for v in _values("c", WARMUP, AFTER):
        producer.produce(topic, value=v, partition=0)
    assert producer.flush(40) == 0


def _send_kafka_python(proxy: FaultProxy, topic: str, idempotent: bool) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=proxy.bootstrap, enable_idempotence=idempotent, acks="all",
                             linger_ms=5, retry_backoff_ms=100, request_timeout_ms=20000)
    try:
        futures = [producer.send(topic, value=v, partition=0) for v in _values("k", 0, WARMUP)]
        producer.flush(20)
        proxy.drop_next_produce_responses(1)
        futures += [producer.send(topic, value=v, partition=0) for v in _values("k", WARMUP, AFTER)]
        producer.flush(40)
        for f in futures:
            f.get(20)
    finally:
        producer.close(10)


def _send_aiokafka(proxy: FaultProxy, topic: str, idempotent: bool) -> None:
    from aiokafka import AIOKafkaProducer

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=proxy.bootstrap, enable_idempotence=idempotent, acks="all",
                                    linger_ms=5, retry_backoff_ms=100, request_timeout_ms=20000)
        await producer.start()
        try:
            futures = [await producer.send(topic, value=v, partition=0) for v in _values("a", 0, WARMUP)]
            await asyncio.gather(*futures)
            proxy.drop_next_produce_responses(1)
            futures = [await producer.send(topic, value=v, partition=0) for v in _values("a", WARMUP, AFTER)]
            await asyncio.wait_for(asyncio.gather(*futures), 40)
        finally:
            await producer.stop()

    asyncio.run(run())


def _send_java(proxy: FaultProxy, topic: str, idempotent: bool) -> None:
    proxy.drop_next_produce_responses(1)
    records = [ch.Rec(value=v) for v in _values("j", 0, WARMUP + AFTER)]
    ch.produce("java", proxy.bootstrap, topic, records,
               config={"enable.idempotence": str(idempotent).lower(), "retry.backoff.ms": 100,
                       "delivery.timeout.ms": 60000})


SENDERS = {
    "confluent": _send_confluent,
    "kafka-python": _send_kafka_python,
    "aiokafka": _send_aiokafka,
    "java": _send_java,
}


# kcat is left out: with one broker, a dropped connection is "all brokers down",
# which kcat treats as fatal and exits on, before librdkafka can retry.
@pytest.mark.parametrize("client", client_params(("confluent", "kafka-python", "aiokafka", "java")))
def test_lost_ack_retried_without_duplicates(client, bootstrap, new_topic):
    require_client(client)
    topic = new_topic()
    with FaultProxy(bootstrap) as proxy:
        SENDERS[client](proxy, topic, idempotent=True)
        assert proxy.dropped == 1, "the proxy never saw a produce response to drop"
        assert proxy.connections >= 2, "the client did not reconnect after the lost acknowledgement"
    stored = ch.read_all(bootstrap, topic, min_count=WARMUP + AFTER)
    counts = Counter(g.value for g in stored)
    dups = {v: n for v, n in counts.items() if n > 1}
    assert not dups, f"{client}: {len(dups)} records stored more than once: {sorted(dups)[:5]}"
    assert len(counts) == WARMUP + AFTER, f"{client}: stored {len(counts)} distinct of {WARMUP + AFTER}"
    assert sorted(g.offset for g in stored) == list(range(WARMUP + AFTER))
    order = [g.value for g in sorted(stored, key=lambda g: g.offset)]
    assert order == sorted(order), f"{client}: records out of order after the retry"


def test_control_without_idempotence_duplicates(bootstrap, new_topic):
    """Harness check: with idempotence off the same fault stores the retried batch twice."""
    topic = new_topic()
    with FaultProxy(bootstrap) as proxy:
        _send_confluent(proxy, topic, idempotent=False)
        assert proxy.dropped == 1
    stored = ch.read_all(bootstrap, topic, min_count=WARMUP + AFTER + 1)
    counts = Counter(g.value for g in stored)
    assert len(counts) == WARMUP + AFTER
    assert any(n > 1 for n in counts.values()), "no duplicate: the proxy did not force a retry"
