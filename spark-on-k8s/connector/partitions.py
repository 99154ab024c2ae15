"""What a Spark task receives: one offset range, and how it turns into Arrow batches.

`RangePartition` is pickled on the driver and unpickled in the executor's
Python worker, so it holds plain data only. `read_partition` runs there:
it creates the Kafka consumer (never on the driver), reads the range and
yields RecordBatches of the source schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pyspark.sql.datasource import InputPartition

from tinystream.spark.kafka_client import read_range
from tinystream.spark.offsets import OffsetRange
from tinystream.spark.options import ReadOptions
from tinystream.spark.registry_values import ValueDecoder, records_to_registry_batch
from tinystream.spark.schema import records_to_batch


class RangePartition(InputPartition):
    """One Spark input partition: offsets [from, until) of one topic-partition."""

    def __init__(self, offset_range: OffsetRange):
        super().__init__(offset_range)
        self.range = offset_range

    def __repr__(self) -> str:
        r = self.range
        return f"RangePartition({r.tp}, {r.from_offset}..{r.until_offset})"


def read_partition(partition: Any, opts: ReadOptions) -> Iterator[Any]:
    """Arrow RecordBatches of one input partition (nothing for Spark's empty placeholder)."""
    if not isinstance(partition, RangePartition):
        return  # PySpark plans InputPartition(None) when a batch read has no ranges
    reg = opts.registry
    decoder = ValueDecoder(reg) if reg is not None else None
    key_decoder = ValueDecoder(opts.key_registry) if opts.key_registry is not None else None
    for messages in read_range(
        partition.range,
        bootstrap=opts.bootstrap_servers,
        conf=opts.client_conf,
        fail_on_data_loss=opts.fail_on_data_loss,
        poll_timeout_ms=opts.poll_timeout_ms,
        retries=opts.fetch_retries,
        retry_interval_ms=opts.fetch_retry_interval_ms,
    ):
        if reg is not None and decoder is not None:
            yield records_to_registry_batch(messages, include_headers=opts.include_headers, reg=reg, decoder=decoder,
                                            key_decoder=key_decoder)
        else:
            yield records_to_batch(messages, include_headers=opts.include_headers)
