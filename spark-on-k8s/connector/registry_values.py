"""Registry-framed values in a read's Arrow batches and a write's records.

Read: the `value` column is a struct of the subject's latest schema (fetched
on the driver when the query is planned, the reader schema); each value is
decoded with the schema its id names (fetched once per id and task) and
resolved to the reader schema by Avro's rules, so records written with older
compatible versions read as the latest. FAILFAST (default) fails the task
with the reason; PERMISSIVE puts null in `value` and the reason in
`valueError` (null when decoded).

Write: the `value` struct column is encoded with the subject's latest schema
(or `value.schema`, registered first when auto.register.schemas=true) and
framed with its id, as Confluent's AvroSerializer does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from tinystream.spark import avro_values
from tinystream.spark.errors import SchemaRegistryError
from tinystream.spark.options import DecodeMode, RegistryOptions
from tinystream.spark.registry_client import RegistryClient
from tinystream.spark.schema import records_to_batch, spark_schema

ERROR_COLUMN = "valueError"


def latest_schema(reg: RegistryOptions) -> str:
    """The subject's latest schema text (driver); a non-Avro subject is refused naming its type."""
    latest = RegistryClient(reg.url, reg.user_info).latest(reg.subject)
    if latest.schema_type != "AVRO":
        raise SchemaRegistryError(
            f'subject "{reg.subject}" holds a {latest.schema_type} schema; value.format "{reg.value_format}" reads AVRO only'
        )
    return latest.schema


def read_schema(include_headers: bool, reg: RegistryOptions, reader_schema: str) -> T.StructType:
    """The source schema with `value` as the subject's struct (and `valueError` when PERMISSIVE)."""
    base = spark_schema(include_headers)
    fields = [T.StructField("value", avro_values.value_struct(reader_schema), True) if f.name == "value" else f
              for f in base.fields]
    if reg.mode is DecodeMode.PERMISSIVE:
        fields.append(T.StructField(ERROR_COLUMN, T.StringType(), True))
    return T.StructType(fields)


class ValueDecoder:
    """Framed bytes -> a dict of the reader schema; one per task (its id cache lives as long)."""

    def __init__(self, reg: RegistryOptions):
        if reg.reader_schema is None:
            raise SchemaRegistryError("the reader schema was not fixed on the driver")
        self.client = RegistryClient(reg.url, reg.user_info)
        self.reader = avro_values.parse_schema(reg.reader_schema)
        self.wrapped = not avro_values.is_record(reg.reader_schema)
        self.writers: dict[int, Any] = {}

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None  # a tombstone stays null, as from_avro leaves a null input null
        schema_id, payload = avro_values.unframe(data)
        writer = self.writers.get(schema_id)
        if writer is None:
            try:
                found = self.client.by_id(schema_id)
            except SchemaRegistryError as exc:
                raise SchemaRegistryError(f"schema id {schema_id} of the value: {exc}") from exc
            if found.schema_type != "AVRO":
                raise SchemaRegistryError(f"schema id {schema_id} is a {found.schema_type} schema, not AVRO")
            writer = self.writers[schema_id] = avro_values.parse_schema(found.schema)
        return avro_values.decode(writer, payload, reader=self.reader, wrapped=self.wrapped)


def records_to_registry_batch(messages: Sequence[Any], *, include_headers: bool, reg: RegistryOptions,
                              decoder: ValueDecoder) -> pa.RecordBatch:
    """Like schema.records_to_batch, with `value` decoded (FAILFAST raises, PERMISSIVE fills valueError)."""
    assert reg.reader_schema is not None
    plain = records_to_batch(messages, include_headers=include_headers)
    target = to_arrow_schema(read_schema(include_headers, reg, reg.reader_schema), timezone="UTC")
    values: list[Any] = []
    errors: list[str | None] = []
    for m in messages:
        try:
            values.append(decoder.decode(m.value()))
            errors.append(None)
        except SchemaRegistryError as exc:
            if reg.mode is DecodeMode.FAILFAST:
                raise SchemaRegistryError(
                    f"{m.topic()}-{m.partition()} offset {m.offset()}: {exc} "
                    '(set the option "mode" to "PERMISSIVE" to read it as null with the reason in "valueError")'
                ) from exc
            values.append(None)
            errors.append(str(exc))
    arrays = []
    for name in target.names:
        if name == "value":
            arrays.append(pa.array(values, type=target.field("value").type))
        elif name == ERROR_COLUMN:
            arrays.append(pa.array(errors, type=pa.string()))
        else:
            arrays.append(plain.column(plain.schema.get_field_index(name)))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


class ValueEncoder:
    """A row's `value` (dict) -> framed Avro bytes with the subject's schema id."""

    def __init__(self, reg: RegistryOptions):
        client = RegistryClient(reg.url, reg.user_info)
        if reg.auto_register and reg.value_schema:
            schema = reg.value_schema
            self.schema_id = client.register(reg.subject, schema)
        else:
            latest = client.latest(reg.subject)
            if latest.schema_type != "AVRO":
                raise SchemaRegistryError(f'subject "{reg.subject}" holds a {latest.schema_type} schema, not AVRO')
            schema, self.schema_id = latest.schema, latest.schema_id
        self.parsed = avro_values.parse_schema(schema)
        self.wrapped = not avro_values.is_record(schema)

    def encode(self, value: Any) -> bytes | None:
        if value is None:
            return None  # a null value writes a tombstone, as without a registry
        if self.wrapped:
            value = value["value"] if isinstance(value, dict) else value
        return avro_values.frame(self.schema_id, avro_values.encode(self.parsed, value))
