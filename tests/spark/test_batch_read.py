"""Batch read: exactly what was produced, for ranges given by offsets and by timestamps."""

from __future__ import annotations

import json

import pytest
from spark_helpers import batch_reader, create_topic, produce

from tinystream.spark.events import recent_start_ms

pytestmark = [pytest.mark.spark, pytest.mark.slow]

BASE_TS = recent_start_ms()  # recent: retention by timestamp must not delete the records


@pytest.fixture
def produced(broker, topic_name):
    """60 records over 3 partitions, with keys, headers and CreateTime timestamps 1 s apart."""
    create_topic(broker.bootstrap, topic_name, 3)
    records = [
        {"key": None if i % 10 == 9 else b"key-%d" % i, "value": b"value-%d" % i, "partition": i % 3,
         "timestamp": BASE_TS + i * 1000, "headers": [("n", b"%d" % i), ("empty", None)] if i % 2 else None}
        for i in range(60)
    ]
    return topic_name, produce(broker.bootstrap, topic_name, records, extra=broker.traits.producer_conf)


def as_tuples(rows):
    return sorted(
        (r.partition, r.offset, r.key, r.value, round(r.timestamp.timestamp() * 1000),
         tuple((h.key, h.value) for h in r.headers))
        for r in rows
    )


def expected(sent, keep=lambda s: True):
    return sorted((s.partition, s.offset, s.key, s.value, s.timestamp, s.headers) for s in sent if keep(s))


def test_reads_exactly_what_was_produced(spark, broker, produced):
    topic, sent = produced
    df = batch_reader(spark, broker.bootstrap, topic, includeHeaders="true")
    assert [f.name for f in df.schema.fields] == ["key", "value", "topic", "partition", "offset", "timestamp",
                                                  "timestampType", "headers"]
    rows = df.collect()
    assert as_tuples(rows) == expected(sent)
    assert {r.topic for r in rows} == {topic} and {r.timestampType for r in rows} == {0}


def test_ranges_by_offsets_and_min_partitions(spark, broker, produced):
    topic, sent = produced
    start = json.dumps({topic: {"0": 3, "1": -2, "2": 10}})
    end = json.dumps({topic: {"0": 15, "1": 5, "2": -1}})
    df = batch_reader(spark, broker.bootstrap, topic, includeHeaders="true", startingOffsets=start,
                      endingOffsets=end, minPartitions="7")
    assert df.rdd.getNumPartitions() >= 7
    bounds = {0: (3, 15), 1: (0, 5), 2: (10, 20)}
    assert as_tuples(df.collect()) == expected(sent, lambda s: bounds[s.partition][0] <= s.offset < bounds[s.partition][1])


def test_assign_reads_only_the_assigned_partitions(spark, broker, produced):
    topic, sent = produced
    df = (spark.read.format("tinystream").option("kafka.bootstrap.servers", broker.bootstrap)
          .option("assign", json.dumps({topic: [1]})).load())
    assert sorted(r.offset for r in df.collect()) == sorted(s.offset for s in sent if s.partition == 1)


def test_ranges_by_timestamps(spark, broker, produced):
    if not broker.traits.timestamp_lookup:
        pytest.skip(f"{broker.name} does not answer ListOffsets by timestamp (KIP-79) correctly")
    topic, sent = produced
    lo, hi = BASE_TS + 15_000, BASE_TS + 45_000  # records 15..44
    df = batch_reader(spark, broker.bootstrap, topic, startingTimestamp=str(lo), endingTimestamp=str(hi))
    assert sorted(r.offset for r in df.collect()) == sorted(s.offset for s in sent if lo <= s.timestamp < hi)
    per_partition = json.dumps({topic: {"0": BASE_TS + 30_000, "1": -2, "2": BASE_TS + 1_000_000}})
    df = batch_reader(spark, broker.bootstrap, topic, startingOffsetsByTimestamp=per_partition,
                      startingOffsetsByTimestampStrategy="latest")
    got = sorted((r.partition, r.offset) for r in df.collect())
    want = sorted((s.partition, s.offset) for s in sent
                  if (s.partition == 0 and s.timestamp >= BASE_TS + 30_000) or s.partition == 1)
    assert got == want


def test_bad_options_fail_before_any_task(spark, broker, produced):
    topic, _ = produced
    with pytest.raises(Exception, match="startingOffsets"):
        batch_reader(spark, broker.bootstrap, topic, startingOffsets="latest").collect()
    with pytest.raises(Exception, match="missing"):
        batch_reader(spark, broker.bootstrap, topic, startingOffsets=json.dumps({topic: {"0": 1}})).collect()
