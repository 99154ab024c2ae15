"""ProducerStateTable: Kafka's sequence rules, replay from batch headers, snapshots."""

from __future__ import annotations

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.replication.idempotence import BATCHES_TO_RETAIN, ProducerStateTable, Verdict
from tinystream.broker.storage.batch import build_batch, read_header


def appended(table: ProducerStateTable, pid: int, epoch: int, first: int, last: int, offset: int) -> None:
    table.record(pid, epoch, first, last, offset, offset + last - first, 0, now_ms=0)


def test_unknown_producer_any_sequence():
    assert ProducerStateTable().check(1, 0, 77, 80).verdict is Verdict.APPEND


def test_in_sequence_duplicate_gap_epochs():
    t = ProducerStateTable()
    appended(t, 1, 0, 0, 4, offset=10)
    assert t.check(1, 0, 5, 9).verdict is Verdict.APPEND
    dup = t.check(1, 0, 0, 4)
    assert dup.verdict is Verdict.DUPLICATE and dup.duplicate.first_offset == 10
    assert t.check(1, 0, 7, 9).error == ErrorCode.out_of_order_sequence_number
    assert t.check(1, 0, 3, 4).error == ErrorCode.out_of_order_sequence_number  # overlapping, not a duplicate
    assert t.check(1, 1, 0, 2).verdict is Verdict.APPEND  # a new epoch restarts at 0
    assert t.check(1, 1, 5, 6).error == ErrorCode.out_of_order_sequence_number
    appended(t, 1, 2, 0, 0, offset=20)
    assert t.check(1, 1, 5, 6).error == ErrorCode.invalid_producer_epoch


def test_only_the_last_five_batches_are_remembered():
    t = ProducerStateTable()
    for i in range(BATCHES_TO_RETAIN + 2):
        appended(t, 1, 0, i, i, offset=i)
    assert t.check(1, 0, 0, 0).error == ErrorCode.out_of_order_sequence_number
    assert t.check(1, 0, 2, 2).verdict is Verdict.DUPLICATE


def test_sequence_wraps_at_int32_max():
    t = ProducerStateTable()
    appended(t, 1, 0, 2**31 - 2, 2**31 - 1, offset=0)
    assert t.check(1, 0, 0, 3).verdict is Verdict.APPEND


def test_replay_from_headers_matches_recording():
    t = ProducerStateTable()
    fields = []
    offset = 0
    for seq, count in [(0, 3), (3, 2)]:
        batch = bytearray(build_batch([(None, b"x")] * count, producer_id=5, producer_epoch=1, base_sequence=seq))
        batch[:8] = offset.to_bytes(8, "big")
        fields.append(read_header(batch))
        offset += count
    fields.append(read_header(build_batch([(None, b"plain")])))  # no producer: ignored
    assert t.replay(fields, now_ms=0) == 2
    assert t.check(5, 1, 3, 4).duplicate.first_offset == 3
    assert t.check(5, 1, 5, 5).verdict is Verdict.APPEND


def test_snapshot_round_trip_and_bad_input():
    t = ProducerStateTable()
    appended(t, 1, 0, 0, 4, offset=10)
    appended(t, 2, 3, 0, 0, offset=15)
    restored, end = ProducerStateTable.restore(t.snapshot(16))
    assert end == 16
    assert restored.check(1, 0, 0, 4).duplicate == t.check(1, 0, 0, 4).duplicate
    assert restored.check(2, 2, 1, 1).error == ErrorCode.invalid_producer_epoch
    for junk in (b"", b"{", b'{"version": 9}', b'{"version": 1, "producers": [[1]]}'):
        with pytest.raises(ValueError):
            ProducerStateTable.restore(junk)


def test_expiry():
    t = ProducerStateTable()
    t.record(1, 0, 0, 0, 0, 0, 0, now_ms=1000)
    t.record(2, 0, 0, 0, 1, 1, 0, now_ms=5000)
    assert t.expire(now_ms=5000, max_idle_ms=2000) == 1
    assert t.get(1) is None and t.get(2) is not None
