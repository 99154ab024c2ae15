"""The data source Spark sees: format "tinystream".

Options are validated when a reader or writer is created (on the driver),
so a typo fails the query at start with a message naming the option, not in
a task.
"""

from __future__ import annotations

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from tinystream.spark.batch_reader import TinyStreamBatchReader
from tinystream.spark.options import Mode, include_headers, parse_read_options, parse_write_options
from tinystream.spark.schema import spark_schema
from tinystream.spark.stream_reader import TinyStreamStreamReader
from tinystream.spark.writer import TinyStreamBatchWriter, TinyStreamStreamWriter

FORMAT = "tinystream"


class TinyStreamDataSource(DataSource):
    """Kafka-compatible topics as a Spark source and sink (columns and options of Spark's Kafka source)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return spark_schema(include_headers(self.options))

    def reader(self, schema: StructType) -> DataSourceReader:
        return TinyStreamBatchReader(parse_read_options(self.options, Mode.BATCH))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TinyStreamStreamReader(parse_read_options(self.options, Mode.STREAMING))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return TinyStreamBatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return TinyStreamStreamWriter(parse_write_options(self.options), schema)
