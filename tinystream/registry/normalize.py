"""`normalize=true`: one text for semantically equal schemas, so they get one id (as Confluent's normalize).

Pure. Avro and JSON Schema: object keys sorted at every level (arrays, such
as Avro's `fields` and `symbols`, keep their order: it is meaning), and an
Avro type written `{"type": "int"}` becomes `"int"`. Protobuf source:
comments dropped and whitespace reduced to one canonical layout (a space
between words, none around punctuation, a line per statement); a base64
descriptor is returned as given.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tinystream.registry import protobuf_parse
from tinystream.registry.errors import ErrorCode, RegistryError
from tinystream.registry.model import SchemaType

_AVRO_PRIMITIVES = frozenset({"null", "boolean", "int", "long", "float", "double", "bytes", "string"})
_PROTO_TOKEN = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'|//[^\n]*|/\*.*?\*/|[A-Za-z0-9_.+-]+|\S', re.S)
_WORD = re.compile(r"[A-Za-z0-9_.+\-\"']")


def normalize(text: str, schema_type: SchemaType) -> str:
    if schema_type is SchemaType.PROTOBUF:
        return text if protobuf_parse.as_descriptor(text) else _proto(text)
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise RegistryError(ErrorCode.INVALID_SCHEMA, f"Invalid schema: not JSON: {exc}") from None
    if schema_type is SchemaType.AVRO:
        value = _avro(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _avro(value: Any) -> Any:
    if isinstance(value, list):
        return [_avro(v) for v in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"type"} and value["type"] in _AVRO_PRIMITIVES:
        return value["type"]
    # "default" values are data, not schemas: keep them as written
    return {k: (v if k == "default" else _avro(v)) for k, v in value.items()}


def _proto(text: str) -> str:
    tokens = [t for t in _PROTO_TOKEN.findall(text) if not t.startswith(("//", "/*"))]
    out: list[str] = []
    for token in tokens:
        if out and _WORD.match(token[0]) and _WORD.match(out[-1][-1]):
            out.append(" ")
        out.append(token)
        if token in (";", "{", "}"):
            out.append("\n")
    return "".join(out).strip() + "\n"
