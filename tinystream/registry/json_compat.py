"""JSON Schema: validity (jsonschema's metaschemas) and a reader/writer check of the common rules.

`incompatibilities(reader, writer)` lists why a document valid under `writer`
may be invalid under `reader`, for the rules Confluent names: a type narrowed
(integer widens to number), an enum narrowed, a property removed from a
closed content model (`additionalProperties: false`), a property added to an
open one (the writer may already send anything under that name), a required
property added, additionalProperties narrowed; objects and array items are
compared recursively. Keywords outside these (numeric bounds, patterns,
combinators, $ref targets) are not compared: the check errs towards
"compatible" there.
"""

from __future__ import annotations

from typing import Any

import jsonschema
import jsonschema.validators

from tinystream.registry.errors import ErrorCode, RegistryError


def parse(obj: Any) -> Any:
    if not isinstance(obj, dict | bool):
        raise RegistryError(ErrorCode.INVALID_SCHEMA, "Invalid schema: a JSON Schema is an object or a boolean")
    try:
        jsonschema.validators.validator_for(obj).check_schema(obj)
    except jsonschema.SchemaError as exc:
        raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: {exc.message}") from exc
    return obj


def incompatibilities(reader: Any, writer: Any, path: str = "#") -> list[str]:
    if reader is True or reader == {} or writer is False:
        return []
    if reader is False:
        return [f"{path}: reader accepts nothing (TYPE_NARROWED)"]
    writer = {} if writer is True else writer
    problems = _types(reader, writer, path)
    if "enum" in reader:
        extra = [v for v in writer.get("enum", [None, "<any>"]) if v not in reader["enum"]]
        if "enum" not in writer or extra:
            problems.append(f"{path}: enum narrowed (ENUM_ARRAY_NARROWED)")
    if _is_object(reader) or _is_object(writer):
        problems += _object(reader, writer, path)
    if isinstance(reader.get("items"), dict | bool):
        problems += incompatibilities(reader["items"], writer.get("items", True), f"{path}/items")
    return problems


def _type_set(schema: dict[str, Any]) -> set[str] | None:
    kind = schema.get("type")
    if kind is None:
        return None
    return {kind} if isinstance(kind, str) else set(kind)


def _types(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    r_types, w_types = _type_set(reader), _type_set(writer)
    if r_types is None:
        return []
    if w_types is None:
        return [f"{path}: type narrowed to {sorted(r_types)} (TYPE_NARROWED)"]
    lost = {t for t in w_types if t not in r_types and not (t == "integer" and "number" in r_types)}
    if lost:
        return [f"{path}: type changed from {sorted(w_types)} to {sorted(r_types)} (TYPE_CHANGED)"]
    return []


def _is_object(schema: dict[str, Any]) -> bool:
    return schema.get("type") == "object" or "properties" in schema or "additionalProperties" in schema


def _object(reader: dict[str, Any], writer: dict[str, Any], path: str) -> list[str]:
    problems: list[str] = []
    r_props: dict[str, Any] = reader.get("properties", {})
    w_props: dict[str, Any] = writer.get("properties", {})
    r_extra = reader.get("additionalProperties", True)
    w_extra = writer.get("additionalProperties", True)
    for name, w_schema in w_props.items():
        where = f"{path}/properties/{name}"
        if name in r_props:
            problems += incompatibilities(r_props[name], w_schema, where)
        elif r_extra is False:
            problems.append(f"{where}: property removed from a closed content model "
                            "(PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL)")
        elif isinstance(r_extra, dict):
            problems += incompatibilities(r_extra, w_schema, where)
    for name, r_schema in r_props.items():
        if name in w_props or w_extra is False:
            continue
        found = incompatibilities(r_schema, w_extra, f"{path}/properties/{name}")
        if found:
            problems.append(f"{path}/properties/{name}: property added to an open content model "
                            "(PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL)")
    added = sorted(set(reader.get("required", [])) - set(writer.get("required", [])))
    if added:
        problems.append(f"{path}/required: required properties added {added} (REQUIRED_ATTRIBUTE_ADDED_TO_CONTENT_MODEL)")
    if r_extra is False and w_extra is not False:
        problems.append(f"{path}/additionalProperties: narrowed (ADDITIONAL_PROPERTIES_NARROWED)")
    elif isinstance(r_extra, dict) and w_extra is not False:
        problems += incompatibilities(r_extra, w_extra, f"{path}/additionalProperties")
    return problems
