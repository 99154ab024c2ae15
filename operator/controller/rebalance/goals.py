"""Rebalance goals: hard ones a plan must keep, soft ones it improves (all pure).

Hard goals (Cruise Control's "hard goals", which Strimzi's KafkaRebalance runs too):

* distinct replicas: a partition never has two replicas on one broker;
* rack spread: a move never lowers the number of racks a partition spans;
* replica count: a partition keeps as many replicas as it had, so
  min.insync.replicas can still be met once the move is done.

Soft goals, each an imbalance over the brokers considered: the squared
coefficient of variation of one load per broker, sum((v - mean)^2) / n / mean^2
(0: all equal; mean below 1 counts as 1, so an empty cluster scores 0).
The loads are replica count, leader count, bytes on disk and bytes in per
second (every replica writes what its partition receives). The score is the
weighted sum; lower is better. Moving load x of one kind from broker b to
broker c changes that goal by (2x(v_c - v_b) + 2x^2) / n / mean^2, which is
how the optimizer prices a move without recomputing the whole score.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from tinystream.operator.controller.rebalance.model import LoadModel

#: Soft goals in the order loads are kept (a load vector is one value per goal).
GOALS: tuple[str, ...] = ("replica-count", "leader-count", "disk", "network-in")
#: The weight of each soft goal in the score (Cruise Control orders goals by priority; equal weights here).
WEIGHTS: tuple[float, ...] = (1.0, 1.0, 1.0, 1.0)

Load = tuple[float, float, float, float]


@dataclass(frozen=True, slots=True, kw_only=True)
class BrokerLoad:
    replicas: int
    leaders: int
    disk_bytes: int
    bytes_in_per_s: float

    def vector(self) -> Load:
        return (float(self.replicas), float(self.leaders), float(self.disk_bytes), self.bytes_in_per_s)


def broker_loads(model: LoadModel, brokers: Iterable[int]) -> dict[int, BrokerLoad]:
    """Each broker's load (replicas, leaders = first replicas, bytes on disk, bytes in)."""
    counts = {b: [0, 0, 0, 0.0] for b in brokers}
    for load in model.partitions.values():
        for i, b in enumerate(load.replicas):
            if b in counts:
                c = counts[b]
                c[0] += 1
                c[1] += 1 if i == 0 else 0
                c[2] += load.size_bytes
                c[3] += load.bytes_in_per_s
    return {b: BrokerLoad(replicas=int(c[0]), leaders=int(c[1]), disk_bytes=int(c[2]), bytes_in_per_s=float(c[3]))
            for b, c in counts.items()}


def imbalance(values: Sequence[float]) -> float:
    """sum((v - mean)^2) / n / max(mean, 1)^2: 0 when balanced."""
    if not values:
        return 0.0
    mean = sum(values) / len(values)
    scale = max(mean, 1.0)
    return sum((v - mean) ** 2 for v in values) / len(values) / scale**2


def goal_scores(model: LoadModel, brokers: Iterable[int]) -> dict[str, float]:
    """Each soft goal's imbalance over `brokers`."""
    vectors = [load.vector() for load in broker_loads(model, sorted(set(brokers))).values()]
    return {name: imbalance([v[k] for v in vectors]) for k, name in enumerate(GOALS)}


def score(model: LoadModel, brokers: Iterable[int]) -> float:
    """The weighted imbalance over `brokers`; lower is better."""
    scores = goal_scores(model, brokers)
    return sum(w * scores[name] for name, w in zip(GOALS, WEIGHTS, strict=True))


def keeps_hard_goals(model: LoadModel, before: Sequence[int], after: Sequence[int]) -> bool:
    """Distinct replicas, as many as before, on as many racks as before."""
    return (len(set(after)) == len(after) == len(before)
            and model.rack_spread(after) >= model.rack_spread(before))


def move_cost(x: Load, source: Load, target: Load, scales: Load, n: int) -> float:
    """The score change of moving load `x` from a broker loaded `source` to one loaded `target`
    (`scales`: max(mean, 1) per goal over the n brokers considered)."""
    total = 0.0
    for k in range(len(GOALS)):  # a plain loop: the optimizer calls this for every candidate move
        xk = x[k]
        if xk:
            total += WEIGHTS[k] * (2 * xk * (target[k] - source[k]) + 2 * xk * xk) / n / (scales[k] * scales[k])
    return total


def scales_of(loads: Mapping[int, Sequence[float]]) -> Load:
    n = max(len(loads), 1)
    sums = [sum(v[k] for v in loads.values()) for k in range(len(GOALS))]
    return tuple(max(s / n, 1.0) for s in sums)  # type: ignore[return-value]
