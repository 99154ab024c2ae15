"""SegmentedLog: a partition log as a directory of segment files (the default store; Kafka's LocalLog).

Directory layout (one per partition, ``<topic>-<partition>/``)::

    00000000000000000000.log / .index / .timeindex   segment at base offset 0
    00000000000000001234.log / .index / .timeindex   the next one ...
    leader-epoch-checkpoint        epoch -> start offset (leader_epoch.py)
    log-start-offset-checkpoint    the log start offset (checkpoint.py)
    *.log.cleaned / *.log.swap     compaction output in flight (compaction_swap.py)

This module appends, reads, truncates and applies retention. Its neighbours
do the rest: loader.py opens and recovers a directory, segments.py holds the
sorted segment snapshot readers walk, segment.py and file_records.py one
segment's files and bytes, policy.py the roll and retention rules,
compaction_swap.py how a compacted segment replaces the old one.

Invariants: segment base offsets increase; the last segment is the active
one and takes every append; offsets inside a segment are below the next
segment's base; log_start_offset <= log_end_offset; every closed segment
was fsynced (with its indexes) when it was rolled.

Durability (Kafka's flush.messages / flush.ms): every append is written
with one ``pwritev`` to the page cache, so it survives a process crash at
once; fsync happens when flush.messages records or flush.ms passed since the
last flush (both None: only on roll, close and ``flush()``; flush.messages=1
fsyncs every append). Checkpoint files are always replaced atomically with
fsync.

Concurrency: writers (append, roll, truncate, retention, compaction swaps)
serialise on one lock and may come from different threads. Readers take a
shared lock and never block appends; the changes that remove or cut bytes
take it exclusively, so a reader never sees a file closed or cut under it.

Disk errors (ENOSPC, EROFS, EIO) raise LogStorageError; a failed append is
cut back so the log stays consistent and later appends can succeed once the
disk has room.

Clock: every method that needs time takes ``now_ms``; the follower path
(``append_replicated``, which has no clock argument) uses the last reading
any call passed in.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from tinystream.atomic_file import fsync_directory
from tinystream.broker.storage import compaction_swap, loader
from tinystream.broker.storage.base import (
    AppendResult,
    EpochEntry,
    LogConfig,
    LogStorageError,
    OffsetOutOfRangeError,
    PartitionLog,
    ReadResult,
    TimestampOffset,
)
from tinystream.broker.storage.batch import (
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_LEADER_EPOCH,
    F_LENGTH,
    LOG_OVERHEAD,
    BatchHeader,
    iter_header_fields,
)
from tinystream.broker.storage.checkpoint import OffsetCheckpoint
from tinystream.broker.storage.file_range import FileRange
from tinystream.broker.storage.leader_epoch import LeaderEpochCache
from tinystream.broker.storage.policy import (
    check_config,
    retention_deletions,
    roll_reason,
    time_to_roll,
)
from tinystream.broker.storage.rwlock import SharedExclusiveLock
from tinystream.broker.storage.segment import (
    LogSegment,
)
from tinystream.broker.storage.segments import LogSegments
from tinystream.broker.storage.validation import prepare_leader_append, split_replicated

_log = logging.getLogger(__name__)
_ONLY_LOG_START = LogConfig(cleanup_policy="compact")  # retention_deletions with only the log-start rule


class SegmentedLog(PartitionLog):
    """The file-backed PartitionLog. Create with ``SegmentedLog.open(directory, config, now_ms=...)``.

    Beyond PartitionLog: ``roll(now_ms)``, ``maybe_flush(now_ms)`` (flush.ms
    for a scheduler), ``locate(offset)`` (the index lookup alone),
    ``batches_from(offset)`` (headers and bytes, for producer-state rebuilds),
    ``segment_base_offsets()``, and the compaction hooks
    ``closed_segment_bases`` / ``segment_batches`` / ``replace_segment``.
    """

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        *,
        log_start_offset: int,
        epochs: LeaderEpochCache,
        start_checkpoint: OffsetCheckpoint,
        now_ms: int,
    ) -> None:
        self.config = config
        self.directory = directory
        self._publish(segments)
        self._start = log_start_offset
        self._end = max(segments[-1].next_offset, log_start_offset)
        self._epochs = epochs
        self._start_checkpoint = start_checkpoint
        self._write_lock = threading.Lock()  # writers; never taken twice by one call
        self._rw = SharedExclusiveLock()
        self._unflushed = 0
        self._last_flush_ms = now_ms
        self._now_ms = now_ms
        self._closed = False
        self._flush_policy = config.flush_messages is not None or config.flush_ms is not None

    # ================================================================ opening
    @classmethod
    def open(cls, directory: str | os.PathLike[str], config: LogConfig | None = None, *, now_ms: int) -> SegmentedLog:
        """Open (or create) the log in ``directory``, recovering it if needed (loader.py)."""
        config = config or LogConfig()
        check_config(config)
        loaded = loader.load(Path(directory), config, now_ms=now_ms)
        return cls(
            loaded.directory,
            config,
            loaded.segments,
            log_start_offset=loaded.log_start_offset,
            epochs=loaded.epochs,
            start_checkpoint=loaded.start_checkpoint,
            now_ms=now_ms,
        )

    # ================================================================ properties
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    def _publish(self, segments: list[LogSegment] | tuple[LogSegment, ...]) -> None:
        """Replace the segment snapshot readers see, in one assignment."""
        self._segments = LogSegments(segments)
        self._active_segment = self._segments.active  # the append path's one attribute load

    @property
    def _active(self) -> LogSegment:
        return self._segments.active

    def _check_open(self) -> None:
        if self._closed:
            raise LogStorageError(f"log {self.directory} is closed")

    # ================================================================ appends
    def append(
        self, batch: bytes | memoryview, *, leader_epoch: int, now_ms: int, header: tuple[int, ...] | None = None
    ) -> AppendResult:
        # The produce hot path, kept flat: validation, the roll rule, one
        # pwritev, bookkeeping. The lock is taken with acquire/release:
        # ``with`` costs twice as much for a plain Lock (16 KiB bench log).
        lock = self._write_lock
        lock.acquire()
        try:
            if self._closed:
                raise LogStorageError(f"log {self.directory} is closed")
            config = self.config
            head, tail, size, base_offset, last_offset, max_timestamp, log_append_time = prepare_leader_append(
                batch, config, self._end, leader_epoch, now_ms, header
            )
            active = self._active_segment
            used = active._tail[0]
            if used and roll_reason(config, active.base_offset, used, active.rolling_base_ms, size, last_offset, now_ms):
                active = self._roll(now_ms)
            position = active.append(head, tail, size, base_offset, last_offset, max_timestamp, now_ms)
            self._end = last_offset + 1
            if leader_epoch > self._epochs.latest_epoch:
                self._epochs.assign(leader_epoch, base_offset)
            if self._flush_policy:
                self._after_append(last_offset - base_offset + 1, now_ms)
            else:
                self._now_ms = now_ms
            return AppendResult(base_offset, last_offset, max_timestamp, log_append_time, position)
        finally:
            lock.release()

    def append_replicated(self, batches: bytes | memoryview) -> int:
        with self._write_lock:
            self._check_open()
            view, parsed = split_replicated(batches, config=self.config, log_end_offset=self._end)
            if not parsed:
                return self._end
            now_ms = self._now_ms
            run: list[tuple[int, tuple[int, ...]]] = []
            active = self._segments.active
            run_bytes = 0
            records = 0
            for pos, fields in parsed:
                size = fields[F_LENGTH] + LOG_OVERHEAD
                last = fields[F_BASE_OFFSET] + fields[F_LAST_OFFSET_DELTA]
                used = active.size + run_bytes
                if used and roll_reason(self.config, active.base_offset, used, active.rolling_base_ms, size, last, now_ms):
                    if run:
                        self._write_run(active, view, run, now_ms)
                        run, run_bytes = [], 0
                    active = self._roll(now_ms)
                run.append((pos, fields))
                run_bytes += size
                records += fields[F_LAST_OFFSET_DELTA] + 1
                if not active.size and len(run) == 1:
                    # Write the first batch of a fresh segment alone so that the
                    # rolling base (and roll checks for the rest) see it.
                    self._write_run(active, view, run, now_ms)
                    run, run_bytes = [], 0
            if run:
                self._write_run(active, view, run, now_ms)
            self._after_append(records, now_ms)
            return self._end

    def _write_run(self, segment: LogSegment, view: memoryview, run: list[tuple[int, tuple[int, ...]]], now_ms: int) -> None:
        segment.append_chunk(view, run, now_ms)
        for _pos, fields in run:
            if fields[F_LEADER_EPOCH] > self._epochs.latest_epoch:
                self._epochs.assign(fields[F_LEADER_EPOCH], fields[F_BASE_OFFSET])
        last = run[-1][1]
        self._end = last[F_BASE_OFFSET] + last[F_LAST_OFFSET_DELTA] + 1

    def _after_append(self, records: int, now_ms: int) -> None:
        self._unflushed += records
        self._now_ms = now_ms
        flush_messages = self.config.flush_messages
        flush_ms = self.config.flush_ms
        if (flush_messages is not None and self._unflushed >= flush_messages) or (
            flush_ms is not None and now_ms - self._last_flush_ms >= flush_ms
        ):
            self._flush_locked(now_ms)

    def _roll(self, now_ms: int) -> LogSegment:
        """Seal the active segment and start a new one at the log end offset (writer lock held)."""
        active = self._segments.active
        if active.size == 0:
            return active
        active.seal()
        segment = LogSegment.create(
            self.directory, self._end, index_interval_bytes=self.config.index_interval_bytes, now_ms=now_ms
        )
        fsync_directory(self.directory)
        self._segments = self._segments.with_appended(segment)
        self._active_segment = segment
        self._unflushed = 0
        return segment

    def maybe_roll(self, now_ms: int) -> bool:
        with self._write_lock:
            self._check_open()
            self._now_ms = now_ms
            active = self._active
            if time_to_roll(config=self.config, segment_size=active.size, rolling_base_ms=active.rolling_base_ms, now_ms=now_ms):
                self._roll(now_ms)
                return True
            return False

    def roll(self, now_ms: int) -> bool:
        """Roll now if the active segment holds anything (admin, tests)."""
        with self._write_lock:
            self._check_open()
            self._now_ms = now_ms
            if self._active.size == 0:
                return False
            self._roll(now_ms)
            return True

    # ================================================================ reads
    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True,
        as_range: bool = False,
    ) -> ReadResult:
        rw = self._rw
        rw.acquire_shared()
        try:
            start, end = self._start, self._end
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(f"offset {offset} is outside [{start}, {end}]")
            limit = end if max_offset is None or max_offset > end else max_offset
            for segment in self._segments.from_offset(offset):
                found = segment.read(offset, max_bytes, limit, min_one, as_range=as_range)
                if found is not None:
                    data, first, next_offset = found
                    if not data:
                        break
                    return ReadResult(data, first, next_offset, start, end)
            return ReadResult(b"", end, offset, start, end)
        finally:
            rw.release_shared()

    def locate(self, offset: int) -> tuple[int, int] | None:
        """(segment base offset, byte position) of the batch holding ``offset`` (the index lookup)."""
        for segment in self._segments.from_offset(offset):
            found = segment.locate(offset)
            if found is not None:
                return segment.base_offset, found[0]
        return None

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        self._rw.acquire_shared()
        try:
            start = self._start
            for segment in self._segments:
                found = segment.find_by_timestamp(timestamp_ms, start)
                if found is not None:
                    return TimestampOffset(found[0], max(found[1], start))
            return None
        finally:
            self._rw.release_shared()

    def batches_from(self, offset: int = 0, *, chunk_bytes: int = 1 << 20) -> Iterator[tuple[BatchHeader, memoryview]]:
        """(header, stored bytes) of every batch whose last offset >= ``offset``, in offset order.

        For producer-state rebuilds and the cleaner. Reads ``chunk_bytes`` at
        a time through ``read`` and holds no lock between chunks; if
        retention moves the log start past the position, it continues from
        the new start.
        """
        position = offset
        while True:
            try:
                result = self.read(position, chunk_bytes)
            except OffsetOutOfRangeError:
                if position < self._start:
                    position = self._start
                    continue
                return
            if not result.data:
                return
            assert not isinstance(result.data, FileRange)  # read without as_range
            view = memoryview(result.data)
            for pos, fields in iter_header_fields(view):
                yield BatchHeader(*fields), view[pos : pos + fields[F_LENGTH] + LOG_OVERHEAD]
            position = result.next_offset

    # ================================================================ truncation and retention
    def truncate_to(self, offset: int) -> None:
        with self._write_lock:
            self._check_open()
            if offset >= self._end:
                return
            if offset < 0:
                raise ValueError(f"cannot truncate to negative offset {offset}")
            with self._rw.exclusive():
                segments = list(self._segments)
                if segments[0].base_offset > offset:
                    self._truncate_fully_locked(offset)
                    return
                while segments[-1].base_offset > offset:
                    segments.pop().delete()
                active = segments[-1]
                active.truncate_to(offset)
                if active.size and active.rolling_base_ms is None:
                    active.rolling_base_ms = active.first_batch_rolling_base(active.last_modified_ms)
                self._publish(segments)
                self._end = active.next_offset
                self._unflushed = 0
                if self._end < self._start:
                    self._start = self._end
                    self._start_checkpoint.write(self._start)
                self._epochs.truncate_from_end(self._end)
            fsync_directory(self.directory)

    def _truncate_fully_locked(self, offset: int) -> None:
        for segment in self._segments:
            segment.delete()
        segment = LogSegment.create(
            self.directory, offset, index_interval_bytes=self.config.index_interval_bytes, now_ms=self._now_ms
        )
        self._publish([segment])
        self._start = self._end = offset
        self._start_checkpoint.write(offset)
        self._epochs.clear()

    def advance_log_start(self, offset: int) -> None:
        with self._write_lock:
            self._check_open()
            if offset > self._end:
                raise OffsetOutOfRangeError(f"cannot move log start to {offset}, past the log end {self._end}")
            if offset <= self._start:
                return
            with self._rw.exclusive():
                self._start = offset
                self._start_checkpoint.write(offset)
                self._delete_oldest_locked(self._plan(None, None))
                self._epochs.truncate_from_start(self._start)

    def _plan(self, now_ms: int | None, high_watermark: int | None) -> int:
        return retention_deletions(
            self._segments.infos(),
            config=self.config if now_ms is not None else _ONLY_LOG_START,
            now_ms=0 if now_ms is None else now_ms,
            log_start_offset=self._start,
            log_end_offset=self._end,
            high_watermark=high_watermark,
        )

    def _delete_oldest_locked(self, count: int) -> None:
        """Delete the ``count`` oldest segments (rolling first if that is all of them)."""
        if count <= 0:
            return
        if count >= len(self._segments):
            self._roll(self._now_ms)
        segments = list(self._segments)
        doomed, kept = segments[:count], segments[count:]
        new_start = max(self._start, kept[0].base_offset)
        if new_start != self._start:
            # Checkpoint first (Kafka's order): a crash before the files go
            # leaves extra data below the start, never a start below missing data.
            self._start_checkpoint.write(new_start)
            self._start = new_start
        self._publish(kept)
        for segment in doomed:
            segment.delete()
        fsync_directory(self.directory)

    def enforce_retention(self, now_ms: int, *, high_watermark: int | None = None) -> int:
        with self._write_lock:
            self._check_open()
            self._now_ms = now_ms
            count = self._plan(now_ms, high_watermark)
            if count:
                with self._rw.exclusive():
                    self._delete_oldest_locked(count)
                    self._epochs.truncate_from_start(self._start)
            return count

    def update_config(self, config: LogConfig) -> None:
        check_config(config)
        with self._write_lock:
            self.config = config
            self._flush_policy = config.flush_messages is not None or config.flush_ms is not None

    # ================================================================ epochs and stats
    def epoch_entries(self) -> list[EpochEntry]:
        return self._epochs.entries()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._epochs.end_offset_for_epoch(epoch, self._end)

    def size_bytes(self) -> int:
        return self._segments.size_bytes()

    def segment_count(self) -> int:
        return len(self._segments)

    def segment_base_offsets(self) -> list[int]:
        return list(self._segments.bases)

    # ================================================================ compaction hooks (cleaner.py)
    def closed_segment_bases(self) -> list[int]:
        return [s.base_offset for s in self._segments.closed()]

    def segment_batches(self, base_offset: int) -> Iterator[memoryview]:
        """Stored bytes of each batch of a closed segment, read in chunks under the shared lock.

        Raises KeyError when the segment is gone (retention, truncation) before
        or during the iteration.
        """
        segment = self._segment_at(base_offset)
        version = segment.version
        position = 0
        while True:
            self._rw.acquire_shared()
            try:
                if segment.closed or segment.version != version:
                    raise KeyError(f"segment {base_offset} changed while it was read")
                chunk = segment.batches_at(position, 1 << 20)
            finally:
                self._rw.release_shared()
            if not chunk:
                return
            for data in chunk:
                yield data
                position += len(data)

    def replace_segment(self, base_offset: int, batches: Iterable[bytes | memoryview]) -> bool:
        """Swap a closed segment's content for ``batches`` (same offsets, fewer records), atomically.

        Returns False (and changes nothing) when the segment was deleted,
        truncated or became active meanwhile: retention and truncation win.

        The new bytes are written to ``<base>.log.cleaned`` and fsynced
        without holding the writer lock (appends go on). Then, under the
        writer lock: rename to ``<base>.log.swap`` (the commit point), and
        under the exclusive lock drop the old indexes, rename the swap file
        over the ``.log`` and rebuild the indexes. ``open`` deletes a
        ``.cleaned`` file and finishes a ``.swap`` one, so a crash at any
        point leaves either the old or the new segment. An empty result
        deletes the segment.
        """
        old = self._segment_at(base_offset)
        version = old.version
        if old is self._active:
            raise ValueError("the active segment is never compacted")
        written = compaction_swap.write_cleaned(self.directory, base_offset, batches)
        with self._write_lock:
            if self._closed or old not in self._segments.closed() or old.version != version:
                compaction_swap.abandon(self.directory, base_offset)
                return False
            compaction_swap.commit(self.directory, base_offset, written)
            with self._rw.exclusive():
                segments = list(self._segments)
                where = segments.index(old)
                if not written:
                    old.delete()
                    del segments[where]
                else:
                    old.close()
                    compaction_swap.install(self.directory, base_offset)
                    fresh = LogSegment.load(
                        self.directory,
                        base_offset,
                        index_interval_bytes=self.config.index_interval_bytes,
                        now_ms=self._now_ms,
                    )
                    fresh.rebuild_indexes()
                    fresh.seal()
                    fresh.last_modified_ms = old.last_modified_ms
                    segments[where] = fresh
                self._publish(segments)
                fsync_directory(self.directory)
            return True

    def _segment_at(self, base_offset: int) -> LogSegment:
        return self._segments.at(base_offset)

    # ================================================================ durability and lifecycle
    def flush(self) -> None:
        with self._write_lock:
            self._check_open()
            self._flush_locked(self._now_ms)

    def maybe_flush(self, now_ms: int) -> bool:
        """Flush if flush.ms passed since the last flush (for the broker's scheduler)."""
        with self._write_lock:
            self._check_open()
            if self.config.flush_ms is not None and self._unflushed and now_ms - self._last_flush_ms >= self.config.flush_ms:
                self._flush_locked(now_ms)
                return True
            return False

    def _flush_locked(self, now_ms: int) -> None:
        self._active.flush()
        self._unflushed = 0
        self._last_flush_ms = now_ms

    def close(self) -> None:
        with self._write_lock:
            if self._closed:
                return
            with self._rw.exclusive():
                try:
                    self._active.seal()
                finally:
                    self._closed = True
                    for segment in self._segments:
                        segment.close()

    def delete(self) -> None:
        with self._write_lock:
            with self._rw.exclusive():
                self._closed = True
                for segment in self._segments:
                    segment.close()
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> SegmentedLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SegmentedLog({str(self.directory)!r}, start={self._start}, end={self._end}, segments={len(self._segments)})"
