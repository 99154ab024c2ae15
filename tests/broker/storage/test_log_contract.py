"""The PartitionLog contract, run against MemoryLog and SegmentedLog alike."""

from __future__ import annotations

import pytest

from tinystream.broker.storage.base import (
    CorruptRecordError,
    EpochEntry,
    InvalidRecordError,
    LogConfig,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    TimestampOffset,
    UnexpectedAppendOffsetError,
)
from tinystream.broker.storage.batch import build_batch, check_batch, iter_batches, parse_header


def headers(data):
    return [h for _pos, h in iter_batches(bytes(data), verify=True)]


def test_append_assigns_dense_offsets_and_rewrites_the_header(log_factory, make_batch):
    log = log_factory()
    first = log.append(make_batch(3, timestamp=100), leader_epoch=5, now_ms=1)
    second = log.append(make_batch(2, timestamp=200), leader_epoch=5, now_ms=2)
    assert (first.base_offset, first.last_offset, first.max_timestamp, first.log_append_time) == (0, 2, 102, -1)
    assert (second.base_offset, second.last_offset, second.position) == (3, 4, first.position + len(make_batch(3)))
    assert log.log_end_offset == 5 and log.log_start_offset == 0
    result = log.read(0, 10_000)
    stored = headers(result.data)
    assert [(h.base_offset, h.partition_leader_epoch) for h in stored] == [(0, 5), (3, 5)]
    assert (result.first_offset, result.next_offset, result.log_end_offset) == (0, 5, 5)


def test_stored_bytes_equal_the_input_apart_from_offset_and_epoch(log_factory, make_batch):
    log = log_factory()
    data = make_batch(4, value_size=100)
    log.append(data, leader_epoch=2, now_ms=0)
    stored = bytes(log.read(0, 10_000).data)
    assert stored[16:] == data[16:] and stored[12:16] == b"\x00\x00\x00\x02"


def test_refused_batches_leave_nothing_behind(log_factory, make_batch):
    log = log_factory(LogConfig(max_message_bytes=500))
    log.append(make_batch(), leader_epoch=0, now_ms=0)
    good = make_batch()
    corrupt = bytearray(good)
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        log.append(bytes(corrupt), leader_epoch=0, now_ms=0)
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(value_size=600), leader_epoch=0, now_ms=0)
    with pytest.raises(InvalidRecordError):
        log.append(build_batch([(b"k", b"v")] * 2, last_offset_delta=3), leader_epoch=0, now_ms=0)
    assert log.log_end_offset == 1 and log.size_bytes() == len(good)
    assert log.append(good, leader_epoch=0, now_ms=0).base_offset == 1


def test_batch_larger_than_a_segment_is_refused(log_factory, make_batch):
    log = log_factory(LogConfig(segment_bytes=200))
    with pytest.raises(RecordTooLargeError):
        log.append(make_batch(value_size=300), leader_epoch=0, now_ms=0)


def test_log_append_time(log_factory, make_batch):
    log = log_factory(LogConfig(message_timestamp_type="LogAppendTime"))
    result = log.append(make_batch(timestamp=5), leader_epoch=0, now_ms=123_456)
    assert result.max_timestamp == result.log_append_time == 123_456
    (stored,) = headers(log.read(0, 1000).data)
    assert stored.max_timestamp == 123_456 and stored.timestamp_type.name == "LOG_APPEND_TIME"


