"""The rebalance optimizer: examples, then properties over random clusters (hypothesis).

Properties, for every mode: no partition gets two replicas on one broker, no partition loses
a replica (min ISR holds once moves finish) or a rack, remove-brokers leaves nothing on the
removed brokers, full and add-brokers never make the score worse, and planning again on the
applied proposal (same mode) proposes nothing.
"""

from __future__ import annotations

from collections import Counter

import pytest
from controller_helpers import Cluster
from hypothesis import given, settings
from hypothesis import strategies as st

from tinystream.operator.controller import PlacementError
from tinystream.operator.controller.rebalance import (
    LoadModel,
    Mode,
    PartitionLoad,
    apply,
    model_from_image,
    propose,
    score,
)


def skewed(brokers: int = 3, partitions: int = 6, rf: int = 2, racks: dict[int, str] | None = None) -> LoadModel:
    """Every partition on brokers 1..rf, the rest empty."""
    ids = range(1, brokers + 1)
    return LoadModel(
        brokers={b: (racks or {}).get(b) for b in ids},
        partitions={("t", p): PartitionLoad(replicas=tuple(range(1, rf + 1)), size_bytes=1000 * (p + 1))
                    for p in range(partitions)},
    )


def replica_counts(model: LoadModel) -> Counter[int]:
    return Counter(b for p in model.partitions.values() for b in p.replicas)


def test_full_spreads_a_skewed_topic() -> None:
    model = skewed()
    proposal = propose(model, Mode.FULL)
    after = apply(model, proposal)
    assert replica_counts(model) == {1: 6, 2: 6}
    assert replica_counts(after) == {1: 4, 2: 4, 3: 4}
    leaders = Counter(p.replicas[0] for p in after.partitions.values())
    assert sorted(leaders.values()) == [2, 2, 2]
    assert proposal.num_replica_movements == 4
    assert proposal.data_to_move_bytes == sum(m.size_bytes * len(m.added) for m in proposal.moves) > 0
    assert proposal.score_after < proposal.score_before


def test_add_brokers_moves_only_onto_the_new_broker() -> None:
    model = skewed(brokers=4, partitions=8, rf=2)
    model = LoadModel(brokers=model.brokers,
                      partitions={k: PartitionLoad(replicas=(1 + k[1] % 3, 1 + (k[1] + 1) % 3))
                                  for k in model.partitions})
    proposal = propose(model, Mode.ADD_BROKERS, [4])
    assert proposal.moves
    assert all(set(m.added) == {4} for m in proposal.moves if m.added)
    assert replica_counts(apply(model, proposal))[4] == 4


def test_remove_brokers_empties_them_and_keeps_racks() -> None:
    racks = {1: "a", 2: "b", 3: "a", 4: "b"}
    model = LoadModel(brokers=racks, partitions={("t", p): PartitionLoad(replicas=(1, 2)) for p in range(4)})
    proposal = propose(model, Mode.REMOVE_BROKERS, [1])
    after = apply(model, proposal)
    assert 1 not in replica_counts(after)
    assert all(after.rack_spread(p.replicas) == 2 for p in after.partitions.values())


def test_fenced_or_drained_brokers_receive_nothing(three: Cluster) -> None:
    three.create("t", partitions=6, rf=None, replica_assignment=((1,),) * 6)
    three.heartbeat(3, want_fence=True)
    model = model_from_image(three.image)
    assert model.excluded == {3}
    assert not any(3 in m.added for m in propose(model, Mode.FULL).moves)
    with pytest.raises(PlacementError, match="fenced or drained"):
        propose(model, Mode.ADD_BROKERS, [3])


def test_frozen_partitions_stay() -> None:
    model = LoadModel(brokers={1: None, 2: None, 3: None},
                      partitions={("t", 0): PartitionLoad(replicas=(1, 2), frozen=True),
                                  ("t", 1): PartitionLoad(replicas=(1, 2), frozen=True)})
    assert propose(model, Mode.FULL).moves == ()


@pytest.mark.parametrize(("mode", "brokers", "message"), [
    (Mode.FULL, [1], "takes no broker ids"),
    (Mode.ADD_BROKERS, [], "needs broker ids"),
    (Mode.REMOVE_BROKERS, [9], "unknown broker"),
    (Mode.REMOVE_BROKERS, [2, 3], "only 1 broker"),
])
def test_bad_requests_are_refused_clearly(mode: Mode, brokers: list[int], message: str) -> None:
    with pytest.raises(PlacementError, match=message):
        propose(skewed(), mode, brokers)


