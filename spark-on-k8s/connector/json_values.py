"""Registry-framed JSON Schema values <-> Spark rows, with no I/O.

The wire format is Confluent's (magic 0, schema id, then the value as UTF-8
JSON text). JSON Schema -> Spark types follow what Spark's `from_json`
users write by hand: object -> struct of its `properties` (every field
nullable: JSON may leave a property out), array -> array of `items`,
string -> string (`format: date` -> date, `format: date-time` -> timestamp),
integer -> bigint, number -> double, boolean -> boolean; `type: [T, "null"]`
-> T. Anything else ($ref, oneOf, an object without properties, a mix of
types) is refused with the path that has it. Writes are validated against
the schema with jsonschema first, as Confluent's JSONSerializer does.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from collections.abc import Mapping
from typing import Any

import jsonschema
from pyspark.sql import types as T

from tinystream.spark.errors import SchemaRegistryError

_SIMPLE: dict[str, T.DataType] = {
    "string": T.StringType(),
    "integer": T.LongType(),
    "number": T.DoubleType(),
    "boolean": T.BooleanType(),
}


def spark_type(schema: Mapping[str, Any] | str, path: str = "$") -> T.DataType:
    """The Spark type of a JSON Schema (text or parsed)."""
    node = json.loads(schema) if isinstance(schema, str) else schema
    if not isinstance(node, Mapping):
        raise SchemaRegistryError(f"{path}: not a JSON Schema object: {node!r}")
    kind = node.get("type")
    if isinstance(kind, list):
        branches = [k for k in kind if k != "null"]
        if len(branches) != 1:
            raise SchemaRegistryError(f"{path}: type {kind} has {len(branches)} non-null types; one maps to a column")
        kind = branches[0]
    if kind == "object":
        properties = node.get("properties")
        if not isinstance(properties, Mapping) or not properties:
            raise SchemaRegistryError(f"{path}: an object without properties has no Spark struct")
        return T.StructType([T.StructField(name, spark_type(sub, f"{path}.{name}"), True)
                             for name, sub in properties.items()])
    if kind == "array":
        if "items" not in node:
            raise SchemaRegistryError(f"{path}: an array without items has no Spark element type")
        return T.ArrayType(spark_type(node["items"], f"{path}[]"), True)
    if kind == "string" and node.get("format") == "date":
        return T.DateType()
    if kind == "string" and node.get("format") == "date-time":
        return T.TimestampType()
    if isinstance(kind, str) and kind in _SIMPLE:
        return _SIMPLE[kind]
    raise SchemaRegistryError(f"{path}: {json.dumps(dict(node))[:200]} has no Spark type (type, properties and items only)")


def value_struct(schema_text: str) -> T.StructType:
    kind = spark_type(schema_text)
    return kind if isinstance(kind, T.StructType) else T.StructType([T.StructField("value", kind, True)])


def decode(payload: bytes, kind: T.DataType) -> Any:
    """UTF-8 JSON -> values of the Spark type (dates and timestamps parsed from their ISO text)."""
    try:
        value = json.loads(payload.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise SchemaRegistryError(f"the payload is not UTF-8 JSON: {exc}") from exc
    return _to_spark(value, kind, "$")


def _to_spark(value: Any, kind: T.DataType, path: str) -> Any:
    if value is None:
        return None
    try:
        if isinstance(kind, T.StructType):
            return {f.name: _to_spark(value.get(f.name), f.dataType, f"{path}.{f.name}") for f in kind.fields}
        if isinstance(kind, T.ArrayType):
            return [_to_spark(v, kind.elementType, f"{path}[]") for v in value]
        if isinstance(kind, T.DateType):
            return dt.date.fromisoformat(value)
        if isinstance(kind, T.TimestampType):
            return dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except (AttributeError, TypeError, ValueError) as exc:
        raise SchemaRegistryError(f"{path}: {value!r} is not a {kind.simpleString()}: {exc}") from exc
    return value


def _to_json(value: Any) -> Any:
    if isinstance(value, dict):  # a null field is left out: JSON Schema's "not required"
        return {k: _to_json(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_to_json(v) for v in value]
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def encode(schema: Mapping[str, Any], value: Any) -> bytes:
    """A row value -> JSON text, checked against the schema first (an invalid value is an error naming why)."""
    document = _to_json(value)
    try:
        jsonschema.validate(document, schema)
    except jsonschema.ValidationError as exc:
        raise SchemaRegistryError(f"the value {document!r} does not match the JSON Schema: {exc.message}") from exc
    return json.dumps(document, separators=(",", ":")).encode()
