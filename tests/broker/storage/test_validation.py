"""The inlined produce checks agree with batch.check_batch on every input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.broker.storage.base import CorruptRecordError, InvalidRecordError, LogConfig, RecordTooLargeError
from tinystream.broker.storage.batch import build_batch, check_batch, parse_header, read_header
from tinystream.broker.storage.validation import LeaderAppend, prepare_leader_append, split_replicated

GOOD = build_batch([(b"key", b"value" * 20)] * 3, base_timestamp=1000)


def verdict(call):
    try:
        call()
    except (CorruptRecordError, InvalidRecordError) as exc:
        return type(exc)
    return None


@settings(max_examples=300, deadline=None)
@given(
    at=st.integers(0, len(GOOD) - 1),
    value=st.integers(0, 255),
    cut=st.integers(0, len(GOOD) + 3),
)
def test_prepare_and_check_batch_agree(at, value, cut):
    mutated = bytearray(GOOD)
    mutated[at] = value
    data = bytes(mutated[:cut]) if cut <= len(GOOD) else bytes(mutated) + b"\0" * (cut - len(GOOD))
    config = LogConfig()
    assert verdict(lambda: prepare_leader_append(data, config, 0, 0, 0)) == verdict(lambda: check_batch(data))
    if len(data) >= len(GOOD):  # the produce path hands over the header it read: same verdict
        header = read_header(data)
        assert verdict(lambda: prepare_leader_append(data, config, 0, 0, 0, header)) == verdict(lambda: check_batch(data))


def test_prepared_append_is_the_stored_batch():
    prepared = LeaderAppend._make(prepare_leader_append(memoryview(GOOD), LogConfig(), 42, 7, 5))
    stored = prepared.head + bytes(prepared.tail)
    check_batch(stored)
    header = parse_header(stored)
    assert (header.base_offset, header.partition_leader_epoch) == (42, 7)
    assert (prepared.base_offset, prepared.last_offset, prepared.max_timestamp, prepared.log_append_time) == (
        42, 44, 1000, -1)
    assert prepared.size == len(GOOD)


def test_size_limits_come_first():
    with pytest.raises(RecordTooLargeError, match="max.message.bytes"):
        prepare_leader_append(GOOD, LogConfig(max_message_bytes=100), 0, 0, 0)
    with pytest.raises(RecordTooLargeError, match="segment.bytes"):
        prepare_leader_append(GOOD, LogConfig(segment_bytes=100), 0, 0, 0)


def test_split_replicated_ignores_a_cut_tail_and_refuses_going_back():
    batches = build_batch([(b"k", b"v")], base_offset=5) + build_batch([(b"k", b"v")], base_offset=6)
    view, parsed = split_replicated(batches[:-1], config=LogConfig(), log_end_offset=5)
    assert [fields[0] for _pos, fields in parsed] == [5]
    with pytest.raises(InvalidRecordError):
        split_replicated(batches, config=LogConfig(), log_end_offset=6)
