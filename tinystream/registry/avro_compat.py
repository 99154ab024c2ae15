"""Avro schemas: parse (fastavro) and the reader/writer check of Avro's schema resolution rules.

`incompatibilities(reader, writer)` lists why data written with `writer`
cannot be read with `reader` (empty: it can), following the specification's
"Schema Resolution": records match by full name (or alias) and resolve fields
by name, a reader field missing in the writer needs a default, writer fields
the reader lacks are skipped; int -> long -> float -> double and string <->
bytes promote; an enum reader needs every writer symbol unless it has a
default; a writer union needs every branch readable, a reader union needs one
branch that reads the writer. Named types are looked up in the parsed
schemas' name tables, and a pair of named types already being compared counts
as compatible (recursive types terminate).
"""

from __future__ import annotations

from typing import Any

import fastavro
from fastavro.schema import SchemaParseException, UnknownType

from tinystream.registry.errors import ErrorCode, RegistryError

_PRIMITIVES = {"null", "boolean", "int", "long", "float", "double", "bytes", "string"}
_PROMOTIONS = {
    "int": {"int", "long", "float", "double"},
    "long": {"long", "float", "double"},
    "float": {"float", "double"},
    "string": {"string", "bytes"},
    "bytes": {"bytes", "string"},
}


def parse(obj: Any, named: dict[str, Any] | None = None) -> Any:
    """The fastavro-parsed schema (full names, `__named_schemas`); `named` holds referenced types."""
    _records_have_fields(obj)
    try:
        return fastavro.parse_schema(obj, named_schemas=dict(named or {}))
    except (SchemaParseException, UnknownType, ValueError, TypeError, KeyError, AttributeError) as exc:
        raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: {exc}") from exc


def _records_have_fields(obj: Any) -> None:
    """A record needs its `fields` list: Avro's own parser (and so Confluent's registry) refuses one without,
    fastavro takes it as empty."""
    if isinstance(obj, list):
        for item in obj:
            _records_have_fields(item)
    elif isinstance(obj, dict):
        if obj.get("type") in ("record", "error") and not isinstance(obj.get("fields"), list):
            raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: record {obj.get('name')!r} has no fields list")
        for key, value in obj.items():
            if key != "default":  # a default is data, not a schema
                _records_have_fields(value)


def named_types(parsed: Any) -> dict[str, Any]:
    if isinstance(parsed, dict):
        return dict(parsed.get("__named_schemas", {}))
    return {}


def incompatibilities(reader: Any, writer: Any) -> list[str]:
    return _Checker(named_types(reader), named_types(writer)).check(reader, writer, "/")


class _Checker:
    def __init__(self, reader_names: dict[str, Any], writer_names: dict[str, Any]) -> None:
        self.reader_names = reader_names
        self.writer_names = writer_names
        self.seen: set[tuple[str, str]] = set()

    def _resolve(self, schema: Any, names: dict[str, Any]) -> Any:
        if isinstance(schema, str) and schema not in _PRIMITIVES:
            return names.get(schema, schema)
        if isinstance(schema, dict) and schema.get("type") in _PRIMITIVES:
            return schema["type"]  # a logicalType is an annotation: the underlying type resolves
        return schema

    def check(self, reader: Any, writer: Any, path: str) -> list[str]:
        reader = self._resolve(reader, self.reader_names)
        writer = self._resolve(writer, self.writer_names)
        if isinstance(writer, list):
            problems: list[str] = []
            for index, branch in enumerate(writer):
                problems += self.check(reader, branch, f"{path}{index}/")
            return problems
        if isinstance(reader, list):
            if any(not self.check(branch, writer, path) for branch in reader):
                return []
            return [f"{path}: reader union lacks a branch for {_type_name(writer)} (TYPE_MISMATCH)"]
        r_type, w_type = _type_name(reader), _type_name(writer)
        if r_type != w_type and not (isinstance(reader, str) and isinstance(writer, str)):
            return [f"{path}: reader type {r_type} is not compatible with writer type {w_type} (TYPE_MISMATCH)"]
        if isinstance(writer, str):
            if r_type in _PROMOTIONS.get(w_type, {w_type}):
                return []
            return [f"{path}: reader type {r_type} is not compatible with writer type {w_type} (TYPE_MISMATCH)"]
        kind = writer["type"]
        if kind in ("record", "error", "enum", "fixed"):
            if not _names_match(reader, writer):
                return [f"{path}: expected name {writer['name']}, found {reader['name']} (NAME_MISMATCH)"]
            pair = (reader["name"], writer["name"])
            if pair in self.seen:
                return []
            self.seen.add(pair)
        if kind in ("record", "error"):
            return self._record(reader, writer, path)
        if kind == "enum":
            missing = [s for s in writer["symbols"] if s not in reader["symbols"]]
            if missing and "default" not in reader:
                return [f"{path}symbols: reader enum lacks {missing} (MISSING_ENUM_SYMBOLS)"]
            return []
        if kind == "fixed":
            if reader["size"] != writer["size"]:
                return [f"{path}size: expected {writer['size']}, found {reader['size']} (FIXED_SIZE_MISMATCH)"]
            return []
        if kind == "array":
            return self.check(reader["items"], writer["items"], f"{path}items/")
        if kind == "map":
            return self.check(reader["values"], writer["values"], f"{path}values/")
        return []

    def _record(self, reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
        problems: list[str] = []
        by_name = {field["name"]: field for field in writer["fields"]}
        for field in reader["fields"]:
            names = [field["name"], *field.get("aliases", [])]
            source = next((by_name[n] for n in names if n in by_name), None)
            where = f"{path}fields/{field['name']}/"
            if source is None:
                if "default" not in field:
                    problems.append(f"{where}: reader field {field['name']} has no default and is not in the writer "
                                    "(READER_FIELD_MISSING_DEFAULT_VALUE)")
                continue
            problems += self.check(field["type"], source["type"], where)
        return problems


def _type_name(schema: Any) -> str:
    if isinstance(schema, str):
        return schema
    if isinstance(schema, list):
        return "union"
    return str(schema["type"])


def _names_match(reader: dict[str, Any], writer: dict[str, Any]) -> bool:
    return reader["name"] == writer["name"] or writer["name"] in reader.get("aliases", [])
