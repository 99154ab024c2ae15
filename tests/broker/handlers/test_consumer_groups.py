"""KIP-848 consumer groups over a real socket: ConsumerGroupHeartbeat, ConsumerGroupDescribe, and how
the classic group APIs and offsets see such a group (the state machine has its own tests)."""

from __future__ import annotations

import asyncio

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import millis
from tinystream.testing.broker import create_topic, entity, request

HB = 68
DESCRIBE = 69


def heartbeat(group: str, member: str, epoch: int, *, version: int = 1, topics: tuple[str, ...] | None = None,
              owned: list[tuple[object, list[int]]] | None = None, rebalance_ms: int = -1,
              instance_id: str | None = None, assignor: str | None = None, regex: str | None = None):
    fields = dict(
        group_id=group, member_id=member, member_epoch=epoch, instance_id=instance_id, rack_id=None,
        rebalance_timeout=millis(rebalance_ms), subscribed_topic_names=topics, server_assignor=assignor,
        topic_partitions=None if owned is None else tuple(
            entity(HB, version, "TopicPartitions", topic_id=tid, partitions=tuple(ps)) for tid, ps in owned),
    )
    if version >= 1 or regex is not None:
        fields["subscribed_topic_regex"] = regex
    return request(HB, version, **fields)


def join(group: str, member: str, topics: tuple[str, ...] = ("t",), **kw):
    return heartbeat(group, member, 0, topics=topics, owned=[], rebalance_ms=60_000, **kw)


def assigned(resp, topic_id) -> set[int]:
    assert resp.assignment is not None
    return {p for tp in resp.assignment.topic_partitions if tp.topic_id == topic_id for p in tp.partitions}


async def ready(broker, client, group: str) -> None:
    await client.request(request(10, 3, key=group, key_type=0))
    for _ in range(200):
        if not broker.groups.coordinator.loading_partitions() and broker.groups.coordinator.owned_partitions():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("offsets partitions did not load")


def commit(group: str, member: str, epoch: int, offset: int, *, version: int = 9):
    return request(8, version, group_id=group, generation_id_or_member_epoch=epoch, member_id=member,
                   group_instance_id=None, topics=(
                       entity(8, version, "OffsetCommitRequestTopic", name="t", partitions=(
                           entity(8, version, "OffsetCommitRequestPartition", partition_index=0,
                                  committed_offset=offset, committed_leader_epoch=-1, committed_metadata=""),)),))


async def test_apis_are_advertised(client):
    versions = await client.request(request(18, 3, client_software_name="t", client_software_version="1"))
    keys = {a.api_key: (a.min_version, a.max_version) for a in versions.api_keys}
    assert keys[HB] == (0, 1) and keys[DESCRIBE] == (0, 1)
    assert keys[9][1] == 9 and keys[16][1] == 5


