"""Plain-dict round trips: state (file / CR status), image (brokers), events, actions."""

from __future__ import annotations

import copy
import json

import pytest
from controller_helpers import Cluster

from tinystream.operator.controller import (
    SCHEMA_VERSION,
    AclFilter,
    AclRecord,
    AclsCreated,
    AclsDeleted,
    Action,
    AdvanceTime,
    AllocateProducerIds,
    AlterBrokerConfigs,
    AlterClientQuotas,
    AlterPartition,
    AlterScramCredentials,
    AlterTopicConfig,
    BrokerConfigAlteration,
    BrokerConfigOp,
    BrokerConfigsChanged,
    BrokerDrained,
    BrokerFenced,
    BrokerHeartbeat,
    BrokerRegistered,
    BrokerUndrained,
    BrokerUnfenced,
    BrokerUnregistered,
    ClientQuotasChanged,
    ControllerActivated,
    ControllerConfig,
    ControllerState,
    CreateAcls,
    CreatePartitions,
    CreateTopic,
    DeleteAcls,
    DeleteTopic,
    DrainBroker,
    ElectionReason,
    ElectPreferredLeaders,
    Event,
    ExpireSession,
    FenceReason,
    IsrChanged,
    LeaderChanged,
    LeaderRecoveryState,
    MetadataImage,
    PartitionsCreated,
    PartitionsOffline,
    PreferredElection,
    ProducerIdsAllocated,
    QuotaAlteration,
    QuotaOp,
    ReassignmentCancelled,
    ReassignmentCompleted,
    ReassignmentStarted,
    ReassignPartitions,
    RegisterBroker,
    ReplicaAssignment,
    ScramCredentialRecord,
    ScramCredentialsChanged,
    ScramDeletion,
    StateFormatError,
    TopicConfigChanged,
    TopicCreated,
    TopicDeleted,
    TopicPartition,
    UndrainBroker,
    UnregisterBroker,
)

ACL = AclRecord(resource_type="TOPIC", resource_name="t", pattern_type="LITERAL", principal="User:a", host="*",
                operation="READ", permission="ALLOW")
CRED = ScramCredentialRecord(user="a", mechanism="SCRAM-SHA-512", salt="c2FsdA==", stored_key="a2V5",
                             server_key="a2V5", iterations=4096)

EVENTS = [
    RegisterBroker(broker_id=1, incarnation_id="i", host="h", port=1, rack="r"),
    BrokerHeartbeat(broker_id=1, broker_epoch=2, metadata_version=3, want_fence=True),
    UnregisterBroker(broker_id=1),
    AllocateProducerIds(broker_id=1, broker_epoch=3),
    ExpireSession(broker_id=1),
    AdvanceTime(),
    ControllerActivated(),
    DrainBroker(broker_id=1),
    UndrainBroker(broker_id=1),
    CreateTopic(topic="t", partitions=2, replication_factor=1, config={"retention.ms": 5, "preallocate": True},
                replica_assignment=((1,), (2,))),
    CreatePartitions(topic="t", count=3, replica_assignment=((1,),)),
    DeleteTopic(topic="t"),
    AlterTopicConfig(topic="t", config={"retention.ms": None, "min.cleanable.dirty.ratio": 0.5}, replace=True),
    AlterPartition(broker_id=1, broker_epoch=2, topic="t", partition=0, leader_epoch=3, partition_epoch=4,
                   isr=(1, 2), leader_recovery_state=LeaderRecoveryState.RECOVERING),
    ElectPreferredLeaders(partitions=(TopicPartition("t", 0),)),
    ReassignPartitions(assignments=(ReplicaAssignment(topic="t", partition=0, replicas=(1, 2)),
                                    ReplicaAssignment(topic="t", partition=1, replicas=None))),
    CreateAcls(acls=(ACL,)),
    DeleteAcls(filters=(AclFilter(resource_type="TOPIC", principal="User:a"),)),
    AlterScramCredentials(upsertions=(CRED,), deletions=(ScramDeletion(user="b", mechanism="SCRAM-SHA-256"),)),
    AlterClientQuotas(alterations=(QuotaAlteration(entity={"user": "a", "client-id": None}, ops=(
        QuotaOp(key="producer_byte_rate", value=1024.0), QuotaOp(key="request_percentage", remove=True))),)),
    AlterBrokerConfigs(alterations=(BrokerConfigAlteration(resource="", ops=(
        BrokerConfigOp(key="log.retention.ms", value="60000"), BrokerConfigOp(key="max.connections", op="DELETE"))),
        BrokerConfigAlteration(resource="2", ops=(BrokerConfigOp(key="follower.replication.throttled.rate",
                                                                 value="1024"),)))),
]

