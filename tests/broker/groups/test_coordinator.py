"""GroupCoordinator membership flows: JoinGroup, SyncGroup, Heartbeat, LeaveGroup."""

from __future__ import annotations

import asyncio
import re
from typing import TYPE_CHECKING

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups import GroupCoordinator, partition_for_group
from tinystream.broker.groups.records import GroupMetadataKey, GroupMetadataValue

if TYPE_CHECKING:
    from conftest import Harness

OK = ErrorCode.none
SESSION_MS = 10_000  # as in conftest (checked below)
REBALANCE_MS = 30_000
INITIAL_DELAY_MS = 3_000


def test_constants_match_the_harness(h: Harness) -> None:
    assert (h.SESSION_MS, h.REBALANCE_MS, h.INITIAL_DELAY_MS) == (SESSION_MS, REBALANCE_MS, INITIAL_DELAY_MS)


# ------------------------------------------------------------------ partition_for_group


@pytest.mark.parametrize(
    ("group_id", "num_partitions", "expected"),
    [
        ("hello", 50, 99162322 % 50),  # Java: "hello".hashCode() == 99162322
        ("my-group", 50, 1906497762 % 50),  # hashCode -1906497762: Utils.abs
        ("polygenelubricants", 50, 0),  # hashCode == Integer.MIN_VALUE: Utils.abs gives 0
        ("\U0001f600", 7, (0xD83D * 31 + 0xDE00) % 7),  # UTF-16 surrogate pair
        ("", 50, 0),
    ],
)
def test_partition_for_group_matches_kafka(group_id: str, num_partitions: int, expected: int) -> None:
    assert partition_for_group(group_id, num_partitions) == expected


# ------------------------------------------------------------------ coordinator status


async def test_requests_before_start_or_for_foreign_partitions(sched, topic) -> None:
    coord = GroupCoordinator(offsets_topic=topic, num_partitions=4, clock=sched.now, scheduler=sched)
    assert await coord.heartbeat(group_id="g", generation_id=1, member_id="m", group_instance_id=None) is ErrorCode.coordinator_not_available
    await coord.start()
    # No partition loaded: this broker coordinates nothing.
    result = await coord.join_group(
        group_id="g", member_id="", group_instance_id=None, protocol_type="consumer", protocols=[("range", b"")],
        session_timeout_ms=10_000, rebalance_timeout_ms=10_000, client_id="c", client_host="h", require_known_member_id=False,
    )
    assert result.error is ErrorCode.not_coordinator
    await coord.load_partition(partition_for_group("g", 4))
    assert await coord.heartbeat(group_id="g", generation_id=1, member_id="m", group_instance_id=None) is ErrorCode.unknown_member_id
    other = next(g for g in (f"group-{i}" for i in range(100)) if partition_for_group(g, 4) != partition_for_group("g", 4))
    assert (await coord.fetch_offsets(group_id=other, partitions=None)).error is ErrorCode.not_coordinator
    assert (await coord.fetch_offsets(group_id="g", partitions=None)).error is OK
    await coord.stop()


async def test_invalid_group_id_and_session_timeout(h: Harness) -> None:
    assert (await h.join(group="")).error is ErrorCode.invalid_group_id
    assert (await h.join(session_ms=5_999)).error is ErrorCode.invalid_session_timeout
    assert (await h.join(session_ms=1_800_001)).error is ErrorCode.invalid_session_timeout
    assert (await h.join("someone")).error is ErrorCode.unknown_member_id  # no such group
    assert h.coord.list_groups() == []  # failed joins leave nothing behind


# ------------------------------------------------------------------ forming a group


