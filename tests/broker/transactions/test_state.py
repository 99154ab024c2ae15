"""The pure transaction state machine: Kafka's transitions, fencing, retries, errors that name state and event."""

from __future__ import annotations

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.transactions.errors import IllegalTransition
from tinystream.broker.transactions.state import MAX_EPOCH, TransactionMetadata, TxnState

TP0 = ("out", 0)
TP1 = ("out", 1)


def fresh(pid: int = 7) -> TransactionMetadata:
    """What InitProducerId leaves: epoch 0, Empty."""
    meta = TransactionMetadata("tx", pid)
    d = meta.init_producer_id(timeout_ms=60_000, expected_producer_id=-1, expected_epoch=-1, now=1)
    assert d.error == ErrorCode.none and d.transit is not None
    meta.complete(d.transit)
    return meta


def ongoing(meta: TransactionMetadata, *tps: tuple[str, int], now: int = 10) -> TransactionMetadata:
    d = meta.add_partitions(producer_id=meta.producer_id, producer_epoch=meta.producer_epoch, partitions=set(tps), now=now)
    assert d.transit is not None, d
    meta.complete(d.transit)
    return meta


def test_first_init_gives_epoch_zero_and_each_init_bumps_it():
    meta = fresh()
    assert (meta.state, meta.producer_epoch) == (TxnState.EMPTY, 0)
    d = meta.init_producer_id(timeout_ms=60_000, expected_producer_id=-1, expected_epoch=-1, now=2)
    meta.complete(d.transit)
    assert meta.producer_epoch == 1 and meta.last_producer_epoch == 0


def test_commit_path_through_every_state():
    meta = ongoing(fresh(), TP0)
    assert meta.state is TxnState.ONGOING and meta.partitions == {TP0} and meta.txn_start_ms == 10
    ongoing(meta, TP1, now=20)
    assert meta.partitions == {TP0, TP1} and meta.txn_start_ms == 10  # the start stays
    d = meta.end_txn(producer_id=7, producer_epoch=0, commit=True, now=30)
    assert d.transit is not None and d.transit.state is TxnState.PREPARE_COMMIT
    meta.complete(d.transit)
    transit = meta.complete_markers(now=40)
    meta.complete(transit)
    assert meta.state is TxnState.COMPLETE_COMMIT and meta.partitions == set()


def test_adding_known_partitions_to_an_ongoing_transaction_writes_nothing():
    meta = ongoing(fresh(), TP0)
    d = meta.add_partitions(producer_id=7, producer_epoch=0, partitions={TP0}, now=11)
    assert d.error == ErrorCode.none and d.transit is None


def test_pending_transit_makes_others_wait():
    meta = fresh()
    d = meta.add_partitions(producer_id=7, producer_epoch=0, partitions={TP0}, now=5)
    assert meta.pending is TxnState.ONGOING
    assert meta.add_partitions(producer_id=7, producer_epoch=0, partitions={TP1}, now=6).error == \
        ErrorCode.concurrent_transactions
    assert meta.init_producer_id(timeout_ms=1, expected_producer_id=-1, expected_epoch=-1, now=6).error == \
        ErrorCode.concurrent_transactions
    meta.abandon()  # the append failed: nothing changed
    assert meta.state is TxnState.EMPTY and meta.pending is None
    assert d.transit is not None


@pytest.mark.parametrize("commit", [True, False])
def test_end_retries_and_the_opposite_result(commit):
    meta = ongoing(fresh(), TP0)
    meta.complete(meta.end_txn(producer_id=7, producer_epoch=0, commit=commit, now=1).transit)
    # Prepared, markers not yet written: the same end is retried later, the opposite is refused.
    assert meta.end_txn(producer_id=7, producer_epoch=0, commit=commit, now=2).error == ErrorCode.concurrent_transactions
    assert meta.end_txn(producer_id=7, producer_epoch=0, commit=not commit, now=2).error == ErrorCode.invalid_txn_state
    assert meta.add_partitions(producer_id=7, producer_epoch=0, partitions={TP1}, now=2).error == \
        ErrorCode.concurrent_transactions
    meta.complete(meta.complete_markers(now=3))
    assert meta.end_txn(producer_id=7, producer_epoch=0, commit=commit, now=4).error == ErrorCode.none
    assert meta.end_txn(producer_id=7, producer_epoch=0, commit=not commit, now=4).error == ErrorCode.invalid_txn_state


def test_end_of_an_empty_transaction_is_invalid_txn_state():
    assert fresh().end_txn(producer_id=7, producer_epoch=0, commit=True, now=1).error == ErrorCode.invalid_txn_state


