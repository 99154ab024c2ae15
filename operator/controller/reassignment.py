"""Partition reassignment (KIP-455) and the scale-up/scale-down planner.

A reassignment never drops a copy before its replacement is in sync:

1. start: replicas become target + (current - target); `adding_replicas`
   are the new ones, `removing_replicas` the ones leaving. Brokers start
   fetching for the added replicas at once.
2. The leader adds the new replicas to the ISR (AlterPartition) as they
   catch up.
3. complete (an automatic step in every settle): once every adding replica
   is in the ISR, replicas become the target, the ISR keeps only target
   members and, if the leader is leaving, a new one is elected from them.
4. cancel (replicas None): back to the original replicas; refused if no ISR
   member would remain (KRaft would need an unclean election).

`plan_reassignment` proposes targets that spread replicas evenly over a new
broker set with as few moves as possible:

* a min-cost flow (flow.py) assigns every replica slot to a target broker:
  staying put is free, moving costs a lot, a partition's replicas stay
  distinct, and every broker ends with total / brokers replicas, rounded
  down or up. The result moves the fewest replicas that balance allows
  (replicas on removed brokers always move); small extra costs break ties
  towards racks the partition does not use yet and towards moving followers
  rather than preferred leaders. A replacement takes the position of the
  replica it replaces;
* then, with no data moved, a second flow reorders replica lists so
  preferred leaders are spread as evenly as the placement allows (the new
  brokers get leaderships too), changing as few first replicas as possible.

`plan_replication_factor` gives one topic's partitions a new number of
replicas (a Topic resource's replicationFactor, Kafka's
kafka-reassign-partitions precedent): fewer keeps the in-sync replicas and
the preferred leader first; more adds the least-loaded brokers, racks the
partition does not use yet first.

Feed either result to `ReassignPartitions(assignments=...)`.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Iterable, Sequence

from tinystream.operator.controller.errors import ControllerError, PlacementError
from tinystream.operator.controller.events import ReplicaAssignment
from tinystream.operator.controller.flow import MinCostFlow
from tinystream.operator.controller.image import MetadataImage, PartitionRecord
from tinystream.operator.controller.state import ControllerState


def start_reassignment(partition: PartitionRecord, target: Sequence[int]) -> PartitionRecord:
    """The partition with a reassignment to `target` under way (or done, for a
    pure reordering). Replaces a reassignment already running."""
    target = tuple(target)
    original = partition.original_replicas
    merged = target + tuple(r for r in partition.replicas if r not in target)
    return dataclasses.replace(
        partition,
        replicas=merged,
        adding_replicas=tuple(r for r in target if r not in original),
        removing_replicas=tuple(r for r in partition.replicas if r not in target),
    )


def complete_reassignment(partition: PartitionRecord) -> PartitionRecord | None:
    """The partition with its reassignment completed, or None if it cannot be yet."""
    p = partition
    if not p.reassigning or any(r not in p.isr for r in p.adding_replicas):
        return None
    target = p.target_replicas
    isr = tuple(r for r in p.isr if r in target)
    if not isr:
        return None
    return dataclasses.replace(p, replicas=target, isr=isr, adding_replicas=(), removing_replicas=())


def revert_reassignment(partition: PartitionRecord) -> PartitionRecord | None:
    """The partition back on its original replicas, or None if no ISR member would remain."""
    p = partition
    original = p.original_replicas
    isr = tuple(r for r in p.isr if r in original)
    if not isr:
        return None
    return dataclasses.replace(p, replicas=original, isr=isr, adding_replicas=(), removing_replicas=())


# -- planning ------------------------------------------------------------------


def plan_reassignment(
    state: ControllerState | MetadataImage, target_brokers: Iterable[int], *, balance_leaders: bool = True
) -> list[ReplicaAssignment]:
    """Targets that move a fair share of replicas onto `target_brokers` and
    every replica off brokers not in it, with minimal movement.

    `state` is a ControllerState or a MetadataImage. Only partitions whose
    replicas (or, with `balance_leaders`, replica order) change are listed,
    by topic and partition. Partitions already being reassigned are planned
    from their target. New target brokers must register before the plan is
    executed (ReassignPartitions refuses unknown brokers); their racks count
    only once they have. Raises PlacementError when no target is given or a
    partition has more replicas than there are target brokers.
    """
    image = state if isinstance(state, MetadataImage) else state.image
    targets = sorted(set(target_brokers))
    if not targets:
        raise PlacementError(ControllerError.INVALID_REPLICA_ASSIGNMENT, "no target brokers")
    keys = [(t, p.partition) for t, p in image.iter_partitions()]
    current = {(t, p.partition): p.target_replicas for t, p in image.iter_partitions()}
    for key, replicas in current.items():
        if len(replicas) > len(targets):
            raise PlacementError(
                ControllerError.INVALID_REPLICATION_FACTOR,
                f"{key[0]}-{key[1]} has {len(replicas)} replicas but only {len(targets)} target broker(s)",
            )
    racks = {b: (image.brokers[b].rack if b in image.brokers else None) for b in targets}

    final = _move_replicas(keys, current, targets=targets, racks=racks)
    if balance_leaders:
        _balance_leaders(final, keys, targets)
    return [
        ReplicaAssignment(topic=key[0], partition=key[1], replicas=final[key])
        for key in keys
        if final[key] != current[key]
    ]


def plan_replication_factor(
    state: ControllerState | MetadataImage, topic: str, replication_factor: int, brokers: Iterable[int]
) -> list[ReplicaAssignment]:
    """Targets giving every partition of `topic` `replication_factor` replicas among `brokers` (the live
    ones); only partitions whose replica count changes are listed. Lowering keeps in-sync replicas before
    the others and keeps their order (the preferred leader stays first); raising appends, one at a time,
    the broker carrying the fewest replicas of the cluster, preferring a rack the partition lacks. Raises
    PlacementError: an unknown topic, or more replicas than brokers."""
    image = state if isinstance(state, MetadataImage) else state.image
    record = image.topic(topic)
    if record is None:
        raise PlacementError(ControllerError.UNKNOWN_TOPIC_OR_PARTITION, f"no topic {topic!r}")
    live = sorted(set(brokers))
    if not 1 <= replication_factor <= len(live):
        raise PlacementError(ControllerError.INVALID_REPLICATION_FACTOR,
                             f"replication factor {replication_factor} needs as many live brokers; "
                             f"{len(live)} available")
    load = Counter(b for _, p in image.iter_partitions() for b in p.target_replicas)
    rack = {b: (image.brokers[b].rack if b in image.brokers else None) for b in live}
    plan = []
    for partition in record.partitions:
        current = partition.target_replicas
        if len(current) == replication_factor:
            continue
        if len(current) > replication_factor:
            keep = sorted(sorted(current, key=lambda b: (b not in partition.isr, current.index(b)))[:replication_factor],
                          key=current.index)
            target = tuple(keep)
        else:
            grown = list(current)
            while len(grown) < replication_factor:
                used = {rack.get(b) for b in grown} - {None}
                pick = min((b for b in live if b not in grown),
                           key=lambda b: (rack[b] is not None and rack[b] in used, load[b], b))
                grown.append(pick)
                load[pick] += 1
            target = tuple(grown)
        for gone in set(current) - set(target):
            load[gone] -= 1
        plan.append(ReplicaAssignment(topic=topic, partition=partition.partition, replicas=target))
    return plan


def _move_replicas(
    keys: list[tuple[str, int]],
    current: dict[tuple[str, int], tuple[int, ...]],
    *,
    targets: list[int],
    racks: dict[int, str | None],
) -> dict[tuple[str, int], tuple[int, ...]]:
    """Balanced replica lists with the fewest moved replicas.

    A min-cost flow: every replica slot is one unit that either stays on its
    broker (cost 0) or moves to another target broker (cost `move`, plus
    small tie-break costs); a node per (partition, broker) with capacity 1
    keeps a partition's replicas distinct; every broker takes `total // n`
    units plus at most one more, and only `total % n` brokers take the extra
    one. Such a balanced assignment always exists (RF <= brokers), so the
    flow is full, and `move` exceeds every possible sum of tie-breaks, so it
    moves as few replicas as balance allows and only then prefers new racks
    and keeping preferred-leader slots.
    """
    total = sum(len(current[key]) for key in keys)
    base, extra = divmod(total, len(targets))
    move = 3 * total + 1
    g = MinCostFlow()
    source, sink, overflow = g.node(), g.node(), g.node()
    g.edge(overflow, sink, cap=extra)
    broker_node = {b: g.node() for b in targets}
    for node in broker_node.values():
        g.edge(node, sink, cap=base)
        g.edge(node, overflow, cap=1)
    choices: list[tuple[int, tuple[str, int], int, int]] = []
    for key in keys:
        replicas = current[key]
        pair = {b: g.node() for b in targets}
        for b, node in pair.items():
            g.edge(node, broker_node[b], cap=1)
        for i, own in enumerate(replicas):
            unit = g.node()
            g.edge(source, unit, cap=1)
            used_racks = {racks.get(r) for r in replicas if r != own} - {None}
            for b in targets:
                if b == own:
                    cost = 0
                else:
                    cost = move + (_LEADER_SLOT_COST if i == 0 and own in broker_node else 0)
                    if racks[b] is not None and racks[b] in used_racks:
                        cost += _RACK_COST
                choices.append((g.edge(unit, pair[b], cap=1, cost=cost), key, i, b))
    flow, _ = g.run(source, sink)
    assert flow == total, "a balanced assignment exists whenever RF <= brokers"
    slots = {key: list(current[key]) for key in keys}
    for eid, key, i, b in choices:
        if g.flow_on(eid):
            slots[key][i] = b
    return {key: tuple(slots[key]) for key in keys}


# Tie-breaks among equally small plans: a replica that would share a rack
# with another replica of its partition costs more than moving a leader slot.
_RACK_COST = 2
_LEADER_SLOT_COST = 1


def _balance_leaders(
    final: dict[tuple[str, int], tuple[int, ...]], keys: list[tuple[str, int]], targets: list[int]
) -> None:
    """Reorder replica lists (no data moves) so preferred leaders are spread evenly.

    A min-cost flow picks one replica per partition as its first, at most
    `partitions // brokers` per broker plus one for `partitions % brokers`
    of them, changing as few current firsts as possible.
    """
    base, extra = divmod(len(keys), len(targets))
    g = MinCostFlow()
    source, sink, overflow = g.node(), g.node(), g.node()
    g.edge(overflow, sink, cap=extra)
    brokers = {b: g.node() for b in targets}
    for node in brokers.values():
        g.edge(node, sink, cap=base)
        g.edge(node, overflow, cap=1)
    choices = []
    for key in keys:
        unit = g.node()
        g.edge(source, unit, cap=1)
        for position, r in enumerate(final[key]):
            choices.append((g.edge(unit, brokers[r], cap=1, cost=0 if position == 0 else 1), key, r))
    g.run(source, sink)
    for eid, key, r in choices:
        if g.flow_on(eid) and final[key][0] != r:
            final[key] = (r,) + tuple(x for x in final[key] if x != r)
