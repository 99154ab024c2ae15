"""One connection's answers onto its socket, in order: bytes through the transport, file slices from their files.

An answer is framed bytes, or `ResponseParts` (protocol/response_parts.py: a
Fetch whose record sets stay in segment files). Bytes go to the transport's
buffer as before (one `writelines` for pipelined answers); so does a small
answer in parts (INLINE_BYTES), its record sets read first. Larger parts are written
one after the other by a task: their bytes through the transport, each file
slice on plaintext with `loop.sendfile` (page cache to socket, no copy through
Python). TLS cannot sendfile: there a slice is read from its file TLS_PIECE
bytes at a time (`os.pread`, a fresh buffer each, never joined into one frame)
and each piece handed to the SSL transport once it has room (the connection
passes on its pause_writing / resume_writing); small parts are gathered into
one buffer up to TLS_PIECE; a byte answer larger than TLS_PIECE goes a piece
at a time too.

Invariants:
- order: asyncio refuses transport writes while a sendfile runs, so once a
  task is running every later answer waits in this writer's queue; `queued`
  counts those bytes (the answer being written included, its file slices'
  bytes too), and the connection adds them to its unwritten answers (the
  back-pressure and the budget);
- on TLS a connection holds in memory at most what its SSL transport buffers
  (up to its high-water mark) plus one piece: a piece is read only once the
  transport has room;
- every file slice is closed once: after it is written, when the write
  fails, or when the connection closes (`close` cancels the task and closes
  what is queued);
- a slice's descriptor is its segment's, shared (storage/file_range.py): it
  is read only at explicit offsets (os.sendfile, os.pread; `_AtOffset` for
  asyncio's sendfile);
- a slice that comes back short (the file was cut meanwhile) fails the
  connection: the frame's size prefix has promised its bytes.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import os
from collections.abc import Callable

from tinystream.broker.protocol.response_parts import FileSlice, ResponseParts

log = logging.getLogger(__name__)

Answer = bytes | bytearray | ResponseParts
# On TLS a larger answer, and a record set read from its file, is handed to the SSL transport this much at a
# time, the next piece once the transport has room (its pause_writing / resume_writing). Handed whole, a 30 MB
# Fetch answer became 30 MB of ciphertext in asyncio's socket buffer: sliced, copied in, and moved down after
# every send (`del buffer[:n]`), which the TLS consume profile showed as about a third of the broker's busy time.
TLS_PIECE = 512 * 1024
# A whole answer up to this size, record sets included, is read into one buffer and written like bytes, when
# nothing is queued before it: one send, no task, where its parts would take a send per part and a sendfile
# per record set. Under a replicated load (acks=all, RF 3: follower and consumer fetches of a few KB) py-spy put
# 9.5% of a broker's busy samples in the transport's send; inlining these answers lowered the end-to-end p50 in
# each of four A/B pairs, CPU unchanged (docs/benchmarks.md). Larger answers keep sendfile.
INLINE_BYTES = 64 * 1024


class ResponseWriter:
    def __init__(self, transport: asyncio.Transport, *, on_drained: Callable[[], None],
                 on_failed: Callable[[BaseException], None], after_sendfile: Callable[[int], None]) -> None:
        self._transport = transport
        # Called with the bytes sent after each sendfile (asyncio paused and resumed reading around it: the
        # connection restores its own choice; the server counts).
        self._after_sendfile = after_sendfile
        self._on_drained = on_drained  # the queue emptied: the connection may write (and read) again
        self._on_failed = on_failed  # a write failed (client gone, file cut): the connection closes
        self._queue: collections.deque[Answer] = collections.deque()
        self._task: asyncio.Task[None] | None = None
        # A plain TCP socket's fd, for the direct first try (-1 on TLS: its bytes must go through the SSL object).
        sock = transport.get_extra_info("socket")
        plain = sock is not None and transport.get_extra_info("ssl_object") is None
        self._sock_fd = sock.fileno() if plain else -1
        self._tls = transport.get_extra_info("ssl_object") is not None
        self._room = asyncio.Event()  # cleared while the transport asks us to pause writing
        self._room.set()
        self.queued = 0  # answer bytes accepted here and not yet handed to the socket or its buffer

    @property
    def busy(self) -> bool:
        return self._task is not None

    def write(self, answers: list[Answer]) -> None:
        """Write `answers` after everything accepted before them."""
        if self._task is None:
            if any(type(a) is ResponseParts and a.size <= INLINE_BYTES for a in answers):
                try:
                    answers = [_inline(a) if type(a) is ResponseParts and a.size <= INLINE_BYTES else a
                               for a in answers]
                except OSError as exc:  # a file cut under an answer (ConnectionError): as a failed write
                    for answer in answers:
                        if type(answer) is ResponseParts:
                            answer.close()
                    self._on_failed(exc)
                    return
            if not any(type(a) is ResponseParts or (self._tls and len(a) > TLS_PIECE) for a in answers):
                self._write_bytes(answers)  # type: ignore[arg-type]  # no parts: the fast path of old
                return
        self._queue.extend(answers)
        self.queued += sum(len(a) for a in answers)
        if self._task is None:
            self._task = asyncio.ensure_future(self._run())

    def _write_bytes(self, answers: list[bytes | bytearray]) -> None:
        if len(answers) == 1:
            # A memoryview: on a partial send asyncio (3.11) slices `data[n:]` before buffering it, a
            # full copy of a bytearray (~45 MiB for a Java consumer's fetch), a zero-copy view of a memoryview.
            self._transport.write(memoryview(answers[0]))
        elif answers:
            self._transport.writelines(answers)

    async def _run(self) -> None:
        try:
            while self._queue:
                answer = self._queue[0]
                if type(answer) is ResponseParts:
                    await self._write_parts(answer)
                elif self._tls and len(answer) > TLS_PIECE:
                    await self._write_pieces(answer)  # type: ignore[arg-type]
                else:
                    self._transport.write(memoryview(answer))  # type: ignore[arg-type]
                self._queue.popleft()
                self.queued -= len(answer)
        except asyncio.CancelledError:  # the connection closed: `close` frees the rest
            raise
        except (OSError, RuntimeError, ConnectionError) as exc:  # RuntimeError: asyncio's "transport is closing"
            self._task = None
            self._drop_queue()
            self._on_failed(exc)
            return
        self._task = None
        self._on_drained()

    def transport_paused(self) -> None:
        self._room.clear()

    def transport_resumed(self) -> None:
        self._room.set()

    async def _write_pieces(self, answer: bytes | bytearray | memoryview) -> None:
        """A large answer on TLS, TLS_PIECE bytes at a time, each once the transport has room."""
        view = memoryview(answer)
        for start in range(0, len(view), TLS_PIECE):
            await self._room.wait()
            self._transport.write(view[start:start + TLS_PIECE])

    async def _read_pieces(self, piece: FileSlice) -> None:
        """A record set on TLS, read from its file TLS_PIECE bytes at a time, each once the transport has room.

        Each piece is a fresh bytes object: the SSL transport may keep a reference to what it was given
        (its write backlog) until it can encrypt it, so a reused buffer could be overwritten under it."""
        fd = piece.fileno()
        position, end = piece.position, piece.position + len(piece)
        while position < end:
            await self._room.wait()
            data = _read(fd, position, min(TLS_PIECE, end - position))
            self._transport.write(data)
            position += len(data)

    async def _write_parts_tls(self, answer: ResponseParts) -> None:
        """An answer in parts on TLS. Small parts (the fields between record sets, small record sets) are
        gathered into one buffer of up to TLS_PIECE, one write and one send where a Fetch of 1,000 small
        partitions would make 2,000; a part that does not fit goes on its own, a piece at a time."""
        batch = bytearray()
        for part in answer.parts:
            if len(batch) + len(part) <= TLS_PIECE:
                if isinstance(part, bytes | bytearray | memoryview):
                    batch += part
                else:
                    batch += _read(part.fileno(), part.position, len(part))
                continue
            await self._write_batch(batch)
            batch = bytearray()  # a new one: the transport may still hold the last
            if isinstance(part, bytes | bytearray | memoryview):
                await self._write_pieces(part)
            else:
                await self._read_pieces(part)
        await self._write_batch(batch)

    async def _write_batch(self, batch: bytearray) -> None:
        if batch:
            await self._room.wait()
            self._transport.write(batch)

    async def _write_parts(self, answer: ResponseParts) -> None:
        loop = asyncio.get_running_loop()
        try:
            if self._tls:
                await self._write_parts_tls(answer)
                return
            for part in answer.parts:
                if isinstance(part, bytes | bytearray | memoryview):
                    self._transport.write(part)
                    continue
                want = len(part)
                fd = part.fileno()
                sent = self._sendfile_now(fd, part.position, want)
                if sent < want:  # the socket is full: asyncio waits for it and writes the rest
                    sent += await loop.sendfile(self._transport, _AtOffset(fd), part.position + sent, want - sent)
                self._after_sendfile(sent)
                if sent != want:
                    raise ConnectionError(f"a record set's file ended {want - sent} bytes early")
        finally:
            answer.close()

    def _sendfile_now(self, file_fd: int, position: int, count: int) -> int:
        """One non-blocking os.sendfile when the transport's buffer is empty (nothing may go before it): a
        socket with room takes the whole slice without asyncio's sendfile machinery (futures, a writer
        callback, pausing reading), which the consume profile showed as ~15% of the broker's busy time."""
        if self._sock_fd < 0 or self._transport.get_write_buffer_size():
            return 0
        try:
            return os.sendfile(self._sock_fd, file_fd, position, count)
        except (BlockingIOError, InterruptedError):
            return 0

    def _drop_queue(self) -> None:
        for answer in self._queue:
            if type(answer) is ResponseParts:
                answer.close()
        self._queue.clear()
        self.queued = 0

    def close(self) -> None:
        """The connection is gone: stop writing and free every file slice held."""
        if self._task is not None:
            self._task.cancel()  # its `finally` closes the answer it was writing
            self._task = None
        self._drop_queue()


