"""Is a Kafka-compatible broker ready to serve clients?

Ready means: a TCP connection is accepted, ApiVersions v0 answers with error
NONE, and Metadata v1 lists at least one broker. A KRaft Kafka accepts
connections a little before it has registered itself, and answering
Metadata with no broker makes clients spin, so the second step matters.
Synchronous and small on purpose: it runs once per broker start.
"""

from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass

from kio.schema.api_versions.v0.request import ApiVersionsRequest
from kio.schema.api_versions.v0.response import ApiVersionsResponse
from kio.schema.metadata.v1.request import MetadataRequest
from kio.schema.metadata.v1.response import MetadataResponse

from tinystream.testing.peers.wire import decode_response, encode_request


@dataclass(frozen=True)
class ProbeResult:
    ready: bool
    reason: str
    api_ranges: dict[int, tuple[int, int]]


def _recv_exact(sock: socket.socket, size: int) -> bytes:
    chunks = bytearray()
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            raise ConnectionError("connection closed by the broker")
        chunks += chunk
    return bytes(chunks)


def roundtrip(sock: socket.socket, request: object, response_type: type, correlation_id: int):
    sock.sendall(encode_request(request, correlation_id=correlation_id))
    (size,) = struct.unpack(">i", _recv_exact(sock, 4))
    got_id, response = decode_response(response_type, _recv_exact(sock, size))
    if got_id != correlation_id:
        raise ConnectionError(f"correlation id {got_id} != {correlation_id}")
    return response


def probe(host: str, port: int, *, timeout: float = 2.0) -> ProbeResult:
    """One readiness check; never raises for an unready broker."""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            versions = roundtrip(sock, ApiVersionsRequest(), ApiVersionsResponse, 1)
            if versions.error_code != 0:
                return ProbeResult(False, f"ApiVersions error {int(versions.error_code)}", {})
            ranges = {int(k.api_key): (int(k.min_version), int(k.max_version)) for k in versions.api_keys}
            metadata = roundtrip(sock, MetadataRequest(topics=()), MetadataResponse, 2)
            if not metadata.brokers:
                return ProbeResult(False, "Metadata lists no broker yet", ranges)
            return ProbeResult(True, "ready", ranges)
    except (OSError, ValueError, struct.error) as exc:
        return ProbeResult(False, f"{type(exc).__name__}: {exc}", {})


def wait_ready(host: str, port: int, *, timeout: float, alive=lambda: True, interval: float = 0.2) -> ProbeResult:
    """Probe until ready, `alive()` turns false, or `timeout` seconds pass."""
    deadline = time.monotonic() + timeout
    result = ProbeResult(False, "not probed", {})
    while time.monotonic() < deadline and alive():
        result = probe(host, port)
        if result.ready:
            return result
        time.sleep(interval)
    return result