def test_model_from_image_reads_targets_and_sizes(three: Cluster) -> None:
    three.create("t", partitions=2, rf=2)
    model = model_from_image(three.image, sizes={("t", 0): 500})
    assert model.partitions[("t", 0)].size_bytes == 500
    assert model.partitions[("t", 1)].size_bytes == 0
    assert set(model.brokers) == {1, 2, 3}


# -- properties -----------------------------------------------------------------


@st.composite
def clusters(draw: st.DrawFn) -> LoadModel:
    n = draw(st.integers(2, 6))
    ids = list(range(1, n + 1))
    rack_count = draw(st.integers(0, 3))
    racks = {b: (f"r{draw(st.integers(0, rack_count - 1))}" if rack_count else None) for b in ids}
    partitions = {}
    for p in range(draw(st.integers(0, 14))):
        rf = draw(st.integers(1, n))
        replicas = draw(st.permutations(ids))[:rf]
        partitions[("t", p)] = PartitionLoad(replicas=tuple(replicas), size_bytes=draw(st.integers(0, 10_000)),
                                             bytes_in_per_s=draw(st.floats(0, 1000)),
                                             frozen=draw(st.booleans()) and draw(st.booleans()))
    widest = max((len(p.replicas) for p in partitions.values()), default=0)
    excluded = draw(st.sets(st.sampled_from(ids), max_size=max(0, n - widest - 1)))
    return LoadModel(brokers=racks, partitions=partitions, excluded=frozenset(excluded))


@st.composite
def requests(draw: st.DrawFn) -> tuple[LoadModel, Mode, list[int]]:
    model = draw(clusters())
    mode = draw(st.sampled_from(Mode))
    if mode is Mode.FULL:
        return model, mode, []
    ids = sorted(model.brokers)
    if mode is Mode.ADD_BROKERS:
        ids = [b for b in ids if b not in model.excluded] or ids[:1]
        if set(ids) <= model.excluded:
            return model, Mode.FULL, []
    named = draw(st.lists(st.sampled_from(ids), min_size=1, max_size=max(1, len(ids) - 1), unique=True))
    if mode is Mode.REMOVE_BROKERS:  # a plan exists only if every partition fits on the live rest
        widest = max((len(p.replicas) for p in model.partitions.values()), default=0)
        named = [b for b in named if b not in model.excluded]
        named = named[: max(0, len(ids) - len(model.excluded) - widest)]
        if not named or any(p.frozen and set(p.replicas) & set(named) for p in model.partitions.values()):
            return model, Mode.FULL, []
    return model, mode, named


@settings(max_examples=150, deadline=None)
@given(requests())
def test_a_proposal_keeps_the_hard_goals(request: tuple[LoadModel, Mode, list[int]]) -> None:
    model, mode, named = request
    proposal = propose(model, mode, named)
    after = apply(model, proposal)
    targets = [b for b in model.brokers if mode is not Mode.REMOVE_BROKERS or b not in named]
    target_racks = len({model.rack_key(b) for b in targets})
    for key, before in model.partitions.items():
        replicas = after.partitions[key].replicas
        assert len(set(replicas)) == len(replicas) == len(before.replicas)
        assert after.rack_spread(replicas) >= min(model.rack_spread(before.replicas), target_racks)
        if mode is not Mode.REMOVE_BROKERS:
            assert after.rack_spread(replicas) >= model.rack_spread(before.replicas)
        if before.frozen:
            assert replicas == before.replicas
    if mode is Mode.REMOVE_BROKERS:
        assert not set(replica_counts(after)) & set(named)
    else:
        assert proposal.score_after <= proposal.score_before + 1e-9
        assert score(after, model.brokers) == pytest.approx(proposal.score_after)
    if mode is Mode.ADD_BROKERS:
        assert all(set(m.added) <= set(named) for m in proposal.moves)
    assert not any(set(m.added) & model.excluded for m in proposal.moves)  # nothing to a broker that cannot fetch
    assert proposal.num_replica_movements == sum(len(m.added) for m in proposal.moves)


@settings(max_examples=100, deadline=None)
@given(requests())
def test_applying_a_proposal_twice_is_a_no_op(request: tuple[LoadModel, Mode, list[int]]) -> None:
    model, mode, named = request
    once = apply(model, propose(model, mode, named))
    again = propose(once, mode, named)
    assert again.moves == ()
    assert apply(once, again) == once
