"""Kafka request framing over kio's schemas, with no I/O.

A request on the wire is `size:int32 | header | body`; the header is
RequestHeader v2 for flexible versions and v1 otherwise (client_id stays a
legacy int16 string either way, which kio's writer already special-cases).
A response is `size:int32 | header | body`; the header is ResponseHeader v1
(correlation id + tagged fields) for flexible versions and v0 otherwise,
except ApiVersions, which always answers with header v0 so that a client can
read it before it knows which versions the broker speaks (KIP-511).

The caller owns the socket: `encode_request` returns bytes to send,
`decode_response` takes one frame's payload (without the size prefix).
Used by the readiness probe (`probe.py`) and the raw-protocol benchmarks.
"""

from __future__ import annotations

import io
import struct
from typing import TypeVar

from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int32
from kio.static.primitive import i16, i32

API_VERSIONS_KEY = 18

E = TypeVar("E")


def encode_request(request: object, *, correlation_id: int, client_id: str = "tinystream-peers") -> bytes:
    """One framed request (size prefix included) for a kio request entity."""
    flexible = type(request).__flexible__
    header_type = RequestHeaderV2 if flexible else RequestHeaderV1
    header = header_type(
        request_api_key=i16(type(request).__api_key__),
        request_api_version=i16(type(request).__version__),
        correlation_id=i32(correlation_id),
        client_id=client_id,
    )
    buf = io.BytesIO()
    buf.write(b"\0\0\0\0")
    entity_writer(header_type)(buf, header)
    entity_writer(type(request))(buf, request)
    data = bytearray(buf.getbuffer())
    struct.pack_into(">i", data, 0, len(data) - 4)
    return bytes(data)


def response_header_size(response_type: type, payload: bytes | memoryview) -> int:
    """Bytes taken by the response header at the start of `payload`."""
    flexible = response_type.__flexible__ and response_type.__api_key__ != API_VERSIONS_KEY
    if not flexible:
        return 4
    # Correlation id, then the tagged-field count (an unsigned varint, almost
    # always 0); tagged fields in a response header are unused so far.
    offset = 4
    count = 0
    shift = 0
    while True:
        byte = payload[offset]
        offset += 1
        count |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    if count:
        raise ValueError("response header tagged fields are not expected")
    return offset


def decode_response(response_type: type[E], payload: bytes | memoryview) -> tuple[int, E]:
    """(correlation id, response entity) from one frame's payload."""
    correlation_id, _ = read_int32(payload, 0)
    offset = response_header_size(response_type, payload)
    entity, _ = entity_reader(response_type)(payload, offset)
    return correlation_id, entity
