"""A pipelined raw-protocol Kafka connection for the load generators.

A Python client cannot build and send a million records a second one record
at a time, so the benchmarks speak the protocol directly: requests are
encoded once (kio via `tinystream.testing.peers.wire`) and resent with only the
correlation id changed, several in flight per connection; responses are
matched by correlation id (a broker answers in order on one connection).

    conn = await WireConnection.open("127.0.0.1", 9092)
    frame = PreparedRequest.from_request(produce_request)     # encode once
    response_payload = await conn.send(frame)                  # many times
    await conn.send_no_response(frame)                         # acks=0
    await conn.close()

`request()` is the convenience path for control traffic (Metadata,
CreateTopics, ListOffsets): encode, send, decode with kio.
"""

from __future__ import annotations

import asyncio
import socket
import struct
import time
from collections import deque
from dataclasses import dataclass

from tinystream.testing.peers.wire import decode_response, encode_request

_SIZE = struct.Struct(">i")
_CORRELATION = struct.Struct(">i")
CORRELATION_OFFSET = 8  # size:int32 | api_key:int16 | api_version:int16 | correlation_id:int32


class WireError(RuntimeError):
    """The connection failed or a response did not match its request."""

@dataclass(frozen=True)
class PreparedRequest:
    """A framed request split around its correlation id, so resending copies nothing."""
    head: bytes  # size, api key, api version
    tail: bytes  # client id and body
    api_key: int

    @classmethod
    def from_request(cls, request: object, *, client_id: str = "tinystream-bench") -> PreparedRequest:
        frame = encode_request(request, correlation_id=0, client_id=client_id)
        return cls(head=frame[:CORRELATION_OFFSET], tail=frame[CORRELATION_OFFSET + 4 :],
                   api_key=type(request).__api_key__)

    @property
    def size(self) -> int:
        return len(self.head) + 4 + len(self.tail)


class WireConnection:
    """One TCP connection with pipelined requests; responses resolve futures in order."""
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self._reader = reader
        self._writer = writer
        self._next_id = 1
        self._waiting: deque[tuple[int, asyncio.Future]] = deque()
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop())
        self._error: BaseException | None = None

    @classmethod
    async def open(cls, host: str, port: int, *, buffer_bytes: int = 4 << 20) -> WireConnection:
        reader, writer = await asyncio.open_connection(host, port, limit=buffer_bytes)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, buffer_bytes)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, buffer_bytes)
        writer.transport.set_write_buffer_limits(high=buffer_bytes)
        return cls(reader, writer)

    @property
    def in_flight(self) -> int:
        return len(self._waiting)

    def _take_id(self) -> int:
        correlation_id = self._next_id
        self._next_id = (self._next_id + 1) & 0x7FFFFFFF or 1
        return correlation_id

    async def send(self, prepared: PreparedRequest) -> memoryview:
        """Send and wait for the response payload (after the size prefix)."""
        if self._error is not None:
            raise WireError(f"connection failed: {self._error}") from self._error
        correlation_id = self._take_id()
        future = asyncio.get_running_loop().create_future()
        self._waiting.append((correlation_id, future))
        self._writer.writelines((prepared.head, _CORRELATION.pack(correlation_id), prepared.tail))
        await self._writer.drain()
        return await future

    async def send_no_response(self, prepared: PreparedRequest) -> None:
        """acks=0 produce: the broker sends nothing back (KAFKA-NOTES.md)."""
        if self._error is not None:
            raise WireError(f"connection failed: {self._error}") from self._error
        self._writer.writelines((prepared.head, _CORRELATION.pack(self._take_id()), prepared.tail))
        await self._writer.drain()

    async def request(self, request: object, response_type: type):
        """Encode, send, await and decode one request (control traffic)."""
        payload = await self.send(PreparedRequest.from_request(request))
        _, response = decode_response(response_type, bytes(payload))
        return response

    async def _read_loop(self) -> None:
        try:
            while True:
                head = await self._reader.readexactly(4)
                (size,) = _SIZE.unpack(head)
                payload = memoryview(await self._reader.readexactly(size))
                (correlation_id,) = _CORRELATION.unpack_from(payload, 0)
                if not self._waiting:
                    raise WireError(f"unexpected response {correlation_id}")
                expected, future = self._waiting.popleft()
                if expected != correlation_id:
                    raise WireError(f"response {correlation_id} while waiting for {expected}")
                if not future.done():
                    future.set_result(payload)
        except (asyncio.IncompleteReadError, ConnectionError, WireError, OSError) as exc:
            self._error = exc
            while self._waiting:
                _, future = self._waiting.popleft()
                if not future.done():
                    future.set_exception(WireError(f"connection lost: {exc!r}"))
        except asyncio.CancelledError:
            pass

    async def close(self) -> None:
        self._reader_task.cancel()
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except (ConnectionError, OSError):
            pass


def now() -> float:
    return time.perf_counter()