def test_read_returns_whole_batches_within_max_bytes(log_factory, make_batch):
    log = log_factory()
    size = len(make_batch(2))
    for _ in range(5):
        log.append(make_batch(2), leader_epoch=0, now_ms=0)
    result = log.read(3, 2 * size + size // 2)  # offset 3 is inside the second batch
    assert [h.base_offset for h in headers(result.data)] == [2, 4]
    assert (result.first_offset, result.next_offset) == (2, 6)
    one = log.read(9, 1)  # KIP-74: at least one whole batch
    assert [h.base_offset for h in headers(one.data)] == [8] and len(one.data) == size
    none = log.read(9, 1, min_one=False)
    assert bytes(none.data) == b"" and none.first_offset == log.log_end_offset and none.next_offset == 9
    at_end = log.read(10, 1000)
    assert bytes(at_end.data) == b"" and at_end.next_offset == 10


def test_read_stops_at_max_offset(log_factory, make_batch):
    log = log_factory()
    for _ in range(5):
        log.append(make_batch(2), leader_epoch=0, now_ms=0)
    result = log.read(0, 10_000, max_offset=6)  # e.g. the high watermark
    assert [h.base_offset for h in headers(result.data)] == [0, 2, 4] and result.next_offset == 6
    straddling = log.read(0, 10_000, max_offset=5)  # a batch starting below the limit is whole
    assert straddling.next_offset == 6
    assert bytes(log.read(6, 10_000, max_offset=6).data) == b""


def test_read_out_of_range(log_factory, make_batch):
    log = log_factory()
    log.append(make_batch(), leader_epoch=0, now_ms=0)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(2, 100)
    with pytest.raises(OffsetOutOfRangeError):
        log.read(-1, 100)


def test_roll_by_size_and_time(log_factory, make_batch):
    size = len(make_batch())
    log = log_factory(LogConfig(segment_bytes=3 * size, segment_ms=1000))
    for _i in range(7):
        log.append(make_batch(timestamp=0), leader_epoch=0, now_ms=0)
    assert log.segment_count() == 3  # 3 + 3 + 1 batches
    assert not log.maybe_roll(now_ms=1000)
    assert log.maybe_roll(now_ms=1001)  # segment.ms passed since the first batch's timestamp
    assert log.segment_count() == 4 and not log.maybe_roll(now_ms=5000)  # an empty segment does not roll
    result = log.read(0, 10**6)
    assert [h.base_offset for h in headers(result.data)] == [0, 1, 2]  # a read stays in one segment
    assert result.next_offset == 3 and log.read(3, 10**6).first_offset == 3


def test_time_retention(log_factory, make_batch):
    size = len(make_batch())
    log = log_factory(LogConfig(segment_bytes=2 * size, retention_ms=1000))
    for ts in (0, 10, 500, 600, 2000):
        log.append(make_batch(timestamp=ts), leader_epoch=0, now_ms=ts)
    assert log.segment_count() == 3
    assert log.enforce_retention(now_ms=1010) == 0  # newest in segment 0 is 10: exactly 1000 old
    assert log.enforce_retention(now_ms=1011) == 1
    assert log.log_start_offset == 2
    assert log.enforce_retention(now_ms=1601) == 1
    assert log.log_start_offset == 4 and log.segment_count() == 1
    with pytest.raises(OffsetOutOfRangeError):
        log.read(0, 100)
    # Everything expired: the active segment is rolled first, the log stays usable.
    assert log.enforce_retention(now_ms=10**6) == 1
    assert log.log_start_offset == log.log_end_offset == 5 and log.segment_count() == 1
    assert log.append(make_batch(), leader_epoch=0, now_ms=10**6).base_offset == 5


def test_size_retention_and_high_watermark(log_factory, make_batch):
    size = len(make_batch())
    log = log_factory(LogConfig(segment_bytes=2 * size, retention_bytes=3 * size, retention_ms=-1))
    for _ in range(7):
        log.append(make_batch(), leader_epoch=0, now_ms=0)
    assert log.segment_count() == 4
    assert log.enforce_retention(now_ms=0, high_watermark=1) == 0
    assert log.enforce_retention(now_ms=0) == 2  # 7 batches -> keep >= 3
    assert log.size_bytes() == 3 * size and log.log_start_offset == 4


def test_advance_log_start(log_factory, make_batch):
    size = len(make_batch(2))
    log = log_factory(LogConfig(segment_bytes=2 * size))
    for _ in range(4):
        log.append(make_batch(2), leader_epoch=0, now_ms=0)
    log.advance_log_start(5)
    assert log.log_start_offset == 5 and log.segment_count() == 1  # segments below 4 went
    assert log.read(5, 10).first_offset == 4  # the batch holding the start offset
    log.advance_log_start(3)  # backwards: ignored
    assert log.log_start_offset == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.advance_log_start(9)
    log.advance_log_start(8)
    assert log.log_start_offset == log.log_end_offset == 8


def test_truncate_to(log_factory, make_batch):
    size = len(make_batch(2))
    log = log_factory(LogConfig(segment_bytes=2 * size))
    for epoch in range(5):
        log.append(make_batch(2), leader_epoch=epoch, now_ms=0)
    log.truncate_to(5)  # inside the batch [4, 5]: it goes whole
    assert log.log_end_offset == 4 and log.segment_count() == 2
    assert log.epoch_entries() == [EpochEntry(0, 0), EpochEntry(1, 2)]
    assert log.read(0, 10**6).next_offset == 4
    log.truncate_to(10)  # past the end: nothing
    assert log.log_end_offset == 4
    assert log.append(make_batch(), leader_epoch=7, now_ms=0).base_offset == 4
    log.truncate_to(0)
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes()) == (0, 0, 0)
    assert log.epoch_entries() == []


def test_truncate_below_the_first_segment_restarts_there(log_factory, make_batch):
    size = len(make_batch())
    log = log_factory(LogConfig(segment_bytes=size))
    for _ in range(3):
        log.append(make_batch(), leader_epoch=0, now_ms=0)
    log.advance_log_start(2)
    log.truncate_to(1)
    assert (log.log_start_offset, log.log_end_offset, log.segment_count()) == (1, 1, 1)
    assert log.append(make_batch(), leader_epoch=1, now_ms=0).base_offset == 1


