"""Topic create / grow / delete / config change."""

from __future__ import annotations

import uuid

import pytest
from controller_helpers import Cluster, spread

from tinystream.operator.controller import (
    AlterTopicConfig,
    ControllerConfig,
    ControllerError,
    CreatePartitions,
    CreateTopic,
    DeleteTopic,
    DrainBroker,
    ExpireSession,
    PartitionsCreated,
    TopicConfigChanged,
    TopicCreated,
    TopicDeleted,
)


def test_create_places_replicas_evenly_and_leaders_first(three: Cluster) -> None:
    decision = three.create("orders", partitions=6, rf=2)
    topic = three.image.topic("orders")
    assert topic is not None and len(topic.partitions) == 6
    for p in topic.partitions:
        assert len(set(p.replicas)) == 2 and p.isr == p.replicas and p.leader == p.replicas[0]
        assert (p.leader_epoch, p.partition_epoch) == (0, 0)
    assert spread(three.replica_counts()) == 0 and spread(three.leader_counts()) == 0
    assert decision.actions == (
        TopicCreated(topic="orders", topic_id=topic.topic_id, partitions=6, replication_factor=2),
    )
    assert uuid.UUID(topic.topic_id).version == 4


def test_defaults_come_from_controller_config() -> None:
    cluster = Cluster(config=ControllerConfig(num_partitions=3, default_replication_factor=2))
    cluster.start_brokers([1, 2])
    cluster.apply(CreateTopic(topic="d"))
    topic = cluster.image.topic("d")
    assert len(topic.partitions) == 3 and all(len(p.replicas) == 2 for p in topic.partitions)


def test_topic_ids_and_placement_are_deterministic_per_seed() -> None:
    runs = []
    for seed in (1, 1, 2):
        cluster = Cluster(seed=seed)
        cluster.start_brokers([1, 2, 3, 4])
        for name in ("a", "b", "c"):
            cluster.create(name, partitions=3, rf=2)
        runs.append(cluster.image)
    assert runs[0] == runs[1]
    assert {t.topic_id for t in runs[0].topics.values()}.isdisjoint(t.topic_id for t in runs[2].topics.values())


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"topic": "bad name"}, ControllerError.INVALID_TOPIC_EXCEPTION),
        ({"topic": ".."}, ControllerError.INVALID_TOPIC_EXCEPTION),
        ({"topic": "x" * 250}, ControllerError.INVALID_TOPIC_EXCEPTION),
        ({"topic": "t", "partitions": 0}, ControllerError.INVALID_PARTITIONS),
        ({"topic": "t", "replication_factor": 0}, ControllerError.INVALID_REPLICATION_FACTOR),
        ({"topic": "t", "replication_factor": 4}, ControllerError.INVALID_REPLICATION_FACTOR),
        ({"topic": "t", "config": {"retention.msx": 1}}, ControllerError.INVALID_CONFIG),
        ({"topic": "t", "config": {"retention.ms": "soon"}}, ControllerError.INVALID_CONFIG),
        ({"topic": "t", "config": {"unclean.leader.election.enable": "maybe"}}, ControllerError.INVALID_CONFIG),
        ({"topic": "t", "config": {"min.insync.replicas": 0}}, ControllerError.INVALID_CONFIG),
        ({"topic": "t", "replica_assignment": ((1, 1),)}, ControllerError.INVALID_REPLICA_ASSIGNMENT),
        ({"topic": "t", "replica_assignment": ((1, 9),)}, ControllerError.INVALID_REPLICA_ASSIGNMENT),
        ({"topic": "t", "replica_assignment": ((1, 2), (3,))}, ControllerError.INVALID_REPLICA_ASSIGNMENT),
        ({"topic": "t", "replica_assignment": ((1,),), "partitions": 2}, ControllerError.INVALID_REQUEST),
    ],
)
def test_create_refusals(three: Cluster, kwargs, error) -> None:
    decision = three.apply(CreateTopic(**kwargs), ok=False)
    assert decision.error is error, decision.message
    assert "t" not in three.image.topics


def test_create_existing_topic(three: Cluster) -> None:
    three.create("t")
    decision = three.apply(CreateTopic(topic="t"), ok=False)
    assert decision.error is ControllerError.TOPIC_ALREADY_EXISTS


def test_placement_skips_fenced_and_drained_brokers(three: Cluster) -> None:
    three.register(4)
    three.heartbeat(4)
    three.apply(ExpireSession(broker_id=1))
    three.apply(DrainBroker(broker_id=2))
    three.create("t", partitions=4, rf=2)
    assert {b for _, p in three.image.iter_partitions() for b in p.replicas} == {3, 4}
    assert three.apply(CreateTopic(topic="u", replication_factor=3), ok=False).error is (
        ControllerError.INVALID_REPLICATION_FACTOR
    )


def test_manual_assignment_with_a_fenced_replica(three: Cluster) -> None:
    three.apply(ExpireSession(broker_id=1))
    three.create("t", replica_assignment=((1, 2),), partitions=None, rf=None)
    p = three.partition("t")
    assert p.replicas == (1, 2) and p.isr == (2,) and p.leader == 2
    three.apply(ExpireSession(broker_id=2))
    refused = three.apply(CreateTopic(topic="u", replica_assignment=((1, 2),)), ok=False)
    assert refused.error is ControllerError.INVALID_REPLICA_ASSIGNMENT


