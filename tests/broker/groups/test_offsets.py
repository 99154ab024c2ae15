"""The pure offsets core: what a commit keeps, its records, the OffsetFetch answer, open transactions."""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.group import CommittedOffset
from tinystream.broker.groups.offsets import (
    PendingTxnOffsets,
    accept_commit,
    commit_records,
    fetch_answer,
    offset_tombstones,
)
from tinystream.broker.groups.records import OffsetCommitKey, OffsetCommitValue, decode_key, decode_value


def test_accept_commit_refuses_only_the_partition_whose_metadata_is_too_large():
    request = {("t", 0): (5, 2, "x" * 5), ("t", 1): (7, -1, None), ("t", 2): (8, 0, "x" * 4)}
    results, accepted = accept_commit(request, metadata_max=4, now=123)
    assert results == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): ErrorCode.none, ("t", 2): ErrorCode.none}
    assert accepted == {("t", 1): CommittedOffset(offset=7, leader_epoch=-1, metadata="", commit_timestamp=123),
                        ("t", 2): CommittedOffset(offset=8, leader_epoch=0, metadata="xxxx", commit_timestamp=123)}


def test_commit_records_decode_back_to_the_accepted_offsets_and_tombstones_to_none():
    _, accepted = accept_commit({("t", 3): (9, 1, "m")}, metadata_max=10, now=50)
    [(key, value)] = commit_records("g", accepted)
    assert decode_key(key) == OffsetCommitKey("g", "t", 3)
    assert decode_value(decode_key(key), value) == OffsetCommitValue(offset=9, leader_epoch=1, metadata="m",
                                                                      commit_timestamp=50)
    assert offset_tombstones("g", [("t", 3)]) == [(key, None)]


def test_fetch_answer_gives_minus_one_for_nothing_committed_and_flags_unstable_partitions():
    committed = {("t", 0): CommittedOffset(offset=4, leader_epoch=2, metadata="a")}
    answer = fetch_answer(committed, [("t", 0), ("t", 1)], unstable=lambda tp: tp == ("t", 0))
    assert [(o.offset, o.leader_epoch, o.metadata) for o in answer.offsets.values()] == [(4, 2, "a"), (-1, -1, "")]
    assert answer.partition_errors == {("t", 0): ErrorCode.unstable_offset_commit}
    assert list(fetch_answer(committed, None, unstable=lambda tp: False).offsets) == [("t", 0)]


def test_a_marker_takes_only_the_groups_of_its_partition_and_later_commits_win():
    pending = PendingTxnOffsets()
    pending.add(7, "here", {("t", 0): CommittedOffset(offset=1)})
    pending.add(7, "here", {("t", 0): CommittedOffset(offset=2)})
    pending.add(7, "elsewhere", {("t", 0): CommittedOffset(offset=3)})
    assert pending.has_pending("here", ("t", 0)) and not pending.has_pending("here", ("t", 1))
    assert pending.take(7, lambda gid: gid == "here") == {"here": {("t", 0): CommittedOffset(offset=2)}}
    assert not pending.has_pending("here", ("t", 0))
    assert pending.has_pending("elsewhere", ("t", 0))  # its own partition's marker decides it
    assert pending.take(8, lambda gid: True) == {}


def test_markers_deferred_for_a_loading_partition_come_back_once_in_order():
    pending = PendingTxnOffsets()
    pending.defer(3, producer_id=1, commit=True)
    pending.defer(3, producer_id=2, commit=False)
    assert pending.take_deferred(3) == [(1, True), (2, False)]
    assert pending.take_deferred(3) == []
