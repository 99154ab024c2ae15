"""Registry-framed values in a read's Arrow batches and a write's records (Avro, JSON Schema, Protobuf).

Read: the `value` column is a struct of the subject's latest schema (fetched
on the driver when the query is planned, the reader schema); each value is
decoded with the schema its id names (fetched once per id and task). Avro
values are resolved to the reader schema by Avro's rules, so records written
with older compatible versions read as the latest; JSON values are read
into the reader struct (properties it does not name are left out);
Protobuf values are parsed with the reader's message (fields match by
number, as Protobuf evolves) after the wire's message indexes were checked
to name that message in the writer's schema.
FAILFAST (default) fails the task with the reason; PERMISSIVE puts null in
`value` and the reason in `valueError` (null when decoded). Keys, when a
key.* option asks, go the same way with their own options (part "key"):
a typed `key` column and `keyError`.

Write: the `value` struct column is encoded with the subject's latest schema
(or `value.schema`, registered first when auto.register.schemas=true) and
framed with its id, as Confluent's AvroSerializer, JSONSerializer and
ProtobufSerializer do (Protobuf: with the message's indexes after the id).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from tinystream.spark import avro_values, json_values, protobuf_values
from tinystream.spark.errors import SchemaRegistryError
from tinystream.spark.options import DecodeMode, RegistryOptions
from tinystream.spark.registry_client import RegisteredSchema, RegistryClient
from tinystream.spark.schema import records_to_batch, spark_schema

ERROR_COLUMN = "valueError"
SCHEMA_TYPES = {"AVRO": "avro", "JSON": "json", "PROTOBUF": "protobuf"}  # the registry's schemaType -> value.format


def _check_type(reg: RegistryOptions, found: RegisteredSchema, what: str) -> None:
    fmt = SCHEMA_TYPES.get(found.schema_type)
    if fmt is None:
        raise SchemaRegistryError(
            f"{what} is a {found.schema_type} schema; the connector reads and writes AVRO, JSON and PROTOBUF")
    if reg.value_format is not None and fmt != reg.value_format:
        raise SchemaRegistryError(f'{what} is a {found.schema_type} schema, not the {reg.part}.format "{reg.value_format}"')


def latest_schema(reg: RegistryOptions) -> RegisteredSchema:
    """The subject's latest schema (driver); a schema type the connector cannot read is refused naming it.

    A Protobuf schema comes back as a FileDescriptorSet of the file and its references (protobuf_values)."""
    client = RegistryClient(reg.url, reg.user_info)
    latest = client.latest(reg.subject)
    _check_type(reg, latest, f'subject "{reg.subject}"')
    if latest.schema_type == "PROTOBUF":
        return RegisteredSchema(latest.schema_id, "PROTOBUF", proto_file_set(client, client.latest(reg.subject, serialized=True)))
    return latest


def proto_file_set(client: RegistryClient, found: RegisteredSchema) -> str:
    """The base64 FileDescriptorSet of a serialized Protobuf schema and, first, every reference it names."""
    files: dict[str, bytes] = {}

    def visit(schema: RegisteredSchema) -> None:
        for name, subject, version in schema.references:
            if name not in files:
                ref = client.version(subject, version, serialized=True)
                visit(ref)
                proto = protobuf_values.file_proto(ref.schema)
                proto.name = name  # imported by its reference name, as confluent-kafka lays it out
                files[name] = proto.SerializeToString()

    visit(found)
    main = protobuf_values.file_proto(found.schema)
    return protobuf_values.file_set([*files.values(), main.SerializeToString()])


def value_struct(schema_type: str, text: str, message: str | None = None) -> T.StructType:
    """The typed column of a schema (for Protobuf, of `message`, by default the file's first)."""
    if schema_type == "PROTOBUF":
        return protobuf_values.spark_type(protobuf_values.load(text, message))
    return json_values.value_struct(text) if schema_type == "JSON" else avro_values.value_struct(text)


def read_schema(include_headers: bool, reg: RegistryOptions, latest: RegisteredSchema,
                key: tuple[RegistryOptions, RegisteredSchema] | None = None) -> T.StructType:
    """The source schema with `value` (and `key`, when keys go through the registry too) as their subjects'
    structs, and `valueError` (`keyError`) when PERMISSIVE."""
    typed = {"value": value_struct(latest.schema_type, latest.schema, reg.record_name)}
    if key is not None:
        typed["key"] = value_struct(key[1].schema_type, key[1].schema, key[0].record_name)
    fields = [T.StructField(f.name, typed[f.name], True) if f.name in typed else f
              for f in spark_schema(include_headers).fields]
    if reg.mode is DecodeMode.PERMISSIVE:
        fields += [T.StructField(f"{part}Error", T.StringType(), True) for part in ("value", "key") if part in typed]
    return T.StructType(fields)


class ValueDecoder:
    """Framed bytes -> a dict of the reader schema; one per task (its id cache lives as long)."""

    def __init__(self, reg: RegistryOptions):
        if reg.reader_schema is None:
            raise SchemaRegistryError("the reader schema was not fixed on the driver")
        self.reg = reg
        self.client = RegistryClient(reg.url, reg.user_info)
        self.json = reg.reader_schema_type == "JSON"
        self.proto = protobuf_values.load(reg.reader_schema, reg.record_name) if reg.reader_schema_type == "PROTOBUF" else None
        self.struct = value_struct(reg.reader_schema_type, reg.reader_schema, reg.record_name)
        self.reader = None if self.json or self.proto else avro_values.parse_schema(reg.reader_schema)
        if self.proto is not None:
            self.wrapped = False
        elif self.json:
            self.wrapped = not isinstance(json_values.spark_type(reg.reader_schema), T.StructType)
        else:
            self.wrapped = not avro_values.is_record(reg.reader_schema)
        self.writers: dict[int, Any] = {}

    def _writer(self, schema_id: int) -> Any:
        writer = self.writers.get(schema_id)
        if writer is None:
            try:
                found = self.client.by_id(schema_id, serialized=self.proto is not None)
            except SchemaRegistryError as exc:
                raise SchemaRegistryError(f"schema id {schema_id} of the {self.reg.part}: {exc}") from exc
            if found.schema_type != self.reg.reader_schema_type:
                raise SchemaRegistryError(
                    f"schema id {schema_id} is a {found.schema_type} schema, the subject's is {self.reg.reader_schema_type}")
            if self.proto is not None:
                writer = protobuf_values.file_proto(found.schema)
            else:
                writer = found.schema if self.json else avro_values.parse_schema(found.schema)
            self.writers[schema_id] = writer
        return writer

    def _decode_proto(self, writer: Any, framed: bytes) -> dict[str, Any]:
        assert self.proto is not None
        indexes, payload = protobuf_values.read_indexes(framed)
        written = protobuf_values.message_name(writer, indexes)
        if written != self.proto.full_name:
            raise SchemaRegistryError(
                f"the value is a {written} message, the column's is {self.proto.full_name} (option value.record.name)")
        return protobuf_values.decode(self.proto, payload)

    def decode(self, data: bytes | None) -> Any:
        if data is None:
            return None  # a tombstone stays null, as from_avro leaves a null input null
        schema_id, payload = avro_values.unframe(data)
        writer = self._writer(schema_id)
        if self.proto is not None:
            return self._decode_proto(writer, payload)
        if self.json:
            kind = self.struct.fields[0].dataType if self.wrapped else self.struct
            value = json_values.decode(payload, kind)
            return {"value": value} if self.wrapped else value
        return avro_values.decode(writer, payload, reader=self.reader, wrapped=self.wrapped)


def records_to_registry_batch(messages: Sequence[Any], *, include_headers: bool, reg: RegistryOptions,
                              decoder: ValueDecoder, key_decoder: ValueDecoder | None = None) -> pa.RecordBatch:
    """Like schema.records_to_batch, with `value` (and `key`) decoded (FAILFAST raises, PERMISSIVE fills valueError)."""
    assert reg.reader_schema is not None
    plain = records_to_batch(messages, include_headers=include_headers)
    latest = RegisteredSchema(-1, reg.reader_schema_type, reg.reader_schema)
    key = None
    columns = {"value": _decode_column(messages, decoder)}
    if key_decoder is not None:
        key_reg = key_decoder.reg
        key = (key_reg, RegisteredSchema(-1, key_reg.reader_schema_type, key_reg.reader_schema or ""))
        columns["key"] = _decode_column(messages, key_decoder)
    target = to_arrow_schema(read_schema(include_headers, reg, latest, key), timezone="UTC")
    arrays = []
    for name in target.names:
        if name in columns:
            arrays.append(pa.array(columns[name][0], type=target.field(name).type))
        elif name.removesuffix("Error") in columns:
            arrays.append(pa.array(columns[name.removesuffix("Error")][1], type=pa.string()))
        else:
            arrays.append(plain.column(plain.schema.get_field_index(name)))
    return pa.RecordBatch.from_arrays(arrays, schema=target)


def _decode_column(messages: Sequence[Any], decoder: ValueDecoder) -> tuple[list[Any], list[str | None]]:
    """(decoded values, reasons) of the messages' values or keys (decoder.reg.part)."""
    part = decoder.reg.part
    values: list[Any] = []
    errors: list[str | None] = []
    for m in messages:
        try:
            values.append(decoder.decode(m.key() if part == "key" else m.value()))
            errors.append(None)
        except SchemaRegistryError as exc:
            if decoder.reg.mode is DecodeMode.FAILFAST:
                raise SchemaRegistryError(
                    f"{m.topic()}-{m.partition()} offset {m.offset()}: {exc} "
                    f'(set the option "mode" to "PERMISSIVE" to read it as null with the reason in "{part}Error")'
                ) from exc
            values.append(None)
            errors.append(str(exc))
    return values, errors


class ValueEncoder:
    """A row's `value` (dict) -> framed bytes with the subject's schema id (Avro, JSON or Protobuf)."""

    def __init__(self, reg: RegistryOptions):
        client = RegistryClient(reg.url, reg.user_info)
        if reg.auto_register and reg.value_schema:
            schema_type = {"json": "JSON", "protobuf": "PROTOBUF"}.get(reg.value_format or "", "AVRO")
            found = RegisteredSchema(client.register(reg.subject, reg.value_schema, schema_type), schema_type,
                                     reg.value_schema)
        else:
            found = client.latest(reg.subject)
            _check_type(reg, found, f'subject "{reg.subject}"')
        self.schema_id = found.schema_id
        self.json = found.schema_type == "JSON"
        self.proto = None
        self.wrapped = False
        if found.schema_type == "PROTOBUF":
            file_set = proto_file_set(client, client.by_id(found.schema_id, serialized=True))
            self.proto = protobuf_values.load(file_set, reg.record_name)
            indexes = protobuf_values.message_indexes(protobuf_values.main_file(file_set), self.proto.full_name)
            self.indexes = protobuf_values.frame_indexes(indexes)
        elif self.json:
            self.document = json.loads(found.schema)
            self.wrapped = self.document.get("type") != "object"
        else:
            self.parsed = avro_values.parse_schema(found.schema)
            self.wrapped = not avro_values.is_record(found.schema)

    def encode(self, value: Any) -> bytes | None:
        if value is None:
            return None  # a null value writes a tombstone, as without a registry
        if self.proto is not None:
            return avro_values.frame(self.schema_id, self.indexes + protobuf_values.encode(self.proto, value))
        if self.wrapped:
            value = value["value"] if isinstance(value, dict) else value
        payload = json_values.encode(self.document, value) if self.json else avro_values.encode(self.parsed, value)
        return avro_values.frame(self.schema_id, payload)
