"""Streaming read: a DataSourceStreamReader with admission control.

The flow Spark drives for each micro-batch (Python runner on the driver):

    initialOffset()            once per new query: startingOffsets resolved to numbers
    getDefaultReadLimit()      ReadMaxRows(maxOffsetsPerTrigger), else ReadAllAvailable
    prepareForTriggerAvailableNow()   Trigger.AvailableNow: snapshot the latest offsets
    latestOffset(start, limit) end of the next batch: latest, capped by the snapshot and
                               by the limit (split over partitions by backlog)
    partitions(start, end)     one RangePartition per topic-partition (minPartitions splits)
    read(partition)            on an executor: consumer + Arrow batches
    commit(end)                nothing: offsets live in the checkpoint only, like Spark's
                               Kafka source, which never commits to the broker either

Offsets are the canonical JSON of offsets.py, so a restarted query resumes
from the checkpoint exactly where the last committed batch ended, and a
batch that was planned but not committed is re-planned with the same end.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    SupportsTriggerAvailableNow,
)

from tinystream.spark.kafka_client import report_losses
from tinystream.spark.offsets import TopicPartition, offsets_from_json, offsets_to_json
from tinystream.spark.options import ReadOptions
from tinystream.spark.partitions import RangePartition, read_partition
from tinystream.spark.planner import OffsetPlanner
from tinystream.spark.planning import Role, plan_end_offsets, plan_ranges, split_ranges

log = logging.getLogger("tinystream.spark")


class TinyStreamStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self.planner = OffsetPlanner(opts)
        self._target: dict[TopicPartition, int] | None = None
        self._latest: dict[TopicPartition, int] | None = None

    # --- driver --------------------------------------------------------------

    def initialOffset(self) -> dict:
        tps = self.planner.current_partitions()
        return offsets_to_json(self.planner.resolve(self.opts.starting, tps, Role.STARTING))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_offsets_per_trigger is not None:
            return ReadMaxRows(self.opts.max_offsets_per_trigger)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        tps = self.planner.current_partitions()
        self._target = self.planner.client.latest(tps) if tps else {}
        log.info("Trigger.AvailableNow: reading up to %s", offsets_to_json(self._target))

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = offsets_from_json(start)
        tps = self.planner.current_partitions()
        latest = self.planner.client.latest(tps) if tps else {}
        self._latest = latest
        new = [tp for tp in tps if tp not in begin]
        earliest_of_new = self.planner.client.earliest(new) if new else {}
        max_rows = limit.max_rows if isinstance(limit, ReadMaxRows) else None
        plan = plan_end_offsets(
            begin, latest, earliest_of_new=earliest_of_new, max_offsets=max_rows, target=self._target,
        )
        report_losses(plan.losses, self.opts.fail_on_data_loss)
        return offsets_to_json(plan.end)

    def reportLatestOffset(self) -> dict | None:
        return offsets_to_json(self._latest) if self._latest is not None else None

    def partitions(self, start: dict, end: dict) -> Sequence[InputPartition]:
        begin, stop = offsets_from_json(start), offsets_from_json(end)
        new = [tp for tp in stop if tp not in begin]
        earliest_of_new = self.planner.client.earliest(new) if new else {}
        plan = plan_ranges(begin, stop, earliest_of_new=earliest_of_new)
        report_losses(plan.losses, self.opts.fail_on_data_loss)
        return [RangePartition(r) for r in split_ranges(plan.ranges, self.opts.min_partitions)]

    def commit(self, end: dict) -> None:
        """Nothing to do: the checkpoint is the only record of progress."""

    def stop(self) -> None:
        self.planner.close()

    # --- executor ------------------------------------------------------------

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition, self.opts)
