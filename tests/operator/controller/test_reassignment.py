"""Reassignment (KIP-455) and the scale-up / scale-down planner."""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from controller_helpers import Cluster, spread
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from tinystream.operator.controller import (
    ControllerError,
    DrainBroker,
    ElectionReason,
    LeaderChanged,
    MetadataImage,
    PartitionRecord,
    PlacementError,
    ReassignmentCancelled,
    ReassignmentCompleted,
    ReassignmentStarted,
    ReassignPartitions,
    ReplicaAssignment,
    TopicRecord,
    plan_reassignment,
)
from tinystream.operator.controller.reassignment import plan_replication_factor


def _reassign(cluster: Cluster, topic: str, index: int, replicas, *, ok: bool = True):
    return cluster.apply(
        ReassignPartitions(assignments=(ReplicaAssignment(topic=topic, partition=index, replicas=replicas),)), ok=ok
    )


@pytest.fixture
def four(cluster: Cluster) -> Cluster:
    cluster.start_brokers([1, 2, 3, 4])
    cluster.create("t", partitions=1, rf=2, replica_assignment=((1, 2),))
    return cluster


def test_start_adds_target_first_then_completes_when_new_replicas_are_in_sync(four: Cluster) -> None:
    started = _reassign(four, "t", 0, (3, 2))
    p = four.partition("t")
    assert p.replicas == (3, 2, 1) and p.adding_replicas == (3,) and p.removing_replicas == (1,)
    assert p.leader == 1 and p.partition_epoch == 1
    assert started.actions == (ReassignmentStarted(topic="t", partition=0, target=(3, 2)),)
    done = four.alter_isr("t", 0, (1, 2, 3))
    p = four.partition("t")
    assert p.replicas == (3, 2) and p.isr == (2, 3) and not p.reassigning
    assert p.leader == 3  # the old leader left: the first in-sync target replica leads
    assert ReassignmentCompleted(topic="t", partition=0, replicas=(3, 2)) in done.actions
    assert any(isinstance(a, LeaderChanged) and a.reason is ElectionReason.REASSIGNMENT for a in done.actions)


def test_pure_reorder_completes_at_once(four: Cluster) -> None:
    decision = _reassign(four, "t", 0, (2, 1))
    p = four.partition("t")
    assert p.replicas == (2, 1) and not p.reassigning and p.leader == 1
    assert decision.actions == (ReassignmentCompleted(topic="t", partition=0, replicas=(2, 1)),)


def test_shrinking_replicas_completes_at_once(four: Cluster) -> None:
    _reassign(four, "t", 0, (2,))
    p = four.partition("t")
    assert p.replicas == (2,) and p.isr == (2,) and p.leader == 2


def test_cancel_reverts_to_original_replicas(four: Cluster) -> None:
    _reassign(four, "t", 0, (3, 4))
    decision = _reassign(four, "t", 0, None)
    p = four.partition("t")
    assert p.replicas == (1, 2) and p.isr == (1, 2) and not p.reassigning
    assert decision.actions[0] == ReassignmentCancelled(topic="t", partition=0, replicas=(1, 2))
    assert _reassign(four, "t", 0, None, ok=False).error is ControllerError.NO_REASSIGNMENT_IN_PROGRESS


@pytest.mark.parametrize(
    ("replicas", "error"),
    [
        ((), ControllerError.INVALID_REPLICA_ASSIGNMENT),
        ((1, 1), ControllerError.INVALID_REPLICA_ASSIGNMENT),
        ((1, 9), ControllerError.INVALID_REPLICA_ASSIGNMENT),
    ],
)
def test_bad_targets(four: Cluster, replicas, error) -> None:
    assert _reassign(four, "t", 0, replicas, ok=False).error is error


def test_all_or_nothing(four: Cluster) -> None:
    before = four.state
    decision = four.apply(
        ReassignPartitions(
            assignments=(
                ReplicaAssignment(topic="t", partition=0, replicas=(3, 4)),
                ReplicaAssignment(topic="t", partition=5, replicas=(3, 4)),
            )
        ),
        ok=False,
    )
    assert decision.error is ControllerError.UNKNOWN_TOPIC_OR_PARTITION and four.state is before
    twice = ReplicaAssignment(topic="t", partition=0, replicas=(3, 4))
    assert four.apply(ReassignPartitions(assignments=(twice, twice)), ok=False).error is ControllerError.INVALID_REQUEST


def test_replacing_a_running_reassignment(four: Cluster) -> None:
    _reassign(four, "t", 0, (3, 4))
    _reassign(four, "t", 0, (1, 4))
    p = four.partition("t")
    assert p.target_replicas == (1, 4) and p.adding_replicas == (4,) and set(p.removing_replicas) == {2, 3}


# -- planning -------------------------------------------------------------------


def _balanced(cluster: Cluster, brokers, topics=(("a", 6, 2), ("b", 4, 3), ("c", 5, 1))) -> None:
    cluster.start_brokers(brokers)
    for name, partitions, rf in topics:
        cluster.create(name, partitions=partitions, rf=rf)


