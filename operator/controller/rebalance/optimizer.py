"""The greedy optimizer: a proposal (moves, leader moves, data to move, score before/after).

Flow, for one mode (Strimzi's KafkaRebalance modes):

* full: balance over every broker in the model;
* add-brokers [ids]: replicas move only onto the added brokers;
* remove-brokers [ids]: first every replica on a removed broker moves to
  the remaining broker that keeps the partition's rack spread highest and
  costs least, then the remaining brokers are balanced.

Balancing repeats two steps until neither finds anything: the single
replica move with the lowest score change (goals.move_cost), taken only if
it lowers the score and keeps the hard goals; then leadership swaps within
a partition's replica list (no data moves) that lower the score. A replacement
takes the list position of the replica it replaces, so a partition's
preferred leader moves with it. Every step lowers the score by more than
EPSILON, so the loop ends; the result is a fixed point, so planning again
on the applied proposal finds nothing (idempotent).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tinystream.operator.controller.errors import ControllerError, PlacementError
from tinystream.operator.controller.rebalance.goals import (
    GOALS,
    BrokerLoad,
    broker_loads,
    goal_scores,
    keeps_hard_goals,
    move_cost,
    scales_of,
    score,
)
from tinystream.operator.controller.rebalance.model import LoadModel, PartitionKey

EPSILON = 1e-9
#: A bound on balancing rounds (each moves one replica or one leadership); far above what a cluster needs.
MAX_STEPS = 100_000


class Mode(enum.Enum):
    FULL = "full"
    ADD_BROKERS = "add-brokers"
    REMOVE_BROKERS = "remove-brokers"


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionMove:
    """One partition's replica list before and after (a reordering alone moves only its leader)."""

    topic: str
    partition: int
    before: tuple[int, ...]
    after: tuple[int, ...]
    size_bytes: int

    @property
    def added(self) -> tuple[int, ...]:
        return tuple(b for b in self.after if b not in self.before)

    @property
    def leader_changed(self) -> bool:
        return self.before[0] != self.after[0]


@dataclass(frozen=True, slots=True, kw_only=True)
class Proposal:
    mode: Mode
    brokers: tuple[int, ...]  # the brokers the mode names (added or removed); empty for full
    moves: tuple[PartitionMove, ...]
    score_before: float
    score_after: float
    goals_before: Mapping[str, float]
    goals_after: Mapping[str, float]
    loads_before: Mapping[int, BrokerLoad]
    loads_after: Mapping[int, BrokerLoad]

    @property
    def num_replica_movements(self) -> int:
        return sum(len(m.added) for m in self.moves)

    @property
    def num_leader_movements(self) -> int:
        return sum(1 for m in self.moves if m.leader_changed)

    @property
    def data_to_move_bytes(self) -> int:
        return sum(m.size_bytes * len(m.added) for m in self.moves)

    def assignment(self) -> dict[PartitionKey, tuple[int, ...]]:
        return {(m.topic, m.partition): m.after for m in self.moves}

    def to_dict(self) -> dict[str, Any]:
        def loads(table: Mapping[int, BrokerLoad]) -> list[dict[str, Any]]:
            return [{"broker_id": b, "replicas": x.replicas, "leaders": x.leaders, "disk_bytes": x.disk_bytes,
                     "bytes_in_per_s": x.bytes_in_per_s} for b, x in sorted(table.items())]

        return {
            "mode": self.mode.value,
            "brokers": list(self.brokers),
            "num_replica_movements": self.num_replica_movements,
            "num_leader_movements": self.num_leader_movements,
            "data_to_move_bytes": self.data_to_move_bytes,
            "score_before": self.score_before,
            "score_after": self.score_after,
            "goals_before": dict(self.goals_before),
            "goals_after": dict(self.goals_after),
            "loads_before": loads(self.loads_before),
            "loads_after": loads(self.loads_after),
            "moves": [{"topic": m.topic, "partition": m.partition, "before": list(m.before),
                       "after": list(m.after), "size_bytes": m.size_bytes} for m in self.moves],
        }


