"""The data source Spark sees: format "tinystream".

Options are validated when a reader or writer is created (on the driver),
so a typo fails the query at start with a message naming the option, not in
a task.
"""

from __future__ import annotations

import dataclasses

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
)
from pyspark.sql.types import StructType

from tinystream.spark.batch_reader import TinyStreamBatchReader
from tinystream.spark.errors import SchemaRegistryError
from tinystream.spark.options import (
    Mode,
    ReadOptions,
    include_headers,
    parse_read_options,
    parse_write_options,
    registry_options,
)
from tinystream.spark.registry_values import latest_schema, read_schema
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
        registry = registry_options(self.options)  # schema() runs before the mode is known
        if registry is None:
            return spark_schema(include_headers(self.options))
        key = registry_options(self.options, "key")
        return read_schema(include_headers(self.options), registry, latest_schema(registry),
                           (key, latest_schema(key)) if key is not None else None)

    def _read_options(self, mode: Mode, schema: StructType) -> ReadOptions:
        """Options with the subject's latest schema fixed, checked against the schema Spark planned with."""
        opts = parse_read_options(self.options, mode)
        if opts.registry is None:
            return opts
        latest = latest_schema(opts.registry)
        key = (opts.key_registry, latest_schema(opts.key_registry)) if opts.key_registry is not None else None
        if read_schema(opts.include_headers, opts.registry, latest, key) != schema:
            raise SchemaRegistryError(
                f'the latest schema of subject "{opts.registry.subject}" changed while the query was planned; run it again'
            )
        fixed = dataclasses.replace(opts.registry, reader_schema=latest.schema, reader_schema_type=latest.schema_type)
        fixed_key = None
        if key is not None:
            fixed_key = dataclasses.replace(key[0], reader_schema=key[1].schema, reader_schema_type=key[1].schema_type)
        return dataclasses.replace(opts, registry=fixed, key_registry=fixed_key)

    def reader(self, schema: StructType) -> DataSourceReader:
        return TinyStreamBatchReader(self._read_options(Mode.BATCH, schema))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return TinyStreamStreamReader(self._read_options(Mode.STREAMING, schema))

    def writer(self, schema: StructType, overwrite: bool) -> DataSourceWriter:
        return TinyStreamBatchWriter(parse_write_options(self.options), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> DataSourceStreamWriter:
        return TinyStreamStreamWriter(parse_write_options(self.options), schema)
