"""A follower's side of KIP-392 in the replica manager, and the leader's view of its in-sync followers.

No sockets: a follower's log is filled with `append_replicated`, as the replica fetcher does, with a
leader high watermark behind its log end, so the bound is visible.
"""

from __future__ import annotations

import asyncio

from tinystream.broker.errors import ErrorCode
from tinystream.broker.replication.partition import PartitionState
from tinystream.broker.replication.replica_manager import FetchPartition, ReplicaManager
from tinystream.broker.storage.base import LogConfig
from tinystream.broker.storage.batch import build_batch, count_records
from tinystream.broker.storage.log_manager import LogManager
from tinystream.broker.storage.topic_partition import TopicPartition

TP = TopicPartition("t", 0)
FOLLOWING = PartitionState(leader=1, leader_epoch=4, replicas=(1, 2, 3), isr=(1, 2, 3))
LEADING = PartitionState(leader=1, leader_epoch=4, replicas=(1, 2, 3), isr=(1, 2, 3))


def follower(tmp_path, *, records: int, leader_hw: int) -> ReplicaManager:
    """Broker 2 following broker 1; its log holds `records` one-record batches, its HW is `leader_hw`."""
    rm = ReplicaManager(broker_id=2, log_manager=LogManager([tmp_path]), clock=lambda: 1000)
    rm.open_partition(TP, LogConfig(), FOLLOWING)
    batches = b"".join(build_batch([(None, b"r%d" % i)], base_offset=i, partition_leader_epoch=4)
                       for i in range(records))
    rm.append_replicated(TP, batches, leader_hw)
    return rm


async def read(rm: ReplicaManager, offset: int, *, leader_only: bool = False, epoch: int = -1):
    [got] = await rm.fetch([FetchPartition(TP, offset, 1 << 20, epoch)], replica_id=-1, min_bytes=0,
                           max_bytes=1 << 20, max_wait_ms=0, leader_only=leader_only)
    return got


async def test_a_follower_refuses_leader_only_consumers(tmp_path):
    rm = follower(tmp_path, records=3, leader_hw=2)
    assert (await read(rm, 0, leader_only=True)).error == ErrorCode.not_leader_or_follower
    assert rm.follower_fetches == 0


async def test_a_follower_serves_up_to_its_high_watermark_and_never_past_it(tmp_path):
    rm = follower(tmp_path, records=3, leader_hw=2)
    got = await read(rm, 0)
    assert (got.error, got.high_watermark, count_records(bytes(got.records))) == (ErrorCode.none, 2, 2)
    between = await read(rm, 2)  # below its log end (3), at its HW: nothing yet (Kafka's LocalLog.read)
    assert (between.error, bytes(between.records or b"")) == (ErrorCode.none, b"")
    assert (await read(rm, 3)).error == ErrorCode.none  # at its log end: empty, not an error
    assert (await read(rm, 4)).error == ErrorCode.offset_out_of_range  # past its log end
    assert rm.follower_fetches == 3  # the served ones; the out-of-range answer is not counted


async def test_a_follower_checks_the_consumers_leader_epoch(tmp_path):
    rm = follower(tmp_path, records=1, leader_hw=1)
    assert (await read(rm, 0, epoch=3)).error == ErrorCode.fenced_leader_epoch
    assert (await read(rm, 0, epoch=5)).error == ErrorCode.unknown_leader_epoch
    assert (await read(rm, 0, epoch=4)).error == ErrorCode.none


async def test_a_long_poll_on_a_follower_is_woken_when_its_high_watermark_moves(tmp_path):
    rm = follower(tmp_path, records=3, leader_hw=2)
    poll = asyncio.ensure_future(rm.fetch([FetchPartition(TP, 2, 1 << 20)], replica_id=-1, min_bytes=1,
                                          max_bytes=1 << 20, max_wait_ms=30_000, leader_only=False))
    await asyncio.sleep(0)
    assert rm.purgatory.waiting == 1
    rm.append_replicated(TP, b"", 3)  # the leader's HW reached the follower's log end
    assert rm.purgatory.waiting == 0  # woken at once, not at max_wait
    [got] = await poll
    assert count_records(bytes(got.records)) == 1


def test_the_leader_offers_only_in_sync_followers_that_hold_the_offset(tmp_path):
    rm = ReplicaManager(broker_id=1, log_manager=LogManager([tmp_path]), clock=lambda: 1000)
    partition = rm.open_partition(TP, LogConfig(), LEADING)
    assert partition.in_sync_holding(0, 1000) == []  # no follower has said where it is
    partition.record_follower_fetch(2, 0, 900, log_start_offset=0)
    partition.record_follower_fetch(3, 0, 900, log_start_offset=5)  # its log starts past offset 0
    assert partition.in_sync_holding(0, 1000) == [(2, 0, 100)]  # (id, log end, ms since caught up)
    assert partition.in_sync_holding(1, 1000) == []  # nobody holds offset 1 yet
    partition.update_state(PartitionState(leader=1, leader_epoch=4, replicas=(1, 2, 3), isr=(1, 3)))
    assert partition.in_sync_holding(0, 1000) == []  # 2 left the ISR; 3 does not hold offset 0
