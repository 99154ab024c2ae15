"""Schema-validated topics: the `tinystream.value.schema` topic config.

A topic may carry a JSON Schema document (the config value, as a string).
When it does, the partition leader decodes each produced batch (decompressing
with the same bound as the rest of the broker) and checks every record value
against the schema before the log sees the bytes; one bad record rejects the
whole batch with INVALID_RECORD, as Kafka does for a batch whose record fails
broker-side validation (KIP-467: `record_errors` names the record by its index
in the batch, `error_message` summarizes). Without a schema nothing is decoded:
the produce hot path reads only the batch header.

Rules:
- The schema's own `$schema` picks the draft; without one, Draft 2020-12.
  `check_schema` refuses a document that is not a valid schema (INVALID_CONFIG).
- A value must be UTF-8 JSON that validates; a null value (a tombstone) is
  accepted so compacted topics can still delete keys.
- Compiled validators are cached by schema text, so a topic's schema is
  compiled once per broker, and an altered schema compiles anew.

Two validators: jsonschema is the authority (every draft, check_schema, the
error message); fastjsonschema, which compiles a schema to Python code, is
the fast path for schemas in the *portable subset*: keywords that mean the
same in drafts 6, 7, 2019-09 and 2020-12 (types, enum/const, numeric and
string and array bounds, properties/required/additionalProperties,
allOf/anyOf) with no `$ref`, `format`, tuple `items`, patternProperties, or
keywords that negate (`not`, `oneOf`, if/then/else). There the fast check is never looser than
jsonschema (it is stricter on one point: its `$` in a pattern is ECMA's end
of input). A record the fast path refuses is checked again by jsonschema,
which decides and names the rule; so the fast path can only make a valid
record cheaper, and a property test checks that it never accepts what
jsonschema refuses. Any other schema is validated by jsonschema.

Cost (`tinystream bench produce --schema builtin`, 100-byte values, 2,382
records a batch): decoding is ~3.4 us a record and parsing ~1.2 us;
validation was ~43 us with jsonschema, and is ~2 us on the fast path. It runs
on the event loop (before the first await, so pipelined requests keep their
order).

No I/O here: the produce handler calls `violation(batch, schema_text)`.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from typing import Any

import fastjsonschema
import jsonschema
import orjson
from jsonschema.exceptions import SchemaError, ValidationError
from jsonschema.protocols import Validator
from referencing import Registry, Resource
from referencing.exceptions import NoSuchResource

from tinystream.broker.storage.base import CorruptRecordError
from tinystream.broker.storage.batch import decode_records
from tinystream.broker.storage.compression import DEFAULT_MAX_DECOMPRESSED_BYTES
from tinystream.config.topic_configs import VALUE_SCHEMA, pattern_problem, remote_reference

SCHEMA_CONFIG = VALUE_SCHEMA  # the topic config (tinystream/config/topic_configs.py)

_DEFAULT_DRAFT = jsonschema.Draft202012Validator
_CACHE_SIZE = 256  # distinct schema texts a broker keeps compiled

# Keywords whose meaning is the same in drafts 6, 7, 2019-09 and 2020-12 (the fast path's subset).
_PORTABLE_DRAFTS = frozenset({
    "http://json-schema.org/draft-06/schema", "http://json-schema.org/draft-07/schema",
    "https://json-schema.org/draft/2019-09/schema", "https://json-schema.org/draft/2020-12/schema",
})
_ANNOTATIONS = frozenset({"$schema", "$comment", "title", "description", "default", "examples", "deprecated",
                          "readOnly", "writeOnly"})
_ASSERTIONS = frozenset({"type", "enum", "const", "multipleOf", "maximum", "minimum", "exclusiveMaximum",
                         "exclusiveMinimum", "maxLength", "minLength", "maxItems", "minItems",
                         "uniqueItems", "maxProperties", "minProperties", "required"})
# Only keywords where a stricter subschema makes a stricter schema: `not`, `oneOf` and if/then/else
# would turn a stricter fast check (fastjsonschema's `$` is ECMA's end of input, Python's `$` also
# matches before a final newline) into a looser one, and the fast path may only ever be stricter.
_ONE_SCHEMA = frozenset({"additionalProperties", "items", "propertyNames"})
_SCHEMA_MAP = frozenset({"properties"})  # not patternProperties: a stricter regex would check fewer names
_SCHEMA_LIST = frozenset({"allOf", "anyOf"})


class InvalidSchema(ValueError):
    """The config value is not a JSON Schema document (INVALID_CONFIG)."""


@dataclass(frozen=True, slots=True)
class RecordViolation:
    """Why a batch is refused: which record, and which rule."""

    index: int  # position in the batch (Produce v8 BatchIndexAndErrorMessage.batch_index)
    offset_delta: int
    path: str  # JSON path of the failing value inside the record value ("$" for the root)
    rule: str  # jsonschema's validator keyword ("type", "required", ...) or "json"
    message: str

    def describe(self) -> str:
        return f"record {self.index} (offset delta {self.offset_delta}): {self.path}: {self.message} [{self.rule}]"


@dataclass(frozen=True, slots=True)
class CorruptBatch:
    """The batch could not be decoded at all (CORRUPT_MESSAGE)."""

    message: str


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (TypeError, ValueError) as exc:
        raise InvalidSchema(f"not a JSON document: {exc}") from None


def check_schema(text: str) -> None:
    """Raise InvalidSchema unless `text` is a JSON Schema document valid for its draft."""
    compile_schema(text)


@dataclass(frozen=True, slots=True)
class CompiledSchema:
    """jsonschema's validator (the authority), and fastjsonschema's when the schema is portable."""

    validator: Validator
    fast: Any = None  # fastjsonschema's compiled function, or None

    def is_valid(self, document: Any) -> bool:
        if self.fast is not None:
            try:
                self.fast(document)
                return True
            except Exception:  # noqa: BLE001 - refused, or fastjsonschema failed: jsonschema decides
                pass
        return self.validator.is_valid(document)


def portable(schema: Any) -> bool:
    """True when every keyword of `schema`, at any depth, is in the fast path's subset."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict):
        return False
    if "$schema" in schema and str(schema["$schema"]).rstrip("#") not in _PORTABLE_DRAFTS:
        return False
    for key, value in schema.items():
        if key in _ANNOTATIONS or key in _ASSERTIONS:
            continue
        if key in _ONE_SCHEMA:
            ok = portable(value)
        elif key in _SCHEMA_MAP:
            ok = isinstance(value, dict) and all(portable(v) for v in value.values())
        elif key in _SCHEMA_LIST:
            ok = isinstance(value, list) and all(portable(v) for v in value)
        else:
            ok = False  # $ref, format, prefixItems, dependencies, unevaluated*, ...: jsonschema only
        if not ok:
            return False
    return True


