"""Transactions in a partition: the last stable offset, markers, the aborted index, restarts (file logs)."""

from __future__ import annotations

from tinystream.broker.errors import ErrorCode
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.replication.replica_manager import ReplicaManager
from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.batch import build_batch, read_header
from tinystream.broker.storage.log_manager import LogManager
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.broker.storage.txn_index import AbortedTxn

TP = TopicPartition("t", 0)
SOLE = PartitionState(leader=0, leader_epoch=0, replicas=(0,), isr=(0,))


def manager(tmp_path) -> ReplicaManager:
    rm = ReplicaManager(broker_id=0, log_manager=LogManager([tmp_path]), clock=lambda: 1000)
    rm.open_partition(TP, LogConfig(), SOLE)
    return rm


def produce(rm, pid, seq, *values, transactional=True, epoch=0):
    batch = build_batch([(None, v) for v in values], producer_id=pid, producer_epoch=epoch, base_sequence=seq,
                        transactional=transactional)
    out = rm.append([(TP, memoryview(batch), read_header(batch))], required_acks=1)[TP]
    assert out.error == ErrorCode.none, out
    return out


def marker(rm, pid, commit, epoch=0, coordinator_epoch=0):
    return rm.append_markers([(TP, pid, epoch, commit, coordinator_epoch)])[TP]


def test_lso_follows_open_transactions_and_aborts_are_indexed(tmp_path):
    rm = manager(tmp_path)
    p = rm.get(TP)
    produce(rm, 1, 0, b"a", b"b")  # offsets 0-1, txn of producer 1
    produce(rm, 2, 0, b"plain", transactional=False)  # offset 2
    produce(rm, 3, 0, b"c")  # offset 3, txn of producer 3
    assert p.high_watermark == 4 and p.last_stable_offset == 0
    m = marker(rm, 1, commit=False)  # offset 4
    assert m.error == ErrorCode.none and m.base_offset == 4
    assert p.last_stable_offset == 3  # producer 3 still open
    assert p.aborted_transactions(0, 10) == [AbortedTxn(1, 0, 4, 0)]
    marker(rm, 3, commit=True)  # offset 5
    assert p.last_stable_offset == p.high_watermark == 6
    assert p.aborted_transactions(5, 10) == []  # the abort ended before the fetch offset
    read = p.read(0, 1 << 20, for_replica=False, min_one=True, read_committed=True)
    assert read.next_offset == 6


def test_read_committed_stops_at_the_lso(tmp_path):
    rm = manager(tmp_path)
    produce(rm, 1, 0, b"x", transactional=False)  # 0
    produce(rm, 2, 0, b"open")  # 1
    p = rm.get(TP)
    committed = p.read(0, 1 << 20, for_replica=False, min_one=True, read_committed=True)
    uncommitted = p.read(0, 1 << 20, for_replica=False, min_one=True)
    assert committed.next_offset == 1 and uncommitted.next_offset == 2


def test_plain_batch_inside_an_open_transaction_and_stale_markers_are_refused(tmp_path):
    rm = manager(tmp_path)
    produce(rm, 1, 0, b"a")
    plain = build_batch([(None, b"p")], producer_id=1, producer_epoch=0, base_sequence=1)
    assert rm.append([(TP, memoryview(plain), read_header(plain))], required_acks=1)[TP].error == \
        ErrorCode.invalid_txn_state
    assert marker(rm, 1, commit=False, epoch=1, coordinator_epoch=5).error == ErrorCode.none
    # The marker moved producer 1 to epoch 1: its zombie (epoch 0) is refused.
    stale = build_batch([(None, b"z")], producer_id=1, producer_epoch=0, base_sequence=1, transactional=True)
    assert rm.append([(TP, memoryview(stale), read_header(stale))], required_acks=1)[TP].error == \
        ErrorCode.invalid_producer_epoch
    assert marker(rm, 1, commit=False, epoch=0, coordinator_epoch=5).error == ErrorCode.invalid_producer_epoch
    assert marker(rm, 1, commit=True, epoch=1, coordinator_epoch=4).error == ErrorCode.transaction_coordinator_fenced


def test_state_survives_a_restart_with_and_without_snapshot(tmp_path):
    rm = manager(tmp_path)
    produce(rm, 1, 0, b"a")  # 0: aborted below
    marker(rm, 1, commit=False)  # 1
    produce(rm, 2, 0, b"b")  # 2: still open at the restart
    rm.close()
    for snapshot in (True, False):
        if not snapshot:
            (tmp_path / "t-0" / "producer-state.json").unlink()
        again = manager(tmp_path)
        p = again.get(TP)
        assert p.aborted_transactions(0, 10) == [AbortedTxn(1, 0, 1, 0)]
        assert p.last_stable_offset == 2  # producer 2's transaction is still open
        assert marker(again, 2, commit=True).error == ErrorCode.none
        assert p.last_stable_offset == p.high_watermark
        again.truncate(TP, 3)  # forget that commit, so the next round starts from the same log
        again.close()


def test_truncation_drops_aborts_past_the_new_end(tmp_path):
    rm = manager(tmp_path)
    produce(rm, 1, 0, b"a")  # 0
    marker(rm, 1, commit=False)  # 1
    produce(rm, 2, 0, b"b")  # 2
    marker(rm, 2, commit=False)  # 3
    p = rm.get(TP)
    assert len(p.txn_index) == 2
    rm.truncate(TP, 3)
    assert [a.producer_id for a in p.aborted_transactions(0, 10)] == [1]
    assert p.producers.ongoing == {2: 2}
    rm.close()
    assert [a.producer_id for a in manager(tmp_path).get(TP).aborted_transactions(0, 10)] == [1]
