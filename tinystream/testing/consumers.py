"""confluent-kafka (librdkafka) consumers for the tests: one that reads one partition from the start (the follower
fetching tests, with or without client.rack), and a produce-and-read-back through registry serializers."""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any


def read_partition(bootstrap: str, topic: str, count: int, *, rack: str | None = None, timeout_s: float = 30,
                   extra: Mapping[str, Any] | None = None) -> list[bytes]:
    """Up to `count` values of partition 0 from offset 0 (fewer if `timeout_s` passes); an error record fails."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition  # the test extra's client

    config: dict[str, Any] = {"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:8]}",
                              "enable.auto.commit": False, **(extra or {})}
    if rack is not None:
        config["client.rack"] = rack
    consumer = Consumer(config)
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    got: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is not None:
                assert msg.error() is None, msg.error()
                got.append(msg.value())
    finally:
        consumer.close()
    return got


def serialized_roundtrip(bootstrap: str, topic: str, serialize: Any, deserialize: Any, values: list, *,
                         already: int = 0) -> list:
    """Produce `values` framed by a registry serializer, read the topic from the start (`already` records
    were there) and decode every record: what the registry tests ask of confluent-kafka's serdes."""
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value=serialize(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    return read_deserialized(bootstrap, topic, deserialize, already + len(values))


def read_deserialized(bootstrap: str, topic: str, deserialize: Any, count: int) -> list:
    """Up to `count` records of `topic` from the start, each decoded by a registry deserializer (a minute at
    most); error records are skipped."""
    from confluent_kafka import Consumer
    from confluent_kafka.serialization import MessageField, SerializationContext

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{uuid.uuid4()}",
                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    decoded: list = []
    try:
        for _ in range(120):
            if len(decoded) == count:
                break
            message = consumer.poll(0.5)
            if message is not None and not message.error():
                decoded.append(deserialize(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return decoded
