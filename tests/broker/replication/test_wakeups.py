"""Who a leader wakes: an append wakes the followers' long polls, a high-watermark move the consumers' and
the acks=all produces whose batch it passes; neither wakes the other side (each re-read would find nothing
it may read), and a change of leadership wakes everyone.

No sockets: a leader's ReplicaManager with followers 2 and 3 in its ISR; the followers' positions are
given by their fetches (`replica_id` >= 0), as the replica fetchers send them.
"""

from __future__ import annotations

import asyncio

from tinystream.broker.errors import ErrorCode
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.replication.replica_manager import FetchPartition, ReplicaManager
from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.batch import count_records, read_header
from tinystream.broker.storage.log_manager import LogManager
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import now_batch

TP = TopicPartition("t", 0)
LEADING = PartitionState(leader=1, leader_epoch=4, replicas=(1, 2, 3), isr=(1, 2, 3))


def leader(tmp_path) -> ReplicaManager:
    rm = ReplicaManager(broker_id=1, log_manager=LogManager([tmp_path]), clock=lambda: 1000)
    rm.open_partition(TP, LogConfig(), LEADING)
    return rm


def produce(rm: ReplicaManager, acks: int = -1):
    batch = now_batch([(None, b"x")])
    [outcome] = rm.append([(TP, memoryview(batch), read_header(batch))], required_acks=acks).values()
    assert outcome.error == ErrorCode.none
    return outcome


def long_poll(rm: ReplicaManager, offset: int, *, replica_id: int = -1) -> asyncio.Future:
    return asyncio.ensure_future(rm.fetch([FetchPartition(TP, offset, 1 << 20)], replica_id=replica_id,
                                          min_bytes=1, max_bytes=1 << 20, max_wait_ms=30_000))


async def follower_fetch(rm: ReplicaManager, replica_id: int, offset: int) -> None:
    await rm.fetch([FetchPartition(TP, offset, 1 << 20)], replica_id=replica_id, min_bytes=0,
                   max_bytes=1 << 20, max_wait_ms=0)


async def test_an_append_wakes_the_followers_and_not_the_consumers(tmp_path):
    rm = leader(tmp_path)
    consumer = long_poll(rm, 0)
    follower = long_poll(rm, 0, replica_id=2)
    await asyncio.sleep(0)
    assert (rm.purgatory.waiting, rm.follower_purgatory.waiting) == (1, 1)
    produce(rm)
    assert (rm.purgatory.waiting, rm.follower_purgatory.waiting) == (1, 0)  # the HW is still 0
    [got] = await follower
    assert count_records(bytes(got.records)) == 1
    await asyncio.sleep(0)
    assert not consumer.done()
    consumer.cancel()


async def test_a_high_watermark_move_wakes_consumers_and_acks_all_but_not_a_caught_up_follower(tmp_path):
    rm = leader(tmp_path)
    outcome = produce(rm)
    consumer = long_poll(rm, 0)
    acks_all = asyncio.ensure_future(rm.wait_replicated({TP: outcome}, 30_000))
    await follower_fetch(rm, 2, 1)  # follower 2 has the record; the HW waits for follower 3
    caught_up = long_poll(rm, 1, replica_id=2)
    await asyncio.sleep(0)
    assert (rm.purgatory.waiting, rm.acks_waiters.waiting, rm.follower_purgatory.waiting) == (1, 1, 1)
    await follower_fetch(rm, 3, 1)  # the last of the ISR: the HW moves to 1
    assert rm.get(TP).high_watermark == 1
    assert (rm.purgatory.waiting, rm.acks_waiters.waiting, rm.follower_purgatory.waiting) == (0, 0, 1)
    [got] = await consumer
    assert (got.high_watermark, count_records(bytes(got.records))) == (1, 1)
    assert (await acks_all)[TP].error == ErrorCode.none
    assert not caught_up.done()
    caught_up.cancel()


async def test_a_leader_alone_in_its_isr_wakes_consumers_on_append(tmp_path):
    rm = ReplicaManager(broker_id=1, log_manager=LogManager([tmp_path]), clock=lambda: 1000)
    rm.open_partition(TP, LogConfig(), PartitionState(leader=1, leader_epoch=4, replicas=(1,), isr=(1,)))
    consumer = long_poll(rm, 0)
    await asyncio.sleep(0)
    produce(rm, acks=1)
    [got] = await consumer
    assert (got.high_watermark, count_records(bytes(got.records))) == (1, 1)


async def test_a_change_of_state_wakes_both_sides(tmp_path):
    rm = leader(tmp_path)
    outcome = produce(rm)
    acks_all = asyncio.ensure_future(rm.wait_replicated({TP: outcome}, 30_000))
    follower = long_poll(rm, 1, replica_id=2)
    await asyncio.sleep(0)
    assert (rm.acks_waiters.waiting, rm.follower_purgatory.waiting) == (1, 1)
    rm.open_partition(TP, LogConfig(), PartitionState(leader=2, leader_epoch=5, replicas=(1, 2, 3), isr=(1, 2, 3)))
    assert (await acks_all)[TP].error == ErrorCode.not_leader_or_follower
    [got] = await follower
    assert got.error == ErrorCode.not_leader_or_follower


async def test_an_acks_all_produce_is_woken_only_by_the_high_watermark_that_passes_its_batch(tmp_path):
    rm = leader(tmp_path)
    first, second = produce(rm), produce(rm)  # offsets 0 and 1, two requests in flight
    waits = [asyncio.ensure_future(rm.wait_replicated({TP: o}, 30_000)) for o in (first, second)]
    await asyncio.sleep(0)
    assert rm.acks_waiters.waiting == 2
    await follower_fetch(rm, 2, 1)
    await follower_fetch(rm, 3, 1)  # the HW moves to 1: past the first batch only
    assert rm.acks_waiters.waiting == 1
    assert (await waits[0])[TP].error == ErrorCode.none
    assert not waits[1].done()
    await follower_fetch(rm, 2, 2)
    await follower_fetch(rm, 3, 2)
    assert (await waits[1])[TP].error == ErrorCode.none
    assert rm.acks_waiters.waiting == 0


async def test_acks_all_times_out_when_the_followers_stay_behind(tmp_path):
    rm = leader(tmp_path)
    outcome = produce(rm)
    await follower_fetch(rm, 2, 1)  # one follower of two: the HW stays at 0
    done = await rm.wait_replicated({TP: outcome}, 50)
    assert done[TP].error == ErrorCode.request_timed_out
    assert rm.acks_waiters.waiting == 0


async def test_an_acks_all_produce_held_by_a_pending_isr_is_woken_when_the_change_settles(tmp_path):
    # The HW waits for the maximal ISR while an AlterPartition is out; a refusal that lets the committed ISR
    # count again moves it outside any fetch (control/session.py settles it through the replica manager).
    rm = ReplicaManager(broker_id=1, log_manager=LogManager([tmp_path]), clock=lambda: 1000)
    rm.open_partition(TP, LogConfig(), PartitionState(leader=1, leader_epoch=4, replicas=(1, 2), isr=(1,)))
    rm.get(TP).isr_change_sent((1, 2))
    outcome = produce(rm)
    acks_all = asyncio.ensure_future(rm.wait_replicated({TP: outcome}, 30_000))
    await asyncio.sleep(0)
    assert rm.acks_waiters.waiting == 1
    rm.settle_isr_change(rm.get(TP))
    assert rm.get(TP).high_watermark == 1  # the committed ISR (the leader alone) counts again
    assert (await acks_all)[TP].error == ErrorCode.none