class _AtOffset:
    """What `loop.sendfile` is given for a slice: its descriptor, shared with the segment and the segment's other
    slices (storage/file_range.py), with a file position of its own. asyncio's native path reads at explicit
    offsets (os.sendfile) and then lseeks the descriptor, which moves nobody's reads: every user of a segment's
    descriptor names its offsets. Its fallback (seek, then readinto on a worker thread, between awaits) reads
    here at this object's position, so two connections sending from one segment never move each other's."""

    __slots__ = ("_fd", "_position")
    mode = "rb"

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._position = 0

    def fileno(self) -> int:
        return self._fd

    def seek(self, position: int, whence: int = os.SEEK_SET) -> int:
        if whence != os.SEEK_SET:
            raise ValueError("only absolute positions")
        self._position = position
        return position

    def tell(self) -> int:
        return self._position

    def readinto(self, buffer: bytearray | memoryview) -> int:
        count = os.preadv(self._fd, [buffer], self._position)
        self._position += count
        return count


def _inline(answer: ResponseParts) -> bytes:
    """A small answer's bytes, its record sets read from their files (INLINE_BYTES); its slices closed."""
    try:
        return b"".join(part if isinstance(part, bytes | bytearray | memoryview)
                        else _read(part.fileno(), part.position, len(part)) for part in answer.parts)
    finally:
        answer.close()


def _read(fd: int, position: int, count: int) -> bytes:
    """`count` bytes of the file at `position`; ConnectionError when it ends before (the file was cut: the
    frame's size prefix has promised them)."""
    data = os.pread(fd, count, position)
    if len(data) != count:
        raise ConnectionError(f"a record set's file ended {count - len(data)} bytes early")
    return data
