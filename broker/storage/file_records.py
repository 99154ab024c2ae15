"""FileRecords: one segment's `.log` bytes, read by position (Kafka's FileRecords).

It knows the batch framing (12-byte prefix, 61-byte header) and nothing
else: no offset index, no segment policy. LogSegment turns an offset into a
starting position with its index and asks this reader for the bytes:

- `pread(length, position)`: one positioned read (it never moves a file
  offset, so readers on other threads never disturb each other or the writer);
- `slice(position, length)`: those bytes left in the file, as a `FileRange`
  that shares this file's descriptor (Kafka's FileRecords.slice: no open);
- `headers(start, end)`: each batch's header from a batch boundary, read in
  windows; stops at the first frame that is not a whole v2 batch;
- `search(start, offset, end)`: the first batch whose last offset is at or
  after `offset` (Kafka's searchForOffsetWithSize);
- `batches(position, end)` / `batches_at(position, max_bytes, end)`: stored
  batches as zero-copy views over chunked reads;
- `first_at_or_after(...)` / `last_whole_batch(...)`: the two walks a fetch
  makes over a buffer it has already read.
"""

from __future__ import annotations

import errno
import os
import struct
from collections.abc import Iterator
from pathlib import Path

from tinystream.broker.storage.base import CorruptRecordError, LogStorageError
from tinystream.broker.storage.batch import (
    BATCH_HEADER_SIZE,
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_LENGTH,
    HEADER,
    LOG_OVERHEAD,
    MAGIC,
    MIN_BATCH_LENGTH,
)
from tinystream.broker.storage.file_range import FileRange, SharedFile

WALK = struct.Struct(">qiibIhi")  # baseOffset .. lastOffsetDelta (27 bytes): what a fetch walk reads
_I32 = struct.Struct(">i")
# Bound once: the fetch walks run once per read, where attribute lookups show (16 KiB bench log reads).
_unpack_walk = WALK.unpack_from
_WALK_SIZE = WALK.size
SCAN_CHUNK = 1 << 20


def storage_error(action: str, path: Path, exc: OSError) -> LogStorageError:
    code = errno.errorcode.get(exc.errno or 0, exc.errno)
    return LogStorageError(f"cannot {action} {path.name}: {code} {exc.strerror or exc}")


