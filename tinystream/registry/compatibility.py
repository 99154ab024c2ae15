"""One entry for every schema type: parse a schema (with its references) and check a level.

BACKWARD: the new schema reads what the old wrote (new = reader). FORWARD:
the old reads what the new writes. FULL: both. *_TRANSITIVE: against every
live version, otherwise against the latest only. NONE: no check.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tinystream.registry import avro_compat, json_compat, protobuf_compat, protobuf_parse
from tinystream.registry.errors import ErrorCode, RegistryError
from tinystream.registry.model import Compatibility, Reference, SchemaDef, SchemaType


@dataclass(frozen=True, slots=True)
class ParsedSchema:
    schema_type: SchemaType
    parsed: Any


def compact(text: str, schema_type: SchemaType = SchemaType.AVRO) -> str:
    """The stored text: the same JSON with insignificant whitespace removed (ids follow it); Protobuf normalized."""
    if schema_type is SchemaType.PROTOBUF:
        return protobuf_parse.normalize(text)
    try:
        return json.dumps(json.loads(text), separators=(",", ":"), ensure_ascii=False)
    except (ValueError, TypeError) as exc:
        raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: not JSON: {exc}") from exc


def parse(schema: SchemaDef, resolve: Callable[[Reference], SchemaDef]) -> ParsedSchema:
    """Parse `schema`; `resolve` gives a reference's schema (raises RegistryError if it is missing)."""
    if schema.schema_type is SchemaType.PROTOBUF:
        return ParsedSchema(SchemaType.PROTOBUF, protobuf_parse.parse(schema.text, _imports(schema, resolve)))
    obj = json.loads(schema.text)
    if schema.schema_type is SchemaType.JSON:
        return ParsedSchema(SchemaType.JSON, json_compat.parse(obj))
    named: dict[str, Any] = {}
    for reference in schema.references:
        named.update(avro_compat.named_types(parse(resolve(reference), resolve).parsed))
    return ParsedSchema(SchemaType.AVRO, avro_compat.parse(obj, named))


def _imports(schema: SchemaDef, resolve: Callable[[Reference], SchemaDef]) -> dict[str, str]:
    """Import path -> text for every reference, transitively (a Protobuf file needs all it imports)."""
    found: dict[str, str] = {}
    pending = list(schema.references)
    while pending:
        reference = pending.pop()
        if reference.name in found:
            continue
        target = resolve(reference)
        found[reference.name] = target.text
        pending += target.references
    return found


def same_protobuf(a: ParsedSchema, b: ParsedSchema) -> bool:
    """Two Protobuf schemas that describe one file (`.proto` text and its base64 descriptor, say)."""
    return (a.schema_type is b.schema_type is SchemaType.PROTOBUF
            and protobuf_parse.canonical(a.parsed) == protobuf_parse.canonical(b.parsed))


def incompatibilities(reader: ParsedSchema, writer: ParsedSchema) -> list[str]:
    """Why data written with `writer` may not be readable with `reader` (empty: compatible)."""
    if reader.schema_type is not writer.schema_type:
        return [f"schema type changed from {writer.schema_type.value} to {reader.schema_type.value}"]
    if reader.schema_type is SchemaType.AVRO:
        return avro_compat.incompatibilities(reader.parsed, writer.parsed)
    if reader.schema_type is SchemaType.PROTOBUF:
        return protobuf_compat.incompatibilities(reader.parsed, writer.parsed)
    return json_compat.incompatibilities(reader.parsed, writer.parsed)


def check(level: Compatibility, new: ParsedSchema, previous: Sequence[ParsedSchema]) -> list[str]:
    """`previous` oldest first (live versions only); empty result: `new` may be registered."""
    if level is Compatibility.NONE or not previous:
        return []
    targets = previous if level.transitive else previous[-1:]
    problems: list[str] = []
    for old in targets:
        if level.backward:
            problems += incompatibilities(new, old)
        if level.forward:
            problems += incompatibilities(old, new)
    return problems
