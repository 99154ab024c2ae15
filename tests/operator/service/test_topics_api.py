"""Topic admin: create (and validate only), describe, grow, reconfigure, delete."""

from __future__ import annotations

from pathlib import Path

import pytest
from service_helpers import Controller

from tinystream.controller_client import ControllerRefused


async def test_create_topic_places_replicas_and_leaders(two_brokers: Controller) -> None:
    ctl = two_brokers
    before = (await ctl.image())["version"]
    status, body = await ctl.request(
        "POST", "/v1/topics", {"name": "orders", "partitions": 4, "replication_factor": 2,
                               "config": {"retention.ms": 60000}}
    )
    assert status == 201
    topic = body["topic"]
    assert topic["name"] == "orders" and topic["config"] == {"retention.ms": 60000}
    assert [p["partition"] for p in topic["partitions"]] == [0, 1, 2, 3]
    for p in topic["partitions"]:
        assert sorted(p["replicas"]) == [1, 2] and sorted(p["isr"]) == [1, 2]
        assert p["leader"] == p["replicas"][0]
    assert {p["leader"] for p in topic["partitions"]} == {1, 2}  # leaders spread
    assert body["metadata_version"] == before + 1 and body["validate_only"] is False
    assert body["actions"][0]["type"] == "TopicCreated"
    image = await ctl.image()
    assert [t["name"] for t in image["topics"]] == ["orders"]
    assert image["version"] == before + 1


async def test_create_existing_topic_is_409(two_brokers: Controller) -> None:
    await two_brokers.client.create_topic("t", partitions=1)
    with pytest.raises(ControllerRefused) as info:
        await two_brokers.client.create_topic("t", partitions=1)
    assert (info.value.error, info.value.code, info.value.status) == ("TOPIC_ALREADY_EXISTS", 36, 409)


async def test_validate_only_changes_nothing(two_brokers: Controller) -> None:
    ctl = two_brokers
    before = await ctl.image()
    reply = await ctl.client.create_topic("dry", partitions=3, replication_factor=2, validate_only=True)
    assert reply.validate_only is True
    assert reply.topic is not None and len(reply.topic.partitions) == 3
    assert await ctl.image() == before
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.describe_topic("dry")
    assert info.value.error == "UNKNOWN_TOPIC_OR_PARTITION" and info.value.status == 404
    # validate_only still validates
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.create_topic("dry", replication_factor=3, validate_only=True)
    assert info.value.error == "INVALID_REPLICATION_FACTOR" and info.value.status == 400


async def test_kafka_minus_one_takes_the_controller_defaults(tmp_path: Path) -> None:
    ctl = Controller(tmp_path / "s.json", num_partitions=3, default_replication_factor=2)
    await ctl.start()
    try:
        await ctl.start_broker(1)
        await ctl.start_broker(2)
        reply = await ctl.client.create_topic("d", partitions=-1, replication_factor=-1)
        assert len(reply.topic.partitions) == 3
        assert all(len(p.replicas) == 2 for p in reply.topic.partitions)
        omitted = await ctl.client.create_topic("e")
        assert len(omitted.topic.partitions) == 3
    finally:
        await ctl.stop()


async def test_grow_a_topic_and_refuse_to_shrink_it(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", partitions=2, replication_factor=2)
    grown = await ctl.client.create_partitions("t", count=5)
    assert [p.partition for p in grown.topic.partitions] == [0, 1, 2, 3, 4]
    assert all(len(p.replicas) == 2 for p in grown.topic.partitions)
    assert grown.actions[0]["type"] == "PartitionsCreated"
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.create_partitions("t", count=3)
    assert info.value.error == "INVALID_PARTITIONS" and "5" in info.value.message
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.create_partitions("missing", count=3)
    assert info.value.error == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_alter_config_merges_deletes_and_replaces(two_brokers: Controller) -> None:
    ctl = two_brokers
    await ctl.client.create_topic("t", config={"retention.ms": 1000, "cleanup.policy": "delete"})
    merged = await ctl.client.alter_topic_config("t", {"retention.ms": 2000, "min.insync.replicas": 1})
    assert dict(merged.topic.config) == {"retention.ms": 2000, "cleanup.policy": "delete", "min.insync.replicas": 1}
    deleted = await ctl.client.alter_topic_config("t", {"cleanup.policy": None})
    assert "cleanup.policy" not in deleted.topic.config
    replaced = await ctl.client.alter_topic_config("t", {"segment.bytes": 1048576}, replace=True)
    assert dict(replaced.topic.config) == {"segment.bytes": 1048576}
    with pytest.raises(ControllerRefused) as info:
        await ctl.client.alter_topic_config("t", {"retention.mss": 1})
    assert (info.value.error, info.value.status) == ("INVALID_CONFIG", 400)
    assert "retention.mss" in info.value.message
    assert dict((await ctl.client.describe_topic("t")).config) == {"segment.bytes": 1048576}


async def test_delete_a_topic(two_brokers: Controller) -> None:
    ctl = two_brokers
    created = await ctl.client.create_topic("gone", partitions=2)
    reply = await ctl.client.delete_topic("gone")
    assert reply.actions == ({"type": "TopicDeleted", "topic": "gone", "topic_id": created.topic.topic_id},)
    assert (await ctl.image())["topics"] == []
    status, body = await ctl.request("DELETE", "/v1/topics/gone")
    assert status == 404 and body["error"] == "UNKNOWN_TOPIC_OR_PARTITION"


async def test_illegal_topic_name_is_refused(two_brokers: Controller) -> None:
    with pytest.raises(ControllerRefused) as info:
        await two_brokers.client.create_topic("bad name!")
    assert (info.value.error, info.value.code, info.value.status) == ("INVALID_TOPIC_EXCEPTION", 17, 400)
