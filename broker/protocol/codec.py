"""Request and response bytes <-> kio entities, with no I/O.

A request frame (size prefix already removed by `framing`) is

    request header v1 (non-flexible APIs) | v2 (flexible: + tagged fields)
        api_key i16 | api_version i16 | correlation_id i32 | client_id nullable int16 string
    body (the API's schema at that version)

and a response is `response header v0 | v1 (+ tagged fields) | body`, where
ApiVersions always answers with header v0 so an old client can read the error
that tells it to retry lower. kio knows which header each version uses
(`__header_schema__`), and its native readers decode the body once
`bounds.check_entity` has walked it (see there why). Responses are written
by `encoder` (compiled from the same schemas: byte for byte what kio writes,
several times faster); requests, on the client side, by kio's own writer.

`decode_request` raises `UnsupportedRequest` (unknown key or version: the
caller answers ApiVersions, closes otherwise) or `MalformedRequest` (bytes that
do not parse: close). `encode_response` returns the framed bytes.
"""

from __future__ import annotations

import datetime
import functools
import io
import struct
from collections.abc import Callable
from dataclasses import dataclass, fields
from types import ModuleType
from typing import Any

from kio.index import UnknownAPIKey, UnknownEntity, load_payload_module
from kio.serial import entity_reader, entity_writer
from kio.serial.errors import SerialError
from kio.static.constants import EntityType
from kio.static.protocol import RequestPayload, ResponsePayload

from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.bounds import check_entity, strip_unknown_tags
from tinystream.broker.protocol.encoder import entity_encoder
from tinystream.broker.protocol.errors import MalformedRequest, UnsupportedRequest
from tinystream.broker.protocol.response_parts import FrameBuffer, ResponseParts, split

_PREFIX = struct.Struct(">hhi")  # api_key, api_version, correlation_id
_I32 = struct.Struct(">i")


@dataclass(frozen=True, slots=True)
class RequestHeader:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None


@dataclass(frozen=True, slots=True)
class Request:
    header: RequestHeader
    body: Any  # the kio request entity
    size: int  # frame size in bytes (metrics)
    held: int  # bytes the decoded request keeps alive (the request budget's count): the frame, or its body


@dataclass(frozen=True, slots=True)
class ApiSchemas:
    """Everything needed to read one API version's requests and write its responses."""

    api_key: int
    version: int
    request_module: ModuleType
    response_module: ModuleType
    request_type: type[RequestPayload]
    response_type: type[ResponsePayload]
    request_header_type: type[Any]
    read_header: Callable[..., Any]
    read_body: Callable[..., Any]
    write_body: Callable[[bytearray, Any], None]  # see `encoder`
    request_flexible: bool
    response_header_flexible: bool

    def response(self, name: str, /, **values: Any) -> Any:
        """Build `name` from the response module, dropping fields this version lacks."""
        return build(getattr(self.response_module, name), values)

    def request_class(self, name: str) -> type[Any]:
        cls: type[Any] = getattr(self.request_module, name)
        return cls


def peek(frame: memoryview | bytes) -> tuple[int, int, int]:
    """(api_key, api_version, correlation_id) from a frame of at least 8 bytes."""
    return _PREFIX.unpack_from(frame, 0)


@functools.cache
def schemas(api_key: int, version: int) -> ApiSchemas:
    """kio's schemas for one API version; UnsupportedRequest if kio has none."""
    try:
        request_module = load_payload_module(api_key, version, EntityType.request)
        response_module = load_payload_module(api_key, version, EntityType.response)
    except (UnknownAPIKey, UnknownEntity) as exc:
        raise UnsupportedRequest(api_key, version, "no schema") from exc
    request_type: type[RequestPayload] = _main_type(request_module, EntityType.request)
    response_type: type[ResponsePayload] = _main_type(response_module, EntityType.response)
    header_type = request_type.__header_schema__
    return ApiSchemas(
        api_key=api_key,
        version=version,
        request_module=request_module,
        response_module=response_module,
        request_type=request_type,
        response_type=response_type,
        request_header_type=header_type,
        read_header=entity_reader(header_type),
        read_body=entity_reader(request_type),
        write_body=entity_encoder(response_type),
        request_flexible=bool(request_type.__flexible__),
        response_header_flexible=bool(response_type.__header_schema__.__flexible__),
    )


def _main_type(module: ModuleType, kind: EntityType) -> Any:
    """The module's request or response payload class (a kio.static.protocol payload type)."""
    for value in vars(module).values():
        if isinstance(value, type) and getattr(value, "__type__", None) is kind:
            return value
    raise UnsupportedRequest(-1, -1, f"no {kind.name} type in {module.__name__}")


#: Bytes after a request's body that may stay referenced (beyond it, the body is copied out of the frame).
TRAILING_SLACK = 4096


