"""MemoryLog: the PartitionLog contract held in Python lists (tests, and the model).

It keeps segments as lists of stored batch bytes so that everything the
contract exposes (segment count, retention by segment, reads that stop at a
segment's end, roll timing) matches SegmentedLog exactly: both call the same
pure functions (``validation``, ``policy``, ``leader_epoch``). The property
tests run random operation sequences against both and compare.

Semantics both implementations share (the contract's fine print):

- Offsets: ``log_start_offset <= log_end_offset`` always. A batch occupies
  [base, base + lastOffsetDelta]; a read at any offset in it returns it.
- ``read``: batches of *one* segment, from the first batch whose last offset
  is >= ``offset`` (moving to later segments past empty ones); it stops
  before a batch starting at or past ``max_offset`` and before passing
  ``max_bytes`` (the first batch is always whole when ``min_one``). An empty
  result has ``first_offset = log_end_offset`` and ``next_offset = offset``.
- ``truncate_to(o)`` with o < log end: drops every batch whose last offset is
  >= o (a batch straddling ``o`` goes whole), so the new log end offset is
  the end of the last kept batch (<= o); if the first segment starts above
  ``o`` the log restarts empty at ``o`` (Kafka's truncateFullyAndStartAt).
  log_start_offset becomes min(log_start_offset, new log end offset).
- ``advance_log_start(o)``: o above the log end offset raises
  OffsetOutOfRangeError; a lower o is a no-op; segments wholly below o go.
- ``offset_for_timestamp(ts)``: the first batch at or above log start whose
  maxTimestamp >= ts; answers (its maxTimestamp, max(its base, log start)).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from tinystream.broker.storage.base import (
    AppendResult,
    EpochEntry,
    LogConfig,
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
    F_MAX_TIMESTAMP,
    LOG_OVERHEAD,
    BatchHeader,
    parse_header,
)
from tinystream.broker.storage.leader_epoch import LeaderEpochCache
from tinystream.broker.storage.policy import SegmentInfo, retention_deletions, roll_reason, time_to_roll
from tinystream.broker.storage.validation import LeaderAppend, prepare_leader_append, split_replicated


@dataclass(slots=True)
class _StoredBatch:
    base_offset: int
    last_offset: int
    max_timestamp: int
    data: bytes


@dataclass(slots=True)
class _MemorySegment:
    base_offset: int
    created_ms: int
    batches: list[_StoredBatch] = field(default_factory=list)
    size: int = 0
    last_modified_ms: int = 0
    rolling_base_ms: int | None = None

    @property
    def max_timestamp(self) -> int:
        return max((b.max_timestamp for b in self.batches), default=-1)

    def info(self) -> SegmentInfo:
        return SegmentInfo(self.base_offset, self.size, self.max_timestamp, self.last_modified_ms)

    def add(self, batch: _StoredBatch, now_ms: int) -> None:
        if not self.batches:
            self.rolling_base_ms = batch.max_timestamp if batch.max_timestamp >= 0 else now_ms
        self.batches.append(batch)
        self.size += len(batch.data)
        self.last_modified_ms = now_ms


class MemoryLog(PartitionLog):
    """An in-memory partition log with SegmentedLog's exact semantics."""

    def __init__(self, config: LogConfig | None = None, *, now_ms: int = 0, log_start_offset: int = 0) -> None:
        self.config = config or LogConfig()
        self._segments = [_MemorySegment(log_start_offset, now_ms, last_modified_ms=now_ms)]
        self._start = log_start_offset
        self._end = log_start_offset
        self._epochs = LeaderEpochCache()
        self._now_ms = now_ms  # last clock reading seen (for segments created without one)

    # ------------------------------------------------------------ properties
    @property
    def log_start_offset(self) -> int:
        return self._start

    @property
    def log_end_offset(self) -> int:
        return self._end

    # ------------------------------------------------------------ appends
    def append(
        self, batch: bytes | memoryview, *, leader_epoch: int, now_ms: int, header: tuple[int, ...] | None = None
    ) -> AppendResult:
        prepared = LeaderAppend._make(prepare_leader_append(batch, self.config, self._end, leader_epoch, now_ms, header))
        self._now_ms = now_ms
        self._maybe_roll_for(prepared.size, prepared.last_offset, now_ms)
        segment = self._segments[-1]
        position = segment.size
        data = prepared.head + bytes(prepared.tail)
        segment.add(_StoredBatch(prepared.base_offset, prepared.last_offset, prepared.max_timestamp, data), now_ms)
        self._end = prepared.last_offset + 1
        if leader_epoch > self._epochs.latest_epoch:
            self._epochs.assign(leader_epoch, prepared.base_offset)
        return AppendResult(
            prepared.base_offset, prepared.last_offset, prepared.max_timestamp, prepared.log_append_time, position
        )

    def append_replicated(self, batches: bytes | memoryview) -> int:
        view, parsed = split_replicated(batches, config=self.config, log_end_offset=self._end)
        now_ms = self._now_ms
        for pos, fields in parsed:
            size = fields[F_LENGTH] + LOG_OVERHEAD
            base = fields[F_BASE_OFFSET]
            last = base + fields[F_LAST_OFFSET_DELTA]
            self._maybe_roll_for(size, last, now_ms)
            self._segments[-1].add(_StoredBatch(base, last, fields[F_MAX_TIMESTAMP], bytes(view[pos : pos + size])), now_ms)
            self._end = last + 1
            if fields[F_LEADER_EPOCH] > self._epochs.latest_epoch:
                self._epochs.assign(fields[F_LEADER_EPOCH], base)
        return self._end

    def _maybe_roll_for(self, size: int, last_offset: int, now_ms: int) -> None:
        active = self._segments[-1]
        reason = roll_reason(
            config=self.config,
            segment_base=active.base_offset,
            segment_size=active.size,
            rolling_base_ms=active.rolling_base_ms,
            batch_size=size,
            batch_last_offset=last_offset,
            now_ms=now_ms,
        )
        if reason is not None:
            self._roll(now_ms)

    def _roll(self, now_ms: int) -> None:
        self._segments.append(_MemorySegment(self._end, now_ms, last_modified_ms=now_ms))

    # ------------------------------------------------------------ reads
    def _locate(self, offset: int) -> tuple[int, int] | None:
        """(segment index, batch index) of the first batch with last offset >= offset."""
        index = 0
        for i, segment in enumerate(self._segments):
            if segment.base_offset <= offset:
                index = i
        for s in range(index, len(self._segments)):
            for b, stored in enumerate(self._segments[s].batches):
                if stored.last_offset >= offset:
                    return s, b
        return None

    def read(
        self, offset: int, max_bytes: int, *, max_offset: int | None = None, min_one: bool = True,
        as_range: bool = False,  # no files here: always bytes
    ) -> ReadResult:
        if offset < self._start or offset > self._end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is outside [{self._start}, {self._end}]"
            )
        limit = self._end if max_offset is None else min(max_offset, self._end)
        found = self._locate(offset)
        chunks: list[bytes] = []
        first = next_offset = None
        if found is not None:
            s, b = found
            total = 0
            for stored in self._segments[s].batches[b:]:
                if stored.base_offset >= limit:
                    break
                size = len(stored.data)
                if total + size > max_bytes and not (min_one and not chunks):
                    break
                chunks.append(stored.data)
                total += size
                if first is None:
                    first = stored.base_offset
                next_offset = stored.last_offset + 1
        if not chunks or first is None or next_offset is None:
            return ReadResult(b"", self._end, offset, self._start, self._end)
        return ReadResult(b"".join(chunks), first, next_offset, self._start, self._end)

    def offset_for_timestamp(self, timestamp_ms: int) -> TimestampOffset | None:
        for segment in self._segments:
            for stored in segment.batches:
                if stored.last_offset >= self._start and stored.max_timestamp >= timestamp_ms:
                    return TimestampOffset(stored.max_timestamp, max(stored.base_offset, self._start))
        return None

    def batches_from(self, offset: int = 0) -> Iterator[tuple[BatchHeader, bytes]]:
        """(header, stored bytes) of every batch whose last offset >= offset, in offset order."""
        for segment in self._segments:
            for stored in segment.batches:
                if stored.last_offset >= offset:
                    yield parse_header(stored.data), stored.data

    # ------------------------------------------------------------ truncation and retention
    def truncate_to(self, offset: int) -> None:
        if offset >= self._end:
            return
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if self._segments[0].base_offset > offset:
            self._segments = [_MemorySegment(offset, self._now_ms, last_modified_ms=self._now_ms)]
            self._start = self._end = offset
            self._epochs.clear()
            return
        while self._segments[-1].base_offset > offset:
            self._segments.pop()
        active = self._segments[-1]
        kept = [b for b in active.batches if b.last_offset < offset]
        active.batches = kept
        active.size = sum(len(b.data) for b in kept)
        if not kept:
            active.rolling_base_ms = None
        self._end = kept[-1].last_offset + 1 if kept else active.base_offset
        self._start = min(self._start, self._end)
        self._epochs.truncate_from_end(self._end)

    def advance_log_start(self, offset: int) -> None:
        if offset > self._end:
            raise OffsetOutOfRangeError(f"cannot move log start to {offset}, past the log end {self._end}")
        if offset <= self._start:
            return
        self._start = offset
        self._delete_oldest(self._plan(now_ms=None))
        self._epochs.truncate_from_start(self._start)

    def _plan(self, now_ms: int | None, high_watermark: int | None = None) -> int:
        config = self.config if now_ms is not None else _ONLY_LOG_START
        return retention_deletions(
            [s.info() for s in self._segments],
            config=config,
            now_ms=0 if now_ms is None else now_ms,
            log_start_offset=self._start,
            log_end_offset=self._end,
            high_watermark=high_watermark,
        )

    def _delete_oldest(self, count: int) -> None:
        if count <= 0:
            return
        if count >= len(self._segments):
            self._roll(self._now_ms)
        del self._segments[:count]
        self._start = max(self._start, self._segments[0].base_offset)

    def enforce_retention(self, now_ms: int, *, high_watermark: int | None = None) -> int:
        self._now_ms = now_ms
        count = self._plan(now_ms, high_watermark)
        if count:
            self._delete_oldest(count)
            self._epochs.truncate_from_start(self._start)
        return count

    def maybe_roll(self, now_ms: int) -> bool:
        self._now_ms = now_ms
        active = self._segments[-1]
        if time_to_roll(config=self.config, segment_size=active.size, rolling_base_ms=active.rolling_base_ms, now_ms=now_ms):
            self._roll(now_ms)
            return True
        return False

    def roll(self, now_ms: int) -> bool:
        """Roll now if the active segment holds anything (tests, admin)."""
        self._now_ms = now_ms
        if self._segments[-1].size == 0:
            return False
        self._roll(now_ms)
        return True

    def update_config(self, config: LogConfig) -> None:
        self.config = config

    # ------------------------------------------------------------ epochs and stats
    def epoch_entries(self) -> list[EpochEntry]:
        return self._epochs.entries()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        return self._epochs.end_offset_for_epoch(epoch, self._end)

    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def segment_count(self) -> int:
        return len(self._segments)

    def segment_base_offsets(self) -> list[int]:
        return [s.base_offset for s in self._segments]

    # ------------------------------------------------------------ compaction hooks (see cleaner.py)
    def closed_segment_bases(self) -> list[int]:
        return [s.base_offset for s in self._segments[:-1]]

    def segment_batches(self, base_offset: int) -> list[bytes]:
        return [b.data for b in self._segment_at(base_offset).batches]

    def replace_segment(self, base_offset: int, batches: Iterable[bytes | memoryview]) -> None:
        segment = self._segment_at(base_offset)
        if segment is self._segments[-1]:
            raise ValueError("the active segment is never compacted")
        stored = []
        for data in batches:
            header = parse_header(data)
            stored.append(_StoredBatch(header.base_offset, header.last_offset, header.max_timestamp, bytes(data)))
        if not stored:
            self._segments.remove(segment)
            return
        segment.batches = stored
        segment.size = sum(len(b.data) for b in stored)

    def _segment_at(self, base_offset: int) -> _MemorySegment:
        for segment in self._segments:
            if segment.base_offset == base_offset:
                return segment
        raise KeyError(f"no segment at base offset {base_offset}")

    # ------------------------------------------------------------ lifecycle
    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def delete(self) -> None:
        self._segments = [_MemorySegment(0, self._now_ms)]
        self._start = self._end = 0
        self._epochs.clear()


_ONLY_LOG_START = LogConfig(cleanup_policy="compact")
