"""Compaction: newest record per key, offsets unchanged, tombstones, codecs, atomic swaps."""

from __future__ import annotations

import pytest

from tinystream.broker.storage import cleaner as cleaner_module
from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.batch import (
    Compression,
    Record,
    TimestampType,
    build_batch,
    check_batch,
    decode_records,
    parse_header,
)
from tinystream.broker.storage.cleaner import LogCleaner
from tinystream.broker.storage.segmented import SegmentedLog

DAY = 24 * 3600 * 1000


def compacted_config(**kwargs):
    kwargs.setdefault("cleanup_policy", "compact")
    kwargs.setdefault("segment_bytes", 300)
    return LogConfig(**kwargs)


def append_kv(log, pairs, *, timestamp=0, compression=Compression.NONE, **kwargs):
    """Append one batch of (key, value) records; returns the AppendResult."""
    records = [Record(key=k, value=v, timestamp_delta=i) for i, (k, v) in enumerate(pairs)]
    return log.append(
        build_batch(records, base_timestamp=timestamp, compression=compression, **kwargs), leader_epoch=0, now_ms=timestamp
    )


def records_by_offset(log):
    """{offset: (key, value)} of every record the log holds."""
    out = {}
    for header, data in log.batches_from(log.log_start_offset):
        if header.is_control:
            continue
        for record in decode_records(bytes(data)):
            out[header.base_offset + record.offset_delta] = (record.key, record.value)
    return out


def test_keeps_the_newest_record_per_key_and_every_offset(log_factory):
    log = log_factory(compacted_config(segment_bytes=250))  # two 100-byte batches per segment
    expected_latest = {}
    offset = 0
    for round_ in range(6):
        pairs = [(b"k%d" % (i % 4), b"v%d-%d" % (round_, i)) for i in range(3)]
        append_kv(log, pairs, timestamp=round_)
        for key, value in pairs:
            expected_latest[key] = (offset, value)
            offset += 1
    before = records_by_offset(log)
    closed = log.segment_count() - 1
    assert closed >= 2
    stats = LogCleaner().clean(log, now_ms=10)
    assert stats and stats.records_after < stats.records_before
    after = records_by_offset(log)
    # Every surviving record kept its offset and value ...
    assert all(before[o] == kv for o, kv in after.items())
    # ... and in closed segments only the newest per key is left.
    active_base = log.segment_base_offsets()[-1]
    closed_records = {o: kv for o, kv in after.items() if o < active_base}
    keys = [kv[0] for kv in closed_records.values()]
    assert len(keys) == len(set(keys))
    for o, (key, _value) in closed_records.items():
        newest_closed = max(x for x, kv in before.items() if kv[0] == key and x < active_base)
        assert o == newest_closed
    # The active segment is untouched.
    assert {o: kv for o, kv in after.items() if o >= active_base} == {o: kv for o, kv in before.items() if o >= active_base}
    # The log still reads at every offset, end offset unchanged.
    assert log.log_end_offset == offset
    for o in range(offset):
        result = log.read(o, 1)
        assert result.next_offset > o


def test_rebuilt_batches_keep_base_offset_last_offset_and_producer_fields(log_factory):
    log = log_factory(compacted_config(segment_bytes=10**6))
    append_kv(
        log, [(b"a", b"1"), (b"b", b"2"), (b"a", b"3")], producer_id=42, producer_epoch=3, base_sequence=10,
        partition_leader_epoch=0,
    )
    append_kv(log, [(b"b", b"4")], timestamp=5)
    log.roll(now_ms=5)
    LogCleaner().clean(log, now_ms=10)
    first, second = [h for h, _ in log.batches_from(0)]
    assert (first.base_offset, first.last_offset, first.record_count) == (0, 2, 1)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (42, 3, 10)
    assert (second.base_offset, second.record_count) == (3, 1)
    data = bytes(log.read(0, 1).data)
    check_batch(data, strict=False)
    (record,) = decode_records(data)
    assert (record.key, record.value, record.offset_delta) == (b"a", b"3", 2)
    assert first.max_timestamp == 2  # recomputed over the survivor (timestamp delta 2)


def test_tombstones_go_after_delete_retention(log_factory):
    log = log_factory(compacted_config(segment_bytes=10**6, delete_retention_ms=DAY))
    append_kv(log, [(b"a", b"1"), (b"b", b"2")], timestamp=1000)
    append_kv(log, [(b"a", None)], timestamp=2000)
    log.roll(now_ms=2000)
    LogCleaner().clean(log, now_ms=2000 + DAY)  # the tombstone is exactly one day old: kept
    assert records_by_offset(log) == {1: (b"b", b"2"), 2: (b"a", None)}
    stats = LogCleaner().clean(log, now_ms=2001 + DAY)
    assert stats.tombstones_dropped == 1
    assert records_by_offset(log) == {1: (b"b", b"2")}
    assert log.log_end_offset == 3


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD])
def test_compressed_batches_are_recompressed_with_their_codec(log_factory, codec):
    log = log_factory(compacted_config(segment_bytes=10**6))
    append_kv(log, [(b"k%d" % (i % 3), b"x" * 200) for i in range(9)], compression=codec)
    append_kv(log, [(b"z", b"1")])
    log.roll(now_ms=0)
    LogCleaner().clean(log, now_ms=0)
    header, data = next(iter(log.batches_from(0)))
    assert header.compression is codec and header.record_count == 3 and header.last_offset == 8
    assert [r.offset_delta for r in decode_records(bytes(data))] == [6, 7, 8]


