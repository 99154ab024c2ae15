"""Batch and streaming write: DataFrame rows -> records, through an idempotent producer.

Columns, as Spark's Kafka sink takes them:
    value    binary or string, required (null writes a tombstone); with "schema.registry.url"
             a struct (or the one type of a non-record schema) encoded by registry_values
    key      binary or string, optional
    topic    string, optional; the "topic" option overrides it; one of the two is required
    partition int, optional (null: the murmur2 partitioner, as Java clients do)
    headers  array<struct<key: string, value: binary>>, optional

The schema is checked on the driver, before any task starts. Each task
produces its rows and flushes; any record the broker refused fails the task
with the broker's error name and message (ProduceError), so Spark retries
or fails the job as it does for its own sink. Delivery is at least once:
Spark re-runs failed tasks and micro-batches, and an idempotent producer
removes duplicates within one producer session only.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark import TaskContext
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    StringType,
    StructType,
)

from tinystream.spark.errors import InvalidOptionError, ProduceError
from tinystream.spark.kafka_client import RecordProducer
from tinystream.spark.options import WriteOptions
from tinystream.spark.registry_values import ValueEncoder

TEXT_OR_BYTES = (BinaryType, StringType)


@dataclass
class WriteCommit(WriterCommitMessage):
    records: int
    partition_id: int


def check_write_schema(schema: StructType, opts: WriteOptions) -> None:
    """Refuse a DataFrame the sink cannot write, naming the column and the types it takes."""
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise InvalidOptionError(f'required attribute "value" not found in {schema.simpleString()}')
    binary = [n for n, reg in (("value", opts.registry), ("key", opts.key_registry)) if reg is None]
    for name in binary:
        if name in fields and not isinstance(fields[name], TEXT_OR_BYTES):
            raise InvalidOptionError(f'{name} attribute type must be a string or binary, not {fields[name].simpleString()}')
    if opts.topic is None:
        if "topic" not in fields:
            raise InvalidOptionError(
                'topic option required when no "topic" attribute is present; use the "topic" option to set one'
            )
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise InvalidOptionError(f"topic attribute type must be a string, not {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise InvalidOptionError(f"partition attribute type must be an int, not {fields['partition'].simpleString()}")
    if "headers" in fields:
        headers = fields["headers"]
        ok = (
            isinstance(headers, ArrayType)
            and isinstance(headers.elementType, StructType)
            and [f.name for f in headers.elementType.fields] == ["key", "value"]
            and isinstance(headers.elementType.fields[0].dataType, StringType)
            and isinstance(headers.elementType.fields[1].dataType, BinaryType)
        )
        if not ok:
            raise InvalidOptionError(
                f"headers attribute type must be array<struct<key:string,value:binary>>, not {headers.simpleString()}"
            )


def _as_bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    return bytes(value)


def _key(key: Any, encoder: ValueEncoder | None) -> bytes | None:
    return encoder.encode(key) if encoder is not None else _as_bytes(key)


def write_batches(batches: Iterator[Any], opts: WriteOptions) -> int:
    """Produce every row of the Arrow batches; returns the number written, raises ProduceError."""
    encoder = ValueEncoder(opts.registry) if opts.registry is not None else None
    key_encoder = ValueEncoder(opts.key_registry) if opts.key_registry is not None else None
    producer = RecordProducer(opts.bootstrap_servers, opts.client_conf)
    for batch in batches:
        names = [n.lower() for n in batch.schema.names]
        columns = {name: batch.column(i).to_pylist() for i, name in enumerate(names)}
        values = columns["value"]
        keys = columns.get("key")
        topics = columns.get("topic")
        partitions = columns.get("partition")
        headers = columns.get("headers")
        for i, value in enumerate(values):
            topic = opts.topic or (topics[i] if topics is not None else None)
            if topic is None:
                raise ProduceError('null topic present in the data; set the "topic" option or fill the column')
            producer.send(
                topic,
                encoder.encode(value) if encoder is not None else _as_bytes(value),
                key=_key(keys[i], key_encoder) if keys is not None else None,
                partition=partitions[i] if partitions is not None else None,
                headers=[(h["key"], h["value"]) for h in headers[i]] if headers is not None and headers[i] else None,
            )
    producer.flush()
    return producer.sent


def _partition_id() -> int:
    context = TaskContext.get()
    return context.partitionId() if context is not None else 0


class TinyStreamBatchWriter(DataSourceArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType):
        check_write_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriteCommit:
        return WriteCommit(records=write_batches(iterator, self.opts), partition_id=_partition_id())

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Records are acknowledged by the broker when write() returns; nothing left to do."""
    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Acknowledged records cannot be taken back (Spark's Kafka sink has the same limit)."""

class TinyStreamStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, opts: WriteOptions, schema: StructType):
        check_write_schema(schema, opts)
        self.opts = opts

    def write(self, iterator: Iterator[Any]) -> WriteCommit:
        return WriteCommit(records=write_batches(iterator, self.opts), partition_id=_partition_id())

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803 - Spark's name
        """Acknowledged in write(); the micro-batch is complete."""
    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:  # noqa: N803
        """At least once: a re-run micro-batch writes its records again."""
