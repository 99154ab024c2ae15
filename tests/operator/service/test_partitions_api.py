"""AlterPartition (accepted with current epochs, stale ones rejected), elections, reassignments."""

from __future__ import annotations

import pytest
from service_helpers import Controller

from tinystream.controller_client import ControllerRefused, PartitionState


async def _partition(ctl: Controller, topic: str, index: int) -> PartitionState:
    return (await ctl.client.describe_topic(topic)).partitions[index]


async def _alter(ctl: Controller, p: PartitionState, isr, *, broker_id=None, leader_epoch=None, partition_epoch=None):
    broker = p.leader if broker_id is None else broker_id
    return await ctl.client.alter_partition(
        broker_id=broker, broker_epoch=ctl.epochs[broker], topic=p.topic, partition=p.partition,
        leader_epoch=p.leader_epoch if leader_epoch is None else leader_epoch,
        partition_epoch=p.partition_epoch if partition_epoch is None else partition_epoch,
        isr=isr,
    )


async def test_alter_partition_with_current_epochs_is_accepted(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", partitions=1, replication_factor=2)
    p = await _partition(ctl, "t", 0)
    follower = next(r for r in p.replicas if r != p.leader)
    version = (await ctl.image())["version"]

    shrunk = await _alter(ctl, p, [p.leader])
    assert shrunk.partition.isr == (p.leader,)
    assert shrunk.partition.partition_epoch == p.partition_epoch + 1
    assert shrunk.partition.leader_epoch == p.leader_epoch  # an ISR change keeps the leader epoch
    assert shrunk.metadata_version == version + 1
    assert (await _partition(ctl, "t", 0)).isr == (p.leader,)

    grown = await _alter(ctl, shrunk.partition, [p.leader, follower])
    assert set(grown.partition.isr) == {p.leader, follower}
    assert grown.partition.partition_epoch == p.partition_epoch + 2


async def test_stale_alter_partition_requests_are_rejected(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", partitions=1, replication_factor=2)
    p = await _partition(ctl, "t", 0)
    shrunk = await _alter(ctl, p, [p.leader])

    # The same request again: its partition epoch is now stale.
    with pytest.raises(ControllerRefused) as info:
        await _alter(ctl, p, [p.leader])
    assert (info.value.error, info.value.code, info.value.status) == ("INVALID_UPDATE_VERSION", 95, 409)

    # Leadership moves (drain the leader, once the follower is back in sync): the old leader epoch is fenced.
    await _alter(ctl, shrunk.partition, list(p.replicas))
    await ctl.client.drain_broker(p.leader)
    moved = await _partition(ctl, "t", 0)
    assert moved.leader != p.leader and moved.leader_epoch > p.leader_epoch
    with pytest.raises(ControllerRefused) as info:
        await _alter(ctl, p, [p.leader], partition_epoch=moved.partition_epoch)
    assert (info.value.error, info.value.status) == ("FENCED_LEADER_EPOCH", 409)

    # A follower cannot change the ISR.
    with pytest.raises(ControllerRefused) as info:
        await _alter(ctl, moved, [moved.leader], broker_id=p.leader)
    assert info.value.error == "INVALID_REQUEST" and "not the leader" in info.value.message

    # A stale broker epoch is refused before anything else.
    status, body = await ctl.request("POST", "/v1/partitions/alter", {
        "broker_id": moved.leader, "broker_epoch": 0, "topic": "t", "partition": 0,
        "leader_epoch": moved.leader_epoch, "partition_epoch": moved.partition_epoch, "isr": [moved.leader],
    })
    assert status == 409 and body["error"] == "STALE_BROKER_EPOCH"
    assert await _partition(ctl, "t", 0) == moved  # nothing changed


async def test_alter_partition_on_unknown_partition_is_404(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", partitions=1)
    status, body = await ctl.request("POST", "/v1/partitions/alter", {
        "broker_id": 1, "broker_epoch": ctl.epochs[1], "topic": "t", "partition": 9,
        "leader_epoch": 0, "partition_epoch": 0, "isr": [1],
    })
    assert status == 404 and body["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_preferred_leader_election_returns_leadership(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", partitions=2, replication_factor=2)
    preferred = {p.partition: p.replicas[0] for p in (await ctl.client.describe_topic("t")).partitions}
    await ctl.client.drain_broker(1)
    await ctl.client.undrain_broker(1)
    # Broker 1 is back; its leader (2) lets it into the ISR again; leadership stays with 2 until an election.
    for p in (await ctl.client.describe_topic("t")).partitions:
        assert p.leader == 2 and p.isr == (2,)
        await _alter(ctl, p, [2, 1])
    assert all(p.leader == 2 for p in (await ctl.client.describe_topic("t")).partitions)

    elected = await ctl.client.elect_preferred_leaders([("t", 0), ("t", 1)])
    moved_back = {(c["partition"], c["leader"]) for c in elected.leaders_changed}
    assert moved_back == {(i, 1) for i, b in preferred.items() if b == 1} and moved_back
    after = (await ctl.client.describe_topic("t")).partitions
    assert all(p.leader == preferred[p.partition] for p in after)
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.elect_preferred_leaders([("t", 5)])
    assert info.value.error == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_reassign_and_cancel(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.start_broker(3)
    await ctl.client.create_topic("t", partitions=1, replica_assignment=[[1, 2]])
    reply = await ctl.client.reassign_partitions({("t", 0): [2, 3]})
    (p,) = reply.partitions
    assert 3 in p.replicas and p.adding_replicas == (3,)
    assert reply.actions[0]["type"] == "ReassignmentStarted"
    cancelled = await ctl.client.reassign_partitions({("t", 0): None})
    assert sorted(cancelled.partitions[0].replicas) == [1, 2] and not cancelled.partitions[0].adding_replicas
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.reassign_partitions({("t", 0): None})
    assert (info.value.error, info.value.status) == ("NO_REASSIGNMENT_IN_PROGRESS", 409)