ACTIONS = [
    BrokerRegistered(broker_id=1, incarnation_id="i", epoch=2),
    BrokerFenced(broker_id=1, reason=FenceReason.RESTARTED),
    BrokerUnfenced(broker_id=1),
    BrokerDrained(broker_id=1),
    BrokerUndrained(broker_id=1),
    BrokerUnregistered(broker_id=1),
    ProducerIdsAllocated(broker_id=1, producer_id_start=1000, producer_id_len=1000),
    TopicCreated(topic="t", topic_id="x", partitions=1, replication_factor=1),
    PartitionsCreated(topic="t", partitions=(1, 2)),
    TopicDeleted(topic="t", topic_id="x"),
    TopicConfigChanged(topic="t", keys=("retention.ms",)),
    LeaderChanged(topic="t", partition=0, leader=-1, leader_epoch=3, reason=ElectionReason.OFFLINE),
    IsrChanged(topic="t", partition=0, isr=(1,), partition_epoch=4),
    PartitionsOffline(partitions=(TopicPartition("t", 0), TopicPartition("u", 1))),
    ReassignmentStarted(topic="t", partition=0, target=(2, 3)),
    ReassignmentCompleted(topic="t", partition=0, replicas=(2, 3)),
    ReassignmentCancelled(topic="t", partition=0, replicas=(1,)),
    AclsCreated(acls=(ACL,)),
    AclsDeleted(matched=((ACL,), ())),
    ScramCredentialsChanged(users=("a",)),
    ClientQuotasChanged(entities=("user=a, client-id=<default>",)),
    BrokerConfigsChanged(resources=("", "2")),
]


def test_every_event_and_action_class_is_covered() -> None:
    assert {type(e).__name__ for e in EVENTS} == set(Event.registry)
    assert {type(a).__name__ for a in ACTIONS} == set(Action.registry)


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_event_round_trip_through_json(event: Event) -> None:
    plain = json.loads(json.dumps(event.to_dict()))
    assert plain["type"] == type(event).__name__
    assert Event.from_dict(plain) == event


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: type(a).__name__)
def test_action_round_trip_through_json(action: Action) -> None:
    assert Action.from_dict(json.loads(json.dumps(action.to_dict()))) == action


@pytest.mark.parametrize(
    ("data", "fragment"),
    [
        ({"type": "Nope"}, "unknown event type"),
        ({}, "type"),
        ({"type": "DrainBroker", "broker_id": True}, "$.broker_id"),
        ({"type": "DrainBroker", "broker_id": "1"}, "$.broker_id"),
        ({"type": "DrainBroker", "broker_id": 1, "extra": 2}, "unknown field"),
        ({"type": "DrainBroker"}, "broker_id"),
        ({"type": "AlterPartition", "broker_id": 1, "broker_epoch": 1, "topic": "t", "partition": 0,
          "leader_epoch": 0, "partition_epoch": 0, "isr": [1, "2"]}, "$.isr[1]"),
        ({"type": "AlterPartition", "broker_id": 1, "broker_epoch": 1, "topic": "t", "partition": 0,
          "leader_epoch": 0, "partition_epoch": 0, "isr": [1], "leader_recovery_state": "HAPPY"}, "leader_recovery_state"),
        ({"type": "CreateTopic", "topic": "t", "config": {"retention.ms": [1]}}, "$.config.retention.ms"),
    ],
)
def test_bad_event_dicts_are_refused_with_a_path(data, fragment) -> None:
    with pytest.raises(StateFormatError) as info:
        Event.from_dict(data)
    assert fragment in str(info.value)


