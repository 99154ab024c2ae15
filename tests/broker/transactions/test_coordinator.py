"""TransactionCoordinator over an in-memory state log and a recording marker writer (no sockets)."""

from __future__ import annotations

import asyncio
import itertools
from collections import defaultdict

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.transactions.coordinator import TransactionCoordinator
from tinystream.broker.transactions.errors import TxnLogError
from tinystream.broker.transactions.records import decode_value
from tinystream.broker.transactions.state import TxnState

pytestmark = pytest.mark.asyncio


class MemoryLog:
    def __init__(self) -> None:
        self.records: dict[int, list[tuple[bytes, bytes | None]]] = defaultdict(list)
        self.fail: list[ErrorCode] = []

    async def append(self, partition, records):
        if self.fail:
            raise TxnLogError(self.fail.pop(0))
        self.records[partition].extend(records)

    def read(self, partition):
        return list(self.records[partition])

    def states(self, partition=0):
        return [decode_value(v).state for _, v in self.records[partition]]


class Markers:
    def __init__(self) -> None:
        self.written: list[tuple[int, int, bool, int, tuple]] = []
        self.refuse: dict[tuple[str, int], list[ErrorCode]] = defaultdict(list)

    async def write_markers(self, *, producer_id, producer_epoch, commit, coordinator_epoch, partitions):
        out = {}
        for tp in partitions:
            out[tp] = self.refuse[tp].pop(0) if self.refuse[tp] else ErrorCode.none
            if out[tp] == ErrorCode.none:
                self.written.append((producer_id, producer_epoch, commit, coordinator_epoch, tp))
        return out


class Clock:
    def __init__(self) -> None:
        self.now = 1_000

    def __call__(self) -> int:
        return self.now


def make(log=None, markers=None, clock=None):
    ids = itertools.count(100)

    async def next_id():
        return next(ids)

    return TransactionCoordinator(state_log=log or MemoryLog(), markers=markers or Markers(), next_producer_id=next_id,
                                  partition_for=lambda _txn: 0, clock=clock or Clock(), abort_check_interval_ms=10**6)


async def settle(coordinator, txn="tx"):
    for _ in range(200):
        await asyncio.sleep(0.01)
        _, d = coordinator.describe(txn)
        if d is not None and d.state not in (TxnState.PREPARE_COMMIT, TxnState.PREPARE_ABORT):
            return d
    raise AssertionError("the transaction did not complete")


async def test_not_coordinator_until_loaded_and_a_full_commit():
    log, markers = MemoryLog(), Markers()
    c = make(log, markers)
    assert (await c.init_producer_id(transactional_id="tx", timeout_ms=60_000))[0] == ErrorCode.not_coordinator
    await c.load_partition(0, coordinator_epoch=3)
    error, pid, epoch = await c.init_producer_id(transactional_id="tx", timeout_ms=60_000)
    assert (error, pid, epoch) == (ErrorCode.none, 100, 0)
    assert await c.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                  partitions=[("out", 0), ("out", 1)]) == ErrorCode.none
    assert await c.end_txn(transactional_id="tx", producer_id=pid, producer_epoch=epoch, commit=True) == ErrorCode.none
    d = await settle(c)
    assert d.state is TxnState.COMPLETE_COMMIT
    assert sorted(markers.written) == [(100, 0, True, 3, ("out", 0)), (100, 0, True, 3, ("out", 1))]
    assert log.states() == [TxnState.EMPTY, TxnState.ONGOING, TxnState.PREPARE_COMMIT, TxnState.COMPLETE_COMMIT]
    await c.stop()


async def test_markers_are_retried_until_written():
    markers = Markers()
    markers.refuse[("out", 0)] = [ErrorCode.not_leader_or_follower, ErrorCode.network_exception]
    c = make(markers=markers)
    await c.load_partition(0, 0)
    _, pid, epoch = await c.init_producer_id(transactional_id="tx", timeout_ms=60_000)
    await c.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch, partitions=[("out", 0)])
    await c.end_txn(transactional_id="tx", producer_id=pid, producer_epoch=epoch, commit=False)
    assert (await settle(c)).state is TxnState.COMPLETE_ABORT
    assert markers.written == [(pid, epoch, False, 0, ("out", 0))]
    await c.stop()