def test_old_epoch_is_fenced_and_unknown_producer_id_is_a_mapping_error():
    meta = fresh()
    meta.complete(meta.init_producer_id(timeout_ms=60_000, expected_producer_id=-1, expected_epoch=-1, now=2).transit)
    assert meta.add_partitions(producer_id=7, producer_epoch=0, partitions={TP0}, now=3).error == \
        ErrorCode.producer_fenced
    assert meta.end_txn(producer_id=7, producer_epoch=0, commit=True, now=3).error == ErrorCode.producer_fenced
    assert meta.add_partitions(producer_id=8, producer_epoch=1, partitions={TP0}, now=3).error == \
        ErrorCode.invalid_producer_id_mapping
    assert meta.verify_partitions(producer_id=7, producer_epoch=0, partitions=[TP0]) == {TP0: ErrorCode.producer_fenced}


def test_init_on_an_ongoing_transaction_asks_for_a_fence_then_abort():
    meta = ongoing(fresh(), TP0)
    d = meta.init_producer_id(timeout_ms=60_000, expected_producer_id=-1, expected_epoch=-1, now=20)
    assert d.fence and d.error == ErrorCode.concurrent_transactions and d.transit is None
    meta.fence()
    assert meta.state is TxnState.PREPARE_EPOCH_FENCE and meta.producer_epoch == 1
    # The zombie (epoch 0) can do nothing more.
    assert meta.add_partitions(producer_id=7, producer_epoch=0, partitions={TP1}, now=21).error == \
        ErrorCode.producer_fenced
    abort = meta.end_txn(producer_id=7, producer_epoch=1, commit=False, now=21, from_client=False)
    assert abort.transit is not None and abort.transit.state is TxnState.PREPARE_ABORT and abort.transit.producer_epoch == 1
    meta.complete(abort.transit)
    meta.complete(meta.complete_markers(now=22))
    again = meta.init_producer_id(timeout_ms=60_000, expected_producer_id=-1, expected_epoch=-1, now=23)
    meta.complete(again.transit)
    assert (meta.state, meta.producer_epoch) == (TxnState.EMPTY, 2)


def test_kip360_bump_with_own_id_and_epoch_and_a_stranger_is_fenced():
    meta = fresh()
    assert meta.init_producer_id(timeout_ms=1000, expected_producer_id=99, expected_epoch=0, now=2).error == \
        ErrorCode.producer_fenced
    assert meta.init_producer_id(timeout_ms=1000, expected_producer_id=7, expected_epoch=5, now=2).error == \
        ErrorCode.producer_fenced
    d = meta.init_producer_id(timeout_ms=1000, expected_producer_id=7, expected_epoch=0, now=2)
    meta.complete(d.transit)
    assert meta.producer_epoch == 1
    # A retry of that bump (the answer was lost) gets the same epoch, not another bump.
    retry = meta.init_producer_id(timeout_ms=1000, expected_producer_id=7, expected_epoch=0, now=3)
    meta.complete(retry.transit)
    assert meta.producer_epoch == 1


def test_exhausted_epoch_rotates_the_producer_id():
    meta = fresh()
    meta.producer_epoch = MAX_EPOCH
    with pytest.raises(ValueError):
        meta.init_producer_id(timeout_ms=1000, expected_producer_id=-1, expected_epoch=-1, now=1)
    d = meta.init_producer_id(timeout_ms=1000, expected_producer_id=-1, expected_epoch=-1, now=1, new_producer_id=42)
    meta.complete(d.transit)
    assert (meta.producer_id, meta.producer_epoch) == (42, 0)


def test_timeouts():
    meta = ongoing(fresh(), TP0, now=100)
    assert not meta.timed_out(now=100 + 60_000)
    assert meta.timed_out(now=100 + 60_001)
    assert not fresh().timed_out(now=10**12)


def test_verify_partitions():
    meta = ongoing(fresh(), TP0)
    assert meta.verify_partitions(producer_id=7, producer_epoch=0, partitions=[TP0, TP1]) == {
        TP0: ErrorCode.none, TP1: ErrorCode.invalid_txn_state,
    }


def test_illegal_transitions_name_the_state_and_the_event():
    meta = fresh()
    with pytest.raises(IllegalTransition) as info:
        meta.complete_markers(now=1)
    assert info.value.state == "Empty" and info.value.event == "markers written" and "'tx'" in str(info.value)
    with pytest.raises(IllegalTransition) as info:
        meta.prepare(TxnState.PREPARE_COMMIT, event="EndTxn(commit)", now=1)
    assert "EndTxn(commit)" in str(info.value) and "Empty" in str(info.value)
    with pytest.raises(IllegalTransition):
        meta.fence()  # only an Ongoing transaction is fenced
    t = meta.prepare(TxnState.ONGOING, event="AddPartitionsToTxn", now=1)
    with pytest.raises(IllegalTransition):
        meta.prepare(TxnState.ONGOING, event="AddPartitionsToTxn", now=1)  # one pending transit at a time
    meta.complete(t)
    with pytest.raises(IllegalTransition):
        meta.complete(t)  # nothing pending any more


def test_state_names_are_kafkas():
    assert [s.kafka_name for s in TxnState] == [
        "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
        "PrepareEpochFence",
    ]
