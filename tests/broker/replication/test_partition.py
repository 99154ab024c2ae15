"""Partition: leader/follower roles, the high watermark with followers, epochs; the purgatory."""

from __future__ import annotations

import asyncio

from tinystream.broker.errors import ErrorCode
from tinystream.broker.replication.partition import Partition, PartitionState
from tinystream.broker.replication.purgatory import Purgatory
from tinystream.broker.storage.batch import read_header
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.topic_partition import TopicPartition
from tinystream.testing.broker import now_batch

TP = TopicPartition("t", 0)


def append(p: Partition, n: int = 1, acks: int = 1):
    batch = now_batch([(None, b"x")] * n)
    return p.append_as_leader(memoryview(batch), read_header(batch), required_acks=acks, now_ms=0)


def test_sole_replica_high_watermark_follows_appends():
    p = Partition(TP, MemoryLog(), broker_id=0, state=PartitionState(0, 0, (0,), (0,)))
    outcome = append(p, 3)
    assert outcome.hw_moved and p.high_watermark == 3


def test_high_watermark_waits_for_isr_followers():
    p = Partition(TP, MemoryLog(), broker_id=0, state=PartitionState(0, 1, (0, 1, 2), (0, 1, 2)))
    append(p, 4)
    assert p.high_watermark == 0
    assert not p.record_follower_fetch(1, 4, now_ms=1)  # follower 1 caught up; 2 has not fetched
    assert p.high_watermark == 0
    assert p.record_follower_fetch(2, 2, now_ms=1)
    assert p.high_watermark == 2
    p.record_follower_fetch(2, 4, now_ms=2)
    assert p.high_watermark == 4
    assert p.read(0, 1 << 20, for_replica=False, min_one=True).next_offset == 4


def test_min_insync_replicas_for_acks_all():
    from tinystream.broker.storage.base import LogConfig

    p = Partition(TP, MemoryLog(LogConfig(min_insync_replicas=2)), broker_id=0, state=PartitionState(0, 0, (0, 1), (0,)))
    assert append(p, acks=-1).error == ErrorCode.not_enough_replicas
    assert append(p, acks=1).error == ErrorCode.none


def test_follower_refuses_client_appends_and_takes_the_leader_hw():
    leader_log = MemoryLog()
    leader = Partition(TP, leader_log, broker_id=0, state=PartitionState(0, 0, (0, 1), (0,)))
    append(leader, 2)
    follower = Partition(TP, MemoryLog(), broker_id=1, state=PartitionState(0, 0, (0, 1), (0,)))
    assert append(follower).error == ErrorCode.not_leader_or_follower
    data = leader.read(0, 1 << 20, for_replica=True, min_one=True).data
    assert follower.append_as_follower(memoryview(bytes(data)), leader_hw=1) == 2
    assert follower.high_watermark == 1


def test_leader_epoch_checks_and_end_offsets():
    p = Partition(TP, MemoryLog(), broker_id=0, state=PartitionState(0, 3, (0,), (0,)))
    assert p.check_leader_epoch(-1) == ErrorCode.none
    assert p.check_leader_epoch(2) == ErrorCode.fenced_leader_epoch
    assert p.check_leader_epoch(4) == ErrorCode.unknown_leader_epoch
    assert p.end_offset_for_epoch(3) == (3, 0)  # the current epoch ends at the log end, even when empty
    append(p, 2)
    assert p.end_offset_for_epoch(3) == (3, 2)


async def test_purgatory_wakes_and_times_out():
    purgatory = Purgatory()
    waiter = asyncio.ensure_future(purgatory.wait(["a", "b"], 5))
    await asyncio.sleep(0)
    assert purgatory.waiting == 1
    purgatory.notify("b")
    assert await waiter is True and purgatory.waiting == 0
    assert await purgatory.wait(["a"], 0.01) is False
    assert await purgatory.wait(["a"], 0) is False


def test_isr_expansion_leaves_out_ineligible_followers():
    # KIP-841: a caught-up follower that is fenced or drained is not proposed (the controller would
    # refuse the whole AlterPartition, and the eligible one would never join).
    p = Partition(TP, MemoryLog(), broker_id=0, state=PartitionState(0, 0, (0, 1, 2), (0,)))
    append(p, 2)
    p.record_follower_fetch(1, 2, now_ms=5)
    p.record_follower_fetch(2, 2, now_ms=5)
    assert p.isr_change(now_ms=6, lag_time_max_ms=30_000) == (0, 1, 2)
    assert p.isr_change(now_ms=6, lag_time_max_ms=30_000, eligible=frozenset({0, 1})) == (0, 1)  # 2: drained
    assert p.isr_change(now_ms=6, lag_time_max_ms=30_000, eligible=frozenset({0})) is None  # 1 unregistered too


def test_an_unanswered_isr_expansion_holds_the_high_watermark_for_the_members_asked_for():
    # A reassignment's new replica caught up; the leader asks to add it. The controller may commit that
    # ISR and at once make the new replica leader: nothing acknowledged meanwhile may be missing there.
    p = Partition(TP, MemoryLog(), broker_id=0, state=PartitionState(0, 0, (0, 1), (0,)))
    append(p, 2)
    assert p.high_watermark == 2  # the sole ISR member: acknowledged at once
    p.record_follower_fetch(1, 2, now_ms=5)
    isr = p.isr_change(now_ms=6, lag_time_max_ms=30_000)
    assert isr == (0, 1)
    p.isr_change_sent(isr)
    assert p.maximal_isr == (0, 1)
    append(p, 3)
    assert p.high_watermark == 2  # waits for replica 1, which the controller may elect next
    p.record_follower_fetch(1, 5, now_ms=7)
    assert p.high_watermark == 5
    p.isr_change_settled()
    assert p.maximal_isr == (0,)


def test_a_refused_isr_change_stops_holding_the_high_watermark_and_a_new_epoch_ends_it():
    p = Partition(TP, MemoryLog(), broker_id=0, state=PartitionState(0, 0, (0, 1), (0,)))
    append(p, 2)
    p.record_follower_fetch(1, 2, now_ms=5)
    p.isr_change_sent((0, 1))
    append(p, 1)
    assert p.high_watermark == 2
    assert p.isr_change_settled() is True  # refused while this leadership stands: the committed ISR counts again
    assert p.high_watermark == 3
    assert p.isr_change_settled() is False  # nothing in flight: nothing moves
    p.isr_change_sent((0, 1))
    p.update_state(PartitionState(0, 1, (0, 1), (0,)), now_ms=8)  # a new leader epoch: the request is void
    assert p.maximal_isr == (0,)
