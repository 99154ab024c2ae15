"""Streaming read on local Spark against a real broker: checkpoints, rate limits, new partitions."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest
from spark_helpers import add_partitions, create_topic, produce, stream_reader

pytestmark = [pytest.mark.spark, pytest.mark.slow]


class BackgroundProducer(threading.Thread):
    """Keeps writing numbered records round-robin over the partitions until stopped."""

    def __init__(self, bootstrap: str, topic: str, partitions: int, conf):
        super().__init__(daemon=True)
        self.bootstrap, self.topic, self.partitions, self.conf = bootstrap, topic, partitions, conf
        self.stop_event = threading.Event()
        self.acked = []
        self.error: BaseException | None = None

    def run(self) -> None:
        n = 0
        try:
            while not self.stop_event.is_set():
                batch = [{"key": b"k%d" % (n + i), "value": b"%d" % (n + i), "partition": (n + i) % self.partitions}
                         for i in range(40)]
                self.acked += produce(self.bootstrap, self.topic, batch, extra=self.conf)
                n += len(batch)
                time.sleep(0.05)
        except BaseException as exc:  # noqa: BLE001 - surfaced by the test
            self.error = exc

    def finish(self) -> list:
        self.stop_event.set()
        self.join(60)
        assert self.error is None, self.error
        return self.acked


def _committed_batches(checkpoint: str) -> int:
    commits = os.path.join(checkpoint, "commits")
    return len([n for n in os.listdir(commits) if n.isdigit()]) if os.path.isdir(commits) else 0


def _wait_for_commit_beyond(committed: int, checkpoint: str, timeout: float = 120) -> None:
    """Stop a run only after it committed a batch of its own.

    Spark refuses to restart from a checkpoint whose offset log holds a half-written
    first batch (STATE_STORE_CHECKPOINT_LOCATION_NOT_EMPTY), which a stop during batch 0
    leaves on a loaded machine: that is Spark's rule, not the connector's.
    """
    deadline = time.monotonic() + timeout
    while _committed_batches(checkpoint) <= committed:
        assert time.monotonic() < deadline, f"no batch committed in {timeout} s"
        time.sleep(0.2)


def test_restarts_from_checkpoint_yield_every_record_exactly_once(spark, broker, topic_name, tmp_path):
    create_topic(broker.bootstrap, topic_name, 3)
    writer = BackgroundProducer(broker.bootstrap, topic_name, 3, broker.traits.producer_conf)
    writer.start()
    out, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")

    def start(trigger):
        df = stream_reader(spark, broker.bootstrap, topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="150")
        return (df.selectExpr("partition", "offset", "cast(value as string) as value")
                .writeStream.format("parquet").option("path", out).option("checkpointLocation", checkpoint)
                .trigger(**trigger).start())

    try:
        for _ in range(3):  # run, stop mid-stream, restart from the checkpoint
            committed = _committed_batches(checkpoint)
            query = start({"processingTime": "200 milliseconds"})
            time.sleep(3)
            _wait_for_commit_beyond(committed, checkpoint)
            query.stop()
    finally:
        acked = writer.finish()
    drain = start({"availableNow": True})
    drain.awaitTermination(240)
    rows = spark.read.parquet(out).collect()
    got = [(r.partition, r.offset, r.value) for r in rows]
    assert len(got) == len(set(got)), "duplicates in the sink"
    assert sorted(got) == sorted((s.partition, s.offset, s.value.decode()) for s in acked)
    assert len(acked) > 300


def test_max_offsets_per_trigger_bounds_every_micro_batch(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 3)
    sizes = [200, 70, 30]  # uneven backlog: the limit is split in proportion
    produce(broker.bootstrap, topic_name,
            [{"value": b"x", "partition": p} for p, n in enumerate(sizes) for _ in range(n)],
            extra=broker.traits.producer_conf)
    query = (stream_reader(spark, broker.bootstrap, topic_name, startingOffsets="earliest", maxOffsetsPerTrigger="70")
             .writeStream.format("memory").queryName("bounded").trigger(availableNow=True).start())
    query.awaitTermination(120)
    batches = [p for p in query.recentProgress if p["numInputRows"] > 0]
    assert all(p["numInputRows"] <= 70 for p in batches)
    assert sum(p["numInputRows"] for p in batches) == 300
    assert len(batches) == 5  # ceil(300 / 70)
    first = batches[0]["sources"][0]
    assert json.loads(first["endOffset"]) == {topic_name: {"0": 47, "1": 16, "2": 7}}  # 70 split as 200:70:30
    assert json.loads(first["latestOffset"]) == {topic_name: {"0": 200, "1": 70, "2": 30}}  # reportLatestOffset
    assert spark.sql("select count(distinct partition, offset) from bounded").first()[0] == 300


def test_partitions_added_while_running_are_read_from_earliest(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 1)
    produce(broker.bootstrap, topic_name, [{"value": b"a%d" % i} for i in range(10)], extra=broker.traits.producer_conf)
    query = (stream_reader(spark, broker.bootstrap, topic_name, startingOffsets="earliest")
             .writeStream.format("memory").queryName("grown").trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        try:
            add_partitions(broker.bootstrap, topic_name, 3)
        except Exception as exc:  # noqa: BLE001
            pytest.skip(f"{broker.name} cannot add partitions: {exc}")
        produce(broker.bootstrap, topic_name, [{"value": b"b%d" % i, "partition": i % 3} for i in range(30)],
                extra=broker.traits.producer_conf)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            query.processAllAvailable()
            if spark.sql("select count(*) from grown").first()[0] >= 40:
                break
            time.sleep(0.5)
    finally:
        query.stop()
    rows = spark.sql("select partition, offset, cast(value as string) v from grown").collect()
    assert sorted(r.v for r in rows) == sorted([f"a{i}" for i in range(10)] + [f"b{i}" for i in range(30)])
    assert {r.partition for r in rows} == {0, 1, 2}
    assert min(r.offset for r in rows if r.partition == 2) == 0  # new partition read from its start


def test_starting_latest_reads_only_new_records(spark, broker, topic_name):
    create_topic(broker.bootstrap, topic_name, 2)
    produce(broker.bootstrap, topic_name, [{"value": b"old", "partition": i % 2} for i in range(20)],
            extra=broker.traits.producer_conf)
    query = (stream_reader(spark, broker.bootstrap, topic_name)  # startingOffsets defaults to latest
             .writeStream.format("memory").queryName("latest_only").trigger(processingTime="200 milliseconds").start())
    try:
        query.processAllAvailable()
        produce(broker.bootstrap, topic_name, [{"value": b"new", "partition": i % 2} for i in range(6)],
                extra=broker.traits.producer_conf)
        query.processAllAvailable()
    finally:
        query.stop()
    values = [r.v for r in spark.sql("select cast(value as string) v from latest_only").collect()]
    assert values == ["new"] * 6
