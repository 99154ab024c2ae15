"""A Kafka writer and reader that run inside the cluster (`python3 - write|read ...` in the client pod).

Shipped on stdin to the image's Python (kafka-python is part of the image), so
the clients reach the brokers by the addresses they advertise (pod DNS names
under the headless Service), as any in-cluster application does.

    write BOOTSTRAP TOPIC PREFIX SECONDS   one line per record: `A <value> <t>` acked (acks=all), `E <value> <error>`;
                                           ends after SECONDS or once /tmp/stop-PREFIX exists
    read BOOTSTRAP TOPIC                   every value in the topic, one per line, then `END <count>`

The writer sends in small synchronous batches so each acknowledgement is
known exactly; values are PREFIX-<n>, distinct, so the caller can count
acknowledged against read.
"""

from __future__ import annotations

import os
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition


def write(bootstrap: str, topic: str, prefix: str, seconds: float) -> None:
    producer = KafkaProducer(bootstrap_servers=bootstrap, acks="all", retries=3, linger_ms=2,
                             request_timeout_ms=8000, max_block_ms=8000, metadata_max_age_ms=2000,
                             reconnect_backoff_max_ms=1000)
    start = time.monotonic()
    n = 0
    stop_file = f"/tmp/stop-{prefix}"
    while time.monotonic() - start < seconds and not os.path.exists(stop_file):
        batch = []
        for _ in range(20):
            value = f"{prefix}-{n}"
            n += 1
            try:
                batch.append((value, producer.send(topic, value.encode())))
            except Exception as exc:  # noqa: BLE001 - every failure is reported, none is fatal
                print(f"E {value} {type(exc).__name__}", flush=True)
        for value, future in batch:
            try:
                future.get(timeout=15)
                print(f"A {value} {time.monotonic() - start:.3f}", flush=True)
            except Exception as exc:  # noqa: BLE001
                print(f"E {value} {type(exc).__name__}", flush=True)
        time.sleep(0.05)
    producer.close(timeout=10)
    print("DONE", flush=True)


def read(bootstrap: str, topic: str) -> None:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest",
                             consumer_timeout_ms=20000, request_timeout_ms=30000)
    partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
    consumer.assign(partitions)
    consumer.seek_to_beginning(*partitions)
    ends = consumer.end_offsets(partitions)
    count = 0
    for record in consumer:
        print(record.value.decode(), flush=False)
        count += 1
        if all(consumer.position(tp) >= ends[tp] for tp in partitions):
            break
    print(f"END {count}", flush=True)


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    if command == "write":
        write(args[0], args[1], args[2], float(args[3]))
    else:
        read(args[0], args[1])
