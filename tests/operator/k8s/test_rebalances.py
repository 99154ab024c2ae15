"""TinyStreamRebalance's pure decisions: the next step for each state and annotation, and the status."""

from __future__ import annotations

import pytest

from tinystream.operator.k8s.rebalances import (
    RebalanceSpec,
    Step,
    members_problem,
    moves_of,
    next_step,
    problem,
    proposal_status,
    throttle_of,
)


def spec(annotation=None, generation=1, **fields) -> RebalanceSpec:
    meta = {"name": "r", "generation": generation,
            "annotations": {"tinystream.io/rebalance": annotation} if annotation else {}}
    return RebalanceSpec.from_resource({"metadata": meta, "spec": {"cluster": "demo", **fields}})


@pytest.mark.parametrize(("state", "annotation", "generation", "step"), [
    (None, None, 1, Step.PROPOSE),
    ("ProposalReady", None, 1, Step.NONE),
    ("ProposalReady", "approve", 1, Step.EXECUTE),
    ("ProposalReady", "approve", 2, Step.PROPOSE),  # the spec changed after the review: propose again
    ("ProposalReady", "refresh", 1, Step.PROPOSE),
    ("Rebalancing", None, 1, Step.VERIFY),
    ("Rebalancing", "stop", 1, Step.STOP),
    ("Rebalancing", "refresh", 2, Step.VERIFY),  # a running rebalance is not re-planned under itself
    ("Ready", None, 1, Step.NONE),
    ("Ready", "approve", 1, Step.NONE),  # approving twice does not move anything again
    ("Stopped", "refresh", 1, Step.PROPOSE),
    ("NotReady", None, 1, Step.PROPOSE),
])
def test_next_step(state, annotation, generation, step) -> None:
    status = {"state": state, "observedGeneration": 1} if state else None
    assert next_step(spec(annotation, generation), status) is step


def test_problems_and_status() -> None:
    assert problem(spec(mode="sideways")) == "spec.mode 'sideways' is not one of full, add-brokers, remove-brokers"
    assert problem(spec(mode="add-brokers")) == "spec.mode add-brokers needs spec.brokers"
    assert problem(spec(mode="add-brokers", brokers=[3])) is None
    proposal = {"num_replica_movements": 1, "num_leader_movements": 1, "data_to_move_bytes": 2_500_000,
                "score_before": 1.5, "score_after": 0.25,
                "moves": [{"topic": "t", "partition": 0, "before": [1, 2], "after": [3, 2], "size_bytes": 9}]}
    status = proposal_status(proposal, generation=4)
    assert status["state"] == "ProposalReady" and status["observedGeneration"] == 4
    assert status["optimizationResult"]["dataToMoveMB"] == 2.5
    assert moves_of(status) == {("t", 0): (3, 2)}


def test_throttle_from_spec_and_status() -> None:
    assert spec().throttle is None and spec(throttle=1024).throttle == 1024
    assert problem(spec(throttle=0)) == "spec.throttle 0 is not a positive number of bytes per second"
    assert throttle_of({"throttle": 1024}) == 1024 and throttle_of({"throttle": None}) is None
    assert throttle_of(None) is None


def test_with_node_pools_the_brokers_named_must_be_the_pools():
    assert members_problem(spec(mode="add-brokers", brokers=[3]), None) is None  # no pools: the controller checks
    assert members_problem(spec(mode="add-brokers", brokers=[3]), frozenset({0, 1, 3})) is None
    assert members_problem(spec(mode="add-brokers", brokers=[1, 7]), frozenset({0, 1})) == (
        "broker(s) [7] are in no node pool of cluster demo (its pools keep [0, 1])")
    assert members_problem(spec(mode="remove-brokers", brokers=[1, 7]), frozenset({0, 1})) is None  # emptied
    assert "hold no broker yet" in members_problem(spec(), frozenset())
