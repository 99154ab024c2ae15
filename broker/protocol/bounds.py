"""Check every declared length (and null) in a message before kio decodes it.

kio's native reader allocates a vector from a compact array's declared length
before it looks at the bytes that follow; a length past 2**32 aborts the whole
process (found by fuzzing; the same class of bug as CVE-2022-34917). Legacy
(int32) lengths are checked by kio itself. So before a flexible body reaches
kio, this module walks it along kio's own schema (the dataclass fields and
their `kafka_type` metadata; no layout is restated here) and refuses any varint
longer than five bytes, any length or count past 2**31 - 1, and any string,
array or tagged field longer than the bytes actually left.

It also caps the array items of one request at `MAX_REQUEST_ITEMS`: a 100 MiB
request can hold 10^8 one-byte items (empty strings), which decode into as many
Python objects over many seconds; no real request comes near the cap (the
largest are bounded by max.partitions), so it is refused from the declared
counts alone, before anything is decoded.

It also refuses a null (-1 length) in a field the schema says is not
nullable: kio would hand such a field over as None, and handlers rightly
expect a list or a string there (found by fuzzing too).

The walk reads no values and builds no objects; arrays of fixed-size items are
skipped in one step.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

from kio.serial._introspect import (
    EntityField,
    EntityTupleField,
    PrimitiveField,
    PrimitiveTupleField,
    classify_field,
    get_field_tag,
    get_schema_field_type,
    is_optional,
)

from tinystream.broker.protocol.encoder import uvarint
from tinystream.broker.protocol.errors import MalformedRequest

_FIXED = {
    "int8": 1,
    "bool": 1,
    "int16": 2,
    "uint16": 2,
    "error_code": 2,
    "int32": 4,
    "timedelta_i32": 4,
    "int64": 8,
    "float64": 8,
    "timedelta_i64": 8,
    "datetime_i64": 8,
    "uuid": 16,
}
_INT31 = 2**31 - 1
#: Array items (at every depth) one request may declare.
MAX_REQUEST_ITEMS = 1_000_000



@dataclasses.dataclass(slots=True)
class _Walk:
    """State of one walk: the unknown-tag sections found (when asked for) and the items still allowed."""

    unknown: list[Any] | None
    items_left: int = MAX_REQUEST_ITEMS


# A step reads from buf at pos (never past end) and returns the new position.
Step = Callable[[Any, int, int, _Walk], int]


def check_entity(
    entity_type: type, buf: Any, pos: int = 0, end: int | None = None, *, sink: list[Any] | None = None
) -> int:
    """Walk one `entity_type` in buf[pos:end]; return where it ends. Raises MalformedRequest.

    With `sink`, every tagged-field section holding tags the schema does not
    know is recorded as (count_start, count_end, known_count, [(start, end) of
    each unknown tag]) for `strip_unknown_tags`.
    """
    if end is None:
        end = len(buf)
    return _entity_step(entity_type)(buf, pos, end, _Walk(sink))


def strip_unknown_tags(buf: Any, sections: list[Any]) -> bytes:
    """A copy of buf without the unknown tagged fields `check_entity` recorded.

    KIP-482 says a reader skips tags it does not know; kio refuses them, so the
    codec strips them and decodes again (a rare path: only a client newer than
    kio's schemas sends them).
    """
    out = bytearray()
    pos = 0
    for count_start, count_end, known, spans in sorted(sections, key=lambda s: s[0]):
        out += buf[pos:count_start]
        out += uvarint(known)
        pos = count_end
        for start, stop in spans:
            out += buf[pos:start]
            pos = stop
    out += buf[pos:]
    return bytes(out)


def read_uvarint(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """Kafka unsigned varint: at most 5 bytes (ByteUtils.readUnsignedVarint)."""
    value = 0
    shift = 0
    while True:
        if pos >= end:
            raise MalformedRequest("truncated varint")
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift >= 35:
            raise MalformedRequest("varint longer than 5 bytes")


def _fixed(size: int) -> Step:
    def step(buf: Any, pos: int, end: int, walk: _Walk) -> int:
        pos += size
        if pos > end:
            raise MalformedRequest("truncated field")
        return pos

    return step


def _int(buf: Any, pos: int, size: int) -> int:
    return int.from_bytes(buf[pos : pos + size], "big", signed=True)


def _compact_length(buf: Any, pos: int, end: int) -> tuple[int, int]:
    """Compact length: stored as n + 1, 0 for null (returned as -1)."""
    raw, pos = read_uvarint(buf, pos, end)
    if raw > _INT31:
        raise MalformedRequest(f"compact length {raw} out of range")
    return raw - 1, pos


def _sized(flexible: bool, width: int, nullable: bool) -> Step:
    """string / bytes / records: compact length or legacy int16 / int32 length."""

    def step(buf: Any, pos: int, end: int, walk: _Walk) -> int:
        if flexible:
            n, pos = _compact_length(buf, pos, end)
        else:
            if pos + width > end:
                raise MalformedRequest("truncated length")
            n = _int(buf, pos, width)
            pos += width
        if n < -1 or (n == -1 and not nullable):
            raise MalformedRequest(f"length {n} for a non-nullable field" if n == -1 else f"negative length {n}")
        if n > 0:
            pos += n
            if pos > end:
                raise MalformedRequest(f"length {n} past the end of the request")
        return pos

    return step


def _array(flexible: bool, item: Step, item_size: int | None, nullable: bool) -> Step:
    def step(buf: Any, pos: int, end: int, walk: _Walk) -> int:
        if flexible:
            n, pos = _compact_length(buf, pos, end)
        else:
            if pos + 4 > end:
                raise MalformedRequest("truncated array length")
            n = _int(buf, pos, 4)
            pos += 4
        if n < -1 or (n == -1 and not nullable):
            raise MalformedRequest("null for a non-nullable array" if n == -1 else f"negative array length {n}")
        if n <= 0:
            return pos
        if n > end - pos:  # every item takes at least one byte
            raise MalformedRequest(f"array of {n} items past the end of the request")
        walk.items_left -= n
        if walk.items_left < 0:
            raise MalformedRequest(f"more than {MAX_REQUEST_ITEMS} array items in one request")
        if item_size is not None:
            pos += n * item_size
            if pos > end:
                raise MalformedRequest("array past the end of the request")
            return pos
        for _ in range(n):
            pos = item(buf, pos, end, walk)
        return pos

    return step


def _nullable_entity(inner: Step) -> Step:
    def step(buf: Any, pos: int, end: int, walk: _Walk) -> int:
        if pos >= end:
            raise MalformedRequest("truncated struct marker")
        marker = buf[pos]
        pos += 1
        if marker == 0xFF:  # -1: null (KIP-893)
            return pos
        return inner(buf, pos, end, walk)

    return step


def _field_step(field: dataclasses.Field[Any], flexible: bool, is_header: bool, is_tag: bool) -> Step:
    """The step that skips one field."""
    if is_header and field.name == "client_id":
        return _sized(False, 2, True)  # RequestHeader.client_id is always a nullable legacy string
    kind = classify_field(field)
    nullable = not is_tag and is_optional(field)
    if isinstance(kind, (EntityField, EntityTupleField)):
        inner = _entity_step(kind.type_)
        if isinstance(kind, EntityTupleField):
            return _array(flexible, inner, None, nullable)
        if nullable:
            return _nullable_entity(inner)
        return inner
    kafka_type = get_schema_field_type(field)
    if kafka_type in _FIXED:
        size = _FIXED[kafka_type]
        if isinstance(kind, PrimitiveTupleField):
            return _array(flexible, _fixed(size), size, nullable)
        return _fixed(size)
    if kafka_type in ("string", "bytes", "records"):
        width = 2 if kafka_type == "string" else 4
        if isinstance(kind, PrimitiveTupleField):  # the array may be null, its items not
            return _array(flexible, _sized(flexible, width, False), None, nullable)
        assert isinstance(kind, PrimitiveField)
        return _sized(flexible, width, nullable)
    raise MalformedRequest(f"no bounds rule for kafka_type {kafka_type!r}")


@functools.cache
def _entity_step(entity_type: type) -> Step:
    flexible = bool(getattr(entity_type, "__flexible__", False))
    is_header = entity_type.__name__ == "RequestHeader"
    steps: list[Step] = []
    tagged: dict[int, Step] = {}
    for field in dataclasses.fields(entity_type):
        tag = get_field_tag(field)
        step = _field_step(field, flexible, is_header, tag is not None)
        if tag is None:
            steps.append(step)
        else:
            tagged[int(tag)] = step

    def walk_entity(buf: Any, pos: int, end: int, walk: _Walk) -> int:
        for step in steps:
            pos = step(buf, pos, end, walk)
        if not flexible:
            return pos
        count_start = pos
        count, pos = read_uvarint(buf, pos, end)
        count_end = pos
        if count > end - pos:
            raise MalformedRequest(f"{count} tagged fields past the end of the request")
        unknown: list[tuple[int, int]] = []
        for _ in range(count):
            tag_start = pos
            tag, pos = read_uvarint(buf, pos, end)
            size, pos = read_uvarint(buf, pos, end)
            if size > end - pos:
                raise MalformedRequest(f"tagged field {tag} of {size} bytes past the end of the request")
            known = tagged.get(tag)
            if known is not None:
                stop = known(buf, pos, pos + size, walk)
                if stop != pos + size:
                    raise MalformedRequest(f"tagged field {tag} does not fill its {size} bytes")
            else:
                unknown.append((tag_start, pos + size))
            pos += size
        if unknown and walk.unknown is not None:
            walk.unknown.append((count_start, count_end, count - len(unknown), unknown))
        return pos

    return walk_entity
