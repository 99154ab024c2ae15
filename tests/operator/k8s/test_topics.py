"""Topic validation (Ready=False reasons) and the changes a spec asks of the controller."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from tinystream.operator.controller.topic_config import TOPIC_CONFIGS
from tinystream.operator.k8s.conditions import Condition, TopicReason, merge_condition, ready
from tinystream.operator.k8s.model import TopicSpec
from tinystream.operator.k8s.reconcile import PartitionView
from tinystream.operator.k8s.topics import (
    SPEC_CONFIG_KEYS,
    AlterConfig,
    ChangeReplicationFactor,
    CreateTopic,
    GrowPartitions,
    TopicView,
    partition_rows,
    placement_condition,
    plan_topic,
    validate_topic,
)


def topic(**spec):
    base = {"cluster": "demo", "partitions": 3, "replicationFactor": 2}
    return TopicSpec.from_resource({"metadata": {"name": "orders", "namespace": "ns"}, "spec": {**base, **spec}})


def reasons(problems):
    return [p.reason for p in problems]


def test_valid_topic_has_no_problems():
    assert validate_topic(topic(config={"retention.ms": "1000", "min.insync.replicas": 2}), cluster_brokers=3) == []


@pytest.mark.parametrize("spec,kwargs,reason", [
    ({}, {"cluster_brokers": None}, TopicReason.CLUSTER_NOT_FOUND),
    ({"replicationFactor": 4}, {"cluster_brokers": 3}, TopicReason.REPLICATION_FACTOR_TOO_LARGE),
    ({"partitions": 2}, {"cluster_brokers": 3, "existing": TopicView("orders", 6, 2)},
     TopicReason.PARTITIONS_CANNOT_SHRINK),
    ({"config": {"retention.hours": 1}}, {"cluster_brokers": 3}, TopicReason.UNKNOWN_CONFIG_KEY),
    ({"config": {"retention.ms": "a week"}}, {"cluster_brokers": 3}, TopicReason.INVALID_CONFIG_VALUE),
    ({"config": {"cleanup.policy": "never"}}, {"cluster_brokers": 3}, TopicReason.INVALID_CONFIG_VALUE),
    ({"config": {"min.insync.replicas": 3}}, {"cluster_brokers": 3}, TopicReason.MIN_INSYNC_REPLICAS_TOO_LARGE),
    ({"topicName": "bad name"}, {"cluster_brokers": 3}, TopicReason.INVALID_TOPIC_NAME),
    ({"topicName": "renamed"}, {"cluster_brokers": 3, "created_name": "orders"}, TopicReason.TOPIC_NAME_CHANGED),
])
def test_each_problem_has_its_reason(spec, kwargs, reason):
    problems = validate_topic(topic(**spec), **kwargs)
    assert reasons(problems)[0] is reason
    assert all(p.reason.value[0].isupper() and " " not in p.reason.value for p in problems)


def test_rf_message_names_numbers():
    problem, = validate_topic(topic(replicationFactor=5), cluster_brokers=3)
    assert "replicationFactor 5 exceeds the 3 broker(s)" in problem.message


def test_plan_creates_a_missing_topic():
    assert plan_topic(topic(config={"retention.ms": 5}), None) == [CreateTopic("orders", 3, 2, {"retention.ms": 5})]


def test_plan_grows_and_alters():
    existing = TopicView("orders", 3, 2, {"retention.ms": "5", "segment.bytes": "1000"})
    actions = plan_topic(topic(partitions=6, config={"retention.ms": 10}), existing)
    assert actions == [GrowPartitions("orders", 6), AlterConfig("orders", {"retention.ms": 10, "segment.bytes": None})]


def test_plan_is_empty_when_in_sync():
    assert plan_topic(topic(config={"retention.ms": 5}), TopicView("orders", 3, 2, {"retention.ms": "5"})) == []


def test_plan_leaves_a_reassignments_throttle_unless_the_spec_names_it():
    moving = {"retention.ms": "5", "leader.replication.throttled.replicas": "0:0",
              "follower.replication.throttled.replicas": "0:1"}
    assert plan_topic(topic(config={"retention.ms": 5}), TopicView("orders", 3, 2, moving)) == []
    named = topic(config={"retention.ms": 5, "follower.replication.throttled.replicas": "*"})
    assert plan_topic(named, TopicView("orders", 3, 2, moving)) == [
        AlterConfig("orders", {"follower.replication.throttled.replicas": "*"})]


def test_topic_name_defaults_to_metadata_name():
    assert topic().topic_name == "orders"
    assert topic(topicName="orders_v1").topic_name == "orders_v1"


def test_condition_transition_time_changes_only_on_flip():
    t1 = datetime(2026, 1, 1, tzinfo=UTC)
    t2 = datetime(2026, 1, 2, tzinfo=UTC)
    first = merge_condition([], ready(False, TopicReason.CLUSTER_NOT_FOUND, "x"), now=t1)
    same = merge_condition(first, ready(False, TopicReason.REPLICATION_FACTOR_TOO_LARGE, "y"), now=t2)
    assert same[0]["lastTransitionTime"] == "2026-01-01T00:00:00Z" and same[0]["reason"] == "ReplicationFactorTooLarge"
    flipped = merge_condition(same, ready(True, TopicReason.READY, "ok"), now=t2)
    assert flipped[0]["lastTransitionTime"] == "2026-01-02T00:00:00Z" and flipped[0]["status"] == "True"
    other = merge_condition(flipped, Condition("Other", None, "Why", "m"), now=t2)
    assert [c["type"] for c in other] == ["Ready", "Other"] and other[1]["status"] == "Unknown"


def test_spec_schema_becomes_the_value_schema_config():
    schema = {"type": "object", "required": ["id"], "properties": {"id": {"type": "integer"}}}
    spec = topic(schema=schema)
    text = spec.config["tinystream.value.schema"]
    assert text == '{"properties":{"id":{"type":"integer"}},"required":["id"],"type":"object"}'  # canonical
    assert validate_topic(spec, cluster_brokers=3) == []
    assert plan_topic(spec, TopicView("orders", 3, 2, {"tinystream.value.schema": text})) == []  # stable
    bad = validate_topic(topic(schema={"type": "objekt"}), cluster_brokers=3)
    assert reasons(bad) == [TopicReason.INVALID_CONFIG_VALUE] and "spec.schema" in bad[0].message


# -- every topic config of the table; the replication factor as a reassignment; placement in status ---------------


def test_every_config_the_table_has_is_accepted_with_its_own_rules():
    accepted = {"flush.ms": 1000, "segment.ms": "60000", "compression.type": "zstd", "preallocate": "true",
                "min.cleanable.dirty.ratio": "0.5", "message.timestamp.type": "LogAppendTime",
                "unclean.leader.election.enable": "false", "delete.retention.ms": 0}
    assert validate_topic(topic(config=accepted), cluster_brokers=3) == []
    assert set(SPEC_CONFIG_KEYS) == set(TOPIC_CONFIGS) - {"tinystream.value.schema"}
    problems = validate_topic(topic(config={"flush.mss": 1, "message.timestamp.type": "Now"}), cluster_brokers=3)
    assert reasons(problems) == [TopicReason.UNKNOWN_CONFIG_KEY, TopicReason.INVALID_CONFIG_VALUE]
    assert "'flush.mss'" in problems[0].message and "message.timestamp.type" in problems[1].message


def test_a_new_replication_factor_is_planned_after_new_partitions():
    existing = TopicView("orders", 2, 3, {})
    assert plan_topic(topic(partitions=3, replicationFactor=2), existing) == [
        GrowPartitions("orders", 3), ChangeReplicationFactor("orders", 2)]
    assert plan_topic(topic(partitions=2, replicationFactor=3), existing) == []


def test_placement_says_changing_then_under_replicated_then_ready():
    spec = topic(replicationFactor=3)
    moving = PartitionView("orders", 0, 1, (1, 2, 3), (1, 2), adding=(3,))
    under = PartitionView("orders", 1, 1, (1, 2, 3), (1, 2))
    full = PartitionView("orders", 2, 2, (2, 3, 1), (2, 3, 1))
    assert placement_condition(spec, [moving, under, full]).reason == TopicReason.REPLICATION_FACTOR_CHANGING.value
    assert "1 of 3 partitions moving" in placement_condition(spec, [moving, under, full]).message
    assert placement_condition(spec, [under, full]).reason == TopicReason.UNDER_REPLICATED.value
    assert placement_condition(spec, [full]).status is True
    # Lowered but the controller not yet told: the partition still has the old count, so not Ready.
    assert placement_condition(topic(replicationFactor=2), [full]).reason == "ReplicationFactorChanging"
    assert partition_rows([moving])[0]["addingReplicas"] == [3] and "removingReplicas" not in partition_rows([moving])[0]
