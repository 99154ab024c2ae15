"""Folding a __consumer_offsets partition's log (pure): last value wins, transactions by their marker."""

from __future__ import annotations

from tinystream.broker.groups.group import CommittedOffset
from tinystream.broker.groups.persistence import TxnMarker, TxnRecord
from tinystream.broker.groups.records import (
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_group_metadata_value,
    encode_key,
    encode_offset_commit_value,
)
from tinystream.broker.groups.replay import PartitionReplay


def commit(group: str, partition: int, offset: int) -> tuple[bytes, bytes]:
    return (encode_key(OffsetCommitKey(group, "t", partition)),
            encode_offset_commit_value(OffsetCommitValue(offset=offset, leader_epoch=-1, metadata="", commit_timestamp=1)))


def test_committed_transactions_count_aborted_ones_do_not_and_open_ones_stay_pending():
    replay = PartitionReplay(0)
    for entry in [
        commit("g", 0, 5),
        TxnRecord(*commit("g", 0, 8), producer_id=1), TxnMarker(1, commit=True),
        TxnRecord(*commit("g", 1, 9), producer_id=2), TxnMarker(2, commit=False),
        TxnRecord(*commit("g", 2, 11), producer_id=3),
    ]:
        replay.add(entry)
    assert {tp: c.offset for tp, c in replay.committed("g").items()} == {("t", 0): 8}
    assert replay.open_transactions() == [(3, "g", {("t", 2): CommittedOffset(offset=11, commit_timestamp=1)})]
    assert replay.group_ids() == {"g"}


def test_a_tombstoned_group_and_its_offsets_leave_nothing_but_its_id():
    replay = PartitionReplay(0)
    value = GroupMetadataValue(protocol_type="consumer", generation=1, protocol=None, leader=None,
                               current_state_timestamp=-1, members=())
    replay.add((encode_key(GroupMetadataKey("g")), encode_group_metadata_value(value)))
    replay.add(commit("g", 0, 5))
    replay.add((encode_key(GroupMetadataKey("g")), None))
    replay.add((commit("g", 0, 5)[0], None))
    assert replay.group_values == {"g": None} and replay.committed("g") == {}


def test_an_unreadable_record_is_skipped_and_not_counted_as_read():
    replay = PartitionReplay(0)
    assert replay.add((b"\xff\xff", b"")) is False
    assert replay.add(TxnMarker(1, commit=True)) is False
    assert replay.add(commit("g", 0, 5)) is True
    assert replay.committed("g")[("t", 0)].offset == 5
