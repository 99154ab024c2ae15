"""LogSegment: one file of concatenated batches plus its two sparse indexes.

Files, named by the segment's base offset in 20 digits (Kafka's names)::

    00000000000000000000.log        batches, byte for byte as stored
    00000000000000000000.index      offset -> position   (index.OffsetIndex)
    00000000000000000000.timeindex  timestamp -> offset  (index.TimeIndex)

Invariants:

- the .log holds whole, valid batches back to back; base offsets increase
  (gaps only after compaction); every offset in the segment is >= the base
  offset and fits 32 bits relative to it;
- an index entry is added for a batch when more than index.interval.bytes
  were appended since the last entry (Kafka's rule), and a time-index entry
  at the same moment when the max timestamp so far grew; a final time entry
  is written when the segment is sealed (rolled) or closed;
- index entries reach disk only after the log bytes they point at were
  fsynced (``flush``), so after any crash the last index entry is a safe
  place to start a recovery scan.

Reads never load a segment: ``os.pread`` fetches the index window and then
the exact byte range to return. ``tail()`` is a (size, next offset) pair the
writer publishes after each write, so a reader that snapshots it sees only
complete batches even while appends continue.

Recovery (``recover``): drop index entries past the file size or not
pointing at a valid batch, then scan from the last remaining entry,
validating every batch (size, magic, CRC, counts, offsets increasing and in
32-bit range). The first invalid or incomplete batch and everything after it
is cut off; indexes are rebuilt for the scanned part.

Errors: an OSError while appending (ENOSPC, EROFS, EIO) truncates the file
back to its previous size and raises LogStorageError; if even that fails the
segment is marked failed and refuses further appends.
"""

from __future__ import annotations

import errno
import os
import re
import struct
from collections.abc import Iterator
from pathlib import Path

from tinystream.broker.storage.base import CorruptRecordError, InvalidRecordError, LogStorageError
from tinystream.broker.storage.batch import (
    BATCH_HEADER_SIZE,
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_LENGTH,
    F_MAX_TIMESTAMP,
    HEADER,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    OFFSET_AND_LENGTH,
    check_batch,
)
from tinystream.broker.storage.file_range import FileRange, SharedFile
from tinystream.broker.storage.file_records import (
    SCAN_CHUNK,
    FileRecords,
    first_at_or_after,
    last_whole_batch,
    length_at,
    storage_error,
)
from tinystream.broker.storage.index import IndexCorruptError, OffsetIndex, TimeIndex
from tinystream.broker.storage.policy import MAX_RELATIVE_OFFSET

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
CLEANED_SUFFIX = ".cleaned"  # compaction output being written
SWAP_SUFFIX = ".swap"  # compaction output complete, not yet renamed into place
_NAME = re.compile(r"^(\d{20})\.log$")
_I32 = struct.Struct(">i")

_fdatasync = getattr(os, "fdatasync", os.fsync)


def segment_file_name(base_offset: int, suffix: str = LOG_SUFFIX) -> str:
    return f"{base_offset:020d}{suffix}"


def parse_segment_file_name(name: str) -> int | None:
    """Base offset of a ``<20 digits>.log`` name, else None."""
    match = _NAME.match(name)
    return int(match.group(1)) if match else None


