"""Batch read: startingOffsets / endingOffsets (or timestamps) resolved once, on the driver.

`partitions()` asks the broker for the partitions and their offsets, turns the
options into one range per topic-partition (split by minPartitions), and
returns them; `read()` runs on executors exactly as in streaming.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from pyspark.sql.datasource import DataSourceReader, InputPartition

from tinystream.spark.errors import InvalidOptionError
from tinystream.spark.offsets import OffsetRange
from tinystream.spark.options import LatestOffsets, ReadOptions
from tinystream.spark.partitions import RangePartition, read_partition
from tinystream.spark.planner import OffsetPlanner
from tinystream.spark.planning import Role, split_ranges


class TinyStreamBatchReader(DataSourceReader):
    def __init__(self, opts: ReadOptions):
        self.opts = opts
        self.planner = OffsetPlanner(opts)

    def partitions(self) -> Sequence[InputPartition]:
        try:
            tps = self.planner.current_partitions()
            start = self.planner.resolve(self.opts.starting, tps, Role.STARTING)
            end = self.planner.resolve(self.opts.ending or LatestOffsets(), tps, Role.ENDING)
        finally:
            self.planner.close()
        ranges = []
        for tp in tps:
            if end[tp] < start[tp]:
                raise InvalidOptionError(
                    f"the starting offset {start[tp]} of {tp} is after its ending offset {end[tp]}"
                )
            ranges.append(OffsetRange(tp, start[tp], end[tp]))
        return [RangePartition(r) for r in split_ranges(ranges, self.opts.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        return read_partition(partition, self.opts)
