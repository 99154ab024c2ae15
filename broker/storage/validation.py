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

import struct
from typing import Any, NamedTuple

from crc32c import crc32c

from tinystream.broker.storage.base import LogConfig, RecordTooLargeError, UnexpectedAppendOffsetError
from tinystream.broker.storage.batch import (
    BATCH_HEADER_SIZE,
    BATCH_PREFIX,
    CODEC_MASK,
    CRC_START,
    F_ATTRIBUTES,
    F_BASE_OFFSET,
    F_CRC,
    F_LAST_OFFSET_DELTA,
    F_LENGTH,
    F_MAGIC,
    F_MAX_TIMESTAMP,
    F_RECORD_COUNT,
    LOG_OVERHEAD,
    MAGIC,
    check_batch,
    iter_header_fields,
    rewrite_header,
)
from tinystream.broker.storage.compression import Compression

LOG_APPEND_TIME = "LogAppendTime"
_ATTRS = {"max.message.bytes": "max_message_bytes", "segment.bytes": "segment_bytes"}
MAX_CODEC = int(Compression.ZSTD)
# Only the header fields the produce checks need (pad bytes skip the rest):
# batchLength, magic, crc, attributes, lastOffsetDelta, maxTimestamp, recordCount.
_CHECKED = struct.Struct(">8xi4xbIhi8xq14xi")
if _CHECKED.size != BATCH_HEADER_SIZE:  # pragma: no cover - a layout typo
    raise ImportError("validation._CHECKED does not span the 61-byte header")


class LeaderAppend(NamedTuple):
    """A validated leader batch, ready to write as ``head + tail``.

    (``prepare_leader_append`` returns a plain tuple in this field order;
    the NamedTuple documents it and serves other callers.)
    """

    head: bytes
    tail: memoryview
    size: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    log_append_time: int  # -1 unless LogAppendTime


def prepare_leader_append(
    batch: bytes | bytearray | memoryview,
    config: LogConfig,
    base_offset: int,
    leader_epoch: int,
    now_ms: int,
    header: tuple[int, ...] | None = None,
) -> tuple[Any, ...]:
    """Validate a producer's batch and return what to write, as a ``LeaderAppend``-shaped tuple.

    The checks are ``batch.check_batch(strict=True)``'s, inlined: this is the
    most frequent call in the broker and every function call shows in the
    produce benchmark. tests/broker/storage/test_validation.py holds both to
    the same verdicts.
    """
    if type(batch) is bytes:
        view = memoryview(batch)
    else:
        view = batch if type(batch) is memoryview else memoryview(batch)
        if view.itemsize != 1 or view.ndim != 1:
            view = view.cast("B")
    size = len(view)
    if size > config.max_message_bytes or size > config.segment_bytes:
        limit = "max.message.bytes" if size > config.max_message_bytes else "segment.bytes"
        raise RecordTooLargeError(f"batch of {size} bytes exceeds {limit} {getattr(config, _ATTRS[limit])}")
    if size < BATCH_HEADER_SIZE:
        check_batch(view)  # raises with the precise reason
    if header is None:
        length, magic, crc, attributes, last_delta, max_timestamp, count = _CHECKED.unpack_from(view)
    else:  # the BatchHeader the produce handler read from these bytes: the header is parsed once
        length, magic, crc, attributes = header[F_LENGTH], header[F_MAGIC], header[F_CRC], header[F_ATTRIBUTES]
        last_delta, max_timestamp, count = header[F_LAST_OFFSET_DELTA], header[F_MAX_TIMESTAMP], header[F_RECORD_COUNT]
    if (
        magic != MAGIC
        or length + LOG_OVERHEAD != size
        or attributes & CODEC_MASK > MAX_CODEC
        or crc32c(view[CRC_START:]) != crc
        or count < 1
        or last_delta != count - 1
    ):
        check_batch(view)  # raises with the precise reason
    if config.message_timestamp_type != LOG_APPEND_TIME:
        # The common case: a new 16-byte prefix; the CRC does not cover it.
        return (
            BATCH_PREFIX.pack(base_offset, length, leader_epoch),
            view[16:],
            size,
            base_offset,
            base_offset + last_delta,
            max_timestamp,
            -1,
        )
    head = rewrite_header(view, base_offset=base_offset, leader_epoch=leader_epoch, log_append_time=now_ms)
    return (head, view[len(head) :], size, base_offset, base_offset + last_delta, now_ms, now_ms)


def split_replicated(
    batches: bytes | bytearray | memoryview, *, config: LogConfig, log_end_offset: int
) -> tuple[memoryview, list[tuple[int, tuple[int, ...]]]]:
    """Validate a follower's buffer; (view, [(position, header fields), ...]) of its complete batches."""
    view = batches if isinstance(batches, memoryview) else memoryview(batches)
    if view.ndim != 1 or view.itemsize != 1:
        view = view.cast("B")
    parsed: list[tuple[int, tuple[int, ...]]] = []
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
