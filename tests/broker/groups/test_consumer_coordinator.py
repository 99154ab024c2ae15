"""KIP-848 consumer groups in the GroupCoordinator: persistence and failover, timers, type changes, deletion."""

from __future__ import annotations

from consumer_helpers import Topics, beat_request, join_request

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups import GroupCoordinator, InMemoryOffsetsTopic, partition_for_group
from tinystream.broker.groups.consumer_group import HeartbeatResult
from tinystream.broker.groups.records import ConsumerGroupMetadataKey, ConsumerGroupMetadataValue, OffsetCommitKey
from tinystream.broker.groups.timers import ManualScheduler

OK = ErrorCode.none
PARTITIONS = 4


def coordinator(topic: InMemoryOffsetsTopic, sched: ManualScheduler, topics: Topics) -> GroupCoordinator:
    return GroupCoordinator(offsets_topic=topic, num_partitions=PARTITIONS, clock=sched.now, scheduler=sched,
                            topic_image=topics, consumer_session_timeout_ms=45_000)


async def start(coord: GroupCoordinator) -> GroupCoordinator:
    for p in range(PARTITIONS):
        await coord.load_partition(p)
    await coord.start()
    return coord


async def join(coord: GroupCoordinator, member: str, group: str = "g") -> HeartbeatResult:
    return await coord.consumer_group_heartbeat(group, join_request(member, rebalance_timeout_ms=30_000))


async def beat(coord: GroupCoordinator, member: str, epoch: int, group: str = "g") -> HeartbeatResult:
    return await coord.consumer_group_heartbeat(group, beat_request(member, epoch))


async def test_a_new_coordinator_takes_over_members_epochs_and_offsets() -> None:
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=2)
    coord = await start(coordinator(topic, sched, topics))
    a = await join(coord, "a")
    b = await join(coord, "b")
    assert (a.member_epoch, b.member_epoch) == (1, 2)
    assert await coord.commit_offsets(group_id="g", generation_id=1, member_id="a", group_instance_id=None,
                                      offsets={("t", 0): (42, -1, "")}) == {("t", 0): OK}
    partition = partition_for_group("g", PARTITIONS)
    epochs = [v for k, v in topic.decoded(partition) if isinstance(k, ConsumerGroupMetadataKey)]
    assert epochs == [ConsumerGroupMetadataValue(1), ConsumerGroupMetadataValue(2)]
    assert any(isinstance(k, OffsetCommitKey) for k, _ in topic.decoded(partition))
    before = (await coord.consumer_group_describe(["g"]))[0]

    await coord.stop()
    new = await start(coordinator(topic, sched, topics))
    (after,) = await new.consumer_group_describe(["g"])
    assert after == before  # members, epochs, assignments and targets, as they were
    assert (await new.fetch_offsets(group_id="g", partitions=[("t", 0)])).offsets[("t", 0)].offset == 42
    # The members go on without a rebalance: a is told to revoke, then b gets its partition.
    a1 = await beat(new, "a", 1)
    assert a1.error is OK and a1.member_epoch == 1 and len(a1.assignment["t"]) == 1
    a2 = await new.consumer_group_heartbeat("g", beat_request("a", 1, a1.assignment))
    assert a2.member_epoch == 2
    b1 = await new.consumer_group_heartbeat("g", beat_request("b", 2, {}))
    assert b1.assignment == {"t": frozenset({0, 1}) - a1.assignment["t"]}
    assert new.group_type("g") == "consumer"
    # A member the new coordinator does not know (it left meanwhile) rejoins after UNKNOWN_MEMBER_ID.
    assert (await beat(new, "zed", 4)).error is ErrorCode.unknown_member_id

    # Removed members leave tombstones: after b leaves and another failover, only a is there.
    assert (await beat(new, "b", -1)).error is OK
    await new.stop()
    third = await start(coordinator(topic, sched, topics))
    (last,) = await third.consumer_group_describe(["g"])
    assert [m.member_id for m in last.members] == ["a"] and last.group_epoch == 3


async def test_members_expire_after_a_failover_when_they_do_not_come_back() -> None:
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=1)
    coord = await start(coordinator(topic, sched, topics))
    await join(coord, "a")
    await coord.stop()
    new = await start(coordinator(topic, sched, topics))
    sched.advance(45_000)  # the restored session runs out
    (described,) = await new.consumer_group_describe(["g"])
    assert (described.state, described.members, described.group_epoch) == ("Empty", [], 2)


