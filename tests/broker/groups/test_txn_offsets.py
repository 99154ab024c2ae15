"""Transactional offset commits (TxnOffsetCommit, KIP-98/447): pending until the marker, on load too."""

from __future__ import annotations

import asyncio

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups import GroupCoordinator, InMemoryOffsetsTopic, partition_for_group

pytestmark = pytest.mark.asyncio

GROUP = "g"
TP = ("in", 0)


async def coordinator(topic: InMemoryOffsetsTopic) -> GroupCoordinator:
    c = GroupCoordinator(offsets_topic=topic, num_partitions=1, clock=lambda: 1000, initial_rebalance_delay_ms=0)
    await c.start()
    await c.load_partition(0)
    return c


async def txn_commit(c: GroupCoordinator, offset: int, producer_id: int = 5) -> dict:
    return await c.txn_offset_commit(group_id=GROUP, producer_id=producer_id, producer_epoch=0, generation_id=-1,
                                     member_id="", group_instance_id=None, offsets={TP: (offset, -1, None)})


async def committed(c: GroupCoordinator, *, require_stable: bool = False):
    result = await c.fetch_offsets(group_id=GROUP, partitions=[TP], require_stable=require_stable)
    return result.offsets[TP].offset, result.partition_errors.get(TP, ErrorCode.none)


async def test_offsets_become_visible_on_commit_and_vanish_on_abort():
    topic = InMemoryOffsetsTopic()
    c = await coordinator(topic)
    assert await txn_commit(c, 10) == {TP: ErrorCode.none}
    assert await committed(c) == (-1, ErrorCode.none)
    assert await committed(c, require_stable=True) == (-1, ErrorCode.unstable_offset_commit)  # KIP-447
    c.complete_txn(partition_for_group(GROUP, 1), 5, commit=True)
    assert await committed(c, require_stable=True) == (10, ErrorCode.none)
    await txn_commit(c, 20)
    c.complete_txn(0, 5, commit=False)
    assert await committed(c) == (10, ErrorCode.none)
    await c.stop()


async def test_loading_applies_only_committed_transactions():
    topic = InMemoryOffsetsTopic()
    c = await coordinator(topic)
    await txn_commit(c, 10, producer_id=5)
    topic.write_marker(0, 5, commit=True)
    await txn_commit(c, 20, producer_id=6)
    topic.write_marker(0, 6, commit=False)
    await txn_commit(c, 30, producer_id=7)  # still open when the coordinator moves
    await c.stop()
    again = await coordinator(topic)
    assert await committed(again) == (10, ErrorCode.none)
    assert await committed(again, require_stable=True) == (10, ErrorCode.unstable_offset_commit)
    again.complete_txn(0, 7, commit=True)
    assert await committed(again, require_stable=True) == (30, ErrorCode.none)
    await again.stop()


async def test_a_marker_during_the_load_is_applied_when_the_load_ends():
    topic = InMemoryOffsetsTopic()
    c = await coordinator(topic)
    for i in range(1500):  # enough records for the load to yield to the loop midway
        await c.commit_offsets(group_id=GROUP, generation_id=-1, member_id="", group_instance_id=None,
                               offsets={("other", i): (i, -1, None)})
    await txn_commit(c, 42)
    await c.stop()
    fresh = GroupCoordinator(offsets_topic=topic, num_partitions=1, clock=lambda: 1000, initial_rebalance_delay_ms=0)
    await fresh.start()
    load = asyncio.ensure_future(fresh.load_partition(0))
    await asyncio.sleep(0)  # the load read part of the log: the marker lands now, after its snapshot
    assert fresh.loading_partitions() == frozenset({0})
    fresh.complete_txn(0, 5, commit=True)
    await load
    assert await committed(fresh) == (42, ErrorCode.none)
    await fresh.stop()
