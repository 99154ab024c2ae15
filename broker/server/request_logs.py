"""What the Kafka listener logs about a request: a rate-limited warning for bad input, and the extras naming it.

Log lines about a request (bad input, a failed handler) carry `client_id`,
`correlation_id`, `api` and `peer` as record extras, so a JSON log
(`--log-format json`) can be searched by them. A flood of garbage (a fuzzer, a
port scanner) must not flood the log: `BadInputLog` lets `burst` lines through
per `period` seconds and counts what it held back in the next line it lets
through.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable
from typing import Any

from tinystream.broker.protocol import api_versions
from tinystream.broker.protocol.codec import Request

_PEEK = struct.Struct(">hhi")
_I16 = struct.Struct(">h")


class BadInputLog:
    """Logs bad input at WARNING on `logger`, at most `burst` lines per `period` seconds."""

    def __init__(self, logger: logging.Logger, burst: int = 20, period: float = 10.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log = logger
        self._burst = burst
        self._period = period
        self._clock = clock
        self._window_start = clock()
        self._count = 0
        self._suppressed = 0

    def warning(self, message: str, *args: Any, extra: dict[str, object] | None = None) -> None:
        now = self._clock()
        if now - self._window_start >= self._period:
            self._window_start = now
            self._count = 0
        if self._count >= self._burst:
            self._suppressed += 1
            return
        self._count += 1
        if self._suppressed:
            message += " (%d similar messages suppressed)"
            args = (*args, self._suppressed)
            self._suppressed = 0
        self._log.warning(message, *args, extra=extra)


def request_extras(frame: memoryview | bytes) -> dict[str, object]:
    """Log extras naming a request from its raw frame; best effort, as the frame may be malformed.

    Request header v1+ (every API we serve but ControlledShutdown v0):
    api_key int16, api_version int16, correlation_id int32, client_id nullable string.
    """
    if len(frame) < _PEEK.size:
        return {}
    api_key, version, correlation_id = _PEEK.unpack_from(frame, 0)
    extras: dict[str, object] = {
        "api": api_versions.api_name(api_key), "api_version": version, "correlation_id": correlation_id,
    }
    if len(frame) >= _PEEK.size + 2:
        (length,) = _I16.unpack_from(frame, _PEEK.size)
        start = _PEEK.size + 2
        if 0 <= length <= len(frame) - start:
            extras["client_id"] = bytes(frame[start:start + length]).decode("utf-8", "replace")
    return extras


def decoded_extras(request: Request) -> dict[str, object]:
    """Log extras naming a decoded request."""
    header = request.header
    return {"api": api_versions.api_name(header.api_key), "api_version": header.api_version,
            "correlation_id": header.correlation_id, "client_id": header.client_id}
