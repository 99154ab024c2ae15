"""A confluent-kafka (librdkafka) consumer that reads one partition from the start: what the follower
fetching tests (in-process and compat) ask of a real client, with or without client.rack."""

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