async def test_three_members_join_and_get_their_assignments(h: Harness) -> None:
    tasks = [h.join(client_id=c) for c in ("a", "b", "c")]
    await h.settle()
    assert not any(t.done() for t in tasks)  # parked in the initial delay
    assert (await h.coord.describe_groups(["g"]))[0].state == "PreparingRebalance"
    await h.advance(INITIAL_DELAY_MS)
    assert not any(t.done() for t in tasks)  # b and c arrived during the delay: it stretched once
    await h.advance(INITIAL_DELAY_MS)
    joins = [t.result() for t in tasks]
    assert [j.error for j in joins] == [OK, OK, OK]
    assert {j.generation_id for j in joins} == {1}
    assert {j.protocol_name for j in joins} == {"range"}
    leader = joins[0]
    assert all(j.leader == leader.member_id for j in joins)
    assert [(m.member_id, m.metadata) for m in leader.members] == [
        (joins[0].member_id, b"sub-a"), (joins[1].member_id, b"sub-b"), (joins[2].member_id, b"sub-c"),
    ]
    assert joins[1].members == [] and joins[2].members == []

    follower_syncs = [h.sync(j) for j in joins[1:]]
    await h.settle()
    assert not any(t.done() for t in follower_syncs)  # waiting for the leader
    assignment = {j.member_id: f"part-{i}".encode() for i, j in enumerate(joins)}
    leader_sync = await h.sync(leader, assignment)
    syncs = [leader_sync] + [await t for t in follower_syncs]
    assert [s.error for s in syncs] == [OK, OK, OK]
    assert [s.assignment for s in syncs] == [b"part-0", b"part-1", b"part-2"]
    assert syncs[1].protocol_name == "range" and syncs[1].protocol_type == "consumer"

    (desc,) = await h.coord.describe_groups(["g"])
    assert desc.state == "Stable" and desc.protocol == "range" and desc.protocol_type == "consumer"
    assert [(m.client_id, m.metadata, m.assignment) for m in desc.members] == [
        ("a", b"sub-a", b"part-0"), ("b", b"sub-b", b"part-1"), ("c", b"sub-c", b"part-2"),
    ]
    # The completed rebalance was persisted with the assignment.
    stored = [v for k, v in h.topic.decoded(partition_for_group("g", 4)) if k == GroupMetadataKey("g")]
    assert isinstance(stored[-1], GroupMetadataValue) and stored[-1].generation == 1
    assert [m.assignment for m in stored[-1].members] == [b"part-0", b"part-1", b"part-2"]
    for j in joins:
        assert await h.heartbeat(j) is OK


async def test_member_leaving_triggers_a_rebalance(h: Harness) -> None:
    joins, _ = await h.form(["a", "b", "c"])
    result = await h.coord.leave_group(group_id="g", members=[(joins[1].member_id, None)])
    assert result.error is OK and result.members == [(joins[1].member_id, None, OK)]
    assert await h.heartbeat(joins[0]) is ErrorCode.rebalance_in_progress
    assert await h.heartbeat(joins[1]) is ErrorCode.unknown_member_id
    rejoin = [h.join(j.member_id, client_id=c) for j, c in ((joins[0], "a"), (joins[2], "c"))]
    results = await asyncio.gather(*rejoin)  # everyone left has rejoined: no timer needed
    assert [r.generation_id for r in results] == [2, 2]
    assert {m.member_id for m in results[0].members} == {joins[0].member_id, joins[2].member_id}


