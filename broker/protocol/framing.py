"""Kafka request framing with no I/O (in the manner of h11).

Every Kafka request is `INT32 size | size bytes`. The caller owns the socket:
`receive_data(chunk)` buffers what arrived, `next_frame()` returns one whole
request (a memoryview) or `None` when more bytes are needed. `frame()` does the
reverse for responses.

Safety (CVE-2022-34917): the declared size is checked against
`socket.request.max.bytes` and against the smallest possible request as soon as
its four bytes arrive, before any buffer is sized from it. Memory held per
connection is what the peer actually sent, never what it declared.

The limit may change between frames (`limit`): a connection that has not
logged in yet is held to Kafka's sasl.server.max.receive.size (512 KiB), a
logged-in one to socket.request.max.bytes. `frame_size()` tells the declared
size of the frame being received, so the caller can reserve memory for it
before its body arrives (Kafka's MemoryPool).

Zero copy where it can be: a frame lying inside one received chunk comes back as
a memoryview of that chunk; a small frame spread over several chunks is joined
(one copy). A large frame (from `ASSEMBLE_FROM` bytes) is appended to one
growing buffer as its chunks arrive: the same one copy, spread over the reads
instead of one long join (60 ms for 100 MiB) on the event loop.
"""

from __future__ import annotations

import struct
from collections import deque

from tinystream.broker.protocol.errors import FrameTooLarge, InvalidFrame

_SIZE = struct.Struct(">i")

# api_key(2) + api_version(2) + correlation_id(4): the request header v0 fields
# every request starts with. Anything shorter cannot be a request.
MIN_REQUEST_SIZE = 8

ASSEMBLE_FROM = 1 << 20


class FrameDecoder:
    """Splits a byte stream into size-prefixed frames."""

    __slots__ = ("_chunks", "_buffered", "_offset", "limit", "limit_name", "_need", "_closed", "_large")

    def __init__(self, max_frame_size: int) -> None:
        self._chunks: deque[bytes] = deque()  # received, not yet consumed
        self._buffered = 0  # bytes in _chunks past _offset
        self._offset = 0  # consumed bytes at the front of _chunks[0]
        self.limit = max_frame_size  # checked against each frame's size prefix as it arrives
        self.limit_name = "socket.request.max.bytes"  # the setting `limit` comes from, for the error
        self._need = -1  # size of the frame being received, -1 while reading the prefix
        self._closed = False  # an error was raised; the stream cannot be resynchronised
        self._large: bytearray | None = None  # a large frame being assembled (its bytes left _chunks)

    @property
    def buffered(self) -> int:
        """Bytes received and not yet returned as frames."""
        return self._buffered + (len(self._large) if self._large is not None else 0)

    @property
    def in_frame(self) -> bool:
        """True while part of a frame (or its prefix) has arrived but not all of it."""
        return self.buffered > 0

    def receive_data(self, data: bytes) -> None:
        if self._closed:
            raise InvalidFrame("stream already failed")
        if not data:
            return
        if self._large is not None and (room := self._need - len(self._large)) > 0:
            view = memoryview(data)
            self._large += view[:room]
            if len(data) <= room:
                return
            data = bytes(view[room:])  # the start of the next frame
        self._chunks.append(data)
        self._buffered += len(data)

    def next_frame(self) -> memoryview | None:
        """The next whole frame without its size prefix, or None if more data is needed.

        Raises FrameTooLarge / InvalidFrame on a bad size prefix; after that the
        decoder refuses further use (a framing error loses synchronisation).
        """
        if self.frame_size() < 0:
            return None
        if self._need >= ASSEMBLE_FROM:
            return self._assembled()
        if self._buffered < self._need:
            return None
        frame = self._take(self._need)
        self._need = -1
        return frame

    def frame_size(self) -> int:
        """The declared size of the frame being received (its prefix checked), or -1 before its prefix.

        Raises FrameTooLarge / InvalidFrame as next_frame does."""
        if self._closed:
            raise InvalidFrame("stream already failed")
        if self._need < 0 and self._buffered >= 4:
            (size,) = _SIZE.unpack(self._take(4))
            if size > self.limit:
                self._closed = True
                raise FrameTooLarge(size, self.limit, self.limit_name)
            if size < MIN_REQUEST_SIZE:
                self._closed = True
                raise InvalidFrame(f"request size {size} is below the minimum {MIN_REQUEST_SIZE}")
            self._need = size
        return self._need

    def _assembled(self) -> memoryview | None:
        """The large frame once all of it is in its buffer (receive_data appends to it)."""
        if self._large is None:
            self._large = bytearray(self._take(min(self._buffered, self._need)) if self._buffered else b"")
        if len(self._large) < self._need:
            return None
        frame = memoryview(self._large).toreadonly()  # kio reads read-only buffers only
        self._large = None
        self._need = -1
        return frame

    def _take(self, n: int) -> memoryview:
        """Consume n buffered bytes (n <= buffered)."""
        first = self._chunks[0]
        start = self._offset
        if len(first) - start >= n:  # inside the first chunk: no copy
            view = memoryview(first)[start : start + n]
            self._offset = start + n
            if self._offset == len(first):
                self._chunks.popleft()
                self._offset = 0
            self._buffered -= n
            return view
        parts: list[bytes | memoryview] = []
        remaining = n
        while remaining:
            chunk = self._chunks[0]
            available = len(chunk) - self._offset
            if available <= remaining:
                parts.append(memoryview(chunk)[self._offset :] if self._offset else chunk)
                self._chunks.popleft()
                self._offset = 0
                remaining -= available
            else:
                parts.append(memoryview(chunk)[self._offset : self._offset + remaining])
                self._offset += remaining
                remaining = 0
        self._buffered -= n
        return memoryview(b"".join(parts))


def frame(payload: bytes) -> bytes:
    """Size-prefix one response."""
    return _SIZE.pack(len(payload)) + payload
