"""Log compaction (cleanup.policy=compact, or compact,delete): keep the newest record per key.

``LogCleaner().clean(log, now_ms)`` is one pure pass over a log's *closed*
segments (the active segment is never touched, as in Kafka); scheduling it
is the broker's job. Two passes, like Kafka's LogCleaner:

1. Build the offset map ``key -> offset of its newest record`` over all
   closed segments.
2. Rewrite each closed segment keeping a record only when it has a key, its
   offset is the one in the map, and it is not a tombstone (null value) older
   than delete.retention.ms. Keyless records are dropped (Kafka refuses them
   on compacted topics and its cleaner drops any that got in).

What a rewrite preserves (so fetches, idempotence and replication keep working):

- offsets: a surviving record keeps its offset delta, and every rebuilt
  batch keeps its base offset and its *original* lastOffsetDelta, so the
  batch still ends at the same offset (recordCount shrinks; followers accept
  this, see ``batch.check_batch(strict=False)``);
- producer id, epoch and base sequence, partition leader epoch, base
  timestamp, the transactional flag and the codec (the records are
  recompressed with it); maxTimestamp is recomputed over the survivors for
  CreateTime and kept for LogAppendTime;
- control batches (transaction markers) are kept unchanged;
- transactions (KIP-98): batches at or past ``max_offset`` (the partition's
  last stable offset: undecided transactions) are neither cleaned nor
  counted in the offset map, and batches of aborted transactions
  (``aborted``: producer id, first offset, marker offset) are removed and
  never win the map, so an aborted value never hides a committed one
  (Kafka's cleaner discards aborted records the same way);
- a batch whose records all go is dropped; a segment left empty is deleted.

Tombstone age is the record's timestamp (the batch's maxTimestamp under
LogAppendTime): a tombstone goes once ``now_ms - timestamp >
delete.retention.ms``. (Kafka >= 3.1 uses a delete horizon stamped into the
batch on the first cleaning, KIP-534; the record timestamp is the simpler
rule and what the topic config documents.)

Decompression is bounded (``max_decompressed_bytes``) against snappy bombs;
a batch that fails to decode is kept as it is and counted, never dropped.
Segments are swapped atomically by the log (``replace_segment``: write
``.cleaned``, fsync, rename); a segment deleted or truncated meanwhile is
skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from tinystream.broker.storage.base import CorruptRecordError, LogConfig, LogError
from tinystream.broker.storage.batch import (
    BatchHeader,
    Record,
    TimestampType,
    decode_records,
    encode_batch,
    encode_records,
    parse_header,
)
from tinystream.broker.storage.compression import DEFAULT_MAX_DECOMPRESSED_BYTES, Compression, compress

_log = logging.getLogger(__name__)


@runtime_checkable
class CompactableLog(Protocol):
    """What the cleaner needs from a log (SegmentedLog and MemoryLog provide it)."""

    config: LogConfig

    def closed_segment_bases(self) -> list[int]: ...

    def segment_batches(self, base_offset: int) -> Iterable[bytes | memoryview]: ...

    def replace_segment(self, base_offset: int, batches: Iterable[bytes | memoryview]) -> bool | None: ...


@dataclass(frozen=True, slots=True)
class CleanerStats:
    segments_scanned: int = 0
    segments_rewritten: int = 0
    segments_deleted: int = 0
    bytes_before: int = 0
    bytes_after: int = 0
    records_before: int = 0
    records_after: int = 0
    tombstones_dropped: int = 0
    undecodable_batches: int = 0

    def __bool__(self) -> bool:
        """True when the pass changed the log."""
        return bool(self.segments_rewritten or self.segments_deleted)


class LogCleaner:
    """Compacts logs whose cleanup.policy includes compact. Stateless between calls."""

    def __init__(self, *, max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> None:
        self.max_decompressed_bytes = max_decompressed_bytes
        self._max_offset: int | None = None
        self._aborted: dict[int, list[tuple[int, int]]] = {}

    def clean(
        self,
        log: CompactableLog,
        now_ms: int,
        *,
        max_offset: int | None = None,
        aborted: Iterable[tuple[int, int, int]] = (),
    ) -> CleanerStats:
        """One compaction pass over the closed segments of ``log`` (see the module docstring for
        ``max_offset`` and ``aborted``)."""
        if not log.config.compacted:
            return CleanerStats()
        bases = log.closed_segment_bases()
        if not bases:
            return CleanerStats()
        self._max_offset = max_offset
        self._aborted = {}
        for producer_id, first, last in aborted:
            self._aborted.setdefault(producer_id, []).append((first, last))
        latest, undecodable = self._offset_map(log, bases)
        horizon = now_ms - log.config.delete_retention_ms
        totals = dict.fromkeys(
            ("segments_rewritten", "segments_deleted", "bytes_before", "bytes_after", "records_before",
             "records_after", "tombstones_dropped"),
            0,
        )
        for base in bases:
            try:
                batches = [bytes(b) for b in log.segment_batches(base)]
            except KeyError:
                continue  # deleted by retention or truncation meanwhile
            rewritten: list[bytes] = []
            changed = False
            for data in batches:
                totals["bytes_before"] += len(data)
                kept, dropped_tombstones, records_in, records_out = self._filter_batch(data, latest, horizon)
                totals["records_before"] += records_in
                totals["records_after"] += records_out
                totals["tombstones_dropped"] += dropped_tombstones
                if kept is not data:
                    changed = True
                if kept is not None:
                    rewritten.append(kept)
                    totals["bytes_after"] += len(kept)
            if not changed:
                continue
            if log.replace_segment(base, rewritten) is False:
                continue
            totals["segments_rewritten" if rewritten else "segments_deleted"] += 1
        return CleanerStats(segments_scanned=len(bases), undecodable_batches=undecodable, **totals)

    # ------------------------------------------------------------------ passes
    def _untouchable(self, header: BatchHeader) -> bool:
        """A batch of a transaction not yet decided (at or past the last stable offset)."""
        return self._max_offset is not None and header.base_offset >= self._max_offset

    def _is_aborted(self, header: BatchHeader) -> bool:
        if not header.is_transactional or header.is_control:
            return False
        return any(first <= header.base_offset <= last for first, last in self._aborted.get(header.producer_id, ()))

    def _offset_map(self, log: CompactableLog, bases: list[int]) -> tuple[dict[bytes, int], int]:
        latest: dict[bytes, int] = {}
        undecodable = 0
        for base in bases:
            try:
                for data in log.segment_batches(base):
                    header = parse_header(data)
                    if header.is_control or self._untouchable(header) or self._is_aborted(header):
                        continue
                    try:
                        records = decode_records(data, max_decompressed_bytes=self.max_decompressed_bytes)
                    except (CorruptRecordError, LogError) as exc:
                        undecodable += 1
                        _log.warning("cleaner: batch at offset %d is not decodable (%s); kept as is", header.base_offset, exc)
                        continue
                    for index, record in enumerate(records):
                        if record.key is not None:
                            latest[record.key] = header.base_offset + _delta(record, index)
            except KeyError:
                continue
        return latest, undecodable

    def _filter_batch(
        self, data: bytes, latest: dict[bytes, int], horizon: int
    ) -> tuple[bytes | None, int, int, int]:
        """(batch to keep — ``data`` itself when unchanged, None when empty —, tombstones dropped, records in, out)."""
        header = parse_header(data)
        if header.is_control or self._untouchable(header):
            return data, 0, header.record_count, header.record_count
        if self._is_aborted(header):
            return None, 0, header.record_count, 0
        try:
            records = decode_records(data, max_decompressed_bytes=self.max_decompressed_bytes)
        except (CorruptRecordError, LogError):
            return data, 0, header.record_count, header.record_count
        log_append_time = header.timestamp_type is TimestampType.LOG_APPEND_TIME
        survivors: list[Record] = []
        tombstones = 0
        for index, record in enumerate(records):
            if record.key is None or latest.get(record.key) != header.base_offset + _delta(record, index):
                continue
            if record.value is None:
                timestamp = header.max_timestamp if log_append_time else header.base_timestamp + record.timestamp_delta
                if timestamp < horizon:
                    tombstones += 1
                    continue
            survivors.append(record)
        if len(survivors) == len(records):
            return data, 0, len(records), len(records)
        if not survivors:
            return None, tombstones, len(records), 0
        return _rebuild(header, survivors), tombstones, len(records), len(survivors)


def _rebuild(header: BatchHeader, records: list[Record]) -> bytes:
    """A batch holding ``records`` with ``header``'s offsets, producer fields and codec."""
    section = encode_records(records)
    codec = header.compression
    if codec is not Compression.NONE:
        section = compress(codec, section)
    if header.timestamp_type is TimestampType.LOG_APPEND_TIME:
        max_timestamp = header.max_timestamp
    else:
        max_timestamp = header.base_timestamp + max(r.timestamp_delta for r in records)
    return encode_batch(
        section,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        attributes=header.attributes,
        last_offset_delta=header.last_offset_delta,
        base_timestamp=header.base_timestamp,
        max_timestamp=max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        record_count=len(records),
    )


def clean(
    log: CompactableLog, now_ms: int, *, max_offset: int | None = None, aborted: Iterable[tuple[int, int, int]] = ()
) -> CleanerStats:
    """One compaction pass with default settings (truthy when the log changed)."""
    return LogCleaner().clean(log, now_ms, max_offset=max_offset, aborted=aborted)


def _delta(record: Record, index: int) -> int:
    """A decoded record's offset delta (Record.offset_delta is None only while building: then its index)."""
    return index if record.offset_delta is None else record.offset_delta
