"""Pure roll and retention decisions."""

from __future__ import annotations

from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.policy import RollReason, SegmentInfo, retention_deletions, roll_reason, time_to_roll


def roll(config, **kw):
    args = dict(segment_base=0, segment_size=100, rolling_base_ms=0, batch_size=10, batch_last_offset=5, now_ms=0)
    args.update(kw)
    return roll_reason(config=config, **args)


def test_roll_reasons():
    config = LogConfig(segment_bytes=1000, segment_ms=60_000)
    assert roll(config) is None
    assert roll(config, segment_size=0, batch_size=10**6, now_ms=10**9) is None  # an empty segment never rolls
    assert roll(config, segment_size=995) is RollReason.SIZE
    assert roll(config, segment_size=990) is None  # exactly full is fine
    assert roll(config, now_ms=60_001) is RollReason.TIME
    assert roll(config, now_ms=60_000) is None
    assert roll(config, rolling_base_ms=None, now_ms=10**9) is None
    assert roll(config, batch_last_offset=2**31) is RollReason.OFFSET_OVERFLOW
    assert time_to_roll(config=config, segment_size=1, rolling_base_ms=0, now_ms=60_001)
    assert not time_to_roll(config=config, segment_size=0, rolling_base_ms=0, now_ms=60_001)


def segs(*specs):
    return [SegmentInfo(base, size, ts, 0) for base, size, ts in specs]


def plan(segments, config, *, now=0, start=0, end=100, hw=None):
    return retention_deletions(
        segments, config=config, now_ms=now, log_start_offset=start, log_end_offset=end, high_watermark=hw
    )


def test_time_retention_deletes_expired_prefix_only():
    config = LogConfig(retention_ms=100)
    segments = segs((0, 10, 50), (10, 10, 500), (20, 10, 60), (30, 10, 900))
    assert plan(segments, config, now=200) == 1  # the expired third segment is behind a fresh one
    assert plan(segments, config, now=2000) == 4  # everything, the active one included (caller rolls)
    assert plan(segments, config, now=2000, hw=25) == 2  # never past the high watermark


def test_size_retention_keeps_at_least_the_limit():
    config = LogConfig(retention_bytes=25, retention_ms=-1)
    segments = segs((0, 10, 0), (10, 10, 0), (20, 10, 0), (30, 5, 0))
    assert plan(segments, config) == 1  # 35 bytes -> deleting one leaves 25
    assert plan(segments, LogConfig(retention_bytes=-1, retention_ms=-1)) == 0


def test_log_start_rule_applies_to_compacted_topics_too():
    config = LogConfig(cleanup_policy="compact", retention_ms=1, retention_bytes=1)
    segments = segs((0, 10, 0), (10, 10, 0), (20, 10, 0))
    assert plan(segments, config, now=10**9, start=15) == 1  # time/size rules ignored without "delete"
    assert plan(segments, config, now=10**9, start=20) == 2


def test_empty_last_segment_is_never_deleted():
    config = LogConfig(retention_ms=1)
    segments = segs((0, 10, 0), (10, 0, -1))
    assert plan(segments, config, now=10**9, end=10) == 1