def propose(model: LoadModel, mode: Mode, brokers: Iterable[int] = ()) -> Proposal:
    """The proposal for `mode`; `brokers` are the added or removed ids. Raises PlacementError on
    input no plan can meet: unknown or missing broker ids, or a partition with more replicas than
    remaining brokers."""
    named = tuple(sorted(set(brokers)))
    everyone = sorted(model.brokers)
    unknown = [b for b in named if b not in model.brokers]
    if unknown:
        raise PlacementError(ControllerError.INVALID_REPLICA_ASSIGNMENT, f"unknown broker(s) {unknown}")
    if mode is Mode.FULL and named:
        raise PlacementError(ControllerError.INVALID_REPLICA_ASSIGNMENT, "mode full takes no broker ids")
    if mode is not Mode.FULL and not named:
        raise PlacementError(ControllerError.INVALID_REPLICA_ASSIGNMENT, f"mode {mode.value} needs broker ids")
    if mode is Mode.ADD_BROKERS and set(named) & model.excluded:
        raise PlacementError(ControllerError.INVALID_REPLICA_ASSIGNMENT,
                             f"broker(s) {sorted(set(named) & model.excluded)} are fenced or drained: they can "
                             "take no replica")
    targets = [b for b in everyone if mode is not Mode.REMOVE_BROKERS or b not in named]
    destinations = set(named) if mode is Mode.ADD_BROKERS else set(targets)
    if not targets:
        raise PlacementError(ControllerError.INVALID_REPLICA_ASSIGNMENT, "no broker would remain")
    current = {key: load.replicas for key, load in model.partitions.items()}
    widest = max((len(r) for r in current.values()), default=0)
    if widest > len(targets):
        raise PlacementError(ControllerError.INVALID_REPLICATION_FACTOR,
                             f"a partition has {widest} replicas but only {len(targets)} broker(s) would remain")
    planner = _Planner(model, targets=targets, destinations=destinations)
    if mode is Mode.REMOVE_BROKERS:
        planner.evacuate(set(named))
    planner.balance()
    after = model.with_assignment(planner.assignment)
    moves = tuple(
        PartitionMove(topic=key[0], partition=key[1], before=current[key], after=planner.assignment[key],
                      size_bytes=model.partitions[key].size_bytes)
        for key in sorted(current) if planner.assignment[key] != current[key]
    )
    return Proposal(
        mode=mode, brokers=named, moves=moves,
        score_before=score(model, everyone), score_after=score(after, targets),
        goals_before=goal_scores(model, everyone), goals_after=goal_scores(after, targets),
        loads_before=broker_loads(model, everyone), loads_after=broker_loads(after, targets),
    )


def apply(model: LoadModel, proposal: Proposal) -> LoadModel:
    """The model once the proposal's moves are done."""
    return model.with_assignment(proposal.assignment())


