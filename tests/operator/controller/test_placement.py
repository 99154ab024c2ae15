"""Placement: Kafka's AdminUtils round-robin, with and without racks."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.operator.controller import ControllerError, PlacementError
from tinystream.operator.controller.placement import assign_replicas, rack_alternated


def _assign(brokers, partitions, rf, start, *, racks=None, first=0, shift=None):
    return assign_replicas(
        brokers=brokers,
        racks=racks or {},
        partitions=partitions,
        replication_factor=rf,
        start_index=start,
        replica_shift=start if shift is None else shift,
        first_partition=first,
    )


def test_matches_kafka_rack_unaware_vector() -> None:
    # AdminUtilsTest.testReplicaAssignment: brokers 0-4, 10 partitions, RF 3, fixed start 0.
    expected = [
        (0, 1, 2), (1, 2, 3), (2, 3, 4), (3, 4, 0), (4, 0, 1),
        (0, 2, 3), (1, 3, 4), (2, 4, 0), (3, 0, 1), (4, 1, 2),
    ]
    assert _assign([0, 1, 2, 3, 4], 10, 3, 0) == expected


def test_rack_alternated_list_matches_kafka() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    assert rack_alternated(racks) == [0, 3, 1, 5, 4, 2]
    del racks[5]
    assert rack_alternated(racks) == [0, 3, 1, 4, 2]


def test_matches_kafka_rack_aware_vector() -> None:
    racks = {0: "rack1", 1: "rack3", 2: "rack3", 3: "rack2", 4: "rack2", 5: "rack1"}
    expected = [(0, 3, 1), (3, 1, 5), (1, 5, 4), (5, 4, 2), (4, 2, 0), (2, 0, 3), (0, 4, 2)]
    assert _assign(sorted(racks), 7, 3, 0, racks=racks) == expected


def test_partial_racks_fall_back_to_rack_unaware() -> None:
    racks = {0: "a", 1: None, 2: "b"}
    assert _assign([0, 1, 2], 3, 2, 0, racks=racks) == _assign([0, 1, 2], 3, 2, 0)


def test_growth_continues_the_round_robin() -> None:
    whole = _assign([1, 2, 3, 4], 8, 2, 1)
    assert _assign([1, 2, 3, 4], 3, 2, 1) + _assign([1, 2, 3, 4], 5, 2, 1, first=3) == whole


@pytest.mark.parametrize("rf", [0, 4])
def test_bad_replication_factor(rf: int) -> None:
    with pytest.raises(PlacementError) as info:
        _assign([1, 2, 3], 1, rf, 0)
    assert info.value.error is ControllerError.INVALID_REPLICATION_FACTOR


@settings(max_examples=150, deadline=None)
@given(
    n=st.integers(1, 7),
    rounds=st.integers(1, 4),
    rf_seed=st.integers(0, 100),
    start=st.integers(0, 1000),
    shift=st.integers(0, 1000),
)
def test_even_cluster_is_perfectly_balanced(n, rounds, rf_seed, start, shift) -> None:
    brokers = list(range(10, 10 + n))
    rf = 1 + rf_seed % n
    result = _assign(brokers, n * rounds, rf, start, shift=shift)
    replicas = Counter(b for r in result for b in r)
    leaders = Counter(r[0] for r in result)
    assert all(len(set(r)) == rf for r in result)
    assert set(replicas.values()) == {rounds * rf}
    assert set(leaders.values()) == {rounds}


@settings(max_examples=150, deadline=None)
@given(n=st.integers(1, 7), partitions=st.integers(1, 30), start=st.integers(0, 99), shift=st.integers(0, 99))
def test_leaders_differ_by_at_most_one(n, partitions, start, shift) -> None:
    result = _assign(list(range(n)), partitions, 1 + (start % n), start, shift=shift)
    leaders = Counter({b: 0 for b in range(n)})
    leaders.update(r[0] for r in result)
    assert max(leaders.values()) - min(leaders.values()) <= 1


@settings(max_examples=100, deadline=None)
@given(
    racks=st.integers(2, 4),
    per_rack=st.integers(1, 3),
    rf=st.integers(1, 4),
    rounds=st.integers(1, 3),
    start=st.integers(0, 99),
)
def test_rack_aware_spreads_racks_and_replicas(racks, per_rack, rf, rounds, start) -> None:
    rack_of = {r * 10 + i: f"rack-{r}" for r in range(racks) for i in range(per_rack)}
    rf = min(rf, len(rack_of))
    n = len(rack_of)
    result = _assign(sorted(rack_of), n * rounds, rf, start, racks=rack_of)
    for replicas in result:
        assert len(set(replicas)) == rf
        assert len({rack_of[b] for b in replicas}) == min(rf, racks)
    counts = Counter(b for r in result for b in r)
    assert max(counts.values()) - min(counts.values()) <= 1
