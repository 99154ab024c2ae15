"""Helpers of the Spark suite: producing known records, probing what a broker can do."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from tinystream.testing.waiting import wait_until

PROBE_TS = tuple(int(time.time() * 1000) - 60_000 + i * 1000 for i in range(3))  # recent: see events.py


@dataclass(frozen=True)
class BrokerTraits:
    """What the broker under test does right; tests adapt or skip on the rest."""

    batched_high_watermark: bool  # ListOffsets(latest) counts every record of a multi-record batch
    timestamp_lookup: bool  # ListOffsets by timestamp (KIP-79) answers correctly
    producer_conf: Mapping[str, Any] = field(default_factory=dict)  # extra settings for our producers

    @property
    def writer_options(self) -> dict[str, str]:
        """Options for format("tinystream") writes, with the same workarounds."""
        return {f"kafka.{k}": str(v) for k, v in self.producer_conf.items()}


def admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient  # noqa: PLC0415

    return AdminClient({"bootstrap.servers": bootstrap, "log_level": 3})


def create_topic(bootstrap: str, topic: str, partitions: int = 1) -> None:
    from confluent_kafka.admin import NewTopic  # noqa: PLC0415

    client = admin(bootstrap)  # keep the handle alive until the futures resolve
    for future in client.create_topics([NewTopic(topic, partitions, 1)], request_timeout=30).values():
        future.result(30)
    wait_for_partitions(bootstrap, topic, partitions)


def wait_for_partitions(bootstrap: str, topic: str, partitions: int, timeout_s: float = 20.0) -> None:
    client = admin(bootstrap)

    def ready() -> bool:
        md = client.list_topics(topic=topic, timeout=5).topics.get(topic)
        return (md is not None and md.error is None and len(md.partitions) >= partitions
                and all(p.leader >= 0 for p in md.partitions.values()))

    wait_until(ready, timeout=timeout_s, interval=0.2, what=f"topic {topic} to get {partitions} partitions with leaders")


def add_partitions(bootstrap: str, topic: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions  # noqa: PLC0415

    client = admin(bootstrap)
    for future in client.create_partitions([NewPartitions(topic, total)], request_timeout=30).values():
        future.result(30)
    wait_for_partitions(bootstrap, topic, total)


def producer(bootstrap: str, extra: Mapping[str, Any] | None = None):
    from confluent_kafka import Producer  # noqa: PLC0415

    return Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "acks": "all",
                     "linger.ms": 2, "log_level": 3, **(extra or {})})


@dataclass(frozen=True)
class Sent:
    key: bytes | None
    value: bytes | None
    partition: int
    offset: int
    timestamp: int
    headers: tuple[tuple[str, bytes | None], ...] = ()


def produce(
    bootstrap: str,
    topic: str,
    records: Iterable[Mapping[str, Any]],
    *,
    extra: Mapping[str, Any] | None = None,
) -> list[Sent]:
    """Produce dicts (key, value, partition, timestamp, headers); return what the broker acknowledged."""
    p = producer(bootstrap, extra)
    acked: list[Sent] = []
    errors: list[str] = []

    def on_delivery_of(headers):
        # Delivery reports carry no headers: remember the ones sent with the record.
        def on_delivery(err, msg):
            if err is not None:
                errors.append(err.str())
                return
            acked.append(Sent(msg.key(), msg.value(), msg.partition(), msg.offset(), msg.timestamp()[1], headers))

        return on_delivery

    for rec in records:
        kwargs = {k: v for k, v in rec.items() if v is not None and k != "topic"}
        while True:
            try:
                p.produce(topic, on_delivery=on_delivery_of(tuple(rec.get("headers") or ())), **kwargs)
                break
            except BufferError:
                p.poll(0.05)
    assert p.flush(60) == 0, "records left unacknowledged"
    assert not errors, errors[:3]
    return sorted(acked, key=lambda s: (s.partition, s.offset))


def probe_traits(bootstrap: str) -> BrokerTraits:
    """Find out, once, whether the broker's offsets can be trusted for batched produce and timestamps."""
    topic = f"spark-probe-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    from confluent_kafka import TopicPartition  # noqa: PLC0415
    from confluent_kafka.admin import OffsetSpec  # noqa: PLC0415

    # Three records in one batch: the high watermark must move by three.
    p = producer(bootstrap, {"linger.ms": 200})
    for ts in PROBE_TS:
        p.produce(topic, value=b"probe", partition=0, timestamp=ts)
    assert p.flush(30) == 0
    client = admin(bootstrap)
    tp = TopicPartition(topic, 0)
    latest = client.list_offsets({tp: OffsetSpec.latest()})[tp].result().offset
    batched_ok = latest == 3
    try:
        found = client.list_offsets({tp: OffsetSpec.for_timestamp(PROBE_TS[1])})[tp].result().offset
        ts_ok = found == 1
    except Exception:  # noqa: BLE001 - an unsupported request is an answer too
        ts_ok = False
    conf = {} if batched_ok else {"batch.num.messages": 1, "linger.ms": 0}
    return BrokerTraits(batched_high_watermark=batched_ok, timestamp_lookup=ts_ok, producer_conf=conf)