def _fast_validator(schema: Any) -> Any:
    if not portable(schema):
        return None
    draft7 = {**schema, "$schema": "http://json-schema.org/draft-07/schema#"} if isinstance(schema, dict) else schema
    try:  # use_default=False: validation must never change the record
        return fastjsonschema.compile(draft7, use_default=False, use_formats=False)
    except Exception:  # noqa: BLE001 - e.g. a pattern it rewrites into one `re` refuses: jsonschema only
        return None


@functools.lru_cache(maxsize=_CACHE_SIZE)
def compile_schema(text: str) -> CompiledSchema:
    """The validators for `text`, compiled once per distinct text."""
    schema = _parse(text)
    if not isinstance(schema, (dict, bool)):
        raise InvalidSchema(f"a JSON Schema is an object or a boolean, got {type(schema).__name__}")
    cls = _with_re2(jsonschema.validators.validator_for(schema, default=_DEFAULT_DRAFT))
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = _json_path(exc.path)
        raise InvalidSchema(f"invalid JSON Schema at {where}: {exc.message}") from None
    bad_pattern = pattern_problem(schema)
    if bad_pattern is not None:
        raise InvalidSchema(f"a pattern RE2 cannot run (no lookaround or backreference): {bad_pattern}")
    remote = remote_reference(schema)
    if remote is not None:  # a topic made before the config check refused these
        raise InvalidSchema(f"remote reference {remote!r}: only references inside the document (#...) are allowed")
    registry: Registry[Any] = Registry(retrieve=_never_retrieve)  # a second guard: config checks refuse them first
    return CompiledSchema(cls(schema, format_checker=cls.FORMAT_CHECKER, registry=registry), _fast_validator(schema))


@functools.cache
def _with_re2(cls: Any) -> Any:
    """`cls` with `pattern` and `patternProperties` run by RE2: linear time, whatever the record."""
    return jsonschema.validators.extend(cls, {"pattern": _re2_pattern, "patternProperties": _re2_pattern_properties})


def _re2_pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Any:
    if validator.is_type(instance, "string") and not _re2(pattern).search(instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _re2_pattern_properties(validator: Any, properties: dict[str, Any], instance: Any, schema: Any) -> Any:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in properties.items():
        compiled = _re2(pattern)
        for key, value in instance.items():
            if compiled.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


@functools.lru_cache(maxsize=_CACHE_SIZE)
def _re2(pattern: str) -> Any:
    import re2  # google-re2

    return re2.compile(pattern)


def _never_retrieve(uri: str) -> Resource[Any]:
    """jsonschema's default would urlopen a remote `$ref` (with no timeout): a broker never fetches."""
    raise NoSuchResource(ref=uri)


def _json_path(path: Any) -> str:
    out = "$"
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else f".{part}"
    return out


def violation(
    batch: memoryview | bytes, schema_text: str, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES
) -> RecordViolation | CorruptBatch | None:
    """The first record of `batch` whose value breaks the schema, or None if all pass."""
    compiled = compile_schema(schema_text)
    try:
        records = decode_records(batch, max_decompressed_bytes=max_decompressed_bytes)
    except CorruptRecordError as exc:
        return CorruptBatch(f"cannot decode records for schema validation: {exc}")
    for index, record in enumerate(records):
        value = record.value
        if value is None:  # tombstone
            continue
        offset_delta = record.offset_delta if record.offset_delta is not None else index
        try:
            document = orjson.loads(value)  # strict RFC 8259 (no NaN), a third of json.loads' time
        except orjson.JSONDecodeError as exc:
            return RecordViolation(index, offset_delta, "$", "json", f"value is not JSON: {exc}")
        if compiled.is_valid(document):  # errors are collected only for the failing record
            continue
        error = jsonschema.exceptions.best_match(compiled.validator.iter_errors(document))
        if error is not None:
            return RecordViolation(index, offset_delta, _json_path(error.absolute_path), str(error.validator),
                                   error.message)
    return None
