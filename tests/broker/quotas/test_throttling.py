"""A producer over its producer_byte_rate is throttled; another client-id on the same broker is not.

Real client (confluent-kafka / librdkafka), in-process broker on a real socket. The
broker keeps quota.window.num=3 samples of 1 s (Kafka: 11), so the burst a fresh
rate allows (quota x (samples - 1) s) is 2 s of quota and the test takes seconds.
Measured, not timed tightly: the throttled client's rate from its first throttle
to its last delivery must be within 0.3x-3x of the quota (a loaded machine only
slows it), and the other client's rate must be far above the quota.
"""

from __future__ import annotations

import time

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.client import KafkaClient
from tinystream.testing.broker import BrokerThread, create_topic, test_settings
from tinystream.testing.broker import alter_client_quotas_request as alter

confluent_kafka = pytest.importorskip("confluent_kafka")

QUOTA = 200_000  # bytes/s
RECORD = b"x" * 4096
RUN_S = 5.0


def produce_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> dict:
    throttles: list[tuple[float, float]] = []
    delivered: list[tuple[float, int]] = []
    producer = confluent_kafka.Producer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5, "compression.type": "none",
        "acks": 1, "queue.buffering.max.kbytes": 512, "statistics.interval.ms": 0,
        "throttle_cb": lambda event: throttles.append((time.monotonic(), event.throttle_time)),
    })

    def on_delivery(err, msg):
        if err is None:
            delivered.append((time.monotonic(), len(msg.value())))

    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            producer.produce(topic, RECORD, on_delivery=on_delivery)
        except BufferError:
            producer.poll(0.05)
        producer.poll(0)
    producer.flush(30)
    return {"start": start, "throttles": throttles, "delivered": delivered}


def rate_between(delivered: list[tuple[float, int]], since: float) -> float:
    after = [(t, n) for t, n in delivered if t >= since]
    if len(after) < 2:
        return 0.0
    return sum(n for _, n in after) / (after[-1][0] - since)


def quota_broker(tmp_path, samples: int) -> BrokerThread:
    """A broker with quota-t, producer_byte_rate QUOTA on client id "noisy", consumer_byte_rate on "reader"."""
    broker = BrokerThread(test_settings(tmp_path, **{"quota.window.num": samples}))
    broker.start()

    async def setup(_b):
        client = await KafkaClient.connect(broker.info.host, broker.info.port)
        try:
            await create_topic(client, "quota-t", 1)
            return await client.request(alter(([("client-id", "noisy")],
                                               [("producer_byte_rate", float(QUOTA), False)]),
                                              ([("client-id", "reader")],
                                               [("consumer_byte_rate", float(QUOTA), False)])))
        finally:
            await client.close()

    try:
        reply = broker.call(setup)
        assert [e.error_code for e in reply.entries] == [ErrorCode.none] * 2
    except BaseException:
        broker.stop()
        raise
    return broker


def test_a_producer_over_its_quota_is_throttled_and_another_is_not(tmp_path):
    broker = quota_broker(tmp_path, 3)
    try:
        noisy = produce_for(broker.bootstrap, "quota-t", "noisy", RUN_S)
        quiet = produce_for(broker.bootstrap, "quota-t", "quiet", 1.5)
        metrics = broker.call(lambda b: b.metrics.exposition().decode())
    finally:
        broker.stop()

    assert noisy["throttles"], "the noisy producer was never told it was throttled"
    assert max(s for _, s in noisy["throttles"]) > 0  # librdkafka reports seconds
    first = noisy["throttles"][0][0]
    measured = rate_between(noisy["delivered"], first)
    quiet_rate = sum(n for _, n in quiet["delivered"]) / 1.5
    print(f"\nquota {QUOTA} B/s: throttled producer {measured:.0f} B/s after its first throttle "
          f"({len(noisy['throttles'])} throttle events, max {max(s for _, s in noisy['throttles']):.1f} s); "
          f"unthrottled client-id {quiet_rate:.0f} B/s")
    assert 0.3 * QUOTA < measured < 3 * QUOTA, measured
    assert not quiet["throttles"], quiet["throttles"]
    assert quiet_rate > 3 * QUOTA, quiet_rate
    assert 'tinystream_quota_throttled_total{quota="produce"}' in metrics


def consume_for(bootstrap: str, topic: str, client_id: str, seconds: float) -> dict:
    throttles: list[tuple[float, float]] = []
    consumer = confluent_kafka.Consumer({
        "bootstrap.servers": bootstrap, "client.id": client_id, "group.id": f"g-{client_id}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "throttle_cb": lambda event: throttles.append((time.monotonic(), event.throttle_time)),
    })
    consumer.subscribe([topic])
    received = 0
    start = time.monotonic()
    try:
        while time.monotonic() - start < seconds:
            msg = consumer.poll(0.1)
            if msg is not None and msg.error() is None:
                received += len(msg.value())
    finally:
        consumer.close()
    return {"throttles": throttles, "rate": received / seconds}


def test_a_consumer_over_its_quota_is_throttled_and_another_is_not(tmp_path):
    broker = quota_broker(tmp_path, 3)
    try:
        produce_for(broker.bootstrap, "quota-t", "writer", 1.0)  # a few MB to read
        reader = consume_for(broker.bootstrap, "quota-t", "reader", 4.0)
        other = consume_for(broker.bootstrap, "quota-t", "other", 2.0)
    finally:
        broker.stop()
    print(f"\nconsumer quota {QUOTA} B/s: throttled reader {reader['rate']:.0f} B/s over 4 s "
          f"({len(reader['throttles'])} throttle events); unthrottled client-id {other['rate']:.0f} B/s")
    assert reader["throttles"] and max(s for _, s in reader["throttles"]) > 0
    assert not other["throttles"]
    assert reader["rate"] < other["rate"] / 3
    # a fresh rate allows (samples - 1) s of quota at once, then the quota: at most ~(2 + 4) x QUOTA in 4 s
    assert reader["rate"] < 3 * QUOTA, reader["rate"]


@pytest.mark.slow
def test_with_kafkas_default_window_the_throttled_rate_settles_at_the_quota(tmp_path):
    """Kafka's 11 samples of 1 s, 25 s of producing: from the first throttle on, the rate is the quota's."""
    broker = quota_broker(tmp_path, 11)
    try:
        noisy = produce_for(broker.bootstrap, "quota-t", "noisy", 25.0)
    finally:
        broker.stop()
    assert noisy["throttles"]
    measured = rate_between(noisy["delivered"], noisy["throttles"][0][0])
    print(f"\nquota {QUOTA} B/s (11 x 1 s window): {measured:.0f} B/s after the first throttle")
    assert 0.5 * QUOTA < measured < 1.5 * QUOTA, measured
