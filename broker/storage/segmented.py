"""SegmentedLog: a partition log as a directory of segment files (the default store).

Directory layout (one per partition, ``<topic>-<partition>/``)::

    00000000000000000000.log / .index / .timeindex   segment at base offset 0
    00000000000000001234.log / .index / .timeindex   the next one ...
    leader-epoch-checkpoint        epoch -> start offset (leader_epoch.py)
    log-start-offset-checkpoint    the log start offset (checkpoint.py)
    *.log.cleaned / *.log.swap     compaction output in flight (see replace_segment)

Invariants: segment base offsets increase; the last segment is the active
one and takes every append; offsets inside a segment are below the next
segment's base; log_start_offset <= log_end_offset; every closed segment
was fsynced (with its indexes) when it was rolled.

Opening (``SegmentedLog.open``) recovers: leftovers of an interrupted
compaction are finished or dropped; closed segments get Kafka's cheap index
sanity check (and a rebuild when it fails); the active segment is scanned
from its last index entry and a torn or corrupt tail is cut off. The log
start offset is the checkpoint's (the first segment's base when there is
none: it may lie below the first segment after compaction removed emptied
segments); the epoch cache drops entries outside [start, end].

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

import bisect
import dataclasses
import logging
import os
import shutil
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

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
from tinystream.broker.storage.checkpoint import CheckpointFormatError, OffsetCheckpoint, fsync_directory
from tinystream.broker.storage.leader_epoch import LEADER_EPOCH_CHECKPOINT, LeaderEpochCache, LeaderEpochCheckpoint
from tinystream.broker.storage.policy import MAX_RELATIVE_OFFSET, SegmentInfo, retention_deletions, time_to_roll
from tinystream.broker.storage.rwlock import SharedExclusiveLock
from tinystream.broker.storage.segment import (
    CLEANED_SUFFIX,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_SUFFIX,
    TIME_INDEX_SUFFIX,
    LogSegment,
    parse_segment_file_name,
    segment_file_name,
)
from tinystream.broker.storage.validation import prepare_leader_append, split_replicated

LOG_START_CHECKPOINT = "log-start-offset-checkpoint"
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
    def open(cls, directory: str | os.PathLike, config: LogConfig | None = None, *, now_ms: int) -> SegmentedLog:
        """Open (or create) the log in ``directory``, recovering it if needed."""
        config = config or LogConfig()
        _check_config(config)
        path = Path(directory)
        try:
            path.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LogStorageError(f"cannot create {path}: {exc.strerror or exc}") from exc
        _finish_interrupted_compaction(path)
        bases = sorted(b for b in (parse_segment_file_name(p.name) for p in path.iterdir()) if b is not None)
        _delete_orphan_indexes(path, set(bases))
        start_checkpoint = OffsetCheckpoint(path / LOG_START_CHECKPOINT)
        checkpointed_start = start_checkpoint.read()
        interval = config.index_interval_bytes
        segments: list[LogSegment] = []
        try:
            for base in bases[:-1]:
                segment = LogSegment.load(path, base, index_interval_bytes=interval, now_ms=now_ms)
                segments.append(segment)
                if not segment.indexes_look_sane():
                    _log.warning("%s: rebuilding indexes of segment %d", path, base)
                    cut = segment.rebuild_indexes()
                    if cut:
                        _log.error("%s: closed segment %d had %d corrupt bytes, cut", path, base, cut)
                    segment.seal()
            if bases:
                active = LogSegment.load(path, bases[-1], index_interval_bytes=interval, now_ms=now_ms)
                segments.append(active)
                cut = active.recover()
                if cut:
                    _log.warning("%s: cut %d bytes of torn or corrupt tail from segment %d", path, cut, bases[-1])
                active.rolling_base_ms = active.first_batch_rolling_base(now_ms)
            else:
                first = checkpointed_start or 0
                segments.append(LogSegment.create(path, first, index_interval_bytes=interval, now_ms=now_ms))
        except BaseException:
            for segment in segments:
                segment.close()
            raise
        end = segments[-1].next_offset
        # The checkpoint is the truth when present: it may lie below the first
        # segment when compaction emptied and removed leading segments (an
        # offset gap, like any other compacted gap). Without one, the first
        # segment's base.
        start = segments[0].base_offset if checkpointed_start is None else checkpointed_start
        if start > end:
            # The checkpoint promised offsets the data no longer reaches (lost unflushed tail):
            # restart empty at the promised start rather than reuse offsets.
            _log.warning("%s: log start %d is past the recovered end %d; restarting at %d", path, start, end, start)
            for segment in segments:
                segment.delete()
            segments = [LogSegment.create(path, start, index_interval_bytes=interval, now_ms=now_ms)]
            end = start
        epochs = _load_epochs(path, segments)
        log = cls(
            path,
            config,
            segments,
            log_start_offset=start,
            epochs=epochs,
            start_checkpoint=start_checkpoint,
            now_ms=now_ms,
        )
        # Entries past the recovered end are gone with the data; one starting
        # exactly at the end is legitimate (the log start moved there).
        epochs.truncate_from_end(log._end + 1)
        epochs.truncate_from_start(start)
        if checkpointed_start != start:
            start_checkpoint.write(start)
        return log

    # ================================================================ properties
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    def _publish(self, segments: list[LogSegment]) -> None:
        """Replace the segment list readers see, in one assignment."""
        self._view = (tuple(s.base_offset for s in segments), tuple(segments))
        self._active_segment = segments[-1]

    @property
    def _active(self) -> LogSegment:
        return self._view[1][-1]

    def _check_open(self) -> None:
        if self._closed:
            raise LogStorageError(f"log {self.directory} is closed")

    # ================================================================ appends
    def append(self, batch: bytes | memoryview, *, leader_epoch: int, now_ms: int) -> AppendResult:
        # The produce hot path, kept flat on purpose: validation, the roll
        # check (policy.roll_reason's rules), one pwritev, bookkeeping. Each
        # helper call or attribute chain shows in the 16 KiB benchmark, where
        # the Python work is about a third of the time. The lock is taken with
        # acquire/release: ``with`` costs twice as much for a plain Lock.
        lock = self._write_lock
        lock.acquire()
        try:
            if self._closed:
                raise LogStorageError(f"log {self.directory} is closed")
            config = self.config
            head, tail, size, base_offset, last_offset, max_timestamp, log_append_time = prepare_leader_append(
                batch, config, self._end, leader_epoch, now_ms
            )
            active = self._active_segment
            used = active._tail[0]
            if used and (
                used + size > config.segment_bytes
                or (active.rolling_base_ms is not None and now_ms - active.rolling_base_ms > config.segment_ms)
                or last_offset - active.base_offset > MAX_RELATIVE_OFFSET
            ):
                active = self._roll(now_ms)
            position = active.append(head, tail, size, base_offset, last_offset, max_timestamp, now_ms)
            self._end = last_offset + 1
            if leader_epoch > self._epochs.latest_epoch:
                self._epochs.assign(leader_epoch, base_offset)
            if self._flush_policy:
                self._after_append(last_offset - base_offset + 1, now_ms)
            else:
                self._now_ms = now_ms
            # AppendResult(...) without its frozen __init__ (see _fast_result_factory).
            result = _new_result(AppendResult)
            _set_base(result, base_offset)
            _set_last(result, last_offset)
            _set_max_ts(result, max_timestamp)
            _set_append_time(result, log_append_time)
            _set_position(result, position)
            return result
        finally:
            lock.release()

    def append_replicated(self, batches: bytes | memoryview) -> int:
        with self._write_lock:
            self._check_open()
            view, parsed = split_replicated(batches, config=self.config, log_end_offset=self._end)
            if not parsed:
                return self._end
            now_ms = self._now_ms
            run: list[tuple[int, tuple]] = []
            active = self._view[1][-1]
            run_bytes = 0
            records = 0
            for pos, fields in parsed:
                size = fields[F_LENGTH] + LOG_OVERHEAD
                last = fields[F_BASE_OFFSET] + fields[F_LAST_OFFSET_DELTA]
                used = active.size + run_bytes
                if used and (
                    used + size > self.config.segment_bytes
                    or (active.rolling_base_ms is not None and now_ms - active.rolling_base_ms > self.config.segment_ms)
                    or last - active.base_offset > MAX_RELATIVE_OFFSET
                ):
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

    def _write_run(self, segment: LogSegment, view: memoryview, run: list[tuple[int, tuple]], now_ms: int) -> None:
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
        active = self._view[1][-1]
        if active.size == 0:
            return active
        active.seal()
        segment = LogSegment.create(
            self.directory, self._end, index_interval_bytes=self.config.index_interval_bytes, now_ms=now_ms
        )
        fsync_directory(self.directory)
        self._publish([*self._view[1], segment])
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
    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True) -> ReadResult:
        rw = self._rw
        rw.acquire_shared()
        try:
            start, end = self._start, self._end
            if offset < start or offset > end:
                raise OffsetOutOfRangeError(f"offset {offset} is outside [{start}, {end}]")
            limit = end if max_offset is None or max_offset > end else max_offset
            bases, segments = self._view
            index = bisect.bisect_right(bases, offset) - 1
            if index < 0:
                index = 0
            for segment in segments[index:]:
                found = segment.read(offset, max_bytes, limit, min_one)
                if found is not None:
                    data, first, next_offset = found
                    if not data:
                        break
                    return _read_result(data, first, next_offset, start, end)
            return _read_result(b"", end, offset, start, end)
        finally:
            rw.release_shared()

    def locate(self, offset: int) -> tuple[int, int] | None:
        """(segment base offset, byte position) of the batch holding ``offset`` (the index lookup)."""
        bases, segments = self._view
        index = max(bisect.bisect_right(bases, offset) - 1, 0)
        for segment in segments[index:]:
            found = segment.locate(offset)
            if found is not None:
                return segment.base_offset, found[0]
        return None

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        self._rw.acquire_shared()
        try:
            start = self._start
            for segment in self._view[1]:
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
                segments = list(self._view[1])
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
        for segment in self._view[1]:
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
            [SegmentInfo(s.base_offset, s.size, s.max_timestamp, s.last_modified_ms) for s in self._view[1]],
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
        if count >= len(self._view[1]):
            self._roll(self._now_ms)
        segments = list(self._view[1])
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
        _check_config(config)
        with self._write_lock:
            self.config = config
            self._flush_policy = config.flush_messages is not None or config.flush_ms is not None

    # ================================================================ epochs and stats
    def epoch_entries(self) -> list[EpochEntry]:
        return self._epochs.entries()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._epochs.end_offset_for_epoch(epoch, self._end)

    def size_bytes(self) -> int:
        return sum(s.size for s in self._view[1])

    def segment_count(self) -> int:
        return len(self._view[1])

    def segment_base_offsets(self) -> list[int]:
        return list(self._view[0])

    # ================================================================ compaction hooks (cleaner.py)
    def closed_segment_bases(self) -> list[int]:
        return list(self._view[0][:-1])

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
        cleaned = self.directory / segment_file_name(base_offset, LOG_SUFFIX + CLEANED_SUFFIX)
        swap = self.directory / segment_file_name(base_offset, LOG_SUFFIX + SWAP_SUFFIX)
        written = 0
        try:
            with open(cleaned, "wb") as handle:
                for data in batches:
                    handle.write(data)
                    written += len(data)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:
            cleaned.unlink(missing_ok=True)
            raise LogStorageError(f"cannot write compacted segment {base_offset}: {exc.strerror or exc}") from exc
        except BaseException:
            cleaned.unlink(missing_ok=True)
            raise
        with self._write_lock:
            bases, segments = self._view
            if self._closed or old not in segments[:-1] or old.version != version:
                cleaned.unlink(missing_ok=True)
                return False
            try:
                if written:
                    os.replace(cleaned, swap)
                    fsync_directory(self.directory)
                else:
                    cleaned.unlink()
            except OSError as exc:
                cleaned.unlink(missing_ok=True)
                raise LogStorageError(f"cannot commit compacted segment {base_offset}: {exc.strerror or exc}") from exc
            with self._rw.exclusive():
                segments = list(self._view[1])
                where = segments.index(old)
                if not written:
                    old.delete()
                    del segments[where]
                else:
                    old.close()
                    old.index.delete_file()
                    old.time_index.delete_file()
                    os.replace(swap, old.log_path)
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
        bases, segments = self._view
        index = bisect.bisect_left(bases, base_offset)
        if index == len(bases) or bases[index] != base_offset:
            raise KeyError(f"no segment at base offset {base_offset}")
        return segments[index]

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
                    for segment in self._view[1]:
                        segment.close()

    def delete(self) -> None:
        with self._write_lock:
            with self._rw.exclusive():
                self._closed = True
                for segment in self._view[1]:
                    segment.close()
                shutil.rmtree(self.directory, ignore_errors=True)

    def __enter__(self) -> SegmentedLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"SegmentedLog({str(self.directory)!r}, start={self._start}, end={self._end}, segments={len(self._view[1])})"


# ==================================================================== hot-path helpers
def _slot_setters(cls: type, names: tuple[str, ...]) -> tuple:
    """The slot descriptors' setters of a frozen slots dataclass, in ``names`` order.

    A frozen dataclass's generated ``__init__`` sets each field through
    ``object.__setattr__``: for AppendResult that costs about as much as
    the CRC of a 4 KiB batch. ``object.__new__`` plus the slot setters build
    the same object (equal, hashable, immutable to callers) in half the time.
    Fails at import if the class stops having exactly these slots, rather
    than build half-filled results.
    """
    fields = tuple(f.name for f in dataclasses.fields(cls))
    if fields != names or getattr(cls, "__slots__", None) != names:
        raise ImportError(f"{cls.__name__} fields {fields} are not the slots {names} this module sets")
    return tuple(getattr(cls, name).__set__ for name in names)


_new_result = object.__new__
_set_base, _set_last, _set_max_ts, _set_append_time, _set_position = _slot_setters(
    AppendResult, ("base_offset", "last_offset", "max_timestamp", "log_append_time", "position")
)
_set_data, _set_first, _set_next, _set_start, _set_end = _slot_setters(
    ReadResult, ("data", "first_offset", "next_offset", "log_start_offset", "log_end_offset")
)


def _read_result(data: bytes | memoryview, first_offset: int, next_offset: int, start: int, end: int) -> ReadResult:
    """ReadResult(...) through the slot setters (see ``_slot_setters``)."""
    result = _new_result(ReadResult)
    _set_data(result, data)
    _set_first(result, first_offset)
    _set_next(result, next_offset)
    _set_start(result, start)
    _set_end(result, end)
    return result


# ==================================================================== open-time helpers
def _check_config(config: LogConfig) -> None:
    """Settings the file format cannot hold (Kafka bounds them the same way)."""
    if not 0 < config.segment_bytes <= MAX_RELATIVE_OFFSET:
        raise ValueError(f"segment.bytes must be in [1, {MAX_RELATIVE_OFFSET}], not {config.segment_bytes}")
    if config.index_interval_bytes < 0:
        raise ValueError(f"index.interval.bytes must be >= 0, not {config.index_interval_bytes}")
    if config.flush_messages is not None and config.flush_messages < 1:
        raise ValueError(f"flush.messages must be >= 1, not {config.flush_messages}")



def _finish_interrupted_compaction(directory: Path) -> None:
    """Drop half-written compaction output; complete a committed swap; drop temp files."""
    for path in directory.iterdir():
        name = path.name
        if name.endswith(CLEANED_SUFFIX) or name.endswith(".tmp") or name.endswith(".deleted"):
            path.unlink(missing_ok=True)
    for path in directory.iterdir():
        if path.name.endswith(LOG_SUFFIX + SWAP_SUFFIX):
            base = parse_segment_file_name(path.name[: -len(SWAP_SUFFIX)])
            if base is None:
                continue
            (directory / segment_file_name(base, INDEX_SUFFIX)).unlink(missing_ok=True)
            (directory / segment_file_name(base, TIME_INDEX_SUFFIX)).unlink(missing_ok=True)
            os.replace(path, directory / segment_file_name(base, LOG_SUFFIX))
            _log.warning("%s: finished an interrupted compaction swap of segment %d", directory, base)
    fsync_directory(directory)


def _delete_orphan_indexes(directory: Path, bases: set[int]) -> None:
    for path in directory.iterdir():
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            if path.name.endswith(suffix) and len(path.name) == 20 + len(suffix):
                try:
                    base = int(path.name[:20])
                except ValueError:
                    continue
                if base not in bases:
                    path.unlink(missing_ok=True)


def _load_epochs(directory: Path, segments: list[LogSegment]) -> LeaderEpochCache:
    """The epoch checkpoint, or (missing or corrupt) a rebuild from batch headers."""
    checkpoint = LeaderEpochCheckpoint(directory / LEADER_EPOCH_CHECKPOINT)
    try:
        entries = checkpoint.read()
    except CheckpointFormatError as exc:
        _log.warning("%s: leader-epoch checkpoint unreadable (%s); rebuilding from batch headers", directory, exc)
        entries = None
    if entries is not None:
        return LeaderEpochCache(entries, checkpoint=checkpoint)
    cache = LeaderEpochCache()
    for segment in segments:
        for fields, _data in segment.iter_batches():
            if fields[F_LEADER_EPOCH] > cache.latest_epoch:
                cache.assign(fields[F_LEADER_EPOCH], fields[F_BASE_OFFSET])
    checkpoint.write(cache.entries())
    return LeaderEpochCache(cache.entries(), checkpoint=checkpoint)
