"""Batch and streaming write, read back through the source; refused writes say why."""

from __future__ import annotations

import uuid

import pytest
from spark_helpers import batch_reader, create_topic, produce, stream_reader

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def write(df, broker, **options):
    writer = df.write.format("tinystream").option("bootstrap.servers", broker.bootstrap).mode("append")
    for k, v in {**broker.traits.writer_options, **options}.items():
        writer = writer.option(k, v)
    writer.save()


def test_batch_write_then_read_round_trip(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    df = spark.range(90).selectExpr(
        "cast(id as string) as key",
        "cast(concat('value-', id) as binary) as value",
        "cast(id % 3 as int) as partition",
        "array(named_struct('key', 'id', 'value', cast(cast(id as string) as binary))) as headers",
    )
    write(df, broker, topic=topic_name)
    rows = batch_reader(spark, broker.bootstrap, topic_name, includeHeaders="true").collect()
    assert len(rows) == 90
    for r in rows:
        n = int(r.key.decode())
        assert r.value == f"value-{n}".encode() and r.partition == n % 3
        assert [(h.key, h.value) for h in r.headers] == [("id", str(n).encode())]
    # Per partition, offsets are dense from 0 and in the order rows were written.
    for p in range(3):
        offsets = sorted(r.offset for r in rows if r.partition == p)
        assert offsets == list(range(30))


def test_topic_column_routes_rows_and_keys_partition_like_java(spark, broker, topic_name):
    other = topic_name + "-b"
    create_topic(broker.bootstrap, topic_name, 4)
    create_topic(broker.bootstrap, other, 1)
    df = spark.range(40).selectExpr(
        f"if(id % 2 = 0, '{topic_name}', '{other}') as topic", "concat('k', id % 5) as key", "cast(id as string) as value")
    write(df, broker)
    a = batch_reader(spark, broker.bootstrap, topic_name).collect()
    b = batch_reader(spark, broker.bootstrap, other).collect()
    assert sorted(int(r.value) for r in a) == list(range(0, 40, 2))
    assert sorted(int(r.value) for r in b) == list(range(1, 40, 2))
    by_key = {}
    for r in a:
        by_key.setdefault(r.key, set()).add(r.partition)
    assert all(len(parts) == 1 for parts in by_key.values())  # one key, one partition (murmur2)


def test_streaming_write_from_a_topic_to_another(spark, broker, topic_name, tmp_path):
    source, sink = topic_name, topic_name + "-out"
    create_topic(broker.bootstrap, source, 2)
    create_topic(broker.bootstrap, sink, 2)
    produce(broker.bootstrap, source, [{"key": b"k%d" % i, "value": b"%d" % i, "partition": i % 2} for i in range(50)],
            extra=broker.traits.producer_conf)
    df = stream_reader(spark, broker.bootstrap, source, startingOffsets="earliest")
    out = df.selectExpr("key", "cast(cast(cast(value as string) as int) * 10 as string) as value")
    writer = (out.writeStream.format("tinystream").option("bootstrap.servers", broker.bootstrap)
              .option("topic", sink).option("checkpointLocation", str(tmp_path / "ck")))
    for k, v in broker.traits.writer_options.items():
        writer = writer.option(k, v)
    writer.trigger(availableNow=True).start().awaitTermination(120)
    rows = batch_reader(spark, broker.bootstrap, sink).collect()
    assert sorted(int(r.value) for r in rows) == [i * 10 for i in range(50)]


def test_write_to_a_missing_topic_errs_clearly_or_auto_creates(spark, broker):
    missing = f"missing-{uuid.uuid4().hex[:8]}"
    df = spark.range(3).selectExpr("cast(id as string) as value")
    try:
        write(df, broker, topic=missing, **{"kafka.message.timeout.ms": "15000",
                                            "kafka.topic.metadata.propagation.max.ms": "5000"})
    except Exception as exc:  # noqa: BLE001 - Spark wraps the task failure
        text = str(exc)
        assert missing in text and ("UNKNOWN_TOPIC" in text or "Unknown topic" in text), text[-2000:]
        return
    rows = batch_reader(spark, broker.bootstrap, missing).collect()  # the broker auto-created it
    assert sorted(int(r.value) for r in rows) == [0, 1, 2]


def test_bad_sink_schema_is_refused_before_writing(spark, broker, topic_name):
    with pytest.raises(Exception, match='required attribute "value"'):
        write(spark.range(1).selectExpr("'x' as key"), broker, topic=topic_name)
