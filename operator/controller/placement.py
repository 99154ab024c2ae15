"""Replica placement for new partitions: Kafka's AdminUtils, ported.

Kafka's `AdminUtils.assignReplicasToBrokers` spreads leaders and replicas
evenly with a round-robin over the broker list:

* the first replica of partition p goes to broker `(p + start) % n`, so
  leaders walk the brokers one by one;
* follower j of p goes `1 + (shift + j) % (n - 1)` positions after it, and the
  shift grows by one after every n partitions, so followers of one leader do
  not always land on the same neighbours.

With racks on every broker, the broker list is first *rack-alternated*
(racks sorted, one broker from each rack in turn) and followers skip brokers
whose rack already holds a replica until every rack has one. A cluster where
only some brokers have a rack is placed without racks (Kafka refuses it
unless told to ignore racks; TinyStream's spec says racks are used when all
brokers report one).

Kafka draws `start` and `shift` at random; here the caller passes them (the
core draws them from the state's IdSource), so placement is deterministic.
Growing a topic calls the same function with `first_partition` set to the
current partition count, as Kafka's CreatePartitions does.

Balance: one call puts the first replicas on consecutive brokers (leader
counts differ by at most one), and when the partition count is a multiple
of the broker count every broker gets exactly `partitions * rf / n`
replicas (without racks, or with racks of equal size).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tinystream.operator.controller.errors import ControllerError, PlacementError


def rack_alternated(racks: Mapping[int, str]) -> list[int]:
    """Kafka's getRackAlternatedBrokerList: one broker per rack in turn.

    rack1: 0, 1, 2; rack2: 3, 4, 5; rack3: 6, 7, 8 -> 0, 3, 6, 1, 4, 7, 2, 5, 8
    """
    by_rack: dict[str, list[int]] = {}
    for broker, rack in racks.items():
        by_rack.setdefault(rack, []).append(broker)
    queues = {rack: sorted(ids) for rack, ids in by_rack.items()}
    order = sorted(queues)
    result: list[int] = []
    index = 0
    while len(result) < len(racks):
        queue = queues[order[index]]
        if queue:
            result.append(queue.pop(0))
        index = (index + 1) % len(order)
    return result


def _replica_index(first: int, shift: int, j: int, n: int) -> int:
    return (first + 1 + (shift + j) % (n - 1)) % n


def assign_replicas(
    *,
    brokers: Sequence[int],
    racks: Mapping[int, str | None],
    partitions: int,
    replication_factor: int,
    start_index: int,
    replica_shift: int,
    first_partition: int = 0,
) -> list[tuple[int, ...]]:
    """Replica lists for `partitions` partitions numbered from `first_partition`.

    `brokers` are the brokers that may receive replicas; `racks` maps each to
    its rack or None. Raises PlacementError (INVALID_REPLICATION_FACTOR) when
    the factor is not positive or exceeds the number of brokers.
    """
    ids = sorted(set(brokers))
    if replication_factor <= 0:
        raise PlacementError(ControllerError.INVALID_REPLICATION_FACTOR, "replication factor must be larger than 0")
    if replication_factor > len(ids):
        raise PlacementError(
            ControllerError.INVALID_REPLICATION_FACTOR,
            f"replication factor {replication_factor} is larger than the {len(ids)} available broker(s)",
        )
    if partitions < 0:
        raise PlacementError(ControllerError.INVALID_PARTITIONS, "number of partitions must not be negative")
    rack_of = {b: racks.get(b) for b in ids}
    if all(rack is not None for rack in rack_of.values()):
        return _rack_aware(
            rack_of,  # type: ignore[arg-type]
            partitions=partitions,
            rf=replication_factor,
            start_index=start_index,
            shift=replica_shift,
            first_partition=first_partition,
        )
    return _rack_unaware(
        ids, partitions=partitions, rf=replication_factor, start_index=start_index, shift=replica_shift,
        first_partition=first_partition,
    )


def _rack_unaware(
    ids: list[int], *, partitions: int, rf: int, start_index: int, shift: int, first_partition: int
) -> list[tuple[int, ...]]:
    n = len(ids)
    start = start_index % n
    current = max(0, first_partition)
    result = []
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        replicas = [ids[first]] + [ids[_replica_index(first, shift, j, n)] for j in range(rf - 1)]
        result.append(tuple(replicas))
        current += 1
    return result


def _rack_aware(
    rack_of: dict[int, str], *, partitions: int, rf: int, start_index: int, shift: int, first_partition: int
) -> list[tuple[int, ...]]:
    arranged = rack_alternated(rack_of)
    n = len(arranged)
    num_racks = len(set(rack_of.values()))
    start = start_index % n
    current = max(0, first_partition)
    result = []
    for _ in range(partitions):
        if current > 0 and current % n == 0:
            shift += 1
        first = (current + start) % n
        leader = arranged[first]
        replicas = [leader]
        racks_used = {rack_of[leader]}
        brokers_used = {leader}
        k = 0
        for _ in range(rf - 1):
            while True:
                broker = arranged[_replica_index(first, shift * num_racks, k, n)]
                rack = rack_of[broker]
                k += 1
                # Skip a broker whose rack already has a replica while some rack
                # has none, and a broker that has one while some broker has none.
                if (rack not in racks_used or len(racks_used) == num_racks) and (
                    broker not in brokers_used or len(brokers_used) == n
                ):
                    replicas.append(broker)
                    racks_used.add(rack)
                    brokers_used.add(broker)
                    break
        result.append(tuple(replicas))
        current += 1
    return result
