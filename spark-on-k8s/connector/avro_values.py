"""Registry-framed Avro values <-> Spark rows, with no I/O.

Confluent's wire format (what its serializers write and read):

    byte 0      magic 0
    bytes 1..4  schema id, big-endian int32 (the registry's global id)
    bytes 5..   the Avro binary encoding of the value (no container header)

Avro -> Spark types follow spark-avro's SchemaConverters (what `from_avro`
users see): record -> struct, array -> array, map -> map<string, _>,
a union of null and one type -> that type (nullable), enum -> string,
fixed/bytes -> binary, int/long/float/double/boolean/string as named,
logical date -> date, timestamp-millis/-micros -> timestamp,
decimal -> decimal(p, s). Other unions (two or more non-null branches) are
refused with a clear error, as spark-avro turns them into member0.. structs
that nobody expects from a registry pipeline.
"""

from __future__ import annotations

import io
import json
import struct
from collections.abc import Mapping
from typing import Any

from pyspark.sql import types as T

from tinystream.spark.errors import SchemaRegistryError

MAGIC = 0
_HEADER = struct.Struct(">bI")

_PRIMITIVES: dict[str, T.DataType] = {
    "boolean": T.BooleanType(),
    "int": T.IntegerType(),
    "long": T.LongType(),
    "float": T.FloatType(),
    "double": T.DoubleType(),
    "bytes": T.BinaryType(),
    "string": T.StringType(),
}


def frame(schema_id: int, payload: bytes) -> bytes:
    """Prefix an encoded value with the magic byte and schema id (Confluent's serializers do the same)."""
    return _HEADER.pack(MAGIC, schema_id) + payload


def unframe(data: bytes | None) -> tuple[int, bytes]:
    """(schema id, payload) of a framed value; a value not in the wire format is an error naming why."""
    if data is None:
        raise SchemaRegistryError("the value is null (a tombstone), not a registry-framed value")
    if len(data) < _HEADER.size:
        raise SchemaRegistryError(f"the value has {len(data)} bytes, fewer than the 5 of the wire format header")
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise SchemaRegistryError(f"unknown magic byte {magic} (the wire format starts with 0)")
    return schema_id, bytes(data[_HEADER.size:])


def _fastavro() -> Any:
    """fastavro, imported only when a pipeline uses registry-framed Avro (plain reads never need it)."""
    try:
        import fastavro
    except ImportError as exc:
        raise SchemaRegistryError(
            "registry-framed Avro needs fastavro: pip install 'tinystream[spark]' (or fastavro>=1.9)") from exc
    return fastavro


def parse_schema(text: str | Mapping[str, Any] | list[Any]) -> Any:
    """fastavro's parsed form of a registry schema string (named types resolved)."""
    raw = _json(text)
    fastavro = _fastavro()
    try:
        return fastavro.parse_schema(raw)
    except Exception as exc:  # noqa: BLE001 - fastavro raises several types for a bad schema
        raise SchemaRegistryError(f"not a valid Avro schema: {exc}") from exc


def _json(schema: Any) -> Any:
    """A registry's schema text (JSON: '{"type": ...}', '"string"') or an already parsed form."""
    if not isinstance(schema, str):
        return schema
    try:
        return json.loads(schema)
    except ValueError:
        return schema  # a bare type name, as Avro allows in a parsed form


def spark_type(schema: Any) -> tuple[T.DataType, bool]:
    """(Spark type, nullable) of an Avro schema: registry text, or JSON already parsed (dict, list, name)."""
    return _convert(_json(schema), {})


def _convert(schema: Any, named: dict[str, T.DataType]) -> tuple[T.DataType, bool]:
    if isinstance(schema, str):
        if schema in _PRIMITIVES:
            return _PRIMITIVES[schema], False
        if schema == "null":
            return T.NullType(), True
        short = schema.rsplit(".", 1)[-1]
        for name in (schema, short):
            if name in named:
                return named[name], False
        raise SchemaRegistryError(f"unknown Avro type {schema!r}")
    if isinstance(schema, list):
        branches = [b for b in schema if b != "null"]
        nullable = len(branches) < len(schema)
        if len(branches) == 1:
            kind, inner_nullable = _convert(branches[0], named)
            return kind, nullable or inner_nullable
        raise SchemaRegistryError(
            f"the Avro union {json.dumps(schema)} has {len(branches)} non-null branches; "
            "only a union of null and one type maps to a Spark column"
        )
    if not isinstance(schema, dict):
        raise SchemaRegistryError(f"not an Avro schema: {schema!r}")
    kind = schema.get("type")
    logical = schema.get("logicalType")
    if logical == "date" and kind == "int":
        return T.DateType(), False
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        return T.TimestampType(), False
    if logical == "decimal" and kind in ("bytes", "fixed"):
        return T.DecimalType(int(schema["precision"]), int(schema.get("scale", 0))), False
    if kind == "record":
        result = T.StructType()
        _remember(schema, result, named)  # before the fields: a recursive record refers to itself
        for f in schema.get("fields", []):
            field_type, nullable = _convert(f["type"], named)
            result.add(f["name"], field_type, nullable)
        return result, False
    if kind == "enum":
        _remember(schema, T.StringType(), named)
        return T.StringType(), False
    if kind == "fixed":
        _remember(schema, T.BinaryType(), named)
        return T.BinaryType(), False
    if kind == "array":
        element, nullable = _convert(schema["items"], named)
        return T.ArrayType(element, nullable), False
    if kind == "map":
        element, nullable = _convert(schema["values"], named)
        return T.MapType(T.StringType(), element, nullable), False
    return _convert(kind, named)


def _remember(schema: Mapping[str, Any], kind: T.DataType, named: dict[str, T.DataType]) -> None:
    name = str(schema["name"])
    namespace = schema.get("namespace")
    named[name.rsplit(".", 1)[-1]] = kind
    named[name if "." in name or not namespace else f"{namespace}.{name}"] = kind


def value_struct(schema_text: str) -> T.StructType:
    """The struct column of a subject's record schema; a non-record value is wrapped as struct<value: _>."""
    kind, nullable = spark_type(schema_text)
    if isinstance(kind, T.StructType):
        return kind
    return T.StructType([T.StructField("value", kind, nullable)])


def decode(parsed: Any, payload: bytes, *, reader: Any = None, wrapped: bool = False) -> Any:
    """One Avro binary value (written with `parsed`, resolved to `reader`) -> values Spark/Arrow take."""
    fastavro = _fastavro()
    try:
        value = fastavro.schemaless_reader(io.BytesIO(payload), parsed, reader)
    except Exception as exc:  # noqa: BLE001 - EOFError, ValueError, ... from a malformed payload
        raise SchemaRegistryError(f"the payload does not decode with its schema: {type(exc).__name__}: {exc}") from exc
    return {"value": value} if wrapped else value


def encode(parsed: Any, value: Any) -> bytes:
    """A row value (dict for a record) -> Avro binary; a value the schema does not take is an error."""
    out = io.BytesIO()
    fastavro = _fastavro()
    try:
        fastavro.schemaless_writer(out, parsed, value)
    except Exception as exc:  # noqa: BLE001 - fastavro's ValueError/TypeError for a bad datum
        raise SchemaRegistryError(f"the value {value!r} does not match the Avro schema: {exc}") from exc
    return out.getvalue()


def is_record(schema_text: str) -> bool:
    raw = _json(schema_text)
    return isinstance(raw, dict) and raw.get("type") == "record"