def _busy_state() -> ControllerState:
    cluster = Cluster(config=ControllerConfig(broker_session_timeout_ms=4000,
                                              preferred_leader_election=PreferredElection.IMMEDIATE))
    cluster.start_brokers([1, 2, 3])
    cluster.register(4, rack="r4")
    cluster.create("a", partitions=3, rf=2, config={"unclean.leader.election.enable": True, "retention.ms": 1})
    cluster.create("b", partitions=1, rf=1)
    cluster.apply(ReassignPartitions(assignments=(ReplicaAssignment(topic="a", partition=0, replicas=(3, 1)),)))
    cluster.apply(DrainBroker(broker_id=2, until_restart=True))
    cluster.apply(ExpireSession(broker_id=1))
    cluster.now = 1234
    cluster.heartbeat(3)
    return cluster.state


def test_state_round_trip_through_json() -> None:
    state = _busy_state()
    plain = json.loads(json.dumps(state.to_dict()))
    assert plain["schema_version"] == SCHEMA_VERSION
    assert plain["config"]["broker.session.timeout.ms"] == 4000
    assert plain["config"]["preferred.leader.election"] == "immediate"
    back = ControllerState.from_dict(plain)
    assert back == state
    assert back.to_dict() == plain


def test_a_rolls_drain_is_written_only_while_it_lasts() -> None:
    # The previous version refuses unknown fields: a state without a roll in progress stays readable by it.
    state = _busy_state()
    brokers = {b["broker_id"]: b for b in state.image.to_dict()["brokers"]}
    assert brokers[2]["drained_until_restart"] is True and "drained_until_restart" not in brokers[3]


def test_image_dict_shape_is_the_documented_one() -> None:
    image = _busy_state().image.to_dict()
    assert set(image) == {"schema_version", "version", "cluster_id", "brokers", "topics"}
    assert set(image["brokers"][0]) == {"broker_id", "host", "port", "rack", "incarnation_id", "epoch", "fenced",
                                        "drained"}  # drained_until_restart only while true
    assert [t["name"] for t in image["topics"]] == ["a", "b"]
    assert set(image["topics"][0]) == {"name", "topic_id", "config", "partitions"}
    assert set(image["topics"][0]["partitions"][0]) == {
        "partition", "replicas", "isr", "leader", "leader_epoch", "partition_epoch", "adding_replicas",
        "removing_replicas", "leader_recovery_state",
    }
    assert MetadataImage.from_dict(image).to_dict() == image


def _mutate(plain, path, value):
    target = plain
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return plain


@pytest.mark.parametrize(
    ("path", "value", "fragment"),
    [
        (("schema_version",), 99, "schema version"),
        (("image", "schema_version"), 0, "schema version"),
        (("image", "version"), True, "$.version"),
        (("image", "brokers", 0, "port"), "9092", "$.brokers[0].port"),
        (("image", "topics", 0, "partitions", 0, "partition"), 5, "index"),
        (("image", "topics", 0, "partitions", 0, "leader"), 4, "leader 4"),
        (("config", "num.partitions"), 0, "num.partitions"),
        (("config", "bogus"), 1, "unknown setting"),
        (("ids",), {"seed": "x"}, "$.ids.seed"),
        (("sessions",), [{"broker_id": 1}], "last_contact_ms"),
    ],
)
def test_bad_state_dicts_are_refused(path, value, fragment) -> None:
    plain = _mutate(copy.deepcopy(_busy_state().to_dict()), path, value)
    with pytest.raises(StateFormatError) as info:
        ControllerState.from_dict(plain)
    assert fragment in str(info.value)


def test_duplicate_broker_is_refused() -> None:
    plain = _busy_state().to_dict()
    plain["image"]["brokers"].append(plain["image"]["brokers"][0])
    with pytest.raises(StateFormatError, match="appears twice"):
        ControllerState.from_dict(plain)


def test_invariant_check_can_be_skipped_for_forensics() -> None:
    plain = _mutate(_busy_state().to_dict(), ("image", "topics", 0, "partitions", 0, "isr"), [])
    with pytest.raises(StateFormatError, match="ISR"):
        ControllerState.from_dict(plain)
    assert ControllerState.from_dict(plain, check=False).image.topics["a"].partitions[0].isr == ()
