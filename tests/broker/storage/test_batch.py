"""RecordBatch v2 header handling, records, and interoperability with kafka-python's codec."""

from __future__ import annotations

import struct

import pytest
from crc32c import crc32c
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.broker.storage.base import CorruptRecordError, InvalidRecordError
from tinystream.broker.storage.batch import (
    BATCH_HEADER_SIZE,
    F_BASE_OFFSET,
    F_LEADER_EPOCH,
    Compression,
    Record,
    TimestampType,
    assign_offsets,
    batch_size,
    build_batch,
    check_batch,
    decode_records,
    iter_batches,
    parse_header,
    rewrite_header,
    split_batches,
)

records_strategy = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=20),
        value=st.none() | st.binary(max_size=200),
        headers=st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3).map(tuple),
        timestamp_delta=st.integers(-(2**40), 2**40),
    ),
    min_size=1,
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(records=records_strategy, codec=st.sampled_from(list(Compression)), base_ts=st.integers(0, 2**45))
def test_build_decode_round_trip(records, codec, base_ts):
    data = build_batch(records, compression=codec, base_timestamp=base_ts, base_offset=7)
    fields = check_batch(data)
    header = parse_header(data)
    assert header.size == len(data) and header.compression is codec
    assert header.record_count == len(records) and header.last_offset_delta == len(records) - 1
    assert header.max_timestamp == base_ts + max(r.timestamp_delta for r in records)
    assert fields[F_BASE_OFFSET] == 7
    decoded = decode_records(data)
    assert [(r.key, r.value, r.headers, r.timestamp_delta) for r in decoded] == [
        (r.key, r.value, r.headers, r.timestamp_delta) for r in records
    ]
    assert [r.offset_delta for r in decoded] == list(range(len(records)))


def test_header_fields_and_flags():
    data = build_batch(
        [(b"k", b"v")] * 3,
        base_offset=100,
        partition_leader_epoch=4,
        base_timestamp=1000,
        compression=Compression.ZSTD,
        timestamp_type=TimestampType.LOG_APPEND_TIME,
        producer_id=77,
        producer_epoch=2,
        base_sequence=2**31 - 2,
        transactional=True,
    )
    h = parse_header(data)
    assert (h.base_offset, h.partition_leader_epoch, h.record_count, h.last_offset) == (100, 4, 3, 102)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (77, 2, 2**31 - 2)
    assert h.is_transactional and not h.is_control and h.has_producer_id
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME and h.compression is Compression.ZSTD
    assert h.last_sequence == 0  # wraps like Kafka's DefaultRecordBatch.incrementSequence
    assert h.next_offset == 103 and batch_size(data) == len(data)


def _corrupt(data: bytes, at: int, value: bytes) -> bytes:
    out = bytearray(data)
    out[at : at + len(value)] = value
    return bytes(out)


def test_check_batch_refuses_bad_batches():
    good = build_batch([(b"k", b"value")] * 2)
    with pytest.raises(CorruptRecordError, match="header"):
        check_batch(good[:60])
    with pytest.raises(CorruptRecordError, match="magic"):
        check_batch(_corrupt(good, 16, b"\x01"))
    with pytest.raises(CorruptRecordError, match="batchLength"):
        check_batch(good + b"\x00")
    with pytest.raises(CorruptRecordError, match="batchLength"):
        check_batch(good[:-1])
    bad_codec = bytearray(_corrupt(good, 21, struct.pack(">h", 5)))
    struct.pack_into(">I", bad_codec, 17, crc32c(bytes(bad_codec[21:])))
    with pytest.raises(CorruptRecordError, match="codec"):
        check_batch(bytes(bad_codec))


def test_every_byte_the_crc_covers_is_checked():
    good = build_batch([(b"key", b"value")])
    for at in range(21, len(good)):
        flipped = bytearray(good)
        flipped[at] ^= 0x40
        with pytest.raises(CorruptRecordError):
            check_batch(bytes(flipped))


