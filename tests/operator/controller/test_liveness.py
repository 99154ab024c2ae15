"""Registration, heartbeats, session expiry and fencing (KIP-631 semantics)."""

from __future__ import annotations

from controller_helpers import Cluster

from tinystream.operator.controller import (
    NO_LEADER,
    BrokerFenced,
    BrokerHeartbeat,
    BrokerRegistered,
    BrokerUnfenced,
    BrokerUnregistered,
    ControllerActivated,
    ControllerConfig,
    ControllerError,
    ElectionReason,
    ExpireSession,
    FenceReason,
    LeaderChanged,
    PartitionsOffline,
    RegisterBroker,
    TopicPartition,
    UnregisterBroker,
)


def test_registration_starts_fenced_and_epoch_is_its_image_version(cluster: Cluster) -> None:
    decision = cluster.register(4)
    record = cluster.image.brokers[4]
    assert record.fenced and not record.drained
    assert record.epoch == cluster.image.version == 1
    assert decision.image_changed
    assert decision.actions == (BrokerRegistered(broker_id=4, incarnation_id="inc-4", epoch=1),)


def test_unfenced_only_after_catching_up_to_its_registration(cluster: Cluster) -> None:
    cluster.register(1)
    cluster.register(2)  # image version 2; broker 1 registered at 1
    behind = cluster.heartbeat(1, metadata_version=0)
    assert cluster.image.brokers[1].fenced and not behind.image_changed
    caught = cluster.heartbeat(1, metadata_version=1)
    assert not cluster.image.brokers[1].fenced
    assert caught.actions == (BrokerUnfenced(broker_id=1),)


def test_session_expires_strictly_after_the_timeout() -> None:
    cluster = Cluster(config=ControllerConfig(broker_session_timeout_ms=5000))
    cluster.start_brokers([1, 2])
    cluster.now = 1000
    cluster.heartbeat(2)
    assert not cluster.advance(4000).image_changed  # t=5000: last contact 0 + 5000 is not yet < now
    decision = cluster.advance(1)
    assert cluster.image.brokers[1].fenced and not cluster.image.brokers[2].fenced
    assert BrokerFenced(broker_id=1, reason=FenceReason.SESSION_EXPIRED) in decision.actions


def test_default_session_timeout_is_kafkas(three: Cluster) -> None:
    assert three.state.config.broker_session_timeout_ms == 9000
    three.advance(9000)
    assert not any(b.fenced for b in three.image.brokers.values())
    three.advance(1)
    assert all(b.fenced for b in three.image.brokers.values())


def test_heartbeat_errors(three: Cluster) -> None:
    unknown = three.apply(BrokerHeartbeat(broker_id=9, broker_epoch=1, metadata_version=5), ok=False)
    assert unknown.error is ControllerError.BROKER_ID_NOT_REGISTERED
    stale = three.heartbeat(1, broker_epoch=0, ok=False)
    assert stale.error is ControllerError.STALE_BROKER_EPOCH
    assert "epoch" in stale.message


def test_refused_event_returns_the_same_state(three: Cluster) -> None:
    before = three.state
    decision = three.heartbeat(1, broker_epoch=99, ok=False)
    assert decision.state is before and not decision.image_changed and decision.actions == ()


def test_heartbeat_renews_session_without_changing_the_image(three: Cluster) -> None:
    version = three.image.version
    three.now = 8000
    decision = three.heartbeat(1)
    assert not decision.image_changed and three.image.version == version
    assert three.state.sessions[1].last_contact_ms == 8000
    three.advance(2000)  # t=10000: 2 and 3 expire, 1 does not
    assert [b for b, r in three.image.brokers.items() if r.fenced] == [2, 3]


def test_fenced_broker_leaves_isr_and_leadership(three: Cluster) -> None:
    three.create("t", partitions=1, rf=3, replica_assignment=((1, 2, 3),))
    decision = three.apply(ExpireSession(broker_id=1))
    p = three.partition("t")
    assert p.leader == 2 and p.isr == (2, 3)
    assert p.leader_epoch == 1 and p.partition_epoch == 1
    assert LeaderChanged(topic="t", partition=0, leader=2, leader_epoch=1, reason=ElectionReason.LEADER_FENCED) in decision.actions


def test_last_isr_member_stays_and_leads_again_when_back(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2, replica_assignment=((1, 2),))
    three.apply(ExpireSession(broker_id=2))
    assert three.partition("t").isr == (1,)
    decision = three.apply(ExpireSession(broker_id=1))
    p = three.partition("t")
    assert p.leader == NO_LEADER and p.isr == (1,)
    assert PartitionsOffline(partitions=(TopicPartition("t", 0),)) in decision.actions
    three.heartbeat(2)  # broker 2 is back but was not in sync: no clean leader
    assert three.partition("t").leader == NO_LEADER
    back = three.heartbeat(1)
    p = three.partition("t")
    assert p.leader == 1 and p.isr == (1,) and p.leader_epoch == 2
    assert any(isinstance(a, LeaderChanged) and a.reason is ElectionReason.ONLINE for a in back.actions)


def test_restart_with_new_incarnation_ends_old_session(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2, replica_assignment=((1, 2),))
    old_epoch = three.image.brokers[1].epoch
    decision = three.register(1, incarnation="inc-1-restarted")
    record = three.image.brokers[1]
    assert record.fenced and record.epoch == three.image.version > old_epoch
    assert BrokerFenced(broker_id=1, reason=FenceReason.RESTARTED) in decision.actions
    assert three.partition("t").leader == 2 and three.partition("t").isr == (2,)
    stale = three.heartbeat(1, broker_epoch=old_epoch, ok=False)
    assert stale.error is ControllerError.STALE_BROKER_EPOCH
    three.heartbeat(1)
    assert not three.image.brokers[1].fenced
    assert three.partition("t").isr == (2,)  # back in the ISR only when the leader says so


def test_retried_registration_amends_endpoint_and_keeps_epoch(three: Cluster) -> None:
    epoch = three.image.brokers[2].epoch
    decision = three.apply(RegisterBroker(broker_id=2, incarnation_id="inc-2", host="10.0.0.2", port=9192, rack="a"))
    record = three.image.brokers[2]
    assert (record.host, record.port, record.rack, record.epoch, record.fenced) == ("10.0.0.2", 9192, "a", epoch, False)
    assert decision.image_changed
    again = three.apply(RegisterBroker(broker_id=2, incarnation_id="inc-2", host="10.0.0.2", port=9192, rack="a"))
    assert not again.image_changed


def test_want_fence_fences(three: Cluster) -> None:
    decision = three.heartbeat(3, want_fence=True)
    assert three.image.brokers[3].fenced
    assert BrokerFenced(broker_id=3, reason=FenceReason.REQUESTED) in decision.actions


def test_controller_activated_restarts_sessions(three: Cluster) -> None:
    three.now = 60_000  # the controller was down for a minute
    three.apply(ControllerActivated())
    assert all(s.last_contact_ms == 60_000 for s in three.state.sessions.values())
    three.advance(9000)
    assert not any(r.fenced for r in three.image.brokers.values())


def test_unregister_removes_broker_and_its_leaderships(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2, replica_assignment=((3, 1),))
    decision = three.apply(UnregisterBroker(broker_id=3))
    assert 3 not in three.image.brokers and 3 not in three.state.sessions
    assert three.partition("t").leader == 1 and three.partition("t").isr == (1,)
    assert BrokerUnregistered(broker_id=3) in decision.actions
    assert three.apply(UnregisterBroker(broker_id=3), ok=False).error is ControllerError.BROKER_ID_NOT_REGISTERED