class FileRecords:
    __slots__ = ("file", "fd", "path", "window")

    def __init__(self, file: SharedFile, *, window: int) -> None:
        self.file = file  # the segment's open .log, shared with the ranges sliced from it
        self.fd = file.fd
        self.path = file.path
        self.window = window  # bytes read at a time by a header walk

    def slice(self, position: int, length: int) -> FileRange:
        """``length`` bytes from ``position`` left in the file, holding the descriptor until the range closes."""
        try:
            return FileRange(self.file, position, length)
        except OSError as exc:
            raise storage_error("read", self.path, exc) from exc

    def pread(self, length: int, position: int) -> bytes:
        try:
            return os.pread(self.fd, length, position)
        except OSError as exc:
            raise storage_error("read", self.path, exc) from exc

    def headers(self, start: int, end: int) -> Iterator[tuple[int, tuple[int, ...]]]:
        """(position, header fields) of batches from ``start`` (a batch boundary) to ``end``; no CRC check."""
        window = self.window
        pos = start
        buf = b""
        buf_start = start
        unpack = HEADER.unpack_from
        while end - pos >= BATCH_HEADER_SIZE:
            offset = pos - buf_start
            if offset + BATCH_HEADER_SIZE > len(buf):
                buf = self.pread(min(window, end - pos), pos)
                buf_start, offset = pos, 0
                if len(buf) < BATCH_HEADER_SIZE:
                    return
            fields = unpack(buf, offset)
            length = fields[F_LENGTH]
            if length < MIN_BATCH_LENGTH or fields[3] != MAGIC or pos + length + LOG_OVERHEAD > end:
                return
            yield pos, fields
            pos += length + LOG_OVERHEAD

    def search(self, start: int, offset: int, end: int) -> tuple[int, tuple[int, ...]] | None:
        """(position, header) of the first batch from ``start`` whose last offset is >= ``offset``."""
        for pos, fields in self.headers(start, end):
            if fields[F_BASE_OFFSET] + fields[F_LAST_OFFSET_DELTA] >= offset:
                return pos, fields
        return None

    def batches(self, position: int, end: int) -> Iterator[tuple[tuple[int, ...], memoryview]]:
        """(header fields, batch bytes) for each batch from ``position`` (a batch boundary) to ``end``."""
        while position < end:
            chunk = self.pread(min(SCAN_CHUNK, end - position), position)
            view = memoryview(chunk)
            offset = 0
            while len(chunk) - offset >= LOG_OVERHEAD:
                length = _I32.unpack_from(chunk, offset + 8)[0]
                if length < MIN_BATCH_LENGTH:
                    raise CorruptRecordError(f"{self.path.name}: bad batchLength at {position + offset}")
                batch_size = length + LOG_OVERHEAD
                if offset + batch_size > len(chunk):
                    break
                yield HEADER.unpack_from(chunk, offset), view[offset : offset + batch_size]
                offset += batch_size
            if offset == 0:
                # One batch bigger than the chunk: read it whole.
                length = _I32.unpack_from(chunk, 8)[0] if len(chunk) >= LOG_OVERHEAD else -1
                if length < MIN_BATCH_LENGTH or position + length + LOG_OVERHEAD > end:
                    raise CorruptRecordError(f"{self.path.name}: cut batch at {position}")
                whole = self.pread(length + LOG_OVERHEAD, position)
                yield HEADER.unpack_from(whole), memoryview(whole)
                offset = len(whole)
            position += offset

    def batches_at(self, position: int, max_bytes: int, end: int) -> list[memoryview]:
        """Whole batches starting at byte ``position`` (a batch boundary), about ``max_bytes`` of them.

        Always at least one batch when any remains before ``end``; [] at the end.
        """
        if position >= end:
            return []
        chunk = self.pread(min(max(max_bytes, BATCH_HEADER_SIZE), end - position), position)
        length = _I32.unpack_from(chunk, 8)[0] if len(chunk) >= LOG_OVERHEAD else -1
        if length < MIN_BATCH_LENGTH or position + length + LOG_OVERHEAD > end:
            raise CorruptRecordError(f"{self.path.name}: no whole batch at position {position}")
        if length + LOG_OVERHEAD > len(chunk):
            chunk = self.pread(length + LOG_OVERHEAD, position)
        view = memoryview(chunk)
        out = []
        offset = 0
        while len(chunk) - offset >= LOG_OVERHEAD:
            length = _I32.unpack_from(chunk, offset + 8)[0]
            if length < MIN_BATCH_LENGTH:
                raise CorruptRecordError(f"{self.path.name}: bad batchLength at {position + offset}")
            if offset + length + LOG_OVERHEAD > len(chunk):
                break
            out.append(view[offset : offset + length + LOG_OVERHEAD])
            offset += length + LOG_OVERHEAD
        return out


def first_at_or_after(buf: bytes, buf_start: int, offset: int, end: int) -> tuple[int, int, int, int] | None:
    """Walk ``buf`` (read at file position ``buf_start``) for the first batch whose last offset is >= ``offset``.

    Returns (position, base offset, batchLength, lastOffsetDelta); when the
    buffer ends first, (position where the walk stopped, -1, -1, -1): go on
    with `FileRecords.search` from there; None at a frame that is not a whole
    batch before ``end``.
    """
    buf_len = len(buf)
    pos = buf_start
    while pos - buf_start + _WALK_SIZE <= buf_len:
        base, length, _epoch, magic, _crc, _attrs, delta = _unpack_walk(buf, pos - buf_start)
        if length < MIN_BATCH_LENGTH or magic != MAGIC or pos + length + LOG_OVERHEAD > end:
            return None
        if base + delta >= offset:
            return pos, base, length, delta
        pos += length + LOG_OVERHEAD
    return pos, -1, -1, -1


def last_whole_batch(data: memoryview, data_start: int, walk: int, end: int, last: tuple[int, int]) -> tuple[int, int, int]:
    """From batch boundary ``walk``, the end of the last whole batch in ``data`` (at file position ``data_start``)
    before ``end``, with that batch's base offset and lastOffsetDelta (``last`` when no further batch fits)."""
    last_base, last_delta = last
    while end - walk >= BATCH_HEADER_SIZE:
        base, length, _epoch, _magic, _crc, _attrs, delta = _unpack_walk(data, walk - data_start)
        if walk + length + LOG_OVERHEAD > end or length < MIN_BATCH_LENGTH:
            break
        last_base, last_delta = base, delta
        walk += length + LOG_OVERHEAD
    return walk, last_base, last_delta


def length_at(data: memoryview, position: int) -> int:
    """The batchLength field of the batch at ``position`` in ``data``."""
    length: int = _I32.unpack_from(data, position + 8)[0]
    return length
