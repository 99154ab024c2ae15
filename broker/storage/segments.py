"""LogSegments: a partition's segments sorted by base offset, as one immutable snapshot (Kafka's LogSegments).

A SegmentedLog replaces its snapshot in one assignment whenever the set
changes (roll, retention, truncation, a compaction swap); a reader takes the
snapshot once and walks it without a lock on the list itself, so a roll
never shows it half a list. Invariants: base offsets strictly increase; the
last segment is the active one (it takes every append); the snapshot is
never empty.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator, Sequence

from tinystream.broker.storage.policy import SegmentInfo
from tinystream.broker.storage.segment import LogSegment


class LogSegments:
    __slots__ = ("active", "bases", "segments")

    def __init__(self, segments: Sequence[LogSegment]) -> None:
        if not segments:
            raise ValueError("a log has at least one segment")
        self.segments: tuple[LogSegment, ...] = tuple(segments)
        self.bases: tuple[int, ...] = tuple(s.base_offset for s in segments)
        self.active: LogSegment = self.segments[-1]

    def __len__(self) -> int:
        return len(self.segments)

    def __iter__(self) -> Iterator[LogSegment]:
        return iter(self.segments)

    def from_offset(self, offset: int) -> tuple[LogSegment, ...]:
        """The segment that may hold `offset` (the floor by base offset) and every later one."""
        index = bisect.bisect_right(self.bases, offset) - 1
        return self.segments[index if index > 0 else 0 :]

    def at(self, base_offset: int) -> LogSegment:
        """The segment starting at `base_offset`; KeyError when there is none."""
        index = bisect.bisect_left(self.bases, base_offset)
        if index == len(self.bases) or self.bases[index] != base_offset:
            raise KeyError(f"no segment at base offset {base_offset}")
        return self.segments[index]

    def closed(self) -> tuple[LogSegment, ...]:
        """Every segment but the active one."""
        return self.segments[:-1]

    def with_appended(self, segment: LogSegment) -> LogSegments:
        return LogSegments([*self.segments, segment])

    def infos(self) -> list[SegmentInfo]:
        """What the retention rule reads of each segment (policy.retention_deletions)."""
        return [SegmentInfo(s.base_offset, s.size, s.max_timestamp, s.last_modified_ms) for s in self.segments]

    def size_bytes(self) -> int:
        return sum(s.size for s in self.segments)