async def test_two_members_split_the_partitions_then_one_leaves(broker, client):
    await create_topic(client, "t", partitions=4)
    topic_id = broker.topics.get("t").topic_id
    await ready(broker, client, "g")

    a = await client.request(join("g", "member-a"))
    assert (a.error_code, a.member_id, a.member_epoch) == (ErrorCode.none, "member-a", 1)
    assert a.heartbeat_interval == millis(5000)
    assert assigned(a, topic_id) == {0, 1, 2, 3}

    b = await client.request(join("g", "member-b"))
    assert (b.error_code, b.member_epoch, assigned(b, topic_id)) == (ErrorCode.none, 2, set())

    a1 = await client.request(heartbeat("g", "member-a", 1))  # told to give two up
    keep = assigned(a1, topic_id)
    assert len(keep) == 2 and a1.member_epoch == 1
    a2 = await client.request(heartbeat("g", "member-a", 1, owned=[(topic_id, sorted(keep))]))
    assert (a2.error_code, a2.member_epoch) == (ErrorCode.none, 2)
    b1 = await client.request(heartbeat("g", "member-b", 2, owned=[]))
    assert assigned(b1, topic_id) == {0, 1, 2, 3} - keep

    described = await client.request(request(DESCRIBE, 1, group_ids=("g", "nope"), include_authorized_operations=False))
    g, nope = described.groups
    assert (g.error_code, g.group_state, g.group_epoch, g.assignment_epoch, g.assignor_name) == (
        ErrorCode.none, "Stable", 2, 2, "uniform")
    members = {m.member_id: m for m in g.members}
    assert set(members) == {"member-a", "member-b"}
    a_parts = members["member-a"].assignment.topic_partitions
    assert [(tp.topic_id, tp.topic_name, set(tp.partitions)) for tp in a_parts] == [(topic_id, "t", keep)]
    assert members["member-b"].subscribed_topic_names == ("t",) and members["member-b"].member_type == 1
    assert nope.error_code == ErrorCode.group_id_not_found

    # Offsets: OffsetCommit v9 carries the member epoch.
    ok = await client.request(commit("g", "member-a", 2, 10))
    assert ok.topics[0].partitions[0].error_code == ErrorCode.none
    stale = await client.request(commit("g", "member-a", 1, 11))
    assert stale.topics[0].partitions[0].error_code == ErrorCode.stale_member_epoch
    old = await client.request(commit("g", "member-a", 2, 11, version=8))
    assert old.topics[0].partitions[0].error_code == ErrorCode.unsupported_version
    fetched = await client.request(request(9, 9, require_stable=True, groups=(
        entity(9, 9, "OffsetFetchRequestGroup", group_id="g", member_id="member-a", member_epoch=2, topics=None),)))
    assert fetched.groups[0].error_code == ErrorCode.none
    assert fetched.groups[0].topics[0].partitions[0].committed_offset == 10
    stale_fetch = await client.request(request(9, 9, require_stable=True, groups=(
        entity(9, 9, "OffsetFetchRequestGroup", group_id="g", member_id="member-a", member_epoch=7, topics=None),)))
    assert stale_fetch.groups[0].error_code == ErrorCode.stale_member_epoch

    # The classic APIs see a consumer group as Kafka shows it.
    listed = await client.request(request(16, 5, states_filter=(), types_filter=("consumer",)))
    assert [(x.group_id, x.protocol_type, x.group_state, x.group_type) for x in listed.groups] == [
        ("g", "consumer", "Stable", "consumer")]
    assert (await client.request(request(16, 5, states_filter=(), types_filter=("classic",)))).groups == ()
    classic = await client.request(request(15, 5, groups=("g",), include_authorized_operations=False))
    assert (classic.groups[0].error_code, classic.groups[0].group_state) == (ErrorCode.none, "Dead")
    joined = await client.request(request(11, 9, group_id="g", session_timeout=millis(10000),
                                          rebalance_timeout=millis(10000), member_id="", group_instance_id=None,
                                          protocol_type="consumer", reason=None, protocols=(
                                              entity(11, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),)))
    assert joined.error_code == ErrorCode.inconsistent_group_protocol

    # b leaves (epoch -1); a gets everything at the next epoch.
    left = await client.request(heartbeat("g", "member-b", -1))
    assert (left.error_code, left.member_epoch) == (ErrorCode.none, -1)
    a3 = await client.request(heartbeat("g", "member-a", 2))
    assert (a3.member_epoch, assigned(a3, topic_id)) == (3, {0, 1, 2, 3})


async def test_errors_and_member_ids(broker, client):
    await create_topic(client, "t", partitions=1)
    await ready(broker, client, "e")
    # v0: the coordinator names a member that joins without an id; v1: the client must.
    v0 = await client.request(join("e", "", version=0))
    assert v0.error_code == ErrorCode.none and len(v0.member_id) == 22
    v1 = await client.request(join("e", ""))
    assert v1.error_code == ErrorCode.invalid_request and v1.error_message == "MemberId can't be empty."
    fenced = await client.request(heartbeat("e", v0.member_id, 9))
    assert fenced.error_code == ErrorCode.fenced_member_epoch and fenced.member_id is None
    unknown = await client.request(heartbeat("e", "ghost", 1))
    assert unknown.error_code == ErrorCode.unknown_member_id
    missing = await client.request(heartbeat("never", "m", 3))
    assert missing.error_code == ErrorCode.unknown_member_id
    bad = await client.request(join("e", "m2", assignor="sticky"))
    assert bad.error_code == ErrorCode.unsupported_assignor
    empty_group = await client.request(join("", "m3"))
    assert empty_group.error_code == ErrorCode.invalid_request