def delete_records(bootstrap: str, topic: str, partition: int, before: int) -> str | None:
    """DeleteRecords up to `before`; returns None, or why the broker could not (for a skip)."""
    from confluent_kafka import TopicPartition  # noqa: PLC0415

    try:
        client = admin(bootstrap)
        futures = client.delete_records([TopicPartition(topic, partition, before)], request_timeout=10)
        for future in futures.values():
            future.result(15)
    except Exception as exc:  # noqa: BLE001
        return f"the broker does not support DeleteRecords ({exc})"
    return None


def stream_reader(spark, bootstrap: str, topic: str, **options: str):
    reader = spark.readStream.format("tinystream").option("bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def batch_reader(spark, bootstrap: str, topic: str, **options: str):
    reader = spark.read.format("tinystream").option("bootstrap.servers", bootstrap).option("subscribe", topic)
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_windowed(spark, broker, tmp_path, topic: str, rounds, build, key_column: str, *, policy: str = "drop",
                 assign=None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """topic -> windows -> topic, one Trigger.AvailableNow run per round from one checkpoint, as the pipelines do.

    Returns the output rows in the order written, and the late-events topic's rows (side-output policy).
    """
    import json  # noqa: PLC0415

    from tinystream.spark.late_events import LatePolicy, SideOutput, TopicOutput, windowed_writer  # noqa: PLC0415
    from tinystream.spark.windows import parse_events  # noqa: PLC0415

    source, sink, late = topic, topic + "-out", topic + "-late"
    create_topic(broker.bootstrap, source, 3)
    create_topic(broker.bootstrap, sink, 1)  # one partition: the order written is the order read
    create_topic(broker.bootstrap, late, 1)
    checkpoint = str(tmp_path / "ck")
    output = TopicOutput(broker.bootstrap, sink, broker.traits.writer_options)
    side_output = SideOutput(spark, source, TopicOutput(broker.bootstrap, late, broker.traits.writer_options),
                             checkpoint, assign) if assign else None
    for batch in rounds:
        produce(broker.bootstrap, source, [{"key": e.key, "value": e.to_json(), "timestamp": e.ts} for e in batch],
                extra=broker.traits.producer_conf)
        events = parse_events(stream_reader(spark, broker.bootstrap, source, startingOffsets="earliest"))
        writer = windowed_writer(build(events), policy=LatePolicy(policy), key_column=key_column, output=output,
                                 checkpoint=checkpoint, side_output=side_output)
        query = writer.trigger(availableNow=True).start()
        query.awaitTermination(180)
        if query.exception():
            raise AssertionError(f"streaming query failed: {query.exception()}")

    def rows(name: str) -> list[dict[str, Any]]:
        return [json.loads(r.value) for r in batch_reader(spark, broker.bootstrap, name).orderBy("offset").collect()]

    return rows(sink), rows(late)
