"""Leader election: clean from the ISR in replica order, unclean only when allowed,
preferred-leader election on a tick or immediately."""

from __future__ import annotations

from controller_helpers import Cluster

from tinystream.operator.controller import (
    NO_LEADER,
    AlterTopicConfig,
    ControllerConfig,
    ElectionReason,
    ElectPreferredLeaders,
    ExpireSession,
    LeaderChanged,
    LeaderRecoveryState,
    PreferredElection,
    TopicPartition,
)
from tinystream.operator.controller.election import elect_leader
from tinystream.operator.controller.liveness import ClusterView


def test_new_leader_is_first_live_isr_member_in_replica_order() -> None:
    view = ClusterView(live=frozenset({2, 3, 4}), drained=frozenset())
    # ISR order (4, 3) is not what counts: replica order (1, 3, 4) is.
    election = elect_leader(replicas=(1, 3, 4), isr=(4, 3), leader=1, view=view, unclean_allowed=False)
    assert election.leader == 3 and not election.unclean


def test_valid_leader_is_kept_even_if_not_preferred() -> None:
    view = ClusterView(live=frozenset({1, 2}), drained=frozenset())
    assert elect_leader(replicas=(1, 2), isr=(1, 2), leader=2, view=view, unclean_allowed=False).leader == 2


def test_no_live_isr_member_means_offline() -> None:
    view = ClusterView(live=frozenset({2}), drained=frozenset())
    election = elect_leader(replicas=(1, 2), isr=(1,), leader=1, view=view, unclean_allowed=False)
    assert election.leader == NO_LEADER and election.isr == (1,)


def _offline_partition(cluster: Cluster, **config) -> None:
    cluster.create("t", partitions=1, rf=2, replica_assignment=((1, 2),), config=config)
    cluster.apply(ExpireSession(broker_id=2))
    cluster.apply(ExpireSession(broker_id=1))
    cluster.heartbeat(2)  # live again, but not in the ISR


def test_unclean_election_is_off_by_default(three: Cluster) -> None:
    _offline_partition(three)
    p = three.partition("t")
    assert p.leader == NO_LEADER and p.isr == (1,)


def test_unclean_election_when_topic_allows_it(three: Cluster) -> None:
    _offline_partition(three, **{"unclean.leader.election.enable": "true"})
    p = three.partition("t")
    assert p.leader == 2 and p.isr == (2,)
    assert p.leader_recovery_state is LeaderRecoveryState.RECOVERING


def test_enabling_unclean_election_elects_offline_partitions(three: Cluster) -> None:
    _offline_partition(three)
    decision = three.apply(AlterTopicConfig(topic="t", config={"unclean.leader.election.enable": True}))
    assert three.partition("t").leader == 2
    assert any(isinstance(a, LeaderChanged) and a.reason is ElectionReason.UNCLEAN for a in decision.actions)


def test_cluster_default_unclean_applies_unless_topic_overrides() -> None:
    cluster = Cluster(config=ControllerConfig(unclean_leader_election_enable=True))
    cluster.start_brokers([1, 2])
    _offline_partition(cluster, **{"unclean.leader.election.enable": False})
    assert cluster.partition("t").leader == NO_LEADER
    cluster.apply(AlterTopicConfig(topic="t", config={"unclean.leader.election.enable": None}))
    assert cluster.partition("t").leader == 2


def _leadership_moved_off_preferred(cluster: Cluster) -> None:
    cluster.create("t", partitions=1, rf=2, replica_assignment=((1, 2),))
    cluster.apply(ExpireSession(broker_id=1))
    cluster.heartbeat(1)
    cluster.alter_isr("t", 0, (2, 1))
    assert cluster.partition("t").leader == 2


def test_preferred_leader_returns_on_tick(three: Cluster) -> None:
    _leadership_moved_off_preferred(three)
    epoch = three.partition("t").leader_epoch
    decision = three.apply(ElectPreferredLeaders())
    p = three.partition("t")
    assert p.leader == 1 and p.leader_epoch == epoch + 1
    assert decision.actions == (
        LeaderChanged(topic="t", partition=0, leader=1, leader_epoch=epoch + 1, reason=ElectionReason.PREFERRED),
    )
    assert not three.apply(ElectPreferredLeaders()).image_changed


def test_preferred_election_for_listed_partitions_only(three: Cluster) -> None:
    _leadership_moved_off_preferred(three)
    three.create("u", partitions=1, rf=2, replica_assignment=((1, 2),))
    unknown = three.apply(ElectPreferredLeaders(partitions=(TopicPartition("nope", 0),)), ok=False)
    assert unknown.error.name == "UNKNOWN_TOPIC_OR_PARTITION"
    three.apply(ElectPreferredLeaders(partitions=(TopicPartition("u", 0),)))
    assert three.partition("t").leader == 2
    three.apply(ElectPreferredLeaders(partitions=(TopicPartition("t", 0),)))
    assert three.partition("t").leader == 1


def test_preferred_leader_not_elected_while_out_of_isr(three: Cluster) -> None:
    three.create("t", partitions=1, rf=2, replica_assignment=((1, 2),))
    three.apply(ExpireSession(broker_id=1))
    three.heartbeat(1)
    assert not three.apply(ElectPreferredLeaders()).image_changed
    assert three.partition("t").leader == 2


def test_immediate_mode_elects_preferred_as_soon_as_it_rejoins() -> None:
    cluster = Cluster(config=ControllerConfig(preferred_leader_election=PreferredElection.IMMEDIATE))
    cluster.start_brokers([1, 2])
    cluster.create("t", partitions=1, rf=2, replica_assignment=((1, 2),))
    cluster.apply(ExpireSession(broker_id=1))
    cluster.heartbeat(1)
    assert cluster.partition("t").leader == 2
    decision = cluster.alter_isr("t", 0, (2, 1))
    assert cluster.partition("t").leader == 1
    assert any(isinstance(a, LeaderChanged) and a.reason is ElectionReason.PREFERRED for a in decision.actions)
