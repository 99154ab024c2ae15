"""Group APIs wired to the GroupCoordinator, over a real socket (the state machine has its own tests)."""

from __future__ import annotations

import asyncio

import pytest

from tinystream.broker.errors import ErrorCode
from tinystream.broker.protocol.codec import millis
from tinystream.testing.broker import create_topic, entity, request


def find_coordinator(key: str, *, version: int = 3, key_type: int = 0):
    if version >= 4:
        return request(10, version, key_type=key_type, coordinator_keys=(key,))
    return request(10, version, key=key, key_type=key_type)


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
async def test_find_coordinator_names_this_broker_and_creates_the_offsets_topic(broker, client, version):
    resp = await client.request(find_coordinator("g", version=version))
    answer = resp.coordinators[0] if version >= 4 else resp
    assert answer.error_code == ErrorCode.none
    assert (answer.node_id, answer.host, answer.port) == (0, broker.info.host, broker.info.port)
    assert broker.topics.get("__consumer_offsets").partitions == 4


async def test_find_transaction_coordinator_creates_the_state_topic(broker, client):
    """Key type 1 (KIP-98): the leader of the id's __transaction_state partition, created on first use."""
    resp = await client.request(find_coordinator("tx", key_type=1))
    assert resp.error_code == ErrorCode.none and resp.node_id == broker.settings.broker_id
    assert broker.topics.get("__transaction_state") is not None
    unknown = await client.request(find_coordinator("tx", key_type=7))
    assert unknown.error_code == ErrorCode.invalid_request


def join(group: str, member: str, *, version: int = 9, session_ms: int = 10000, rebalance_ms: int = 10000):
    return request(11, version, group_id=group, session_timeout=millis(session_ms), rebalance_timeout=millis(rebalance_ms),
                   member_id=member, group_instance_id=None, protocol_type="consumer", reason=None,
                   protocols=(entity(11, version, "JoinGroupRequestProtocol", name="range", metadata=b"meta"),))


def sync(group: str, generation: int, member: str, assignments: list[tuple[str, bytes]], *, version: int = 5):
    return request(14, version, group_id=group, generation_id=generation, member_id=member, group_instance_id=None,
                   protocol_type="consumer", protocol_name="range",
                   assignments=tuple(entity(14, version, "SyncGroupRequestAssignment", member_id=m, assignment=a)
                                     for m, a in assignments))


async def wait_loaded(broker) -> None:
    for _ in range(200):
        if not broker.groups.coordinator.loading_partitions() and broker.groups.coordinator.owned_partitions():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("offsets partitions did not load")


