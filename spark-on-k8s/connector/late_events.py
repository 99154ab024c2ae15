"""Late events: what a windowed pipeline does with rows that arrive after the watermark.

Three policies, as the streaming-primitives library among our seeds names them
(the watermark delay is the allowed lateness):

    drop         append mode, Spark's default: a row whose window ended at or before
                 the watermark is dropped; each window is written once, when it closes
    update       update mode: every micro-batch writes the windows it changed, so a late
                 row inside the allowed lateness updates a window already written (the
                 last write of a window is its value); rows beyond it are still dropped
    side-output  append mode, and the rows Spark drops go to a late-events topic with
                 the window they missed, the watermark and their lateness, and are counted

Spark does not say which rows a micro-batch dropped, but its checkpoint says
enough to find them exactly: before batch N runs, Spark writes the batch's
source end offsets and the watermark the batch uses to the offset log
(`<checkpoint>/offsets/N`: a version line, the batch metadata with
`batchWatermarkMs`, then one line per source). Batch N read the offsets between
the ends of N-1 and N; the side output reads that range back from the topic,
assigns each event its windows as the aggregation does, and keeps those whose
window ended at or before the batch's watermark: the rows the aggregation dropped.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.streaming import DataStreamWriter

from tinystream.spark.windows import parse_events, to_records

EARLIEST = -2  # a partition first seen in this batch starts at earliest (as Spark's Kafka source does)


class LatePolicy(str, Enum):
    DROP = "drop"
    UPDATE = "update"
    SIDE_OUTPUT = "side-output"

    @property
    def output_mode(self) -> str:
        return "update" if self is LatePolicy.UPDATE else "append"


@dataclass(frozen=True)
class BatchLog:
    """One entry of Spark's offset log: the watermark a micro-batch used and where its source ended."""

    watermark_ms: int
    end_offsets: dict[str, dict[str, int]]


def parse_offset_log(text: str) -> BatchLog:
    """`offsets/N` of a checkpoint: 'v1', the batch metadata, then one offset line per source ('-': none)."""
    lines = text.splitlines()
    if len(lines) < 3 or not lines[0].startswith("v"):
        raise ValueError(f"not a Spark offset log entry: {text[:80]!r}")
    sources = [line for line in lines[2:] if line.strip()]
    if len(sources) != 1:
        raise ValueError(f"the late-events side output needs exactly one streaming source, found {len(sources)}")
    offsets = json.loads(sources[0]) if sources[0] != "-" else {}
    return BatchLog(int(json.loads(lines[1]).get("batchWatermarkMs", 0)), offsets)


def batch_range(previous: BatchLog | None, current: BatchLog) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, int]]]:
    """(startingOffsets, endingOffsets) of what the batch read: from the previous batch's end to its own."""
    before = previous.end_offsets if previous else {}
    start = {topic: {p: before.get(topic, {}).get(p, EARLIEST) for p in parts}
             for topic, parts in current.end_offsets.items()}
    return start, current.end_offsets


def read_batch_log(checkpoint: str | Path, batch_id: int) -> BatchLog | None:
    path = Path(checkpoint) / "offsets" / str(batch_id)
    return parse_offset_log(path.read_text()) if path.exists() else None


@dataclass(frozen=True)
class TopicOutput:
    """Where and how the pipeline writes records (batch writes, for foreachBatch)."""

    bootstrap: str
    topic: str
    options: Mapping[str, str] = field(default_factory=dict)

    def write(self, records: DataFrame) -> None:
        writer = records.write.format("tinystream").option("bootstrap.servers", self.bootstrap).option("topic", self.topic)
        for key, value in self.options.items():
            writer = writer.option(key, value)
        writer.mode("append").save()


def late_rows(assigned: DataFrame, watermark_ms: int) -> DataFrame:
    """Events (with window_start/window_end) whose window ended at or before the watermark: what Spark drops."""
    watermark = F.timestamp_millis(F.lit(watermark_ms))
    return (assigned.where(F.col("window_end") <= watermark)
            .withColumn("watermark", watermark)
            .withColumn("lateness_ms", F.lit(watermark_ms) - F.unix_millis("event_time")))


@dataclass
class SideOutput:
    """Writes the input rows a micro-batch dropped as late to the late-events topic (see the module doc)."""

    spark: Any
    input_topic: str
    late: TopicOutput
    checkpoint: str
    assign: Callable[[DataFrame], DataFrame]  # events -> one row per (event, window), as the aggregation sees them
    reader_options: Mapping[str, str] = field(default_factory=dict)
    late_count: int = 0  # late events written by this process (a re-run batch counts again)

    def write_batch(self, batch_id: int) -> None:
        current = read_batch_log(self.checkpoint, batch_id)
        if current is None or current.watermark_ms <= 0:
            return  # the first batches run before any watermark: nothing can be late
        start, end = batch_range(read_batch_log(self.checkpoint, batch_id - 1), current)
        if start == end:
            return  # a no-data batch, run only to move the watermark
        reader = (self.spark.read.format("tinystream").option("bootstrap.servers", self.late.bootstrap)
                  .option("subscribe", self.input_topic)
                  .option("startingOffsets", json.dumps(start)).option("endingOffsets", json.dumps(end)))
        for key, value in self.reader_options.items():
            reader = reader.option(key, value)
        late = late_rows(self.assign(parse_events(reader.load())), current.watermark_ms).cache()
        try:
            count = late.count()
            if count:
                self.late.write(to_records(late, "user"))
                self.late_count += count
        finally:
            late.unpersist()


@dataclass
class WindowsToTopic:
    """foreachBatch sink: the windows a micro-batch wrote (changed ones in update mode), then its late events.

    foreachBatch because Spark's Python data sources take append mode only; a batch
    write per micro-batch is how Spark's guide writes update-mode results to such sinks.
    """

    output: TopicOutput
    key_column: str
    side_output: SideOutput | None = None

    def __call__(self, windows: DataFrame, batch_id: int) -> None:
        self.output.write(to_records(windows, self.key_column))
        if self.side_output is not None:
            self.side_output.write_batch(batch_id)


def windowed_writer(result: DataFrame, *, policy: LatePolicy, key_column: str, output: TopicOutput,
                    checkpoint: str, side_output: SideOutput | None = None) -> DataStreamWriter:
    """The streaming writer of a windowed result under a late-event policy (set a trigger, then start it)."""
    if policy is LatePolicy.SIDE_OUTPUT and side_output is None:
        raise ValueError("the side-output policy needs a SideOutput (where late events go)")
    if policy is LatePolicy.DROP:
        writer = to_records(result, key_column).writeStream.format("tinystream") \
            .option("bootstrap.servers", output.bootstrap).option("topic", output.topic)
        for key, value in output.options.items():
            writer = writer.option(key, value)
    else:
        keep = side_output if policy is LatePolicy.SIDE_OUTPUT else None
        writer = result.writeStream.foreachBatch(WindowsToTopic(output, key_column, keep))
    return writer.option("checkpointLocation", checkpoint).outputMode(policy.output_mode)
