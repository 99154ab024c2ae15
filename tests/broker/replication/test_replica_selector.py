"""The preferred read replica (KIP-392) as Kafka's RackAwareReplicaSelector picks it; no sockets."""

from __future__ import annotations

import pytest

from tinystream.broker.replication.replica_selector import (
    KNOWN_CLASSES,
    LEADER,
    RACK_AWARE,
    ReplicaView,
    leader_selector,
    preferred_read_replica,
    rack_aware_selector,
    selector_for,
)
from tinystream.config.settings import BrokerSettings

LEADER_A = ReplicaView(1, "zone-a", 100, 0)


def view(broker_id: int, rack: str | None, leo: int = 100, lag_ms: int = 0) -> ReplicaView:
    return ReplicaView(broker_id, rack, leo, lag_ms)


def test_the_leader_selector_never_redirects():
    followers = [view(2, "zone-b"), view(3, "zone-c")]
    assert preferred_read_replica(leader_selector, LEADER_A, followers, "zone-b") == -1


@pytest.mark.parametrize("client_rack", ["", "zone-a", "zone-x"])
def test_rack_aware_stays_on_the_leader_without_a_rack_in_its_rack_or_with_nobody_there(client_rack):
    followers = [view(2, "zone-b"), view(3, "zone-c")]
    assert preferred_read_replica(rack_aware_selector, LEADER_A, followers, client_rack) == -1


def test_rack_aware_sends_the_client_to_the_follower_in_its_rack():
    followers = [view(2, "zone-b"), view(3, "zone-c")]
    assert preferred_read_replica(rack_aware_selector, LEADER_A, followers, "zone-c") == 3
    assert preferred_read_replica(rack_aware_selector, LEADER_A, followers, "zone-b") == 2


def test_racks_compare_exactly_and_a_replica_without_rack_matches_nothing():
    followers = [view(2, "Zone-B"), view(3, None)]
    assert preferred_read_replica(rack_aware_selector, LEADER_A, followers, "zone-b") == -1


def test_ties_in_the_rack_go_to_the_most_caught_up_then_the_freshest_then_the_highest_id():
    # Kafka's ReplicaView.comparator: log end offset, then time since caught up (less is better), then id.
    assert preferred_read_replica(rack_aware_selector, LEADER_A, [view(2, "b", 90), view(3, "b", 80)], "b") == 2
    assert preferred_read_replica(rack_aware_selector, LEADER_A,
                                  [view(2, "b", 90, lag_ms=50), view(3, "b", 90, lag_ms=10)], "b") == 3
    assert preferred_read_replica(rack_aware_selector, LEADER_A, [view(4, "b"), view(3, "b")], "b") == 4


def test_the_leader_in_the_client_rack_wins_over_a_more_caught_up_follower_there():
    leader = view(1, "b", leo=10)
    assert preferred_read_replica(rack_aware_selector, leader, [view(2, "b", leo=10)], "b") == -1


def test_selector_names_are_kafkas_and_the_settings_accept_exactly_those():
    assert selector_for(None) is leader_selector
    assert selector_for(LEADER) is leader_selector
    assert selector_for(RACK_AWARE) is rack_aware_selector
    with pytest.raises(ValueError, match="RackAwareReplicaSelector"):
        selector_for("com.example.MySelector")
    for name in KNOWN_CLASSES:
        assert BrokerSettings(**{"replica.selector.class": name}).replica_selector_class == name
    assert BrokerSettings().replica_selector_class is None
    with pytest.raises(ValueError, match="replica.selector.class"):
        BrokerSettings(**{"replica.selector.class": "com.example.MySelector"})