def test_record_count_rules_strict_and_compacted():
    mismatched = build_batch([(b"k", b"v")] * 2, last_offset_delta=5)  # a compacted batch: 2 records over 6 offsets
    with pytest.raises(InvalidRecordError):
        check_batch(mismatched)
    check_batch(mismatched, strict=False)
    empty = build_batch([], last_offset_delta=0)
    with pytest.raises(InvalidRecordError):
        check_batch(empty)
    check_batch(empty, strict=False)
    too_many = build_batch([(b"k", b"v")] * 3, last_offset_delta=1)
    with pytest.raises(InvalidRecordError):
        check_batch(too_many, strict=False)


def test_rewrite_header_changes_only_uncovered_fields():
    data = build_batch([(b"k", b"v")] * 2, base_timestamp=5)
    head = rewrite_header(data, base_offset=1234, leader_epoch=9)
    assert len(head) == 16
    stored = head + data[16:]
    fields = check_batch(stored)  # CRC still valid: it does not cover these fields
    assert (fields[F_BASE_OFFSET], fields[F_LEADER_EPOCH]) == (1234, 9)
    assert parse_header(data).base_offset == 0  # input untouched


def test_log_append_time_sets_bit_and_timestamp_and_crc():
    data = build_batch([(b"k", b"v")], base_timestamp=5)
    buf = bytearray(data)
    assign_offsets(buf, 50, 3, log_append_time=99_000)
    check_batch(bytes(buf))
    h = parse_header(buf)
    assert (h.base_offset, h.partition_leader_epoch, h.max_timestamp) == (50, 3, 99_000)
    assert h.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert bytes(buf[BATCH_HEADER_SIZE:]) == data[BATCH_HEADER_SIZE:]


def test_iter_batches_yields_only_complete_batches_at_every_cut():
    batches = [build_batch([(b"k", b"v" * n)], base_offset=i) for i, n in enumerate((1, 50, 3))]
    joined = b"".join(batches)
    ends = [sum(len(b) for b in batches[: i + 1]) for i in range(3)]
    for cut in range(len(joined) + 1):
        got = [h.base_offset for _pos, h in iter_batches(joined[:cut], verify=True)]
        assert got == [i for i, end in enumerate(ends) if end <= cut]
    assert [bytes(v) for v in split_batches(joined)] == batches


def test_iter_batches_refuses_an_impossible_length():
    data = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">i", data, 8, 10)
    with pytest.raises(CorruptRecordError):
        list(iter_batches(bytes(data)))


def test_decoder_bounds_record_count_and_trailing_bytes():
    data = bytearray(build_batch([(b"k", b"v")]))
    struct.pack_into(">i", data, 57, 10**6)  # recordCount far beyond the bytes present
    with pytest.raises(CorruptRecordError):
        decode_records(bytes(data))
    two = build_batch([(b"k", b"v")] * 2)
    one_claimed = bytearray(two)
    struct.pack_into(">i", one_claimed, 57, 1)
    with pytest.raises(CorruptRecordError, match="left"):
        decode_records(bytes(one_claimed))


def test_kafka_python_reads_our_batches_and_we_read_theirs():
    kafka_records = pytest.importorskip("kafka.record.default_records")
    for codec in Compression:
        ours = build_batch(
            [Record(b"a", b"b" * 300, (("h", b"x"),), timestamp_delta=3), Record(None, None)],
            compression=codec,
            base_timestamp=77,
        )
        theirs_view = kafka_records.DefaultRecordBatch(ours)
        assert theirs_view.validate_crc()
        got = [(r.key, r.value, r.timestamp, r.offset, list(r.headers)) for r in theirs_view]
        assert got == [(b"a", b"b" * 300, 80, 0, [("h", b"x")]), (None, None, 77, 1, [])]

        builder = kafka_records.DefaultRecordBatchBuilder(
            magic=2, compression_type=int(codec), is_transactional=0, producer_id=5, producer_epoch=1,
            base_sequence=10, batch_size=1 << 20,
        )
        for i in range(3):
            builder.append(i, timestamp=1000 + i, key=b"k%d" % i, value=b"v" * 500, headers=[("h", b"y")])
        theirs = bytes(builder.build())
        check_batch(theirs)
        decoded = decode_records(theirs)
        assert [r.key for r in decoded] == [b"k0", b"k1", b"k2"]
        assert parse_header(theirs).producer_id == 5
