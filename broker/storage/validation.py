"""What every PartitionLog checks before it writes, and what it then writes.

Pure functions over byte buffers; MemoryLog and SegmentedLog both call them,
so both refuse exactly the same batches with the same errors.

Leader path (``prepare_leader_append``), in Kafka's order
(LogValidator / UnifiedLog.analyzeAndValidateRecords):
size against max.message.bytes and segment.bytes (MESSAGE_TOO_LARGE), then
header and CRC (CORRUPT_MESSAGE), then producer counts (INVALID_RECORD).
Nothing is copied: the result is a new 16- or 61-byte head plus a view of
the rest of the caller's buffer.

Follower path (``split_replicated``): every complete batch is validated
(CRC, non-strict counts since compacted batches have offset gaps); offsets
must not go backwards; the first base offset must not be below the log end
offset. A trailing incomplete batch is ignored (a size-limited fetch may cut
the last batch, KIP-74).
"""

from __future__ import annotations

from typing import NamedTuple

from .base import LogConfig, RecordTooLargeError, UnexpectedAppendOffsetError
from .batch import (
    F_BASE_OFFSET,
    F_LAST_OFFSET_DELTA,
    F_LENGTH,
    F_MAX_TIMESTAMP,
    LOG_OVERHEAD,
    check_batch,
    iter_header_fields,
    rewrite_header,
)

LOG_APPEND_TIME = "LogAppendTime"


class LeaderAppend(NamedTuple):
    """A validated leader batch, ready to write as ``head + tail``."""

    head: bytes
    tail: memoryview
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless LogAppendTime


def prepare_leader_append(
    batch: bytes | bytearray | memoryview,
    *,
    config: LogConfig,
    base_offset: int,
    leader_epoch: int,
    now_ms: int,
) -> LeaderAppend:
    view = batch if isinstance(batch, memoryview) else memoryview(batch)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    size = len(view)
    if size > config.max_message_bytes:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}")
    if size > config.segment_bytes:
        raise RecordTooLargeError(f"batch of {size} bytes exceeds segment.bytes {config.segment_bytes}")
    fields = check_batch(view, strict=True)
    log_append_time = now_ms if config.message_timestamp_type == LOG_APPEND_TIME else None
    head = rewrite_header(view, base_offset=base_offset, leader_epoch=leader_epoch, log_append_time=log_append_time)
    return LeaderAppend(
        head,
        view[len(head) :],
        size,
        base_offset,
        base_offset + fields[F_LAST_OFFSET_DELTA],
        fields[F_MAX_TIMESTAMP] if log_append_time is None else log_append_time,
        -1 if log_append_time is None else log_append_time,
    )


def split_replicated(
    batches: bytes | bytearray | memoryview, *, config: LogConfig, log_end_offset: int
) -> tuple[memoryview, list[tuple[int, tuple]]]:
    """Validate a follower's buffer; (view, [(position, header fields), ...]) of its complete batches."""
    view = batches if isinstance(batches, memoryview) else memoryview(batches)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    parsed: list[tuple[int, tuple]] = []
    expected = log_end_offset
    for pos, fields in iter_header_fields(view, verify=True):
        size = fields[F_LENGTH] + LOG_OVERHEAD
        if size > config.segment_bytes:
            raise RecordTooLargeError(f"batch of {size} bytes exceeds segment.bytes {config.segment_bytes}")
        if fields[F_BASE_OFFSET] < expected:
            raise UnexpectedAppendOffsetError(
                f"batch at offset {fields[F_BASE_OFFSET]} is below the expected offset {expected}"
            )
        expected = fields[F_BASE_OFFSET] + fields[F_LAST_OFFSET_DELTA] + 1
        parsed.append((pos, fields))
    return view, parsed