class LogSegment:
    """One segment. The owning log serialises writers; readers use ``tail()`` snapshots."""

    def __init__(
        self,
        directory: Path,
        base_offset: int,
        fd: int,
        size: int,
        *,
        index_interval_bytes: int,
        now_ms: int,
        new: bool,
    ) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self.log_path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        self.index = OffsetIndex(directory / segment_file_name(base_offset, INDEX_SUFFIX), base_offset, new=new)
        self.time_index = TimeIndex(directory / segment_file_name(base_offset, TIME_INDEX_SUFFIX), base_offset, new=new)
        # Only ever used at explicit offsets (pread, pwrite, ftruncate, fsync): its file position is shared by
        # the FileRanges sliced from it (file_range.py), which may keep it open after `close`.
        self._fd = fd
        self._file = SharedFile(fd, self.log_path)
        self._interval = index_interval_bytes
        self.records = FileRecords(self._file, window=max(8192, 2 * index_interval_bytes + 2 * BATCH_HEADER_SIZE))
        # Published for readers: (size in bytes, next offset or None when not yet computed).
        self._tail: tuple[int, int | None] = (size, base_offset if size == 0 else None)
        self._bytes_since_index = 0
        self._max_timestamp: int | None = -1 if size == 0 else None  # None: not computed yet
        self._offset_of_max = base_offset
        self.rolling_base_ms: int | None = None
        self.last_modified_ms = now_ms
        self.failed: LogStorageError | None = None
        self.closed = False
        self.version = 0  # bumped whenever existing bytes change (truncation, rebuild)

    # ------------------------------------------------------------ opening
    @classmethod
    def create(cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int) -> LogSegment:
        """A new empty segment (files created; an existing empty .log is reused)."""
        path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise storage_error("create", path, exc) from exc
        size = os.fstat(fd).st_size
        if size:
            os.close(fd)
            raise LogStorageError(f"{path.name} already holds {size} bytes")
        segment = cls(directory, base_offset, fd, 0, index_interval_bytes=index_interval_bytes, now_ms=now_ms, new=True)
        segment.index.reset()
        segment.time_index.reset()
        return segment

    @classmethod
    def load(cls, directory: Path, base_offset: int, *, index_interval_bytes: int, now_ms: int) -> LogSegment:
        """Open an existing segment; indexes load lazily (see ``indexes_look_sane`` and ``recover``)."""
        path = directory / segment_file_name(base_offset, LOG_SUFFIX)
        try:
            fd = os.open(path, os.O_RDWR)
            stat = os.fstat(fd)
        except OSError as exc:
            raise storage_error("open", path, exc) from exc
        segment = cls(
            directory, base_offset, fd, stat.st_size, index_interval_bytes=index_interval_bytes, now_ms=now_ms, new=False
        )
        segment.last_modified_ms = stat.st_mtime_ns // 1_000_000
        return segment

    # ------------------------------------------------------------ state
    @property
    def size(self) -> int:
        return self._tail[0]

    def tail(self) -> tuple[int, int]:
        """(size, next offset) as one consistent snapshot."""
        size, next_offset = self._tail
        if next_offset is None:
            next_offset = self._compute_next_offset(size)
        return size, next_offset

    @property
    def next_offset(self) -> int:
        return self.tail()[1]

    @property
    def max_timestamp(self) -> int:
        """Largest batch maxTimestamp in the segment (-1 when none)."""
        known = self._max_timestamp
        return self._compute_max_timestamp() if known is None else known

    def _compute_next_offset(self, size: int) -> int:
        _, start = self.index.lookup(1 << 62, size)
        next_offset = self.base_offset
        for _pos, fields in self._headers(start, size):
            next_offset = fields[F_BASE_OFFSET] + fields[F_LAST_OFFSET_DELTA] + 1
        if self._tail[0] == size:
            self._tail = (size, next_offset)
        return next_offset

    def _compute_max_timestamp(self) -> int:
        """From the time index's last entry plus a scan after the last offset-index entry."""
        size = self.size
        best, best_offset = -1, self.base_offset
        last = self.time_index.last_entry()
        if last is not None:
            best, best_offset = last
        entry = self.index.last_entry()
        start = entry[1] if entry is not None and entry[1] < size else 0
        for _pos, fields in self._headers(start, size):
            if fields[F_MAX_TIMESTAMP] > best:
                best, best_offset = fields[F_MAX_TIMESTAMP], fields[F_BASE_OFFSET]
        self._max_timestamp, self._offset_of_max = best, best_offset
        return best

    def first_batch_rolling_base(self, fallback_ms: int) -> int | None:
        """Kafka's rollingBasedTimestamp: the first batch's max timestamp, else ``fallback_ms``."""
        if self.size == 0:
            return None
        head = self._pread(BATCH_HEADER_SIZE, 0)
        if len(head) < BATCH_HEADER_SIZE:
            return fallback_ms
        max_ts = HEADER.unpack_from(head)[F_MAX_TIMESTAMP]
        return max_ts if max_ts >= 0 else fallback_ms

    # ------------------------------------------------------------ appends (writer only)
    def append(
        self, head: bytes, tail: memoryview, size: int, base_offset: int, last_offset: int, max_timestamp: int, now_ms: int
    ) -> int:
        """Write one batch given as head + tail; returns its position."""
        if self.failed is not None:
            raise self.failed
        if self._max_timestamp is None:
            self._compute_max_timestamp()
        position = self._tail[0]
        try:
            written = os.pwritev(self._fd, (head, tail), position)
        except OSError as exc:
            self._rollback(position, exc)
        if written != size:
            self._rollback(position, OSError(errno.EIO, f"short write: {written} of {size} bytes"))
        if position == 0:
            self.rolling_base_ms = max_timestamp if max_timestamp >= 0 else now_ms
        self.last_modified_ms = now_ms
        # _track, inlined for the leader hot path (same order: max first, then entries).
        known = self._max_timestamp
        if known is None:
            known = self._compute_max_timestamp()
        if max_timestamp > known:
            self._max_timestamp = known = max_timestamp
            self._offset_of_max = base_offset
        if self._bytes_since_index > self._interval:
            self.index.append_trusted(base_offset, position)
            if known > self.time_index.last_timestamp:
                self.time_index.maybe_append(known, self._offset_of_max)
            self._bytes_since_index = size
        else:
            self._bytes_since_index += size
        self._tail = (position + size, last_offset + 1)
        return position

    def append_chunk(self, view: memoryview, batches: list[tuple[int, tuple[int, ...]]], now_ms: int) -> None:
        """Write several already-validated batches (follower path) with one system call.

        ``batches`` are (position in ``view``, header fields) of consecutive
        batches; ``view[first position : end of last]`` is written as is.
        """
        if self.failed is not None:
            raise self.failed
        start = batches[0][0]
        last_pos, last_fields = batches[-1]
        end = last_pos + last_fields[F_LENGTH] + LOG_OVERHEAD
        position = self._tail[0]
        try:
            written = os.pwrite(self._fd, view[start:end], position)
        except OSError as exc:
            self._rollback(position, exc)
        if written != end - start:
            self._rollback(position, OSError(errno.EIO, f"short write: {written} of {end - start} bytes"))
        if position == 0:
            first_max = batches[0][1][F_MAX_TIMESTAMP]
            self.rolling_base_ms = first_max if first_max >= 0 else now_ms
        self.last_modified_ms = now_ms
        for pos, fields in batches:
            self._track(position + pos - start, fields[F_LENGTH] + LOG_OVERHEAD, fields[F_BASE_OFFSET], fields[F_MAX_TIMESTAMP])
        self._tail = (position + end - start, last_fields[F_BASE_OFFSET] + last_fields[F_LAST_OFFSET_DELTA] + 1)

    def _track(self, position: int, size: int, base_offset: int, max_timestamp: int) -> None:
        """Index bookkeeping for one appended (or rescanned) batch, in Kafka's order."""
        known = self._max_timestamp
        if known is None:
            known = self._compute_max_timestamp()
        if max_timestamp > known:
            self._max_timestamp = known = max_timestamp
            self._offset_of_max = base_offset
        if self._bytes_since_index > self._interval:
            self.index.append(base_offset, position)
            self.time_index.maybe_append(known, self._offset_of_max)
            self._bytes_since_index = 0
        self._bytes_since_index += size

    def _rollback(self, position: int, exc: OSError) -> None:
        """Undo a failed write; always raises LogStorageError."""
        error = storage_error("append to", self.log_path, exc)
        try:
            os.ftruncate(self._fd, position)
        except OSError as second:
            self.failed = LogStorageError(
                f"{self.log_path.name} may hold a partial batch after {error}; truncating it failed too "
                f"({second.strerror}); reopen the log to recover"
            )
            raise self.failed from exc
        raise error from exc

    # ------------------------------------------------------------ reads (any thread)
    def _pread(self, length: int, position: int) -> bytes:
        return self.records.pread(length, position)

    def _headers(self, start: int, end: int) -> Iterator[tuple[int, tuple[int, ...]]]:
        return self.records.headers(start, end)

    def locate(self, offset: int, size: int | None = None) -> tuple[int, tuple[int, ...]] | None:
        """(position, header) of the first batch whose last offset is >= ``offset``; None if none here."""
        if size is None:
            size = self._tail[0]
        _, start = self.index.lookup(offset, size)
        return self.records.search(start, offset, size)

    def read(
        self, offset: int, max_bytes: int, limit_offset: int, min_one: bool, *, as_range: bool = False
    ) -> tuple[bytes | memoryview | FileRange, int, int] | None:
        """Whole batches from the one holding ``offset``: (data, first base offset, next offset).

        ``as_range``: data is a `FileRange` (the batches left in the file, for sendfile) when not empty;
        only the headers the walks need are read.

        None when no batch here ends at or after ``offset`` (try the next
        segment); empty data when the first batch is not allowed (starts at or
        past ``limit_offset``, or is larger than ``max_bytes`` without ``min_one``).

        The index gives a position at or below ``offset``; one ``pread`` from
        there usually covers both the header walk and the bytes returned,
        which are then a zero-copy view (FileRecords does the byte walks).
        """
        size, next_offset = self._tail  # tail(), inlined for the fetch path
        if next_offset is None:
            next_offset = self._compute_next_offset(size)
        _, start = self.index.lookup(offset, size)
        records = self.records
        # Enough for the walk from the index entry (at most one interval plus a
        # header past it, unless batches are big) and the bytes to return.
        buf = records.pread(min(size - start, self._interval + 2 * BATCH_HEADER_SIZE + (0 if as_range else max(max_bytes, 0))),
                            start)
        buf_len = len(buf)
        found = first_at_or_after(buf, start, offset, size)
        if found is None:
            return None
        pos, base, length, delta = found
        if length < 0:  # the buffer ended before the batch: walk on from there
            located = records.search(pos, offset, size)
            if located is None:
                return None
            pos, header = located
            base, length, delta = header[F_BASE_OFFSET], header[F_LENGTH], header[F_LAST_OFFSET_DELTA]
        if base >= limit_offset:
            return b"", base, offset
        first_size = length + LOG_OVERHEAD
        if first_size > max_bytes:
            if not min_one:
                return b"", base, offset
            if as_range:
                return records.slice(pos, first_size), base, base + delta + 1
            if pos + first_size <= start + buf_len:
                return memoryview(buf)[pos - start : pos - start + first_size], base, base + delta + 1
            return records.pread(first_size, pos), base, base + delta + 1
        end = min(size, pos + max_bytes)
        if limit_offset < next_offset:
            end = self._end_before_limit(end, limit_offset, size)
        if as_range:
            return self._range(pos, pos + first_size, end, (base, delta))
        if end <= start + buf_len:
            data = memoryview(buf)[pos - start : end - start]
        else:
            data = memoryview(records.pread(end - pos, pos))
            end = pos + len(data)
        # Find the last whole batch inside ``data``. The first one is known to
        # fit (first_size <= max_bytes, and a limit cuts after it), so walk on
        # from its end; when more than an index interval follows, jump to an
        # index entry near the end first (a 1 MiB fetch of small batches).
        walk = pos + first_size
        if end - walk > self._interval:
            walk = self._walk_from_index(data, pos, walk, end)
        if end - walk < BATCH_HEADER_SIZE:  # no room for another batch (a one-batch read): no walk
            return (data if walk == end else data[: walk - pos]), base, base + delta + 1
        walk, last_base, last_delta = last_whole_batch(data, pos, walk, end, (base, delta))
        if walk != end:
            data = data[: walk - pos]
        return data, base, last_base + last_delta + 1

    def _range(self, pos: int, walk: int, end: int, first: tuple[int, int]) -> tuple[FileRange, int, int]:
        """`read`'s answer as a file range: from ``pos`` (first batch at ``first``, ending at ``walk``) to the
        end of the last whole batch before ``end``, found from the index entry nearest ``end`` and the headers
        after it (the batches' bodies are never read)."""
        base, last = first[0], first
        if end - walk > self._interval:
            entry = self.index.entry_at_or_before_position(end - BATCH_HEADER_SIZE)
            if entry is not None and entry[1] > walk:
                # The entry before it: every batch from there to the entry fits, so the walk yields the
                # batch that ends last (about two index intervals of headers: one windowed read).
                walk = max(walk, self.index.position_before(entry[1]))
        for at, fields in self.records.headers(walk, end):
            last = (fields[F_BASE_OFFSET], fields[F_LAST_OFFSET_DELTA])
            walk = at + fields[F_LENGTH] + LOG_OVERHEAD
        return self.records.slice(pos, walk - pos), base, last[0] + last[1] + 1

    def _end_before_limit(self, end: int, limit_offset: int, size: int) -> int:
        """``end`` cut at the batch holding ``limit_offset`` (kept when it starts below the limit): a
        read_committed read stops at the last stable offset, a consumer's at the high watermark."""
        stop = self.locate(limit_offset, size)
        if stop is None:
            return end
        stop_pos, stop_fields = stop
        if stop_fields[F_BASE_OFFSET] < limit_offset:
            stop_pos += stop_fields[F_LENGTH] + LOG_OVERHEAD
        return min(end, stop_pos)

    def _walk_from_index(self, data: memoryview, pos: int, walk: int, end: int) -> int:
        """Where the walk for the last whole batch may start when more than an index interval follows
        ``walk``: an index entry near ``end`` whose batch fits, else the entry before it, else ``walk``
        (a 1 MiB fetch of small batches then walks one interval, not the whole megabyte)."""
        entry = self.index.entry_at_or_before_position(end - BATCH_HEADER_SIZE)
        if entry is None or entry[1] <= walk:
            return walk
        candidate = entry[1]
        if candidate + length_at(data, candidate - pos) + LOG_OVERHEAD <= end:
            return candidate
        earlier = self.index.position_before(candidate)
        return earlier if earlier > walk else walk

    def find_by_timestamp(self, timestamp_ms: int, min_offset: int) -> tuple[int, int] | None:
        """(max timestamp, base offset) of the first batch with maxTimestamp >= ts and last offset >= min_offset."""
        if self.max_timestamp < timestamp_ms:
            return None
        size = self.size
        offset = self.time_index.lookup(timestamp_ms)
        start = 0 if offset is None else self.index.lookup(offset, size)[1]
        for _pos, fields in self.records.headers(start, size):
            if (
                fields[F_MAX_TIMESTAMP] >= timestamp_ms
                and fields[F_BASE_OFFSET] + fields[F_LAST_OFFSET_DELTA] >= min_offset
            ):
                return fields[F_MAX_TIMESTAMP], fields[F_BASE_OFFSET]
        return None

    def iter_batches(self, start_offset: int | None = None) -> Iterator[tuple[tuple[int, ...], memoryview]]:
        """(header fields, batch bytes) for each batch (from the one holding ``start_offset``)."""
        size = self.size
        position = 0
        if start_offset is not None:
            found = self.locate(start_offset, size)
            if found is None:
                return
            position = found[0]
        yield from self.records.batches(position, size)

    def batches_at(self, position: int, max_bytes: int) -> list[memoryview]:
        """Whole batches starting at byte ``position`` (a batch boundary), about ``max_bytes`` of them.

        Always at least one batch when any remains; [] at the end.
        """
        return self.records.batches_at(position, max_bytes, self.size)

    # ------------------------------------------------------------ recovery and truncation (writer, exclusive)
    def indexes_look_sane(self) -> bool:
        """Kafka's cheap sanity check for a closed segment at open (no full index load).

        Both files exist with whole entries and the last offset entry points
        inside the log.
        Full validation happens on first use (``index._SparseIndex.load``).
        """
        size = self.size
        try:
            index_size = os.path.getsize(self.index.path)
            time_size = os.path.getsize(self.time_index.path)
        except OSError:
            return False
        if index_size % OffsetIndex.ENTRY_SIZE or time_size % TimeIndex.ENTRY_SIZE:
            return False
        if index_size == 0:
            return True
        try:
            with open(self.index.path, "rb") as handle:
                handle.seek(index_size - OffsetIndex.ENTRY_SIZE)
                relative, position = struct.unpack(">II", handle.read(OffsetIndex.ENTRY_SIZE))
        except OSError:
            return False
        return bool(position < size and relative <= MAX_RELATIVE_OFFSET)

    def rebuild_indexes(self) -> int:
        """Rebuild both indexes from the log (validating it); returns bytes cut from a bad tail."""
        self.index.reset()
        self.time_index.reset()
        self._max_timestamp, self._offset_of_max = -1, self.base_offset
        return self._scan_and_cut(0)

    def recover(self) -> int:
        """Validate the tail after the last trustworthy index entry; returns bytes cut."""
        try:
            self.index.load()
            self.time_index.load()
        except IndexCorruptError:
            return self.rebuild_indexes()
        size = self.size
        self.index.truncate_to_position(size)
        while True:
            last = self.index.last_entry()
            if last is None:
                return self.rebuild_indexes()
            offset, position = last
            if self._valid_batch_at(position, size, offset):
                break
            self.index.drop_last()
        time_last = self.time_index.last_entry()
        self._max_timestamp, self._offset_of_max = time_last if time_last is not None else (-1, self.base_offset)
        return self._scan_and_cut(position)

    def _valid_batch_at(self, position: int, size: int, expected_base: int) -> bool:
        header = self._pread(LOG_OVERHEAD, position)
        if len(header) < LOG_OVERHEAD:
            return False
        base, length = OFFSET_AND_LENGTH.unpack(header)
        if base != expected_base or length < MIN_BATCH_LENGTH or position + length + LOG_OVERHEAD > size:
            return False
        try:
            check_batch(self._pread(length + LOG_OVERHEAD, position), strict=False)
        except (CorruptRecordError, InvalidRecordError):
            return False
        return True

    def _scan_and_cut(self, start: int) -> int:
        """Validate batches from ``start``; rebuild index state; cut the file at the first bad byte."""
        size = self.size
        position = start
        expected = self.base_offset
        next_offset = self.base_offset
        self._bytes_since_index = 0
        while position < size:
            chunk = self._pread(min(max(SCAN_CHUNK, self.records.window), size - position), position)
            offset = 0
            bad = False
            while len(chunk) - offset >= LOG_OVERHEAD:
                length = _I32.unpack_from(chunk, offset + 8)[0]
                if length < MIN_BATCH_LENGTH or position + offset + length + LOG_OVERHEAD > size:
                    bad = True
                    break
                batch_size = length + LOG_OVERHEAD
                if offset + batch_size > len(chunk):
                    if offset == 0:
                        chunk = self._pread(batch_size, position)
                        continue
                    break
                try:
                    fields = check_batch(memoryview(chunk)[offset : offset + batch_size], strict=False)
                except (CorruptRecordError, InvalidRecordError):
                    bad = True
                    break
                base = fields[F_BASE_OFFSET]
                last = base + fields[F_LAST_OFFSET_DELTA]
                if base < expected or last - self.base_offset > MAX_RELATIVE_OFFSET:
                    bad = True
                    break
                self._track(position + offset, batch_size, base, fields[F_MAX_TIMESTAMP])
                expected = next_offset = last + 1
                offset += batch_size
            position += offset
            if bad or offset == 0:
                break
        cut = size - position
        if cut:
            self.version += 1
            try:
                os.ftruncate(self._fd, position)
            except OSError as exc:
                raise storage_error("truncate", self.log_path, exc) from exc
            self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(next_offset)
        self._tail = (position, next_offset)
        if position == 0:
            self.rolling_base_ms = None
        return cut

    def truncate_to(self, offset: int) -> bool:
        """Drop every batch whose last offset is >= ``offset``; True when anything was removed.

        Either way the segment is ready to be the active one afterwards (its
        tail state is re-derived), since truncation ends at this segment.
        """
        size = self.size
        found = self.locate(offset, size)
        if found is None:
            self.prepare_to_append()
            return False
        position, fields = found
        self.version += 1
        try:
            os.ftruncate(self._fd, position)
        except OSError as exc:
            raise storage_error("truncate", self.log_path, exc) from exc
        self.index.truncate_to_position(position)
        self.time_index.truncate_to_offset(fields[F_BASE_OFFSET])
        self._tail = (position, None)
        self.prepare_to_append()
        return True

    def prepare_to_append(self) -> None:
        """Re-derive what appends track (next offset, bytes since the last index entry,
        max timestamp) from the indexes and a walk after the last index entry."""
        size = self.size
        entry = self.index.last_entry()
        start = entry[1] if entry is not None else 0
        time_last = self.time_index.last_entry()
        best, best_offset = time_last if time_last is not None else (-1, self.base_offset)
        since_index = 0
        next_offset = self.base_offset
        for _pos, header in self._headers(start, size):
            if header[F_MAX_TIMESTAMP] > best:
                best, best_offset = header[F_MAX_TIMESTAMP], header[F_BASE_OFFSET]
            since_index += header[F_LENGTH] + LOG_OVERHEAD
            next_offset = header[F_BASE_OFFSET] + header[F_LAST_OFFSET_DELTA] + 1
        self._max_timestamp, self._offset_of_max = best, best_offset
        self._bytes_since_index = since_index
        self._tail = (size, next_offset)
        if size == 0:
            self.rolling_base_ms = None

    # ------------------------------------------------------------ durability and lifecycle
    def flush(self, *, fsync_indexes: bool = False) -> None:
        """fsync the log, then persist index entries (which now point at durable data)."""
        try:
            _fdatasync(self._fd)
        except OSError as exc:
            raise storage_error("fsync", self.log_path, exc) from exc
        if self.index.loaded:
            self.index.flush(fsync=fsync_indexes)
        if self.time_index.loaded:
            self.time_index.flush(fsync=fsync_indexes)

    def seal(self) -> None:
        """The segment stops being active: final time-index entry, everything durable."""
        known = self._max_timestamp
        if known is None:
            known = self._compute_max_timestamp()
        if self.size:
            self.time_index.maybe_append(known, self._offset_of_max)
        self.flush(fsync_indexes=True)

    def close(self) -> None:
        """Let go of the .log's descriptor: closed now, or by the last FileRange still holding it."""
        if self.closed:
            return
        self.closed = True
        self._file.close()

    def delete(self) -> None:
        """Close and unlink all three files (a FileRange taken before still reads the old bytes)."""
        self.close()
        for path in (self.log_path, self.index.path, self.time_index.path):
            try:
                path.unlink()
            except FileNotFoundError:
                pass
            except OSError as exc:
                raise storage_error("delete", path, exc) from exc

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, size={self._tail[0]})"
