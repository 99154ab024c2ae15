"""The source's schema, and Kafka records -> Arrow record batches.

Columns are those of Spark's built-in Kafka source, in the same order:
    key binary, value binary, topic string, partition int, offset bigint,
    timestamp timestamp, timestampType int [, headers array<struct<key string, value binary>>]

`read()` yields `pyarrow.RecordBatch`es. PySpark checks each batch against
`to_arrow_schema(schema, timezone="UTC")` with `Schema.equals`, so the
batches are built against exactly that Arrow schema (microsecond UTC
timestamps, nullable fields, PySpark's list element naming), derived from the
Spark schema rather than written out twice.

timestampType follows Kafka's TimestampType ids as Spark exposes them:
0 = CreateTime, 1 = LogAppendTime (librdkafka numbers them 1 and 2; 0 there
means "not available", which becomes -1 here like Kafka's NO_TIMESTAMP_TYPE).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

BASE_COLUMNS = (
    "key binary, value binary, topic string, partition int, offset bigint, "
    "timestamp timestamp, timestampType int"
)
HEADERS_COLUMN = "headers array<struct<key: string, value: binary>>"

# librdkafka timestamp type -> Kafka/Spark timestampType
_TIMESTAMP_TYPE = {0: -1, 1: 0, 2: 1}


def source_schema_ddl(include_headers: bool) -> str:
    return f"{BASE_COLUMNS}, {HEADERS_COLUMN}" if include_headers else BASE_COLUMNS


def spark_schema(include_headers: bool) -> StructType:
    """The same schema as a StructType, built without a JVM (executors have none to parse DDL)."""
    fields = [
        T.StructField("key", T.BinaryType()),
        T.StructField("value", T.BinaryType()),
        T.StructField("topic", T.StringType()),
        T.StructField("partition", T.IntegerType()),
        T.StructField("offset", T.LongType()),
        T.StructField("timestamp", T.TimestampType()),
        T.StructField("timestampType", T.IntegerType()),
    ]
    if include_headers:
        header = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", T.BinaryType())])
        fields.append(T.StructField("headers", T.ArrayType(header)))
    return T.StructType(fields)


@lru_cache(maxsize=4)
def arrow_schema(include_headers: bool) -> pa.Schema:
    """The Arrow schema PySpark expects for the source schema (what its check compares with)."""
    return to_arrow_schema(spark_schema(include_headers), timezone="UTC")


def timestamp_type(librdkafka_type: int) -> int:
    return _TIMESTAMP_TYPE.get(librdkafka_type, -1)


def records_to_batch(messages: Sequence[Any], *, include_headers: bool) -> pa.RecordBatch:
    """confluent_kafka Messages (all without error) -> one RecordBatch of the source schema."""
    schema = arrow_schema(include_headers)
    keys = []
    values = []
    topics = []
    partitions = []
    offsets = []
    stamps = []
    stamp_types = []
    headers: list[list[dict[str, Any]] | None] = []
    for m in messages:
        keys.append(m.key())
        values.append(m.value())
        topics.append(m.topic())
        partitions.append(m.partition())
        offsets.append(m.offset())
        kind, ms = m.timestamp()
        stamps.append(ms if kind else None)
        stamp_types.append(_TIMESTAMP_TYPE.get(kind, -1))
        if include_headers:
            hs = m.headers()
            headers.append([{"key": k, "value": v} for k, v in hs] if hs else [])
    ms_type = pa.timestamp("ms", tz="UTC")
    arrays = [
        pa.array(keys, type=pa.binary()),
        pa.array(values, type=pa.binary()),
        pa.array(topics, type=pa.string()),
        pa.array(partitions, type=pa.int32()),
        pa.array(offsets, type=pa.int64()),
        pa.array(stamps, type=ms_type).cast(schema.field("timestamp").type),
        pa.array(stamp_types, type=pa.int32()),
    ]
    if include_headers:
        arrays.append(pa.array(headers, type=schema.field("headers").type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