def _apply_plan(image, plan):
    after = {(t, p.partition): p.replicas for t, p in image.iter_partitions()}
    for a in plan:
        after[(a.topic, a.partition)] = a.replicas
    return after


def test_scale_up_moves_the_minimum_to_new_brokers(cluster: Cluster) -> None:
    cluster.start_brokers([1, 2, 3])
    cluster.create("a", partitions=6, rf=2)  # 12 replicas, 4 per broker
    cluster.register(4)
    cluster.heartbeat(4)
    plan = plan_reassignment(cluster.state, [1, 2, 3, 4])
    after = _apply_plan(cluster.image, plan)
    counts = Counter(b for r in after.values() for b in r)
    assert counts == Counter({1: 3, 2: 3, 3: 3, 4: 3})
    before = {(t, p.partition): p.replicas for t, p in cluster.image.iter_partitions()}
    moved = sum(len(set(after[k]) - set(before[k])) for k in before)
    assert moved == 3  # exactly broker 4's fair share
    leaders = Counter(r[0] for r in after.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1 and leaders[4] >= 1


def test_scale_down_moves_everything_off_removed_brokers(cluster: Cluster) -> None:
    _balanced(cluster, [1, 2, 3, 4])
    plan = plan_reassignment(cluster.image, [1, 2, 3])
    after = _apply_plan(cluster.image, plan)
    counts = Counter(b for r in after.values() for b in r)
    assert 4 not in counts and max(counts.values()) - min(counts.values()) <= 1
    assert all(len(set(r)) == len(r) for r in after.values())


def test_balanced_cluster_needs_no_plan(cluster: Cluster) -> None:
    cluster.start_brokers([1, 2, 3])
    cluster.create("a", partitions=6, rf=2)
    assert plan_reassignment(cluster.state, [1, 2, 3]) == []


def test_plan_refuses_impossible_targets(cluster: Cluster) -> None:
    _balanced(cluster, [1, 2, 3])
    with pytest.raises(PlacementError) as info:
        plan_reassignment(cluster.state, [1, 2])
    assert info.value.error is ControllerError.INVALID_REPLICATION_FACTOR
    with pytest.raises(PlacementError):
        plan_reassignment(cluster.state, [])


@settings(max_examples=80, deadline=None)
@given(
    start=st.integers(2, 5),
    added=st.integers(0, 3),
    removed=st.integers(0, 2),
    topics=st.lists(st.tuples(st.integers(1, 8), st.integers(1, 3)), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
)
def test_plans_balance_replicas_and_are_stable(start, added, removed, topics, seed) -> None:
    cluster = Cluster(seed=seed)
    brokers = list(range(1, start + 1))
    cluster.start_brokers(brokers)
    for i, (partitions, rf) in enumerate(topics):
        cluster.create(f"t{i}", partitions=partitions, rf=min(rf, start))
    targets = [b for b in brokers if b > removed] + list(range(100, 100 + added))
    if not targets or max(len(p.replicas) for _, p in cluster.image.iter_partitions()) > len(targets):
        return
    for b in range(100, 100 + added):
        cluster.register(b)
        cluster.heartbeat(b)
    plan = plan_reassignment(cluster.state, targets)
    after = _apply_plan(cluster.image, plan)
    counts = Counter({b: 0 for b in targets})
    counts.update(b for r in after.values() for b in r)
    assert set(counts) == set(targets)  # nothing left on removed brokers
    assert max(counts.values()) - min(counts.values()) <= 1
    before = {(t, p.partition): p.replicas for t, p in cluster.image.iter_partitions()}
    assert all(len(after[k]) == len(before[k]) and len(set(after[k])) == len(after[k]) for k in before)
    # Never fewer moves than the replicas on removed brokers.
    gone = sum(1 for r in before.values() for b in r if b not in counts)
    assert sum(len(set(after[k]) - set(before[k])) for k in before) >= gone
    # Executing the plan and planning again proposes nothing.
    cluster.apply(ReassignPartitions(assignments=tuple(plan)))
    for t, p in list(cluster.image.iter_partitions()):
        if p.reassigning:
            cluster.alter_isr(t, p.partition, tuple(dict.fromkeys(p.isr + p.adding_replicas)))
    assert not any(p.reassigning for _, p in cluster.image.iter_partitions())
    assert plan_reassignment(cluster.state, targets) == []


@settings(max_examples=60, deadline=None)
@given(
    layout=st.lists(
        st.lists(st.integers(1, 4), min_size=1, max_size=3, unique=True), min_size=1, max_size=3
    ),
    targets=st.sets(st.integers(1, 6), min_size=1, max_size=4),
)
def test_plan_moves_as_few_replicas_as_brute_force(layout, targets) -> None:
    targets = sorted(targets)
    assume(max(len(r) for r in layout) <= len(targets))
    options = [list(itertools.permutations(targets, len(r))) for r in layout]
    assume(math.prod(len(o) for o in options) <= 5000)
    image = MetadataImage(
        version=1,
        cluster_id="c",
        topics={
            "t": TopicRecord(
                name="t",
                topic_id="id",
                partitions=tuple(
                    PartitionRecord(partition=i, replicas=tuple(r), isr=tuple(r), leader=r[0])
                    for i, r in enumerate(layout)
                ),
            )
        },
    )

    def moves(assignment):
        return sum(len(set(new) - set(old)) for old, new in zip(layout, assignment))

    def balanced(assignment):
        counts = Counter({b: 0 for b in targets})
        counts.update(b for r in assignment for b in r)
        return max(counts.values()) - min(counts.values()) <= 1

    best = min(moves(a) for a in itertools.product(*options) if balanced(a))
    planned = [tuple(r) for r in layout]
    for a in plan_reassignment(image, targets):
        planned[a.partition] = a.replicas
    assert balanced(planned) and moves(planned) == best


def test_scale_down_end_to_end_with_drain(cluster: Cluster) -> None:
    _balanced(cluster, [1, 2, 3, 4])
    cluster.apply(DrainBroker(broker_id=4))
    # Only partitions whose sole in-sync copy is on 4 (RF 1) are still led there.
    assert all(cluster.image.partition(tp.topic, tp.partition).isr == (4,) for tp in cluster.image.leaderships(4))
    plan = plan_reassignment(cluster.state, [1, 2, 3])
    cluster.apply(ReassignPartitions(assignments=tuple(plan)))
    for t, p in list(cluster.image.iter_partitions()):
        if p.reassigning:
            cluster.alter_isr(t, p.partition, tuple(dict.fromkeys(p.isr + p.adding_replicas)))
    assert all(4 not in p.replicas and not p.reassigning for _, p in cluster.image.iter_partitions())
    assert cluster.image.leaderships(4) == ()
    assert spread(cluster.replica_counts([1, 2, 3])) <= 1


# -- a topic's replication factor (plan_replication_factor) --------------------------------------------------------


def test_raising_the_replication_factor_adds_the_least_loaded_brokers(cluster: Cluster) -> None:
    cluster.start_brokers([1, 2, 3, 4])
    cluster.create("busy", partitions=1, rf=2, replica_assignment=((1, 2),))
    cluster.create("t", partitions=2, rf=1, replica_assignment=((1,), (3,)))
    plan = plan_replication_factor(cluster.image, "t", 2, [1, 2, 3, 4])
    # 4 carries nothing, 3 one replica (of t itself): t-0 takes 4 first; t-1 then 2 (one replica, lowest id).
    assert plan == [ReplicaAssignment(topic="t", partition=0, replicas=(1, 4)),
                    ReplicaAssignment(topic="t", partition=1, replicas=(3, 2))]
    cluster.apply(ReassignPartitions(assignments=tuple(plan)))
    assert cluster.partition("t", 0).adding_replicas == (4,)  # joins once in sync, as any reassignment


def test_raising_prefers_a_rack_the_partition_lacks(cluster: Cluster) -> None:
    cluster.start_brokers([1, 2, 3], racks={1: "a", 2: "a", 3: "b"})
    cluster.create("busy", partitions=2, rf=1, replica_assignment=((3,), (3,)))
    cluster.create("t", partitions=1, rf=1, replica_assignment=((1,),))
    assert plan_replication_factor(cluster.image, "t", 2, [1, 2, 3]) == [
        ReplicaAssignment(topic="t", partition=0, replicas=(1, 3))]  # rack b, though 3 carries more


def test_lowering_keeps_in_sync_replicas_and_the_preferred_leader(cluster: Cluster) -> None:
    cluster.start_brokers([1, 2, 3])
    cluster.create("t", partitions=1, rf=3, replica_assignment=((1, 2, 3),))
    cluster.alter_isr("t", 0, (1, 3))
    assert plan_replication_factor(cluster.image, "t", 2, [1, 2, 3]) == [
        ReplicaAssignment(topic="t", partition=0, replicas=(1, 3))]  # 2 is out of sync: it goes
    assert plan_replication_factor(cluster.image, "t", 3, [1, 2, 3]) == []  # unchanged: nothing to do


def test_a_replication_factor_above_the_live_brokers_is_refused(cluster: Cluster) -> None:
    cluster.start_brokers([1, 2])
    cluster.create("t", partitions=1, rf=1)
    with pytest.raises(PlacementError) as info:
        plan_replication_factor(cluster.image, "t", 3, [1, 2])
    assert info.value.error is ControllerError.INVALID_REPLICATION_FACTOR and "2 available" in info.value.message
    with pytest.raises(PlacementError) as unknown:
        plan_replication_factor(cluster.image, "missing", 1, [1, 2])
    assert unknown.value.error is ControllerError.UNKNOWN_TOPIC_OR_PARTITION