async def test_join_sync_heartbeat_commit_fetch_leave(broker, client):
    await create_topic(client, "topic", partitions=2)
    await client.request(find_coordinator("grp"))
    await wait_loaded(broker)
    first = await client.request(join("grp", ""))
    assert first.error_code == ErrorCode.member_id_required and first.member_id  # KIP-394
    joined = await client.request(join("grp", first.member_id))
    assert joined.error_code == ErrorCode.none and joined.leader == first.member_id
    assert [m.member_id for m in joined.members] == [first.member_id]
    synced = await client.request(sync("grp", joined.generation_id, first.member_id, [(first.member_id, b"assign")]))
    assert synced.error_code == ErrorCode.none and synced.assignment == b"assign"
    hb = await client.request(request(12, 4, group_id="grp", generation_id=joined.generation_id,
                                      member_id=first.member_id, group_instance_id=None))
    assert hb.error_code == ErrorCode.none
    stale = await client.request(request(12, 4, group_id="grp", generation_id=joined.generation_id + 5,
                                         member_id=first.member_id, group_instance_id=None))
    assert stale.error_code == ErrorCode.illegal_generation

    commit = await client.request(request(8, 9, group_id="grp", generation_id_or_member_epoch=joined.generation_id,
                                          member_id=first.member_id, group_instance_id=None, topics=(
        entity(8, 9, "OffsetCommitRequestTopic", name="topic", partitions=(
            entity(8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=42,
                   committed_leader_epoch=0, committed_metadata="m"),
            entity(8, 9, "OffsetCommitRequestPartition", partition_index=9, committed_offset=1,
                   committed_leader_epoch=0, committed_metadata=None))),
        entity(8, 9, "OffsetCommitRequestTopic", name="nope", partitions=(
            entity(8, 9, "OffsetCommitRequestPartition", partition_index=0, committed_offset=1,
                   committed_leader_epoch=-1, committed_metadata=None),)),
    )))
    errors = [[p.error_code for p in t.partitions] for t in commit.topics]
    assert errors == [[ErrorCode.none, ErrorCode.unknown_topic_or_partition], [ErrorCode.unknown_topic_or_partition]]

    fetched = await client.request(request(9, 8, require_stable=False, groups=(
        entity(9, 8, "OffsetFetchRequestGroup", group_id="grp", topics=(
            entity(9, 8, "OffsetFetchRequestTopics", name="topic", partition_indexes=(0, 1)),)),)))
    parts = {p.partition_index: p for p in fetched.groups[0].topics[0].partitions}
    assert (parts[0].committed_offset, parts[0].metadata, parts[0].committed_leader_epoch) == (42, "m", 0)
    assert parts[1].committed_offset == -1

    listed = await client.request(request(16, 4, states_filter=()))
    assert [(g.group_id, g.group_state) for g in listed.groups] == [("grp", "Stable")]
    described = await client.request(request(15, 5, groups=("grp",), include_authorized_operations=False))
    assert described.groups[0].group_state == "Stable" and len(described.groups[0].members) == 1

    left = await client.request(request(13, 5, group_id="grp", members=(
        entity(13, 5, "MemberIdentity", member_id=first.member_id, group_instance_id=None, reason=None),)))
    assert left.error_code == ErrorCode.none and left.members[0].error_code == ErrorCode.none
    deleted = await client.request(request(42, 2, groups_names=("grp", "unknown")))
    assert [r.error_code for r in deleted.results] == [ErrorCode.none, ErrorCode.group_id_not_found]


@pytest.mark.parametrize("version", [0, 1, 2, 3])
async def test_old_join_versions_need_no_member_id_round(broker, client, version):
    await client.request(find_coordinator("old"))
    await wait_loaded(broker)
    joined = await client.request(join("old", "", version=version))
    assert joined.error_code == ErrorCode.none and joined.member_id
    assert joined.protocol_name == "range"


@pytest.mark.parametrize("version", [1, 2, 3, 5, 7])
async def test_offset_fetch_old_versions_and_standalone_commit(broker, client, version):
    await create_topic(client, "solo")
    await client.request(find_coordinator("solo-group"))
    await wait_loaded(broker)
    commit = await client.request(request(8, 2, group_id="solo-group", generation_id_or_member_epoch=-1, member_id="",
                                          retention_time=millis(-1), topics=(
        entity(8, 2, "OffsetCommitRequestTopic", name="solo", partitions=(
            entity(8, 2, "OffsetCommitRequestPartition", partition_index=0, committed_offset=7,
                   committed_metadata=""),)),)))
    assert commit.topics[0].partitions[0].error_code == ErrorCode.none
    fetched = await client.request(request(9, version, group_id="solo-group", require_stable=False, topics=(
        entity(9, version, "OffsetFetchRequestTopic", name="solo", partition_indexes=(0,)),)))
    assert fetched.topics[0].partitions[0].committed_offset == 7


async def test_committed_offsets_survive_a_restart(tmp_path):
    from tinystream.broker.app import Broker
    from tinystream.broker.protocol.client import KafkaClient
    from tinystream.testing.broker import test_settings

    settings = test_settings(tmp_path / "d")
    for attempt in range(2):
        b = Broker(settings)
        await b.start()
        client = await KafkaClient.connect(b.info.host, b.info.port)
        try:
            await client.request(find_coordinator("durable"))
            await wait_loaded(b)
            if attempt == 0:
                await create_topic(client, "dt")
                await client.request(request(8, 2, group_id="durable", generation_id_or_member_epoch=-1, member_id="",
                                             retention_time=millis(-1), topics=(
                    entity(8, 2, "OffsetCommitRequestTopic", name="dt", partitions=(
                        entity(8, 2, "OffsetCommitRequestPartition", partition_index=0, committed_offset=99,
                               committed_metadata=""),)),)))
            else:
                fetched = await client.request(request(9, 3, group_id="durable", topics=None))
                assert fetched.topics[0].partitions[0].committed_offset == 99
        finally:
            await client.close()
            await b.stop()
