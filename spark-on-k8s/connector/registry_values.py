"""Registry-framed values in a read's Arrow batches and a write's records (Avro and JSON Schema).

Read: the `value` column is a struct of the subject's latest schema (fetched
on the driver when the query is planned, the reader schema); each value is
decoded with the schema its id names (fetched once per id and task). Avro
values are resolved to the reader schema by Avro's rules, so records written
with older compatible versions read as the latest; JSON values are read
into the reader struct (properties it does not name are left out).
FAILFAST (default) fails the task with the reason; PERMISSIVE puts null in
`value` and the reason in `valueError` (null when decoded).

Write: the `value` struct column is encoded with the subject's latest schema
(or `value.schema`, registered first when auto.register.schemas=true) and
framed with its id, as Confluent's AvroSerializer and JSONSerializer do.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from tinystream.spark import avro_values, json_values
from tinystream.spark.errors import SchemaRegistryError
from tinystream.spark.options import DecodeMode, RegistryOptions
from tinystream.spark.registry_client import RegisteredSchema, RegistryClient
from tinystream.spark.schema import records_to_batch, spark_schema

ERROR_COLUMN = "valueError"
SCHEMA_TYPES = {"AVRO": "avro", "JSON": "json"}  # the registry's schemaType -> value.format


def _check_type(reg: RegistryOptions, found: RegisteredSchema, what: str) -> None:
    fmt = SCHEMA_TYPES.get(found.schema_type)
    if fmt is None:
        raise SchemaRegistryError(f"{what} is a {found.schema_type} schema; the connector reads and writes AVRO and JSON")
    if reg.value_format is not None and fmt != reg.value_format:
        raise SchemaRegistryError(f'{what} is a {found.schema_type} schema, not the value.format "{reg.value_format}"')


def latest_schema(reg: RegistryOptions) -> RegisteredSchema:
    """The subject's latest schema (driver); a schema type the connector cannot read is refused naming it."""
    latest = RegistryClient(reg.url, reg.user_info).latest(reg.subject)
    _check_type(reg, latest, f'subject "{reg.subject}"')
    return latest


def value_struct(schema_type: str, text: str) -> T.StructType:
    return json_values.value_struct(text) if schema_type == "JSON" else avro_values.value_struct(text)


def read_schema(include_headers: bool, reg: RegistryOptions, latest: RegisteredSchema) -> T.StructType:
    """The source schema with `value` as the subject's struct (and `valueError` when PERMISSIVE)."""
    base = spark_schema(include_headers)
    struct = value_struct(latest.schema_type, latest.schema)
    fields = [T.StructField("value", struct, True) if f.name == "value" else f for f in base.fields]
    if reg.mode is DecodeMode.PERMISSIVE:
        fields.append(T.StructField(ERROR_COLUMN, T.StringType(), True))
    return T.StructType(fields)


class ValueDecoder:
    """Framed bytes -> a dict of the reader schema; one per task (its id cache lives as long)."""

    def __init__(self, reg: RegistryOptions):
        if reg.reader_schema is None:
            raise SchemaRegistryError("the reader schema was not fixed on the driver")
        self.reg = reg
        self.client = RegistryClient(reg.url, reg.user_info)
        self.json = reg.reader_schema_type == "JSON"
        self.struct = value_struct(reg.reader_schema_type, reg.reader_schema)
        self.reader = None if self.json else avro_values.parse_schema(reg.reader_schema)
        if self.json:
            self.wrapped = not isinstance(json_values.spark_type(reg.reader_schema), T.StructType)
        else:
            self.wrapped = not avro_values.is_record(reg.reader_schema)
        self.writers: dict[int, Any] = {}

    def _writer(self, schema_id: int) -> Any:
        writer = self.writers.get(schema_id)
        if writer is None:
            try:
                found = self.client.by_id(schema_id)
            except SchemaRegistryError as exc:
                raise SchemaRegistryError(f"schema id {schema_id} of the value: {exc}") from exc
            if found.schema_type != self.reg.reader_schema_type:
                raise SchemaRegistryError(
                    f"schema id {schema_id} is a {found.schema_type} schema, the subject's is {self.reg.reader_schema_type}")
            writer = self.writers[schema_id] = found.schema if self.json else avro_values.parse_schema(found.schema)
        return writer

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None  # a tombstone stays null, as from_avro leaves a null input null
        schema_id, payload = avro_values.unframe(data)
        writer = self._writer(schema_id)
        if self.json:
            kind = self.struct.fields[0].dataType if self.wrapped else self.struct
            value = json_values.decode(payload, kind)
            return {"value": value} if self.wrapped else value
        return avro_values.decode(writer, payload, reader=self.reader, wrapped=self.wrapped)


def records_to_registry_batch(messages: Sequence[Any], *, include_headers: bool, reg: RegistryOptions,
                              decoder: ValueDecoder) -> pa.RecordBatch:
    """Like schema.records_to_batch, with `value` decoded (FAILFAST raises, PERMISSIVE fills valueError)."""
    assert reg.reader_schema is not None
    plain = records_to_batch(messages, include_headers=include_headers)
    latest = RegisteredSchema(-1, reg.reader_schema_type, reg.reader_schema)
    target = to_arrow_schema(read_schema(include_headers, reg, latest), timezone="UTC")
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
    """A row's `value` (dict) -> framed bytes with the subject's schema id (Avro or JSON)."""

    def __init__(self, reg: RegistryOptions):
        client = RegistryClient(reg.url, reg.user_info)
        if reg.auto_register and reg.value_schema:
            schema_type = "JSON" if reg.value_format == "json" else "AVRO"
            found = RegisteredSchema(client.register(reg.subject, reg.value_schema, schema_type), schema_type,
                                     reg.value_schema)
        else:
            found = client.latest(reg.subject)
            _check_type(reg, found, f'subject "{reg.subject}"')
        self.schema_id = found.schema_id
        self.json = found.schema_type == "JSON"
        if self.json:
            self.document = json.loads(found.schema)
            self.wrapped = self.document.get("type") != "object"
        else:
            self.parsed = avro_values.parse_schema(found.schema)
            self.wrapped = not avro_values.is_record(found.schema)

    def encode(self, value: Any) -> bytes | None:
        if value is None:
            return None  # a null value writes a tombstone, as without a registry
        if self.wrapped:
            value = value["value"] if isinstance(value, dict) else value
        payload = json_values.encode(self.document, value) if self.json else avro_values.encode(self.parsed, value)
        return avro_values.frame(self.schema_id, payload)