async def test_session_expiry_removes_the_silent_member(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"])
    for _ in range(3):
        await h.advance(SESSION_MS // 2)
        assert await h.heartbeat(joins[0]) in (OK, ErrorCode.rebalance_in_progress)
    (desc,) = await h.coord.describe_groups(["g"])
    assert [m.client_id for m in desc.members] == ["a"]  # b never heartbeated
    assert desc.state == "PreparingRebalance"
    result = await h.join(joins[0].member_id, client_id="a")
    assert result.generation_id == 2 and result.leader == joins[0].member_id


async def test_members_that_do_not_rejoin_are_dropped_after_the_rebalance_timeout(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"])
    parked = h.join(joins[0].member_id, client_id="a", protocols=[("range", b"changed")])
    elapsed = 0
    while not parked.done():
        await h.advance(SESSION_MS // 2)
        elapsed += SESSION_MS // 2
        if not parked.done():
            assert await h.heartbeat(joins[1]) is ErrorCode.rebalance_in_progress  # alive, but never rejoins
    assert elapsed == REBALANCE_MS
    result = parked.result()
    assert result.generation_id == 2 and [m.member_id for m in result.members] == [joins[0].member_id]
    assert await h.heartbeat(joins[1]) is ErrorCode.unknown_member_id


async def test_member_id_required_flow(h: Harness) -> None:
    first = await h.join(client_id="app", require_known=True)
    assert first.error is ErrorCode.member_id_required and first.member_id.startswith("app-")
    task = h.join(first.member_id, client_id="app", require_known=True)
    await h.advance(INITIAL_DELAY_MS)
    result = await task
    assert result.error is OK and result.member_id == first.member_id == result.leader


async def test_default_member_ids_are_client_id_dash_uuid(topic, sched) -> None:
    coord = GroupCoordinator(offsets_topic=topic, num_partitions=1, clock=sched.now, scheduler=sched)
    await coord.load_partition(0)
    await coord.start()
    result = await coord.join_group(
        group_id="g", member_id="", group_instance_id=None, protocol_type="consumer", protocols=[("range", b"")],
        session_timeout_ms=10_000, rebalance_timeout_ms=10_000, client_id="consumer-1", client_host="h",
        require_known_member_id=True,
    )
    assert re.fullmatch(r"consumer-1-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", result.member_id)
    await coord.stop()


async def test_sync_and_heartbeat_errors(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"])
    assert await h.coord.heartbeat(group_id="g", generation_id=0, member_id=joins[0].member_id, group_instance_id=None) is ErrorCode.illegal_generation
    assert await h.coord.heartbeat(group_id="g", generation_id=1, member_id="ghost", group_instance_id=None) is ErrorCode.unknown_member_id
    assert await h.coord.heartbeat(group_id="nope", generation_id=1, member_id="ghost", group_instance_id=None) is ErrorCode.unknown_member_id
    assert (await h.sync(joins[1], generation=5)).error is ErrorCode.illegal_generation
    assert (await h.coord.sync_group(
        group_id="g", generation_id=1, member_id=joins[1].member_id, group_instance_id=None, protocol_type="consumer",
        protocol_name="roundrobin", assignments=[],
    )).error is ErrorCode.inconsistent_group_protocol
    # A late follower sync in a Stable group gets its assignment at once.
    assert (await h.sync(joins[1])).assignment == b"assign-b"
    # A member of another protocol type cannot join.
    assert (await h.join(client_id="z", protocol_type="connect")).error is ErrorCode.inconsistent_group_protocol
    # SyncGroup during PreparingRebalance.
    parked = h.join(joins[0].member_id, client_id="a")
    await h.settle()
    assert (await h.sync(joins[1])).error is ErrorCode.rebalance_in_progress
    assert (await h.join(joins[1].member_id, client_id="b")).generation_id == 2
    assert (await parked).generation_id == 2


async def test_heartbeat_between_join_and_sync_is_fine(h: Harness) -> None:
    task = h.join(client_id="a")
    await h.advance(INITIAL_DELAY_MS)
    joined = await task
    assert (await h.coord.describe_groups(["g"]))[0].state == "CompletingRebalance"
    assert await h.heartbeat(joined) is OK  # Kafka answers NONE in CompletingRebalance


async def test_rebalance_during_sync_fails_the_parked_sync(h: Harness) -> None:
    tasks = [h.join(client_id=c) for c in ("a", "b")]
    await h.advance(2 * INITIAL_DELAY_MS)
    a, b = [t.result() for t in tasks]
    follower_sync = h.sync(b)
    await h.settle()
    newcomer = h.join(client_id="c")  # arrives before the leader's assignment
    assert (await follower_sync).error is ErrorCode.rebalance_in_progress
    rejoins = [h.join(a.member_id, client_id="a"), h.join(b.member_id, client_id="b")]
    results = await asyncio.gather(newcomer, *rejoins)
    assert {r.generation_id for r in results} == {2} and len(results[1].members) == 3


# ------------------------------------------------------------------ static membership


async def test_static_member_rejoins_with_a_new_id_without_rebalance(h: Harness) -> None:
    joins, syncs = await h.form(["a", "b"], instances=["ia", "ib"])
    writes_before = sum(h.topic.appends.values())
    # b restarts: no member id, same instance id, same subscription.
    rejoined = await h.join(client_id="b", instance="ib")
    assert rejoined.error is OK and rejoined.member_id != joins[1].member_id
    assert rejoined.generation_id == 1 and rejoined.leader == joins[0].member_id and rejoined.members == []
    assert (await h.coord.describe_groups(["g"]))[0].state == "Stable"
    assert sum(h.topic.appends.values()) == writes_before + 1  # the new member id was persisted
    # It syncs and gets its old assignment; the old id is fenced.
    assert (await h.sync(rejoined, instance="ib")).assignment == b"assign-b"
    assert await h.heartbeat(joins[1], instance="ib") is ErrorCode.fenced_instance_id
    assert await h.heartbeat(rejoined, instance="ib") is OK
    assert await h.heartbeat(joins[0], instance="ia") is OK  # nobody else was disturbed


async def test_static_leader_rejoin_is_told_to_skip_assignment(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"], instances=["ia", "ib"])
    rejoined = await h.join(client_id="a", instance="ia")
    assert rejoined.leader == rejoined.member_id and rejoined.skip_assignment
    assert {m.group_instance_id for m in rejoined.members} == {"ia", "ib"}
    assert (await h.coord.describe_groups(["g"]))[0].state == "Stable"


async def test_static_member_with_new_subscription_but_same_protocol_is_not_rebalanced(h: Harness) -> None:
    """Kafka's rule: only a change of the group's selected protocol forces a rebalance on
    a static rejoin; a changed subscription is the leader's to notice (KIP-814)."""
    joins, _ = await h.form(["a", "b"], instances=["ia", "ib"])
    rejoined = await h.join(client_id="b", instance="ib", protocols=[("roundrobin", b"x"), ("range", b"y")])
    assert rejoined.error is OK and rejoined.generation_id == 1 and rejoined.protocol_name == "range"
    assert await h.heartbeat(joins[0], instance="ia") is OK
    (desc,) = await h.coord.describe_groups(["g"])
    assert desc.state == "Stable" and desc.members[1].metadata == b"y"


async def test_static_member_with_new_vote_rebalances(h: Harness) -> None:
    joins, _ = await h.form(["a"], instances=["ia"])
    # a restarts preferring another protocol: the selected protocol would change.
    task = h.join(client_id="a", instance="ia", protocols=[("roundrobin", b"x"), ("range", b"y")])
    result = await task  # alone in the group: the rebalance completes at once
    assert result.generation_id == 2 and result.protocol_name == "roundrobin"


async def test_restarted_static_member_fences_the_old_ids_parked_join(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"], instances=["ia", "ib"])
    old = h.join(joins[0].member_id, client_id="a", instance="ia")  # leader rejoins: waits for b
    await h.settle()
    restarted = h.join(client_id="a", instance="ia")  # the instance comes back with no member id
    assert (await old).error is ErrorCode.fenced_instance_id
    b = await h.join(joins[1].member_id, client_id="b", instance="ib")
    new = await restarted
    assert new.generation_id == b.generation_id == 2 and new.member_id != joins[0].member_id
    assert new.leader == new.member_id  # it kept the old member's leadership


async def test_leave_group_by_instance_id(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"], instances=["ia", "ib"])
    result = await h.coord.leave_group(group_id="g", members=[("", "ib"), ("", "unknown"), ("wrong-id", "ia")])
    assert [m.error for m in result.members] == [OK, ErrorCode.unknown_member_id, ErrorCode.fenced_instance_id]
    (desc,) = await h.coord.describe_groups(["g"])
    assert [m.group_instance_id for m in desc.members] == ["ia"] and desc.state == "PreparingRebalance"


async def test_leave_unknown_group(h: Harness) -> None:
    result = await h.coord.leave_group(group_id="nope", members=[("m", None)])
    assert result.error is OK and result.members == [("m", None, ErrorCode.unknown_member_id)]


# ------------------------------------------------------------------ cooperative rebalancing


async def test_cooperative_two_round_rebalance(h: Harness) -> None:
    """The client drives incremental rebalancing: revoke in one generation, rejoin at once for the next."""
    coop = lambda owned: [("cooperative-sticky", owned)]  # noqa: E731
    tasks = [h.join(client_id="a", protocols=coop(b"none"))]
    await h.advance(INITIAL_DELAY_MS)
    a = await tasks[0]
    await h.sync(a, {a.member_id: b"p0,p1"})
    b_task = h.join(client_id="b", protocols=coop(b"none"))
    await h.settle()
    a2_task = h.join(a.member_id, client_id="a", protocols=coop(b"p0,p1"))
    a2, b2 = await asyncio.gather(a2_task, b_task)
    assert a2.generation_id == b2.generation_id == 2 and a2.protocol_name == "cooperative-sticky"
    # Round 1: the leader revokes p1 from a, gives b nothing yet.
    sync_b = h.sync(b2)
    assert (await h.sync(a2, {a2.member_id: b"p0", b2.member_id: b""})).assignment == b"p0"
    assert (await sync_b).assignment == b""
    # Round 2: a rejoins with what it owns now; b follows on the heartbeat signal.
    a3_task = h.join(a2.member_id, client_id="a", protocols=coop(b"p0"))
    await h.settle()
    assert await h.heartbeat(b2) is ErrorCode.rebalance_in_progress
    a3, b3 = await asyncio.gather(a3_task, h.join(b2.member_id, client_id="b", protocols=coop(b"none")))
    assert a3.generation_id == 3
    sync_b = h.sync(b3)
    await h.sync(a3, {a3.member_id: b"p0", b3.member_id: b"p1"})
    assert (await sync_b).assignment == b"p1"
    assert (await h.coord.describe_groups(["g"]))[0].state == "Stable"


# ------------------------------------------------------------------ robustness


async def test_a_retried_join_supersedes_the_parked_one(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"])
    first = h.join(joins[0].member_id, client_id="a")
    await h.settle()
    second = h.join(joins[0].member_id, client_id="a")
    assert (await first).error is ErrorCode.rebalance_in_progress
    await h.join(joins[1].member_id, client_id="b")
    assert (await second).generation_id == 2


async def test_a_cancelled_parked_join_does_not_wedge_the_group(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"])
    parked = h.join(joins[0].member_id, client_id="a")
    await h.settle()
    parked.cancel()  # the client went away
    with pytest.raises(asyncio.CancelledError):
        await parked
    # b rejoins: the join completes (a counts as rejoined) ...
    b = await h.join(joins[1].member_id, client_id="b")
    assert b.generation_id == 2 and b.leader == joins[0].member_id
    b_sync = h.sync(b)
    # ... but the leader is gone: it neither syncs nor heartbeats, so its session runs out.
    await h.advance(SESSION_MS - 1)
    assert not b_sync.done()
    await h.advance(1)
    assert (await b_sync).error is ErrorCode.rebalance_in_progress
    (desc,) = await h.coord.describe_groups(["g"])
    assert desc.state == "PreparingRebalance" and [m.client_id for m in desc.members] == ["b"]
    b3 = await h.join(b.member_id, client_id="b")
    assert b3.generation_id == 3 and b3.leader == b.member_id


async def test_stop_answers_parked_requests_with_not_coordinator(h: Harness) -> None:
    task = h.join(client_id="a")
    await h.settle()
    await h.coord.stop()
    assert (await task).error is ErrorCode.not_coordinator
    assert h.sched.pending() == 0  # no timer left behind
    assert (await h.join(client_id="b")).error is ErrorCode.coordinator_not_available


async def test_unloading_a_partition_hands_groups_over(h: Harness) -> None:
    joins, _ = await h.form(["a", "b"])
    parked = h.join(joins[0].member_id, client_id="a")
    await h.settle()
    await h.coord.unload_partition(partition_for_group("g", 4))
    assert (await parked).error is ErrorCode.not_coordinator
    assert await h.heartbeat(joins[1]) is ErrorCode.not_coordinator
    assert h.coord.list_groups() == []


async def test_list_and_describe_groups(h: Harness) -> None:
    await h.form(["a"], group="stable-one")
    task = h.join(group="joining-one", client_id="x")
    await h.settle()
    listed = sorted(h.coord.list_groups())
    assert listed == [("joining-one", "consumer", "PreparingRebalance"), ("stable-one", "consumer", "Stable")]
    assert h.coord.list_groups(["stable"]) == [("stable-one", "consumer", "Stable")]
    assert h.coord.list_groups(["Empty"]) == []
    described = await h.coord.describe_groups(["joining-one", "missing"])
    assert described[0].members[0].metadata == b"" and described[0].protocol == ""  # not Stable: no metadata
    assert (described[1].error, described[1].state) == (OK, "Dead")
    await h.advance(INITIAL_DELAY_MS)
    assert (await task).error is OK


async def test_default_clock_and_loop_scheduler_drive_real_timers(topic) -> None:
    """The production wiring (wall clock, asyncio timers), with short timeouts."""
    coord = GroupCoordinator(offsets_topic=topic, num_partitions=1, initial_rebalance_delay_ms=30, min_session_timeout_ms=50)
    await coord.load_partition(0)
    await coord.start()
    kwargs = dict(group_id="g", group_instance_id=None, protocol_type="consumer", protocols=[("range", b"")],
                  session_timeout_ms=80, rebalance_timeout_ms=200, client_host="h", require_known_member_id=False)
    a, b = await asyncio.wait_for(
        asyncio.gather(coord.join_group(member_id="", client_id="a", **kwargs), coord.join_group(member_id="", client_id="b", **kwargs)),
        timeout=2,
    )
    assert a.generation_id == b.generation_id == 1
    follower = asyncio.create_task(coord.sync_group(group_id="g", generation_id=1, member_id=b.member_id, group_instance_id=None,
                                                    protocol_type=None, protocol_name=None, assignments=[]))
    await coord.sync_group(group_id="g", generation_id=1, member_id=a.member_id, group_instance_id=None,
                           protocol_type=None, protocol_name=None, assignments=[(a.member_id, b"A"), (b.member_id, b"B")])
    assert (await follower).assignment == b"B"
    # Only a heartbeats; b's 80 ms session runs out on the real clock.
    for _ in range(8):
        await asyncio.sleep(0.03)
        await coord.heartbeat(group_id="g", generation_id=1, member_id=a.member_id, group_instance_id=None)
    (desc,) = await coord.describe_groups(["g"])
    assert [m.client_id for m in desc.members] == ["a"]
    await coord.stop()