async def test_a_classic_group_with_members_refuses_consumer_members(broker, client):
    await create_topic(client, "t", partitions=1)
    await ready(broker, client, "cl")
    first = await client.request(request(11, 9, group_id="cl", session_timeout=millis(10000),
                                         rebalance_timeout=millis(10000), member_id="", group_instance_id=None,
                                         protocol_type="consumer", reason=None, protocols=(
                                             entity(11, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),)))
    assert first.error_code == ErrorCode.member_id_required
    joined = asyncio.ensure_future(client.request(request(
        11, 9, group_id="cl", session_timeout=millis(10000), rebalance_timeout=millis(10000), member_id=first.member_id,
        group_instance_id=None, protocol_type="consumer", reason=None,
        protocols=(entity(11, 9, "JoinGroupRequestProtocol", name="range", metadata=b""),))))
    await asyncio.sleep(0.2)  # the classic group is rebalancing, with a member
    other = await client.request(join("cl", "m"))
    assert other.error_code == ErrorCode.group_id_not_found
    assert other.error_message == "Group cl is not a consumer group."
    described = await client.request(request(DESCRIBE, 1, group_ids=("cl",), include_authorized_operations=False))
    assert described.groups[0].error_code == ErrorCode.group_id_not_found
    joined.cancel()


async def test_a_restarted_coordinator_keeps_members_epochs_and_offsets(tmp_path):
    from tinystream.broker.app import Broker
    from tinystream.broker.protocol.client import KafkaClient
    from tinystream.testing.broker import test_settings

    settings = test_settings(tmp_path / "d")
    for attempt in range(2):
        b = Broker(settings)
        await b.start()
        client = await KafkaClient.connect(b.info.host, b.info.port)
        try:
            if attempt == 0:
                await create_topic(client, "t", partitions=2)
            await ready(b, client, "durable")
            topic_id = b.topics.get("t").topic_id
            if attempt == 0:
                joined = await client.request(join("durable", "m1"))
                assert (joined.member_epoch, assigned(joined, topic_id)) == (1, {0, 1})
                done = await client.request(commit("durable", "m1", 1, 77))
                assert done.topics[0].partitions[0].error_code == ErrorCode.none
            else:
                # The restarted coordinator read the member back: it goes on at its epoch, no rebalance.
                went_on = await client.request(heartbeat("durable", "m1", 1))
                assert (went_on.error_code, went_on.member_epoch) == (ErrorCode.none, 1)
                fetched = await client.request(request(9, 9, require_stable=True, groups=(
                    entity(9, 9, "OffsetFetchRequestGroup", group_id="durable", member_id="m1", member_epoch=1,
                           topics=None),)))
                assert fetched.groups[0].topics[0].partitions[0].committed_offset == 77
                # A member it does not know is told to rejoin; it does, at the next epoch.
                ghost = await client.request(heartbeat("durable", "m2", 1))
                assert ghost.error_code == ErrorCode.unknown_member_id
                again = await client.request(join("durable", "m2"))
                assert (again.error_code, again.member_epoch) == (ErrorCode.none, 2)
        finally:
            await client.close()
            await b.stop()


async def test_the_broker_chooses_its_assignors(tmp_path):
    """group.consumer.assignors: the first is the default, the others may be asked for, nothing else."""
    import pydantic

    from tinystream.broker.app import Broker
    from tinystream.broker.protocol.client import KafkaClient
    from tinystream.testing.broker import test_settings

    with pytest.raises(pydantic.ValidationError, match="group.consumer.assignors"):
        test_settings(tmp_path / "bad", **{"group.consumer.assignors": "sticky"})
    b = Broker(test_settings(tmp_path / "d", **{"group.consumer.assignors": "range"}))
    await b.start()
    client = await KafkaClient.connect(b.info.host, b.info.port)
    try:
        await create_topic(client, "t", partitions=2)
        await ready(b, client, "ranged")
        assert (await client.request(join("ranged", "m1"))).error_code == ErrorCode.none
        refused = await client.request(join("ranged", "m2", assignor="uniform"))
        assert refused.error_code == ErrorCode.unsupported_assignor
        assert refused.error_message == "ServerAssignor uniform is not supported. Supported assignors: range."
        described = await client.request(request(DESCRIBE, 1, group_ids=("ranged",), include_authorized_operations=False))
        assert described.groups[0].assignor_name == "range"
    finally:
        await client.close()
        await b.stop()
