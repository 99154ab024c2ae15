"""Draining: controlled shutdown that lasts (rolls and scale-down, KIP-841)."""

from __future__ import annotations

from controller_helpers import Cluster

from tinystream.operator.controller import (
    BrokerDrained,
    BrokerUndrained,
    ControllerError,
    DrainBroker,
    ElectionReason,
    ElectPreferredLeaders,
    LeaderChanged,
    UndrainBroker,
)


def test_drain_moves_leadership_and_leaves_isrs(three: Cluster) -> None:
    three.create("t", partitions=3, rf=2, replica_assignment=((1, 2), (2, 1), (3, 1)))
    decision = three.apply(DrainBroker(broker_id=1))
    assert three.image.brokers[1].drained and not three.image.brokers[1].fenced
    assert three.image.leaderships(1) == ()
    assert [three.partition("t", i).isr for i in range(3)] == [(2,), (2,), (3,)]
    assert decision.actions[0] == BrokerDrained(broker_id=1)
    assert LeaderChanged(
        topic="t", partition=0, leader=2, leader_epoch=1, reason=ElectionReason.CONTROLLED_SHUTDOWN
    ) in decision.actions


def test_sole_in_sync_copy_keeps_leading_until_another_catches_up(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2, replica_assignment=((1, 2),))
    three.alter_isr("t", 0, (1,))
    three.apply(DrainBroker(broker_id=1))
    assert three.partition("t").leader == 1 and three.partition("t").isr == (1,)
    decision = three.alter_isr("t", 0, (1, 2))  # the drained leader may still add an eligible follower
    p = three.partition("t")
    assert p.leader == 2 and p.isr == (2,)
    assert any(isinstance(a, LeaderChanged) and a.leader == 2 for a in decision.actions)


def test_drained_broker_cannot_rejoin_isr(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2, replica_assignment=((2, 1),))
    three.apply(DrainBroker(broker_id=1))
    assert three.alter_isr("t", 0, (2, 1), ok=False).error is ControllerError.INELIGIBLE_REPLICA


def test_undrain_then_tick_restores_preferred_leaders(three: Cluster) -> None:
    three.create("t", partitions=3, rf=2)
    before = {i: three.partition("t", i).leader for i in range(3)}
    three.apply(DrainBroker(broker_id=1))
    three.apply(UndrainBroker(broker_id=1))
    assert three.image.leaderships(1) == ()
    for i in range(3):
        p = three.partition("t", i)
        if 1 in p.replicas and 1 not in p.isr:
            three.alter_isr("t", i, p.isr + (1,))
    three.apply(ElectPreferredLeaders())
    assert {i: three.partition("t", i).leader for i in range(3)} == before


def test_drain_survives_a_restart(three: Cluster) -> None:
    three.apply(DrainBroker(broker_id=2))
    three.register(2, incarnation="inc-2-b")
    three.heartbeat(2)
    assert three.image.brokers[2].drained and not three.image.brokers[2].fenced


def test_roll_drain_ends_when_the_broker_registers_again(three: Cluster) -> None:
    three.create("t", partitions=3, rf=3)
    three.apply(DrainBroker(broker_id=2, until_restart=True))
    assert three.image.brokers[2].drained and three.image.leaderships(2) == ()
    three.heartbeat(2)  # the same incarnation: still drained
    assert three.image.brokers[2].drained
    decision = three.register(2, incarnation="inc-2-b")  # the restarted pod
    assert not three.image.brokers[2].drained and BrokerUndrained(broker_id=2) in decision.actions


def test_lasting_drain_wins_over_a_roll_drain(three: Cluster) -> None:
    three.apply(DrainBroker(broker_id=2, until_restart=True))
    three.apply(DrainBroker(broker_id=2))  # scale-down chose it meanwhile
    three.register(2, incarnation="inc-2-b")
    assert three.image.brokers[2].drained
    three.apply(DrainBroker(broker_id=2, until_restart=True))  # a later roll does not shorten it
    three.register(2, incarnation="inc-2-c")
    assert three.image.brokers[2].drained


def test_drain_unknown_broker(three: Cluster) -> None:
    assert three.apply(DrainBroker(broker_id=9), ok=False).error is ControllerError.BROKER_ID_NOT_REGISTERED
    assert not three.apply(UndrainBroker(broker_id=1)).image_changed
