"""Benchmark: rows/s through the connector against rows/s of the raw client, same topic, same run.

`run_spark_bench(bootstrap)` (for `tinystream bench spark`):

1. write: a Spark DataFrame of `records` rows (key, ~100-byte value) written with
   format("tinystream") into a new topic -> rows/s written (Arrow writer, idempotent producer);
2. raw read: one confluent-kafka Consumer in this process reads every partition of
   that topic to its end -> rows/s (the client's ceiling, no Spark);
3. connector read: a batch read of the same topic on local Spark, forced through the
   noop sink so every column is built -> rows/s (one task per partition, Arrow path).

The aim (issue 6) is connector read >= 0.5 x raw read. Each read is timed after one
warm-up run that starts the Python workers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import Any

from confluent_kafka import Consumer, KafkaError, TopicPartition

from tinystream.spark.events import create_topic
from tinystream.spark.local import local_session


def _raw_read(bootstrap: str, topic: str, partitions: int, expected: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                         "enable.auto.commit": False, "enable.partition.eof": True, "log_level": 3})
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    at_end: set[int] = set()
    while len(at_end) < partitions:
        for m in consumer.consume(num_messages=10_000, timeout=1.0):
            if m.error() is None:
                seen += 1
                _ = (m.key(), m.value(), m.offset(), m.timestamp(), m.headers())  # what the connector touches
            elif m.error().code() == KafkaError._PARTITION_EOF:
                at_end.add(m.partition())
    elapsed = time.perf_counter() - started
    consumer.close()
    if seen != expected:
        raise RuntimeError(f"raw read saw {seen} records, expected {expected}")
    return elapsed


def run_spark_bench(
    bootstrap: str,
    *,
    records: int = 500_000,
    partitions: int = 2,
    value_bytes: int = 100,
    out: Callable[[str], Any] = print,
    spark: Any = None,
) -> dict[str, float]:
    """Measure write, raw read and connector read rates; returns rows/s figures and the ratio."""
    topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, partitions=partitions)
    own = spark is None
    spark = spark or local_session("tinystream-bench", log_level="ERROR")
    try:
        rows = spark.range(records).selectExpr(
            "cast(id as string) as key", f"cast(repeat('x', {value_bytes}) as binary) as value")
        started = time.perf_counter()
        rows.write.format("tinystream").option("bootstrap.servers", bootstrap).option("topic", topic) \
            .mode("append").save()
        write_s = time.perf_counter() - started

        raw_s = _raw_read(bootstrap, topic, partitions, records)

        def connector_read() -> float:
            t = time.perf_counter()
            (spark.read.format("tinystream").option("bootstrap.servers", bootstrap).option("subscribe", topic)
             .load().write.format("noop").mode("overwrite").save())
            return time.perf_counter() - t

        connector_read()  # warm-up: Python workers, JIT
        read_s = connector_read()
        count = spark.read.format("tinystream").option("bootstrap.servers", bootstrap) \
            .option("subscribe", topic).load().count()
        if count != records:
            raise RuntimeError(f"connector read {count} records, expected {records}")
    finally:
        if own:
            spark.stop()
    figures = {
        "records": float(records),
        "write_rows_per_s": records / write_s,
        "raw_read_rows_per_s": records / raw_s,
        "connector_read_rows_per_s": records / read_s,
    }
    figures["read_ratio"] = figures["connector_read_rows_per_s"] / figures["raw_read_rows_per_s"]
    out(f"spark bench: {records} rows of {value_bytes} B in {partitions} partitions ({topic})")
    out(f"  write (Spark -> topic)        {figures['write_rows_per_s']:>12,.0f} rows/s")
    out(f"  read, raw confluent-kafka     {figures['raw_read_rows_per_s']:>12,.0f} rows/s")
    out(f"  read, connector (local[2])    {figures['connector_read_rows_per_s']:>12,.0f} rows/s"
        f"   ratio {figures['read_ratio']:.2f} (aim >= 0.5)")
    return figures