def test_grow_continues_placement_with_same_replication_factor(three: Cluster) -> None:
    three.create("t", partitions=3, rf=2)
    decision = three.apply(CreatePartitions(topic="t", count=6))
    topic = three.image.topic("t")
    assert len(topic.partitions) == 6 and all(len(p.replicas) == 2 for p in topic.partitions)
    assert [p.partition for p in topic.partitions] == list(range(6))
    assert decision.actions == (PartitionsCreated(topic="t", partitions=(3, 4, 5)),)
    assert spread(three.replica_counts()) == 0 and spread(three.leader_counts()) == 0


@pytest.mark.parametrize(
    ("event", "error"),
    [
        (CreatePartitions(topic="t", count=2), ControllerError.INVALID_PARTITIONS),
        (CreatePartitions(topic="t", count=1), ControllerError.INVALID_PARTITIONS),
        (CreatePartitions(topic="nope", count=5), ControllerError.UNKNOWN_TOPIC_OR_PARTITION),
        (CreatePartitions(topic="t", count=4, replica_assignment=((1, 2),)), ControllerError.INVALID_REPLICA_ASSIGNMENT),
        (CreatePartitions(topic="t", count=3, replica_assignment=((1,),)), ControllerError.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_grow_refusals(three: Cluster, event, error) -> None:
    three.create("t", partitions=2, rf=2)
    assert three.apply(event, ok=False).error is error


def test_grow_with_manual_assignment(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2)
    three.apply(CreatePartitions(topic="t", count=2, replica_assignment=((3, 1),)))
    assert three.partition("t", 1).replicas == (3, 1) and three.partition("t", 1).leader == 3


def test_delete_reports_topic_id_so_brokers_delete_logs(three: Cluster) -> None:
    three.create("t", partitions=2, rf=2)
    topic_id = three.image.topic("t").topic_id
    decision = three.apply(DeleteTopic(topic="t"))
    assert "t" not in three.image.topics
    assert decision.actions == (TopicDeleted(topic="t", topic_id=topic_id),)
    assert three.apply(DeleteTopic(topic="t"), ok=False).error is ControllerError.UNKNOWN_TOPIC_OR_PARTITION


def test_delete_can_be_disabled() -> None:
    cluster = Cluster(config=ControllerConfig(delete_topic_enable=False))
    cluster.start_brokers([1])
    cluster.create("t")
    assert cluster.apply(DeleteTopic(topic="t"), ok=False).error is ControllerError.TOPIC_DELETION_DISABLED


def test_config_merge_delete_and_replace(three: Cluster) -> None:
    three.create("t", config={"retention.ms": 1000, "cleanup.policy": "compact"})
    decision = three.apply(AlterTopicConfig(topic="t", config={"retention.ms": 2000, "cleanup.policy": None}))
    assert dict(three.image.topic("t").config) == {"retention.ms": 2000}
    assert decision.actions == (TopicConfigChanged(topic="t", keys=("cleanup.policy", "retention.ms")),)
    three.apply(AlterTopicConfig(topic="t", config={"segment.bytes": 1 << 20}, replace=True))
    assert dict(three.image.topic("t").config) == {"segment.bytes": 1 << 20}
    unchanged = three.apply(AlterTopicConfig(topic="t", config={"segment.bytes": 1 << 20}))
    assert not unchanged.image_changed
    bad = three.apply(AlterTopicConfig(topic="t", config={"nope": 1}), ok=False)
    assert bad.error is ControllerError.INVALID_CONFIG
    assert three.apply(AlterTopicConfig(topic="x", config={}), ok=False).error is (
        ControllerError.UNKNOWN_TOPIC_OR_PARTITION
    )


def test_image_config_is_read_only(three: Cluster) -> None:
    three.create("t", config={"retention.ms": 1000})
    with pytest.raises(TypeError):
        three.image.topic("t").config["retention.ms"] = 1  # type: ignore[index]


def test_value_schema_is_checked_to_be_a_json_schema(three: Cluster) -> None:
    schema = '{"type": "object", "required": ["id"]}'
    three.create("t", config={"tinystream.value.schema": schema})
    assert three.image.topic("t").config["tinystream.value.schema"] == schema
    bad = three.apply(AlterTopicConfig(topic="t", config={"tinystream.value.schema": '{"type": "objekt"}'}), ok=False)
    assert bad.error is ControllerError.INVALID_CONFIG
    assert "tinystream.value.schema" in bad.message and "not a valid JSON Schema at $.type" in bad.message
    not_json = three.apply(CreateTopic(topic="u", config={"tinystream.value.schema": "{"}), ok=False)
    assert not_json.error is ControllerError.INVALID_CONFIG and "not a JSON document" in not_json.message


def test_the_cluster_wide_partition_limit_refuses_creates_and_growth() -> None:
    cluster = Cluster(config=ControllerConfig(max_partitions=10))
    cluster.start_brokers([1, 2])
    cluster.apply(CreateTopic(topic="a", partitions=6, replication_factor=1))
    refused = cluster.apply(CreateTopic(topic="b", partitions=5, replication_factor=1), ok=False)
    assert refused.error is ControllerError.POLICY_VIOLATION and "max.partitions=10" in refused.message
    grown = cluster.apply(CreatePartitions(topic="a", count=11), ok=False)
    assert grown.error is ControllerError.POLICY_VIOLATION and "11 partitions" in grown.message
    cluster.apply(CreateTopic(topic="b", partitions=4, replication_factor=1))  # exactly the limit is fine
    assert ControllerConfig.from_dict(ControllerConfig(max_partitions=10).to_dict()).max_partitions == 10
