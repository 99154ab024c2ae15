"""The load model a rebalance plans on: brokers with racks, partitions with replicas and load.

Pure data, built from the metadata image plus what was measured (bytes on
disk per partition, bytes in per second); a partition nobody measured
counts as 0 bytes, so the plan then balances replica and leader counts
alone. A replica list is ordered, the first is the preferred leader (as in
the image). Partitions under a reassignment are `frozen`: the plan leaves
them alone (KIP-455 would replace their running move).

Invariants (checked in __post_init__): replica lists are non-empty and
distinct, every replica is a known broker.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from tinystream.operator.controller.image import MetadataImage

PartitionKey = tuple[str, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionLoad:
    """One partition: its replicas (first = preferred leader) and its load per replica."""

    replicas: tuple[int, ...]
    size_bytes: int = 0  # on disk, per replica (DescribeLogDirs)
    bytes_in_per_s: float = 0.0  # produced into it; every replica writes it, the leader serves it to followers
    frozen: bool = False  # a reassignment is under way: not planned


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadModel:
    """Brokers (id -> rack or None) and partitions; the input of every goal and of the optimizer."""

    brokers: Mapping[int, str | None]
    partitions: Mapping[PartitionKey, PartitionLoad] = field(default_factory=dict)
    # Brokers that may keep replicas but receive none: fenced, drained, or not registered (a move to
    # them would never finish, as they fetch nothing).
    excluded: frozenset[int] = frozenset()

    def __post_init__(self) -> None:
        for key, load in self.partitions.items():
            if not load.replicas:
                raise ValueError(f"{key[0]}-{key[1]} has no replicas")
            if len(set(load.replicas)) != len(load.replicas):
                raise ValueError(f"{key[0]}-{key[1]} lists a broker twice: {list(load.replicas)}")
            unknown = [b for b in load.replicas if b not in self.brokers]
            if unknown:
                raise ValueError(f"{key[0]}-{key[1]} has replicas on unknown broker(s) {unknown}")

    def rack_key(self, broker: int) -> str:
        """A broker's rack, or a rack of its own when it has none (then only distinct brokers spread)."""
        rack = self.brokers.get(broker)
        return rack if rack is not None else f"\0broker-{broker}"

    def rack_spread(self, replicas: Iterable[int]) -> int:
        """How many racks hold a replica: what a rack failure spares."""
        return len({self.rack_key(b) for b in replicas})

    def with_assignment(self, assignment: Mapping[PartitionKey, tuple[int, ...]]) -> LoadModel:
        """The model with these partitions' replica lists replaced (what applying a proposal gives)."""
        partitions = dict(self.partitions)
        for key, replicas in assignment.items():
            partitions[key] = replace(partitions[key], replicas=tuple(replicas))
        return LoadModel(brokers=self.brokers, partitions=partitions, excluded=self.excluded)


def model_from_image(
    image: MetadataImage,
    *,
    sizes: Mapping[PartitionKey, int] | None = None,
    bytes_in: Mapping[PartitionKey, float] | None = None,
    extra_brokers: Iterable[int] = (),
) -> LoadModel:
    """The load model of a cluster image. `sizes` / `bytes_in` are what was measured (missing: 0).
    Every registered broker counts; fenced and drained ones receive no replica. `extra_brokers` adds
    ids not registered yet (add-brokers before the new pods are up), rack unknown."""
    sizes = sizes or {}
    bytes_in = bytes_in or {}
    brokers: dict[int, str | None] = {b: r.rack for b, r in image.brokers.items()}
    for b in extra_brokers:
        brokers.setdefault(b, None)
    partitions = {}
    for topic, p in image.iter_partitions():
        key = (topic, p.partition)
        partitions[key] = PartitionLoad(
            replicas=p.target_replicas,
            size_bytes=max(0, int(sizes.get(key, 0))),
            bytes_in_per_s=max(0.0, float(bytes_in.get(key, 0.0))),
            frozen=p.reassigning,
        )
    for key, load in partitions.items():
        for b in load.replicas:
            brokers.setdefault(b, None)  # a replica on an unregistered broker: still a place that holds data
        partitions[key] = load
    excluded = frozenset(b for b in brokers if b not in image.brokers or image.brokers[b].fenced
                         or image.brokers[b].drained) - set(extra_brokers)
    return LoadModel(brokers=brokers, partitions=partitions, excluded=excluded)
