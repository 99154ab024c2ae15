"""Offsets, group persistence in __consumer_offsets, loading after a restart, deletion."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups import GroupCoordinator, InMemoryOffsetsTopic, OffsetsTopicError, partition_for_group
from tinystream.broker.groups.records import (
    GroupMetadataKey,
    OffsetCommitKey,
    OffsetCommitValue,
    encode_key,
    encode_offset_commit_value,
)

if TYPE_CHECKING:
    from conftest import Harness

OK = ErrorCode.none
P = partition_for_group("g", 4)


async def commit(h: Harness, offsets, *, group="g", generation=-1, member="", instance=None):
    return await h.coord.commit_offsets(
        group_id=group, generation_id=generation, member_id=member, group_instance_id=instance, offsets=offsets
    )


async def test_member_commits_and_fetches(h: Harness) -> None:
    joins, _ = await h.form(["a"])
    a = joins[0]
    result = await commit(h, {("t", 0): (10, 3, "meta"), ("t", 1): (20, -1, None)}, generation=1, member=a.member_id)
    assert result == {("t", 0): OK, ("t", 1): OK}
    # Durable before the answer: the records are in the topic, in Kafka's layout.
    stored = {k: v for k, v in h.topic.decoded(P) if isinstance(k, OffsetCommitKey)}
    assert stored[OffsetCommitKey("g", "t", 0)] == OffsetCommitValue(
        offset=10, leader_epoch=3, metadata="meta", commit_timestamp=h.sched.now()
    )
    fetched = await h.coord.fetch_offsets(group_id="g", partitions=[("t", 0), ("t", 1), ("t", 9)])
    assert fetched.error is OK
    assert fetched.offsets == {("t", 0): (10, 3, "meta"), ("t", 1): (20, -1, ""), ("t", 9): (-1, -1, "")}
    everything = await h.coord.fetch_offsets(group_id="g", partitions=None)
    assert set(everything.offsets) == {("t", 0), ("t", 1)}
    assert h.coord.committed("g") == {("t", 0): 10, ("t", 1): 20}


async def test_standalone_consumer_commits_without_a_group(h: Harness) -> None:
    assert await commit(h, {("t", 0): (5, -1, "")}, group="solo") == {("t", 0): OK}
    assert (await h.coord.fetch_offsets(group_id="solo", partitions=[("t", 0)])).offsets[("t", 0)].offset == 5
    assert ("solo", "", "Empty") in h.coord.list_groups()
    (desc,) = await h.coord.describe_groups(["solo"])
    assert desc.state == "Empty" and desc.members == []


async def test_fetch_for_unknown_group_answers_minus_one(h: Harness) -> None:
    fetched = await h.coord.fetch_offsets(group_id="nobody", partitions=[("t", 0)])
    assert fetched.error is OK and fetched.offsets == {("t", 0): (-1, -1, "")}
    assert (await h.coord.fetch_offsets(group_id="nobody", partitions=None)).offsets == {}
    assert h.coord.committed("nobody") == {}


async def test_commit_errors(h: Harness) -> None:
    joins, _ = await h.form(["a"])
    a = joins[0]
    tp = {("t", 0): (1, -1, "")}
    assert await commit(h, tp) == {("t", 0): ErrorCode.unknown_member_id}  # standalone, but the group is active
    assert await commit(h, tp, generation=7, member=a.member_id) == {("t", 0): ErrorCode.illegal_generation}
    assert await commit(h, tp, generation=1, member="ghost") == {("t", 0): ErrorCode.unknown_member_id}
    assert await commit(h, tp, group="never-seen", generation=3, member="m") == {("t", 0): ErrorCode.illegal_generation}
    big = await commit(h, {("t", 0): (1, -1, "x" * 4097), ("t", 1): (2, -1, "ok")}, generation=1, member=a.member_id)
    assert big == {("t", 0): ErrorCode.offset_metadata_too_large, ("t", 1): OK}
    assert await commit(h, tp, group="") == {("t", 0): OK}  # Kafka allows the empty group id for offsets
    assert [g for g, *_ in h.coord.list_groups()].count("never-seen") == 0  # the failed commit left nothing


async def test_commit_during_completing_rebalance_and_during_preparing(h: Harness) -> None:
    task = h.join(client_id="a")
    await h.advance(h.INITIAL_DELAY_MS)
    a = await task
    tp = {("t", 0): (1, -1, "")}
    assert await commit(h, tp, generation=1, member=a.member_id) == {("t", 0): ErrorCode.rebalance_in_progress}
    await h.sync(a, {a.member_id: b""})
    newcomer = h.join(client_id="b")
    await h.settle()  # now PreparingRebalance: commits of the old generation are still taken
    assert await commit(h, tp, generation=1, member=a.member_id) == {("t", 0): OK}
    newcomer.cancel()


@pytest.mark.parametrize(
    ("append_error", "client_error"),
    [
        (ErrorCode.not_enough_replicas, ErrorCode.coordinator_not_available),
        (ErrorCode.not_leader_or_follower, ErrorCode.not_coordinator),
        (ErrorCode.message_too_large, ErrorCode.invalid_commit_offset_size),
    ],
)
async def test_failed_append_fails_the_commit(h: Harness, append_error, client_error) -> None:
    h.topic.fail_next(append_error)
    assert await commit(h, {("t", 0): (9, -1, "")}) == {("t", 0): client_error}
    assert (await h.coord.fetch_offsets(group_id="g", partitions=[("t", 0)])).offsets[("t", 0)].offset == -1


class BrokenTopic(InMemoryOffsetsTopic):
    def __init__(self, exc: Exception) -> None:
        super().__init__()
        self.exc = exc

    async def append(self, partition, records):
        raise self.exc


@pytest.mark.parametrize(
    ("exc", "expected"),
    [(OSError("disk gone"), ErrorCode.not_coordinator), (RuntimeError("bug"), ErrorCode.unknown_server_error)],
)
async def test_unexpected_append_exceptions_become_error_codes(sched, exc, expected) -> None:
    coord = GroupCoordinator(offsets_topic=BrokenTopic(exc), num_partitions=1, clock=sched.now, scheduler=sched)
    await coord.load_partition(0)
    await coord.start()
    result = await coord.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                        offsets={("t", 0): (1, -1, "")})
    assert result == {("t", 0): expected}
    await coord.stop()


async def test_failed_assignment_store_fails_sync_and_rebalances(h: Harness) -> None:
    tasks = [h.join(client_id=c) for c in ("a", "b")]
    await h.advance(2 * h.INITIAL_DELAY_MS)
    a, b = [t.result() for t in tasks]
    follower = h.sync(b)
    h.topic.fail_next(ErrorCode.not_enough_replicas)
    leader = await h.sync(a, {a.member_id: b"A", b.member_id: b"B"})
    assert leader.error is ErrorCode.coordinator_not_available
    assert (await follower).error is ErrorCode.coordinator_not_available
    assert (await h.coord.describe_groups(["g"]))[0].state == "PreparingRebalance"


# ------------------------------------------------------------------ restart


async def test_restart_restores_groups_members_and_offsets(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"], instances=[None, "ib"])
    a, b = joins
    await commit(h, {("t", 0): (100, 2, "m")}, generation=1, member=a.member_id)
    await commit(h, {("u", 3): (7, -1, "")}, group="solo")
    coord = await h.restart()

    (desc,) = await coord.describe_groups(["g"])
    assert desc.state == "Stable" and desc.protocol == "range"
    assert [(m.member_id, m.group_instance_id, m.assignment) for m in desc.members] == [
        (a.member_id, None, b"assign-a"), (b.member_id, "ib", b"assign-b"),
    ]
    assert coord.committed("g") == {("t", 0): 100}
    assert (await coord.fetch_offsets(group_id="g", partitions=[("t", 0)])).offsets[("t", 0)] == (100, 2, "m")
    assert coord.committed("solo") == {("u", 3): 7}
    # Members carry on with their generation: heartbeats and syncs work after the failover.
    assert await h.heartbeat(a) is OK
    assert (await h.sync(b, instance="ib")).assignment == b"assign-b"
    # A member that does not come back is expired like any other.
    for _ in range(3):
        await h.advance(h.SESSION_MS // 2)
        await h.heartbeat(a)
    assert [m.client_id for m in (await coord.describe_groups(["g"]))[0].members] == ["a"]


async def test_restart_after_everyone_left_restores_an_empty_group_with_its_generation(h: Harness) -> None:
    joins, _ = await h.form(["a"])
    await commit(h, {("t", 0): (1, -1, "")}, generation=1, member=joins[0].member_id)
    await h.coord.leave_group(group_id="g", members=[(joins[0].member_id, None)])
    await h.settle()
    coord = await h.restart()
    (desc,) = await coord.describe_groups(["g"])
    assert desc.state == "Empty" and desc.protocol_type == "consumer"
    task = h.join(client_id="z")
    await h.advance(h.INITIAL_DELAY_MS)
    assert (await task).generation_id == 3  # gen 1, Empty at gen 2, then the next one


async def test_load_skips_records_it_cannot_read(sched, topic) -> None:
    await topic.append(0, [(b"\x00", b"junk"), (encode_key(OffsetCommitKey("g", "t", 0)), b"\x00\x09bad")])
    await topic.append(0, [(encode_key(OffsetCommitKey("g", "t", 1)), encode_offset_commit_value(OffsetCommitValue(offset=4)))])
    coord = GroupCoordinator(offsets_topic=topic, num_partitions=1, clock=sched.now, scheduler=sched)
    await coord.load_partition(0)
    await coord.start()
    assert coord.committed("g") == {("t", 1): 4}
    await coord.stop()


async def test_requests_during_loading_get_load_in_progress(sched, topic) -> None:
    records = [
        (encode_key(OffsetCommitKey("g", "t", i)), encode_offset_commit_value(OffsetCommitValue(offset=i)))
        for i in range(2500)
    ]
    await topic.append(0, records)
    coord = GroupCoordinator(offsets_topic=topic, num_partitions=1, clock=sched.now, scheduler=sched)
    await coord.start()
    loading = asyncio.create_task(coord.load_partition(0))
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert coord.loading_partitions() == frozenset({0})
    assert (await coord.fetch_offsets(group_id="g", partitions=None)).error is ErrorCode.coordinator_load_in_progress
    assert await coord.heartbeat(group_id="g", generation_id=1, member_id="m", group_instance_id=None) is ErrorCode.coordinator_load_in_progress
    await loading
    assert coord.loading_partitions() == frozenset()
    assert len(coord.committed("g")) == 2500
    await coord.stop()


async def test_failed_read_leaves_the_partition_unowned(sched) -> None:
    class Unreadable(InMemoryOffsetsTopic):
        def read(self, partition):
            raise OffsetsTopicError(ErrorCode.kafka_storage_error)

    coord = GroupCoordinator(offsets_topic=Unreadable(), num_partitions=1, clock=sched.now, scheduler=sched)
    await coord.start()
    with pytest.raises(OffsetsTopicError):
        await coord.load_partition(0)
    assert coord.owned_partitions() == frozenset()
    assert (await coord.fetch_offsets(group_id="g", partitions=None)).error is ErrorCode.not_coordinator
    await coord.stop()


# ------------------------------------------------------------------ deletion


async def test_delete_groups(h: Harness) -> None:
    await h.form(["a"], group="busy")
    await commit(h, {("t", 0): (1, -1, ""), ("t", 1): (2, -1, "")}, group="idle")
    result = await h.coord.delete_groups(["idle", "busy", "ghost"])
    assert result == {"idle": OK, "busy": ErrorCode.non_empty_group, "ghost": ErrorCode.group_id_not_found}
    assert (await h.coord.fetch_offsets(group_id="idle", partitions=None)).offsets == {}
    assert "idle" not in [g for g, *_ in h.coord.list_groups()]
    # Tombstones for the group and each of its offsets.
    tail = h.topic.decoded(partition_for_group("idle", 4))[-3:]
    assert tail == [(GroupMetadataKey("idle"), None), (OffsetCommitKey("idle", "t", 0), None), (OffsetCommitKey("idle", "t", 1), None)]
    # And it stays deleted after a restart.
    coord = await h.restart()
    assert coord.committed("idle") == {}
    assert [g for g, *_ in coord.list_groups()] == ["busy"]


async def test_a_group_can_be_reused_after_deletion(h: Harness) -> None:
    await commit(h, {("t", 0): (1, -1, "")}, group="again")
    assert await h.coord.delete_groups(["again"]) == {"again": OK}
    assert await commit(h, {("t", 0): (2, -1, "")}, group="again") == {("t", 0): OK}
    coord = await h.restart()
    assert coord.committed("again") == {("t", 0): 2}  # the tombstone came before the new commit


async def test_failed_tombstone_append_is_reported(h: Harness) -> None:
    await commit(h, {("t", 0): (1, -1, "")}, group="idle")
    h.topic.fail_next(ErrorCode.not_enough_replicas)
    assert await h.coord.delete_groups(["idle"]) == {"idle": ErrorCode.coordinator_not_available}