async def test_second_init_fences_the_zombie_and_aborts_its_transaction():
    markers = Markers()
    c = make(markers=markers)
    await c.load_partition(0, 0)
    _, pid, epoch = await c.init_producer_id(transactional_id="tx", timeout_ms=60_000)
    await c.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch, partitions=[("out", 0)])
    assert (await c.init_producer_id(transactional_id="tx", timeout_ms=60_000))[0] == ErrorCode.concurrent_transactions
    await settle(c)
    assert markers.written == [(pid, epoch + 1, False, 0, ("out", 0))]  # the abort carries the bumped epoch
    error, pid2, epoch2 = await c.init_producer_id(transactional_id="tx", timeout_ms=60_000)
    assert (error, pid2, epoch2) == (ErrorCode.none, pid, epoch + 2)
    # The zombie is fenced everywhere.
    assert await c.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                  partitions=[("out", 1)]) == ErrorCode.producer_fenced
    assert await c.end_txn(transactional_id="tx", producer_id=pid, producer_epoch=epoch, commit=True) == \
        ErrorCode.producer_fenced
    await c.stop()


async def test_timed_out_transactions_are_aborted():
    clock, markers = Clock(), Markers()
    c = make(markers=markers, clock=clock)
    await c.load_partition(0, 0)
    _, pid, epoch = await c.init_producer_id(transactional_id="tx", timeout_ms=5_000)
    await c.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch, partitions=[("out", 0)])
    clock.now += 5_000
    assert await c.abort_timed_out() == 0
    clock.now += 1
    assert await c.abort_timed_out() == 1
    assert (await settle(c)).state is TxnState.COMPLETE_ABORT
    assert await c.end_txn(transactional_id="tx", producer_id=pid, producer_epoch=epoch, commit=True) == \
        ErrorCode.producer_fenced
    await c.stop()


async def test_failover_completes_a_prepared_transaction():
    log, markers = MemoryLog(), Markers()
    first = make(log, Markers())
    await first.load_partition(0, 0)
    _, pid, epoch = await first.init_producer_id(transactional_id="tx", timeout_ms=60_000)
    await first.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch, partitions=[("out", 0)])
    first._finish = lambda *a: asyncio.sleep(0)  # this coordinator dies right after PrepareCommit is durable
    assert await first.end_txn(transactional_id="tx", producer_id=pid, producer_epoch=epoch, commit=True) == \
        ErrorCode.none
    await first.stop()
    assert log.states()[-1] is TxnState.PREPARE_COMMIT
    second = make(log, markers)
    await second.load_partition(0, coordinator_epoch=1)
    assert (await settle(second)).state is TxnState.COMPLETE_COMMIT
    assert markers.written == [(pid, epoch, True, 1, ("out", 0))]
    await second.stop()


async def test_a_failed_state_append_changes_nothing():
    log = MemoryLog()
    c = make(log)
    await c.load_partition(0, 0)
    _, pid, epoch = await c.init_producer_id(transactional_id="tx", timeout_ms=60_000)
    log.fail = [ErrorCode.not_enough_replicas]
    assert await c.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                  partitions=[("out", 0)]) == ErrorCode.coordinator_not_available
    assert c.describe("tx")[1].state is TxnState.EMPTY
    assert await c.add_partitions(transactional_id="tx", producer_id=pid, producer_epoch=epoch,
                                  partitions=[("out", 0)]) == ErrorCode.none
    await c.stop()


async def test_invalid_timeout_and_listing():
    c = make()
    await c.load_partition(0, 0)
    assert (await c.init_producer_id(transactional_id="tx", timeout_ms=0))[0] == ErrorCode.invalid_transaction_timeout
    assert (await c.init_producer_id(transactional_id="tx", timeout_ms=10**9))[0] == ErrorCode.invalid_transaction_timeout
    await c.init_producer_id(transactional_id="tx", timeout_ms=1000)
    assert [d.transactional_id for d in c.list_transactions()] == ["tx"]
    assert c.describe("nope")[0] == ErrorCode.transactional_id_not_found
    await c.stop()


async def test_idle_transactional_ids_expire_with_a_tombstone():
    clock, log = Clock(), MemoryLog()
    ids = itertools.count(100)

    async def next_id():
        return next(ids)

    c = TransactionCoordinator(state_log=log, markers=Markers(), next_producer_id=next_id,
                               partition_for=lambda _txn: 0, clock=clock, abort_check_interval_ms=10**6,
                               id_expiration_ms=1000)
    await c.load_partition(0, 0)
    _, pid, epoch = await c.init_producer_id(transactional_id="idle", timeout_ms=60_000)
    _, pid2, epoch2 = await c.init_producer_id(transactional_id="busy", timeout_ms=60_000)
    await c.add_partitions(transactional_id="busy", producer_id=pid2, producer_epoch=epoch2, partitions=[("o", 0)])
    clock.now += 1001
    assert await c.expire_transactional_ids() == 1  # "busy" has a transaction open: it stays
    assert c.describe("idle")[0] == ErrorCode.transactional_id_not_found
    assert log.records[0][-1][1] is None  # the tombstone
    reloaded = make(log)
    await reloaded.load_partition(0, 1)
    assert [d.transactional_id for d in reloaded.list_transactions()] == ["busy"]
    await c.stop()
    await reloaded.stop()
