"""Real clients against a real broker: kafka-python, aiokafka, confluent-kafka (librdkafka).

Each produces keyed records with headers under every compression codec and
consumes them back through a consumer group; confluent-kafka also runs an
idempotent producer. The restart test stops the broker between producing and
consuming, and checks that idempotent producer state survived.
(The cross-client compatibility matrix lives in tests/compat/.)
"""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest

from tinystream.testing.broker import BrokerThread, test_settings

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
N = 200


@pytest.fixture(scope="module")
def running(tmp_path_factory):
    with BrokerThread(test_settings(tmp_path_factory.mktemp("clients") / "data")) as b:
        yield b


def expected(prefix: str) -> list[tuple[bytes, bytes, list[tuple[str, bytes]]]]:
    return [(b"%s-k%d" % (prefix.encode(), i), b"v%d" % i * 20, [("h", b"%d" % i)]) for i in range(N)]


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:6]}"


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python(running, codec):
    from kafka import KafkaConsumer, KafkaProducer

    topic = unique(f"kp-{codec}")
    producer = KafkaProducer(bootstrap_servers=running.bootstrap, compression_type=None if codec == "none" else codec,
                             linger_ms=5)
    for key, value, headers in expected(codec):
        producer.send(topic, key=key, value=value, headers=headers)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(topic, bootstrap_servers=running.bootstrap, group_id=unique("kp-group"),
                             auto_offset_reset="earliest", enable_auto_commit=False)
    got = []
    deadline = time.monotonic() + 30  # a group join (3 s initial rebalance delay) on a busy machine: 15 s ran out
    while len(got) < N and time.monotonic() < deadline:
        for records in consumer.poll(timeout_ms=200).values():
            got += [(m.key, m.value, list(m.headers)) for m in records]
    assert consumer.assignment(), f"no partition assigned in 30 s ({len(got)} records read)"
    consumer.commit()
    committed = consumer.committed(next(iter(consumer.assignment())))
    consumer.close()
    assert got == expected(codec)
    assert committed == N


@pytest.mark.parametrize("codec", CODECS)
def test_aiokafka(running, codec):
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    topic = unique(f"aio-{codec}")

    async def run():
        producer = AIOKafkaProducer(bootstrap_servers=running.bootstrap,
                                    compression_type=None if codec == "none" else codec, enable_idempotence=True)
        await producer.start()
        try:
            batch = [producer.send(topic, key=k, value=v, headers=h) for k, v, h in expected(codec)]
            for fut in await asyncio.gather(*batch):
                await fut
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, bootstrap_servers=running.bootstrap, group_id=unique("aio-group"),
                                    auto_offset_reset="earliest")
        await consumer.start()
        got = []
        try:
            deadline = time.monotonic() + 15
            while len(got) < N and time.monotonic() < deadline:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    got += [(m.key, m.value, list(m.headers)) for m in records]
            await consumer.commit()
        finally:
            await consumer.stop()
        return got

    assert asyncio.run(run()) == expected(codec)


def _confluent_produce(bootstrap: str, topic: str, codec: str, records, **extra) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "compression.type": codec, "linger.ms": 5, **extra})
    errors = []
    for key, value, headers in records:
        producer.produce(topic, key=key, value=value, headers=headers,
                         on_delivery=lambda err, _msg: err and errors.append(err))
    assert producer.flush(15) == 0
    assert not errors, errors


def _confluent_consume(bootstrap: str, topic: str, count: int, group: str | None = None) -> list:
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group or unique("ck-group"),
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    got = []
    deadline = time.monotonic() + 20
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None:
                continue
            assert msg.error() is None, msg.error()
            got.append((msg.key(), msg.value(), [(k, v) for k, v in (msg.headers() or [])]))
        if got:
            consumer.commit(asynchronous=False)
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_idempotent(running, codec):
    topic = unique(f"ck-{codec}")
    _confluent_produce(running.bootstrap, topic, codec, expected(codec), **{"enable.idempotence": True})
    assert _confluent_consume(running.bootstrap, topic, N) == expected(codec)


def test_confluent_admin_and_offsets(running):
    from confluent_kafka import TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

    admin = AdminClient({"bootstrap.servers": running.bootstrap})
    topic = unique("admin")
    admin.create_topics([NewTopic(topic, num_partitions=2, replication_factor=1,
                                  config={"retention.ms": "3600000"})])[topic].result(10)
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(10)
    metadata = admin.list_topics(topic, timeout=10)
    assert len(metadata.topics[topic].partitions) == 3
    resource = ConfigResource(ConfigResource.Type.TOPIC, topic)
    configs = admin.describe_configs([resource])[resource].result(10)
    assert configs["retention.ms"].value == "3600000"
    _confluent_produce(running.bootstrap, topic, "lz4", expected("adm")[:10])
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": running.bootstrap, "group.id": "x"})
    lows_highs = [consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10) for p in range(3)]
    consumer.close()
    assert sum(high for _, high in lows_highs) == 10
    admin.delete_topics([topic])[topic].result(10)
    assert topic not in admin.list_topics(timeout=10).topics


def test_restart_keeps_data_offsets_and_producer_state(tmp_path):
    """Produce (idempotent), stop the broker, start it on the same dir, consume everything."""
    from tinystream.broker.storage.topic_partition import TopicPartition

    broker = BrokerThread(test_settings(tmp_path / "data"))
    broker.start()
    try:
        topic = "durable"
        records = expected("restart")
        _confluent_produce(broker.bootstrap, topic, "zstd", records, **{"enable.idempotence": True})
        assert _confluent_consume(broker.bootstrap, topic, N // 2, group="resume")  # commits its position

        def producers(b):
            table = b.replicas.get(TopicPartition(topic, 0)).producers
            return {pid: (e.epoch, [(m.first_seq, m.last_seq, m.first_offset) for m in e.batches])
                    for pid, e in table._entries.items()}

        before = broker.call(producers)
        assert before
        broker.restart()
        assert broker.call(producers) == before
        everything = _confluent_consume(broker.bootstrap, topic, N)
        assert everything == records
    finally:
        broker.stop()