class _Planner:
    """The mutable working state of one plan: replica lists and per-broker loads, kept in step."""

    def __init__(self, model: LoadModel, *, targets: list[int], destinations: set[int]) -> None:
        self.model = model
        self.targets = targets
        self.destinations = destinations
        self.assignment: dict[PartitionKey, tuple[int, ...]] = {k: p.replicas for k, p in model.partitions.items()}
        self.keys = sorted(self.assignment)
        self.target_set = set(targets)
        self.destination_list = [b for b in targets if b in destinations and b not in model.excluded]
        self.loads = {b: list(x.vector()) for b, x in broker_loads(model, model.brokers).items()}

    def _load_of(self, key: PartitionKey, position: int) -> tuple[float, float, float, float]:
        p = self.model.partitions[key]
        return (1.0, 1.0 if position == 0 else 0.0, float(p.size_bytes), p.bytes_in_per_s)

    def _move(self, key: PartitionKey, position: int, target: int) -> None:
        replicas = list(self.assignment[key])
        source = replicas[position]
        x = self._load_of(key, position)
        for k, xk in enumerate(x):
            self.loads[source][k] -= xk
            self.loads[target][k] += xk
        replicas[position] = target
        self.assignment[key] = tuple(replicas)

    def _swap_leader(self, key: PartitionKey, position: int) -> None:
        replicas = list(self.assignment[key])
        old, new = replicas[0], replicas[position]
        self.loads[old][1] -= 1
        self.loads[new][1] += 1
        replicas[0], replicas[position] = new, old
        self.assignment[key] = tuple(replicas)

    def _target_loads(self) -> dict[int, list[float]]:
        return {b: self.loads[b] for b in self.targets}

    def evacuate(self, removed: set[int]) -> None:
        """Every replica on a removed broker to the remaining broker keeping rack spread highest, then cheapest."""
        for key in sorted(self.assignment):
            for position, broker in enumerate(self.assignment[key]):
                if broker not in removed:
                    continue
                replicas = self.assignment[key]
                x = self._load_of(key, position)
                scales = scales_of(self._target_loads())
                n = len(self.targets)

                def rank(c: int, replicas: tuple[int, ...] = replicas, position: int = position,
                         x: tuple[float, ...] = x, scales: tuple[float, ...] = scales, n: int = n) -> tuple[int, float, int]:
                    after = replicas[:position] + (c,) + replicas[position + 1:]
                    spread = self.model.rack_spread(r for r in after if r not in removed)
                    cost = move_cost(x, (0.0,) * len(x), tuple(self.loads[c]), scales, n)  # type: ignore[arg-type]
                    return (-spread, cost, c)

                candidates = [c for c in self.targets if c not in replicas and c not in self.model.excluded]
                if not candidates:
                    raise PlacementError(ControllerError.INVALID_REPLICA_ASSIGNMENT,
                                         f"{key[0]}-{key[1]}: no remaining live broker can take its replica")
                self._move(key, position, min(candidates, key=rank))

    def balance(self) -> None:
        for _ in range(MAX_STEPS):
            if not self._best_replica_move() and not self._best_leader_swap():
                return

    def _best_replica_move(self) -> bool:
        """The move that lowers the score most: priced first (cheap arithmetic), the hard goals checked
        only for a move that would be the best so far."""
        n = len(self.targets)
        scales = scales_of(self._target_loads())
        best: tuple[float, PartitionKey, int, int] | None = None
        for key in self.keys:
            if self.model.partitions[key].frozen:
                continue
            replicas = self.assignment[key]
            for position, source in enumerate(replicas):
                if source not in self.target_set:
                    continue
                x = self._load_of(key, position)
                source_load = tuple(self.loads[source])
                for target in self.destination_list:
                    if target in replicas:
                        continue
                    cost = move_cost(x, source_load, tuple(self.loads[target]), scales, n)  # type: ignore[arg-type]
                    if cost >= -EPSILON or (best is not None and cost >= best[0]):
                        continue
                    after = replicas[:position] + (target,) + replicas[position + 1:]
                    if keeps_hard_goals(self.model, replicas, after):
                        best = (cost, key, position, target)
        if best is None:
            return False
        self._move(best[1], best[2], best[3])
        return True

    def _best_leader_swap(self) -> bool:
        n = len(self.targets)
        scales = scales_of(self._target_loads())
        x = (0.0, 1.0, 0.0, 0.0)
        best: tuple[float, PartitionKey, int] | None = None
        for key in self.keys:
            if self.model.partitions[key].frozen:
                continue
            replicas = self.assignment[key]
            for position in range(1, len(replicas)):
                cost = move_cost(x, tuple(self.loads[replicas[0]]), tuple(self.loads[replicas[position]]),  # type: ignore[arg-type]
                                 scales, n)
                if cost < -EPSILON and (best is None or cost < best[0]):
                    best = (cost, key, position)
        if best is None:
            return False
        self._swap_leader(best[1], best[2])
        return True


__all__ = ["GOALS", "Mode", "PartitionMove", "Proposal", "apply", "propose"]
