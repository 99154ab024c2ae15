"""Request logs carry client_id and correlation_id as extras (the JSON log's fields)."""

from __future__ import annotations

import asyncio
import json
import logging
import struct

from tinystream.broker.server.request_logs import request_extras
from tinystream.log_format import JsonFormatter


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


def test_request_extras_from_a_raw_frame():
    frame = struct.pack(">hhih", 3, 1, 42, 5) + b"alice" + b"\x00"
    assert request_extras(frame) == {"api": "Metadata", "api_version": 1, "correlation_id": 42, "client_id": "alice"}
    assert request_extras(struct.pack(">hhih", 3, 1, 7, 50))["correlation_id"] == 7  # client id past the end
    assert "client_id" not in request_extras(struct.pack(">hhih", 3, 1, 7, 50))
    assert request_extras(b"\x00\x01") == {}


async def test_malformed_request_log_names_client_and_correlation_id(broker, caplog):
    caplog.set_level(logging.WARNING, logger="tinystream.broker.server.connection")
    reader, writer = await asyncio.open_connection(broker.info.host, broker.info.port)
    writer.write(framed(struct.pack(">hhih", 3, 1, 99, 3) + b"bob" + b"\x00\x00"))  # Metadata v1, body cut
    assert await asyncio.wait_for(reader.read(100), 5) == b""
    writer.close()
    (record,) = [r for r in caplog.records if "closing connection" in r.getMessage()]
    assert (record.client_id, record.correlation_id, record.api) == ("bob", 99, "Metadata")
    line = json.loads(JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["logger"] == "tinystream.broker.server.connection"
    assert line["client_id"] == "bob" and line["correlation_id"] == 99 and "peer" in line
    assert "closing connection" in line["message"] and line["ts"].endswith("+00:00")