async def test_session_timeout_through_the_timer() -> None:
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=2)
    coord = await start(coordinator(topic, sched, topics))
    await join(coord, "a")
    sched.advance(30_000)
    await join(coord, "b")
    sched.advance(15_000)  # a's 45 s are up
    (described,) = await coord.consumer_group_describe(["g"])
    assert [m.member_id for m in described.members] == ["b"]
    assert described.group_epoch == 3
    b = await beat(coord, "b", 2)
    assert (b.member_epoch, b.assignment) == (3, {"t": frozenset({0, 1})})


async def test_an_empty_classic_group_becomes_a_consumer_group_with_its_offsets_and_back() -> None:
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=1)
    coord = await start(coordinator(topic, sched, topics))
    assert await coord.commit_offsets(group_id="g", generation_id=-1, member_id="", group_instance_id=None,
                                      offsets={("t", 0): (7, -1, "")}) == {("t", 0): OK}
    assert coord.group_type("g") == "classic"
    assert (await join(coord, "a")).error is OK
    assert coord.group_type("g") == "consumer"
    assert coord.committed("g") == {("t", 0): 7}
    assert [g.protocol_type for g in coord.list_groups(types_filter=["consumer"])] == ["consumer"]
    # While it has a member, a classic JoinGroup is refused.
    refused = await coord.join_group(group_id="g", member_id="", group_instance_id=None, protocol_type="consumer",
                                     protocols=[("range", b"")], session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                     client_id="c", client_host="/h", require_known_member_id=True)
    assert refused.error is ErrorCode.inconsistent_group_protocol
    assert (await beat(coord, "a", -1)).error is OK
    # Empty again: a classic member turns it back into a classic group, offsets kept.
    back = await coord.join_group(group_id="g", member_id="", group_instance_id=None, protocol_type="consumer",
                                  protocols=[("range", b"")], session_timeout_ms=10_000, rebalance_timeout_ms=10_000,
                                  client_id="c", client_host="/h", require_known_member_id=True)
    assert back.error is ErrorCode.member_id_required
    assert coord.group_type("g") == "classic"
    assert coord.committed("g") == {("t", 0): 7}
    # The consumer group record is tombstoned: a reload does not resurrect it.
    await coord.stop()
    reloaded = await start(coordinator(topic, sched, topics))
    assert reloaded.group_type("g") == "classic"
    assert reloaded.committed("g") == {("t", 0): 7}


async def test_delete_only_an_empty_consumer_group() -> None:
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=1)
    coord = await start(coordinator(topic, sched, topics))
    await join(coord, "a")
    assert await coord.commit_offsets(group_id="g", generation_id=1, member_id="a", group_instance_id=None,
                                      offsets={("t", 0): (3, -1, "")}) == {("t", 0): OK}
    assert await coord.delete_groups(["g"]) == {"g": ErrorCode.non_empty_group}
    await beat(coord, "a", -1)
    assert await coord.delete_groups(["g"]) == {"g": OK}
    assert coord.list_groups() == []
    await coord.stop()
    reloaded = await start(coordinator(topic, sched, topics))
    assert reloaded.list_groups() == [] and reloaded.committed("g") == {}


async def test_requests_for_a_group_being_loaded_or_elsewhere() -> None:
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=1)
    coord = coordinator(topic, sched, topics)
    await coord.start()
    assert (await join(coord, "a")).error is ErrorCode.not_coordinator
    (described,) = await coord.consumer_group_describe(["g"])
    assert described.error is ErrorCode.not_coordinator


async def test_a_failed_epoch_append_is_reported() -> None:
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=1)
    coord = await start(coordinator(topic, sched, topics))
    topic.fail_next(ErrorCode.not_leader_or_follower)
    assert (await join(coord, "a")).error is ErrorCode.not_coordinator


async def test_transactional_offsets_of_a_consumer_group_member() -> None:
    """TxnOffsetCommit (KIP-447) from a KIP-848 member: checked by member epoch, visible on COMMIT."""
    topic, sched, topics = InMemoryOffsetsTopic(), ManualScheduler(), Topics(t=1)
    coord = await start(coordinator(topic, sched, topics))
    await join(coord, "a")

    async def txn(epoch: int, member: str = "a", offset: int = 5) -> dict:
        return await coord.txn_offset_commit(group_id="g", producer_id=9, producer_epoch=0, generation_id=epoch,
                                             member_id=member, group_instance_id=None,
                                             offsets={("t", 0): (offset, -1, "")})

    assert await txn(0) == {("t", 0): ErrorCode.stale_member_epoch}
    assert await txn(1, member="ghost") == {("t", 0): ErrorCode.unknown_member_id}
    assert await txn(1) == {("t", 0): OK}
    assert coord.committed("g") == {}  # pending until the transaction commits
    assert coord.complete_txn(partition_for_group("g", PARTITIONS), 9, commit=True) == 1
    assert coord.committed("g") == {("t", 0): 5}
