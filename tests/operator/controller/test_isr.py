"""AlterPartition: accepted only from the current leader at the current epochs,
refused with KRaft's error codes otherwise (KIP-497, KIP-704, KIP-841)."""

from __future__ import annotations

import pytest
from controller_helpers import Cluster

from tinystream.operator.controller import (
    ControllerError,
    DrainBroker,
    ExpireSession,
    IsrChanged,
    LeaderRecoveryState,
)


@pytest.fixture
def shrunk(three: Cluster) -> Cluster:
    """t-0 on (1, 2, 3) led by 1, with broker 3 out of the ISR."""
    three.create("t", partitions=1, rf=3, replica_assignment=((1, 2, 3),))
    three.alter_isr("t", 0, (1, 2))
    return three


def test_accepted_shrink_bumps_partition_epoch_only(three: Cluster) -> None:
    three.create("t", partitions=1, rf=3, replica_assignment=((1, 2, 3),))
    version = three.image.version
    decision = three.alter_isr("t", 0, (1, 3))
    p = three.partition("t")
    assert p.isr == (1, 3) and p.leader == 1
    assert (p.leader_epoch, p.partition_epoch) == (0, 1)
    assert decision.image_changed and three.image.version == version + 1
    assert decision.actions == (IsrChanged(topic="t", partition=0, isr=(1, 3), partition_epoch=1),)


def test_expand_back(shrunk: Cluster) -> None:
    shrunk.alter_isr("t", 0, (1, 2, 3))
    assert shrunk.partition("t").isr == (1, 2, 3) and shrunk.partition("t").partition_epoch == 2


def test_same_isr_is_a_no_op(shrunk: Cluster) -> None:
    version = shrunk.image.version
    decision = shrunk.alter_isr("t", 0, (1, 2))
    assert not decision.image_changed and shrunk.image.version == version


@pytest.mark.parametrize(
    ("overrides", "error"),
    [
        ({"leader_epoch": -1}, ControllerError.FENCED_LEADER_EPOCH),
        ({"leader_epoch": 5}, ControllerError.NOT_CONTROLLER),
        ({"partition_epoch": 9}, ControllerError.NOT_CONTROLLER),
        ({"partition_epoch": 0}, ControllerError.INVALID_UPDATE_VERSION),
        ({"broker_id": 2}, ControllerError.INVALID_REQUEST),
        ({"broker_epoch": 0}, ControllerError.STALE_BROKER_EPOCH),
        ({"broker_id": 8}, ControllerError.BROKER_ID_NOT_REGISTERED),
        ({"topic": "nope"}, ControllerError.UNKNOWN_TOPIC_OR_PARTITION),
        ({"partition": 3}, ControllerError.UNKNOWN_TOPIC_OR_PARTITION),
    ],
)
def test_stale_or_foreign_requests_are_refused(shrunk: Cluster, overrides, error) -> None:
    before = shrunk.state
    decision = shrunk.alter_isr("t", 0, (1, 2, 3), ok=False, **overrides)
    assert decision.error is error, decision.message
    assert decision.state is before


@pytest.mark.parametrize(
    "isr", [(), (1, 1, 2), (1, 2, 4), (2, 3)], ids=["empty", "duplicate", "not-a-replica", "without-leader"]
)
def test_malformed_isr_is_invalid_request(shrunk: Cluster, isr) -> None:
    assert shrunk.alter_isr("t", 0, isr, ok=False).error is ControllerError.INVALID_REQUEST


def test_adding_a_fenced_broker_is_ineligible(shrunk: Cluster) -> None:
    shrunk.apply(ExpireSession(broker_id=3))
    decision = shrunk.alter_isr("t", 0, (1, 2, 3), ok=False)
    assert decision.error is ControllerError.INELIGIBLE_REPLICA and "3" in decision.message


def test_adding_a_drained_broker_is_ineligible(shrunk: Cluster) -> None:
    shrunk.apply(DrainBroker(broker_id=3))
    assert shrunk.alter_isr("t", 0, (1, 2, 3), ok=False).error is ControllerError.INELIGIBLE_REPLICA


def test_epochs_from_before_a_leader_change_are_fenced(shrunk: Cluster) -> None:
    old = shrunk.partition("t")
    shrunk.apply(ExpireSession(broker_id=1))  # 2 leads now, leader epoch 1
    shrunk.heartbeat(1)
    decision = shrunk.alter_isr(
        "t", 0, (2, 1), broker_id=2, leader_epoch=old.leader_epoch, partition_epoch=old.partition_epoch, ok=False
    )
    assert decision.error is ControllerError.FENCED_LEADER_EPOCH
    shrunk.alter_isr("t", 0, (2, 1))
    assert shrunk.partition("t").isr == (2, 1)


def test_recovering_leader_keeps_a_single_member_isr(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2, replica_assignment=((1, 2),), config={"unclean.leader.election.enable": True})
    three.apply(ExpireSession(broker_id=2))
    three.apply(ExpireSession(broker_id=1))
    three.heartbeat(2)
    assert three.partition("t").leader_recovery_state is LeaderRecoveryState.RECOVERING
    three.heartbeat(1)
    expand = three.alter_isr("t", 0, (2, 1), leader_recovery_state=LeaderRecoveryState.RECOVERING, ok=False)
    assert expand.error is ControllerError.INVALID_REQUEST
    three.alter_isr("t", 0, (2,), leader_recovery_state=LeaderRecoveryState.RECOVERED)
    assert three.partition("t").leader_recovery_state is LeaderRecoveryState.RECOVERED
    back = three.alter_isr("t", 0, (2,), leader_recovery_state=LeaderRecoveryState.RECOVERING, ok=False)
    assert back.error is ControllerError.INVALID_REQUEST
    three.alter_isr("t", 0, (2, 1))
    assert three.partition("t").isr == (2, 1)
