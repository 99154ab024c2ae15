"""TinyStreamRebalance decisions, pure: what the next step is and the status it leads to.

Strimzi's KafkaRebalance flow, with TinyStream's annotation:

    (new, or spec changed, or refresh)  -> propose  -> ProposalReady   (or NotReady: why)
    ProposalReady + tinystream.io/rebalance=approve -> execute -> Rebalancing
    Rebalancing                          -> verify  -> Ready once every move is done
    Rebalancing + tinystream.io/rebalance=stop      -> stop    -> Stopped (running moves cancelled)

The proposal (its moves) lives in status, so what runs is exactly what was
reviewed; `refresh` makes a new one. On a cluster with node pools the brokers
are the pools' (members_problem, node_pools.pool_members): only ids a pool
keeps receive replicas, a pool's leaving ids and removed brokers none. An annotation is removed once acted on.
A spec change while Rebalancing does not re-plan until the moves end or stop.
"""

from __future__ import annotations

import enum
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from typing import Any

ANNOTATION = "tinystream.io/rebalance"
MODES = ("full", "add-brokers", "remove-brokers")


class State(str, enum.Enum):
    NEW = "New"
    PENDING_PROPOSAL = "PendingProposal"
    PROPOSAL_READY = "ProposalReady"
    REBALANCING = "Rebalancing"
    READY = "Ready"
    NOT_READY = "NotReady"
    STOPPED = "Stopped"


class Step(enum.Enum):
    NONE = "none"
    PROPOSE = "propose"
    EXECUTE = "execute"
    VERIFY = "verify"
    STOP = "stop"


@dataclass(frozen=True, slots=True, kw_only=True)
class RebalanceSpec:
    name: str
    namespace: str
    cluster: str
    mode: str
    brokers: tuple[int, ...]
    generation: int
    throttle: int | None = None  # bytes/s on the brokers a move involves, while moving
    annotation: str | None

    @classmethod
    def from_resource(cls, body: Mapping[str, Any]) -> RebalanceSpec:
        meta = body.get("metadata") or {}
        spec = body.get("spec") or {}
        return cls(name=meta["name"], namespace=meta.get("namespace") or "default",
                   cluster=str(spec.get("cluster") or ""), mode=str(spec.get("mode") or "full"),
                   brokers=tuple(int(b) for b in spec.get("brokers") or ()),
                   throttle=int(spec["throttle"]) if spec.get("throttle") is not None else None,
                   generation=int(meta.get("generation") or 1),
                   annotation=(meta.get("annotations") or {}).get(ANNOTATION))


def next_step(spec: RebalanceSpec, status: Mapping[str, Any] | None) -> Step:
    """The step this resource needs now (see the module docstring)."""
    status = status or {}
    state = status.get("state")
    if state == State.REBALANCING.value:
        return Step.STOP if spec.annotation == "stop" else Step.VERIFY
    if spec.annotation == "refresh" or state in (None, State.NEW.value, State.NOT_READY.value) \
            or status.get("observedGeneration") != spec.generation:
        return Step.PROPOSE
    if state == State.PROPOSAL_READY.value and spec.annotation == "approve":
        return Step.EXECUTE
    return Step.NONE


def problem(spec: RebalanceSpec) -> str | None:
    """What is wrong with the spec itself, before asking the controller."""
    if not spec.cluster:
        return "spec.cluster is required"
    if spec.mode not in MODES:
        return f"spec.mode {spec.mode!r} is not one of {', '.join(MODES)}"
    if spec.mode != "full" and not spec.brokers:
        return f"spec.mode {spec.mode} needs spec.brokers"
    if spec.throttle is not None and spec.throttle < 1:
        return f"spec.throttle {spec.throttle} is not a positive number of bytes per second"
    return None


def members_problem(spec: RebalanceSpec, members: Collection[int] | None) -> str | None:
    """With node pools (`members`: the ids the pools keep), the brokers given replicas must be pool brokers;
    remove-brokers may name any (emptying a broker no pool keeps, or one a pool is giving up, is its job)."""
    if members is None or spec.mode == "remove-brokers":
        return None
    if not members:
        return f"cluster {spec.cluster} uses node pools, and its pools hold no broker yet"
    stray = [b for b in spec.brokers if b not in members]
    if stray:
        return (f"broker(s) {stray} are in no node pool of cluster {spec.cluster} (its pools keep "
                f"{sorted(members)})")
    return None


def proposal_status(proposal: Mapping[str, Any], *, generation: int) -> dict[str, Any]:
    """Status for a fresh proposal (Strimzi's optimizationResult names; bytes as MB, as dataToMoveMB)."""
    return {
        "state": State.PROPOSAL_READY.value,
        "observedGeneration": generation,
        "message": f"{proposal['num_replica_movements']} replica movement(s); annotate "
                   f"{ANNOTATION}=approve to carry them out",
        "optimizationResult": {
            "numReplicaMovements": proposal["num_replica_movements"],
            "numLeaderMovements": proposal["num_leader_movements"],
            "dataToMoveMB": round(proposal["data_to_move_bytes"] / 1e6, 3),
            "imbalanceScoreBefore": round(proposal["score_before"], 6),
            "imbalanceScoreAfter": round(proposal["score_after"], 6),
        },
        "proposal": [{"topic": m["topic"], "partition": m["partition"], "before": m["before"], "after": m["after"]}
                     for m in proposal["moves"]],
    }


def moves_of(status: Mapping[str, Any] | None) -> dict[tuple[str, int], tuple[int, ...]]:
    """The reviewed moves kept in status."""
    return {(m["topic"], int(m["partition"])): tuple(m["after"]) for m in (status or {}).get("proposal") or ()}


def throttle_of(status: Mapping[str, Any] | None) -> int | None:
    """The rate the running execution set (kept in status, so a spec edit meanwhile leaves it removable)."""
    value = (status or {}).get("throttle")
    return int(value) if value is not None else None


def state_status(state: State, message: str, *, generation: int) -> dict[str, Any]:
    return {"state": state.value, "message": message, "observedGeneration": generation}