def test_leader_epochs(log_factory, make_batch):
    log = log_factory()
    for epoch in (0, 0, 2, 2, 5):
        log.append(make_batch(), leader_epoch=epoch, now_ms=0)
    assert log.epoch_entries() == [EpochEntry(0, 0), EpochEntry(2, 2), EpochEntry(5, 4)]
    assert log.end_offset_for_epoch(0) == (0, 2)
    assert log.end_offset_for_epoch(3) == (2, 4)
    assert log.end_offset_for_epoch(5) == (5, 5)
    assert log.end_offset_for_epoch(9) == (-1, -1)


def test_offset_for_timestamp(log_factory, make_batch):
    size = len(make_batch())
    log = log_factory(LogConfig(segment_bytes=2 * size, index_interval_bytes=1))
    for ts in (100, 300, 200, 400, 500):
        log.append(make_batch(timestamp=ts), leader_epoch=0, now_ms=0)
    assert log.offset_for_timestamp(0) == TimestampOffset(100, 0)
    assert log.offset_for_timestamp(250) == TimestampOffset(300, 1)
    assert log.offset_for_timestamp(301) == TimestampOffset(400, 3)
    assert log.offset_for_timestamp(501) is None
    log.advance_log_start(2)
    assert log.offset_for_timestamp(0) == TimestampOffset(200, 2)


def test_append_replicated(log_factory, make_batch):
    leader = log_factory(name="leader")
    follower = log_factory(name="follower")
    for epoch in (1, 1, 3):
        leader.append(make_batch(2), leader_epoch=epoch, now_ms=0)
    data = bytes(leader.read(0, 10**6).data)
    # A cut last batch (size-limited fetch) is ignored; the caller fetches it again.
    assert follower.append_replicated(data[:-5]) == 4
    assert follower.append_replicated(data[2 * len(make_batch(2)) :]) == 6
    assert bytes(follower.read(0, 10**6).data) == data
    assert follower.epoch_entries() == leader.epoch_entries() == [EpochEntry(1, 0), EpochEntry(3, 4)]
    with pytest.raises(UnexpectedAppendOffsetError):
        follower.append_replicated(data)
    corrupt = bytearray(build_batch([(b"k", b"v")], base_offset=6))
    corrupt[-1] ^= 1
    with pytest.raises(CorruptRecordError):
        follower.append_replicated(bytes(corrupt))
    assert follower.log_end_offset == 6


def test_append_replicated_accepts_compaction_gaps(log_factory):
    follower = log_factory()
    gapped = build_batch([(b"a", b"1")], base_offset=0, last_offset_delta=4) + build_batch(
        [(b"b", b"2")], base_offset=9
    )
    assert follower.append_replicated(gapped) == 10
    assert follower.read(6, 1000).first_offset == 9  # an offset in the gap reads the next batch
    assert follower.read(2, 1).first_offset == 0


def test_append_replicated_rolls_segments(log_factory, make_batch):
    size = len(make_batch())
    leader = log_factory(LogConfig(segment_bytes=10**6), name="leader")
    for _ in range(6):
        leader.append(make_batch(), leader_epoch=0, now_ms=0)
    follower = log_factory(LogConfig(segment_bytes=2 * size), name="follower")
    assert follower.append_replicated(leader.read(0, 10**6).data) == 6
    assert follower.segment_count() == 3
    for offset in range(6):
        check_batch(bytes(follower.read(offset, 1).data), strict=False)


def test_batches_from(log_factory, make_batch):
    size = len(make_batch())
    log = log_factory(LogConfig(segment_bytes=2 * size))
    for i in range(5):
        log.append(make_batch(producer_id=7, base_sequence=i), leader_epoch=0, now_ms=0)
    got = [(h.base_offset, h.base_sequence) for h, data in log.batches_from(2)]
    assert got == [(2, 2), (3, 3), (4, 4)]
    for header, data in log.batches_from(0):
        assert parse_header(bytes(data)) == header


def test_empty_log(log_factory):
    log = log_factory()
    assert (log.log_start_offset, log.log_end_offset, log.size_bytes(), log.segment_count()) == (0, 0, 0, 1)
    result = log.read(0, 100)
    assert bytes(result.data) == b"" and result.first_offset == 0 and result.next_offset == 0
    assert log.offset_for_timestamp(0) is None and log.end_offset_for_epoch(0) == (-1, -1)
    assert log.enforce_retention(now_ms=10**12) == 0
    log.flush()