def decode_request(frame: memoryview | bytes) -> Request:
    api_key, version, correlation_id = peek(frame)
    api = api_versions.lookup(api_key)
    if api is None or not api.advertises(version):
        raise UnsupportedRequest(api_key, version)
    if not api.serves(version):
        if api_key == api_versions.PRODUCE:
            return _decode_legacy_produce(frame, version)
        raise UnsupportedRequest(api_key, version)
    s = schemas(api_key, version)
    try:
        header, offset = _read(s.read_header, s.request_header_type, frame, 0)
        body, end = _read(s.read_body, s.request_type, frame, offset)
        whole = len(frame)
    except _UnknownTag:
        # KIP-482: tags a reader does not know are skipped. kio refuses them,
        # so drop them and decode the cleaned copy.
        sections: list[Any] = []
        header_end = check_entity(s.request_header_type, frame, 0, sink=sections)
        check_entity(s.request_type, frame, header_end, sink=sections)
        clean = strip_unknown_tags(frame, sections)
        header, offset = _read(s.read_header, s.request_header_type, clean, 0, False)
        body, end = _read(s.read_body, s.request_type, clean, offset, False)
        whole = len(clean)
    if whole - end > TRAILING_SLACK and whole == len(frame):
        # Bytes after the body are ignored, as Kafka's parser does (librdkafka sends a few after Metadata
        # v12). Many are not kept alive: decoded again from a copy of the body alone, so a 60-byte Fetch
        # padded with 70 MiB holds 60 bytes while it waits (Request.held, the budget's count).
        trimmed = decode_request(bytes(frame[:end]))
        return Request(trimmed.header, trimmed.body, len(frame), end)
    return Request(RequestHeader(api_key, version, correlation_id, header.client_id), body, len(frame), len(frame))


class _UnknownTag(MalformedRequest):
    """kio met a tagged field its schema does not have (it raises KeyError)."""


def _read(reader: Callable[..., Any], entity_type: type[Any], frame: Any, offset: int, check: bool = True) -> tuple[Any, int]:
    """Decode one entity at offset, after the bounds walk (see `bounds`) unless already done."""
    if check:
        check_entity(entity_type, frame, offset)
    try:
        value, size = reader(frame, offset)
    except KeyError as exc:
        raise _UnknownTag(f"{entity_type.__name__}: {exc}") from exc
    except (SerialError, ValueError, TypeError, OverflowError, UnicodeError) as exc:
        raise MalformedRequest(f"{entity_type.__name__}: {type(exc).__name__}: {exc}") from exc
    return value, offset + size


def _decode_legacy_produce(frame: memoryview | bytes, version: int) -> Request:
    """Produce v0-2 share v3's layout minus its leading transactional_id.

    They are parsed with kio's v3 schema behind a null transactional_id so the
    handler can answer each partition with UNSUPPORTED_VERSION.
    """
    s = schemas(api_versions.PRODUCE, 3)
    header, offset = _read(s.read_header, s.request_header_type, frame, 0)
    body_bytes = b"\xff\xff" + bytes(frame[offset:])
    body, _ = _read(s.read_body, s.request_type, body_bytes, 0)
    return Request(RequestHeader(api_versions.PRODUCE, version, header.correlation_id, header.client_id), body, len(frame),
                   len(frame))


def encode_response(header: RequestHeader, body: Any) -> bytearray | ResponseParts:
    """Frame `body` (a kio response entity of header's API and version); parts when a record set is a file
    slice (response_parts.py: a Fetch written with sendfile)."""
    s = schemas(header.api_key, header.api_version)
    out = FrameBuffer(_I32.pack(0))  # size, patched below
    out.slices = []
    out += _I32.pack(header.correlation_id)
    if s.response_header_flexible:
        out.append(0)  # no tagged fields
    s.write_body(out, body)
    if out.slices:
        _I32.pack_into(out, 0, len(out) - 4 + out.spliced_bytes)
        return split(out)
    _I32.pack_into(out, 0, len(out) - 4)
    return out


def encode_with(writer: Callable[[Any, Any], object], correlation_id: int, body: Any) -> bytes:
    """Frame a body written by `writer(buffer, body)` (layouts kio lacks, e.g. legacy Produce)."""
    buffer = io.BytesIO()
    buffer.write(_I32.pack(0))
    buffer.write(_I32.pack(correlation_id))
    writer(buffer, body)
    size = buffer.tell() - 4
    buffer.seek(0)
    buffer.write(_I32.pack(size))
    return buffer.getvalue()


# -- building entities across versions -------------------------------------------


@functools.cache
def _field_names(entity_type: type) -> frozenset[str]:
    return frozenset(f.name for f in fields(entity_type))


def build(entity_type: type, values: dict[str, Any]) -> Any:
    """`entity_type(**values)` keeping only the fields this version has.

    Handlers describe a response once with every field any version has;
    each version's class takes what it knows.
    """
    names = _field_names(entity_type)
    return entity_type(**{k: v for k, v in values.items() if k in names})


_TIMEDELTA_ZERO = datetime.timedelta(0)


def millis(value: int) -> datetime.timedelta:
    """An int of milliseconds as kio's timedelta fields want it."""
    return datetime.timedelta(milliseconds=value) if value else _TIMEDELTA_ZERO


def to_millis(value: datetime.timedelta | int) -> int:
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


# -- the client side (followers fetching from leaders; tests) --------------------


def encode_request(body: Any, *, correlation_id: int, client_id: str | None = "tinystream") -> bytes:
    """Frame a kio request entity with the header its version uses."""
    header_type = body.__header_schema__
    header = header_type(
        request_api_key=body.__api_key__,
        request_api_version=body.__version__,
        correlation_id=correlation_id,
        client_id=client_id,
    )
    buffer = io.BytesIO()
    buffer.write(_I32.pack(0))
    entity_writer(header_type)(buffer, header)
    entity_writer(type(body))(buffer, body)
    size = buffer.tell() - 4
    buffer.seek(0)
    buffer.write(_I32.pack(size))
    return buffer.getvalue()


def decode_response(api_key: int, version: int, frame: memoryview | bytes) -> tuple[int, Any]:
    """(correlation_id, kio response entity) from a response frame without its size prefix."""
    s = schemas(api_key, version)
    header_type = s.response_type.__header_schema__
    header, offset = _read(entity_reader(header_type), header_type, frame, 0)
    body, _ = _read(entity_reader(s.response_type), s.response_type, frame, offset)
    return header.correlation_id, body
