"""Pure decisions shared by every PartitionLog: when to roll, what retention deletes.

No I/O and no clock: callers pass ``now_ms`` and a snapshot of their
segments, so MemoryLog and SegmentedLog decide identically (the property
tests rely on it). Rules follow Kafka's UnifiedLog / LogSegment:

Roll (LogSegment.shouldRoll) before appending a batch when the active
segment is not empty and
- its size plus the batch would pass segment.bytes, or
- ``now_ms - rolling_base_ms > segment.ms``, where the rolling base is the
  max timestamp of the segment's first batch, or the wall-clock time of that
  first append when the batch carries no timestamp (Kafka's
  rollingBasedTimestamp; it survives a restart because it is in the data), or
- the batch's last offset would not fit a 32-bit offset relative to the
  segment's base (index entries hold relative offsets).

Retention (UnifiedLog.deleteOldSegments) deletes a prefix of the oldest
segments, applying in turn:
1. log start breached: the *next* segment's base <= log start offset;
2. (cleanup.policy has delete) retention.ms: ``now_ms - largest > retention.ms``
   where largest is the segment's max timestamp, or its last-modified time
   when it holds no timestamp;
3. (cleanup.policy has delete) retention.bytes: delete while the log stays
   at or above retention.bytes without the segment.
A segment is never deleted when its upper bound offset (next segment's base,
or the log end offset) is above the high watermark, and an empty last
segment is never deleted. If the active segment itself is deletable the
caller rolls first, so the log keeps an (empty) active segment at its end.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tinystream.broker.storage.base import LogConfig

MAX_RELATIVE_OFFSET = (1 << 31) - 1


class RollReason(enum.Enum):
    SIZE = "segment.bytes"
    TIME = "segment.ms"
    OFFSET_OVERFLOW = "relative offset overflow"


@dataclass(frozen=True, slots=True)
class SegmentInfo:
    """What retention needs to know about one segment."""

    base_offset: int
    size: int
    max_timestamp: int  # -1 when no batch carries a timestamp
    last_modified_ms: int

    @property
    def largest_timestamp(self) -> int:
        return self.max_timestamp if self.max_timestamp >= 0 else self.last_modified_ms


def roll_reason(
    config: LogConfig,
    segment_base: int,
    segment_size: int,
    rolling_base_ms: int | None,
    batch_size: int,
    batch_last_offset: int,
    now_ms: int,
) -> RollReason | None:
    """Why the active segment must roll before this batch, or None: THE roll rule.

    Every append path calls it (SegmentedLog.append and append_replicated,
    MemoryLog), positionally on the leader's hot path (a keyword call costs
    twice as much there). Kafka's LogSegment.shouldRoll: size, segment.ms
    since the first batch's timestamp, and relative-offset overflow.
    """
    if segment_size == 0:
        return None
    if segment_size + batch_size > config.segment_bytes:
        return RollReason.SIZE
    if rolling_base_ms is not None and now_ms - rolling_base_ms > config.segment_ms:
        return RollReason.TIME
    if batch_last_offset - segment_base > MAX_RELATIVE_OFFSET:
        return RollReason.OFFSET_OVERFLOW
    return None


def time_to_roll(*, config: LogConfig, segment_size: int, rolling_base_ms: int | None, now_ms: int) -> bool:
    """segment.ms passed for a non-empty active segment (the periodic check)."""
    return segment_size > 0 and rolling_base_ms is not None and now_ms - rolling_base_ms > config.segment_ms


def retention_deletions(
    segments: Sequence[SegmentInfo],
    *,
    config: LogConfig,
    now_ms: int,
    log_start_offset: int,
    log_end_offset: int,
    high_watermark: int | None = None,
) -> int:
    """How many of the oldest segments to delete (all of them means: roll first)."""
    limit = log_end_offset if high_watermark is None else high_watermark

    def deletable_prefix(start: int, predicate: Callable[[int], bool]) -> int:
        index = start
        while index < len(segments):
            segment = segments[index]
            is_last = index == len(segments) - 1
            upper = log_end_offset if is_last else segments[index + 1].base_offset
            if is_last and segment.size == 0:
                break
            if upper > limit or not predicate(index):
                break
            index += 1
        return index

    deleted = deletable_prefix(
        0, lambda i: i + 1 < len(segments) and segments[i + 1].base_offset <= log_start_offset
    )
    if config.deletes:
        if config.retention_ms >= 0:
            deleted = deletable_prefix(
                deleted, lambda i: now_ms - segments[i].largest_timestamp > config.retention_ms
            )
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in segments[deleted:]) - config.retention_bytes

            def over_size(i: int) -> bool:
                nonlocal excess
                if excess - segments[i].size >= 0:
                    excess -= segments[i].size
                    return True
                return False

            deleted = deletable_prefix(deleted, over_size)
    return deleted


def check_config(config: LogConfig) -> None:
    """Refuse settings the file format cannot hold (Kafka bounds them the same way): ValueError."""
    if not 0 < config.segment_bytes <= MAX_RELATIVE_OFFSET:
        raise ValueError(f"segment.bytes must be in [1, {MAX_RELATIVE_OFFSET}], not {config.segment_bytes}")
    if config.index_interval_bytes < 0:
        raise ValueError(f"index.interval.bytes must be >= 0, not {config.index_interval_bytes}")
    if config.flush_messages is not None and config.flush_messages < 1:
        raise ValueError(f"flush.messages must be >= 1, not {config.flush_messages}")
