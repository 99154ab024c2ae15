"""The aborted-transaction index: Kafka's 34-byte entries, queries, trimming, a torn tail."""

from __future__ import annotations

import struct

from tinystream.broker.storage.txn_index import ENTRY_SIZE, AbortedTxn, TxnIndex


def test_entries_are_kafkas_layout_and_survive_reopening(tmp_path):
    path = tmp_path / "aborted-txns.index"
    index = TxnIndex(path)
    index.append(AbortedTxn(7, 10, 20, 5))
    index.append(AbortedTxn(8, 15, 30, 10))
    index.append(AbortedTxn(7, 10, 20, 5))  # a replay of a marker already indexed
    data = path.read_bytes()
    assert len(data) == 2 * ENTRY_SIZE == 68
    assert struct.unpack_from(">hqqqq", data, 0) == (0, 7, 10, 20, 5)
    assert TxnIndex(path).entries() == [AbortedTxn(7, 10, 20, 5), AbortedTxn(8, 15, 30, 10)]


def test_collect_is_kafkas_overlap_rule():
    index = TxnIndex()
    for entry in (AbortedTxn(1, 0, 5, 0), AbortedTxn(2, 3, 12, 0), AbortedTxn(3, 20, 25, 20)):
        index.append(entry)
    # marker at or after the fetch offset, first offset below the end of what was read
    assert [a.producer_id for a in index.collect(6, 21)] == [2, 3]
    assert [a.producer_id for a in index.collect(0, 3)] == [1]
    assert index.collect(26, 100) == []


def test_truncate_and_trim_rewrite_the_file(tmp_path):
    path = tmp_path / "aborted-txns.index"
    index = TxnIndex(path)
    for i in range(5):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, 0))
    index.truncate_to(35)  # markers at 35 and 45 are gone with the log's tail
    index.trim_before(10)  # the marker at 5 went with the log's head
    assert [a.last_offset for a in TxnIndex(path).entries()] == [15, 25]


def test_a_torn_last_entry_is_ignored(tmp_path):
    path = tmp_path / "aborted-txns.index"
    index = TxnIndex(path)
    index.append(AbortedTxn(1, 0, 5, 0))
    index.append(AbortedTxn(2, 6, 9, 6))
    path.write_bytes(path.read_bytes()[:-7])  # a crash mid-write
    reopened = TxnIndex(path)
    assert reopened.entries() == [AbortedTxn(1, 0, 5, 0)]
    reopened.append(AbortedTxn(3, 10, 12, 10))  # lands aligned after the cut
    assert TxnIndex(path).entries() == [AbortedTxn(1, 0, 5, 0), AbortedTxn(3, 10, 12, 10)]