def test_control_batches_and_keyless_records(log_factory):
    log = log_factory(compacted_config(segment_bytes=10**6))
    append_kv(log, [(None, b"no key"), (b"a", b"1")])
    marker = build_batch([Record(key=b"\x00\x00\x00\x01", value=b"\x00\x00\x00\x00\x00\x00")], control=True,
                         transactional=True, producer_id=9, base_offset=0)
    log.append(marker, leader_epoch=0, now_ms=0)
    append_kv(log, [(b"b", b"2")])
    log.roll(now_ms=0)
    LogCleaner().clean(log, now_ms=0)
    headers = [h for h, _ in log.batches_from(0)]
    assert [h.is_control for h in headers] == [False, True, False]
    assert records_by_offset(log) == {1: (b"a", b"1"), 3: (b"b", b"2")}


def test_log_append_time_tombstones_use_the_batch_timestamp(log_factory):
    log = log_factory(compacted_config(segment_bytes=10**6, delete_retention_ms=100, message_timestamp_type="LogAppendTime"))
    log.append(build_batch([Record(b"a", None)], base_timestamp=0), leader_epoch=0, now_ms=10_000)
    log.append(build_batch([Record(b"b", b"1")]), leader_epoch=0, now_ms=10_000)
    log.roll(now_ms=10_000)
    LogCleaner().clean(log, now_ms=10_050)
    assert 0 in records_by_offset(log)  # the record's own timestamp (0) is ignored under LogAppendTime
    LogCleaner().clean(log, now_ms=10_101)
    assert 0 not in records_by_offset(log)
    assert parse_header(bytes(log.read(1, 1).data)).timestamp_type is TimestampType.LOG_APPEND_TIME


def test_delete_policy_logs_are_left_alone(log_factory):
    log = log_factory(LogConfig(segment_bytes=300))
    for _ in range(6):
        append_kv(log, [(b"a", b"1")])
    stats = LogCleaner().clean(log, now_ms=0)
    assert not stats and len(records_by_offset(log)) == 6


def test_emptied_segments_are_deleted_and_reads_skip_the_gap(log_factory):
    log = log_factory(compacted_config(segment_bytes=200))
    for i in range(8):
        append_kv(log, [(b"same", b"%d" % i)])
    segments = log.segment_count()
    stats = LogCleaner().clean(log, now_ms=0)
    assert stats.segments_deleted >= 1 and log.segment_count() < segments
    survivors = records_by_offset(log)
    assert list(survivors.values()).count((b"same", b"7")) == 1
    assert log.read(0, 1).first_offset == min(survivors)


def test_segmented_compaction_survives_reopen(tmp_path):
    config = compacted_config(segment_bytes=250)
    log = SegmentedLog.open(tmp_path, config, now_ms=0)
    for i in range(12):
        append_kv(log, [(b"k%d" % (i % 3), b"v%d" % i)])
    LogCleaner().clean(log, now_ms=0)
    expected = records_by_offset(log)
    log.close()
    assert not list(tmp_path.glob("*.cleaned")) and not list(tmp_path.glob("*.swap"))
    again = SegmentedLog.open(tmp_path, config, now_ms=0)
    assert records_by_offset(again) == expected
    for offset in expected:
        assert again.read(offset, 1).first_offset <= offset
    again.close()


def test_undecodable_batches_are_kept(log_factory, monkeypatch):
    log = log_factory(compacted_config(segment_bytes=10**6))
    append_kv(log, [(b"a", b"1")], compression=Compression.GZIP)
    append_kv(log, [(b"a", b"2")])
    log.roll(now_ms=0)
    stats = LogCleaner(max_decompressed_bytes=1).clean(log, now_ms=0)  # the gzip batch exceeds the bound
    assert stats.undecodable_batches == 1
    assert [h.base_offset for h, _ in log.batches_from(0)] == [0, 1]


def test_module_level_clean_reports_change(log_factory):
    log = log_factory(compacted_config(segment_bytes=10**6))
    append_kv(log, [(b"a", b"1"), (b"a", b"2")])
    log.roll(now_ms=0)
    assert cleaner_module.clean(log, now_ms=0)
    assert not cleaner_module.clean(log, now_ms=0)  # nothing left to do


def test_aborted_transactions_are_dropped_and_undecided_ones_left_alone(log_factory):
    """KIP-98: an aborted value never hides the committed one; nothing past the LSO is cleaned."""
    log = log_factory(compacted_config(segment_bytes=10**6))
    append_kv(log, [(b"k", b"committed")])  # 0
    append_kv(log, [(b"k", b"aborted")], producer_id=7, producer_epoch=0, transactional=True)  # 1
    marker = build_batch([Record(key=b"\x00\x00\x00\x00", value=b"\x00\x00\x00\x00\x00\x00")], control=True,
                         transactional=True, producer_id=7)
    log.append(marker, leader_epoch=0, now_ms=0)  # 2: ABORT
    append_kv(log, [(b"j", b"old")])  # 3
    append_kv(log, [(b"j", b"open")], producer_id=8, producer_epoch=0, transactional=True)  # 4: undecided
    log.roll(now_ms=0)
    LogCleaner().clean(log, now_ms=0, max_offset=4, aborted=[(7, 1, 2)])
    assert records_by_offset(log) == {0: (b"k", b"committed"), 3: (b"j", b"old"), 4: (b"j", b"open")}
    assert [h.is_control for h, _ in log.batches_from(0)] == [False, True, False, False]
