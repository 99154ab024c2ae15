"""Carrying out a proposal, as pure decisions: the throttle configs of its moves, and its progress.

Throttles follow kafka-reassign-partitions.sh --throttle (KIP-73): a moving
partition's current replicas go into its topic's
leader.replication.throttled.replicas (they serve the copy) and the replicas
being added into follower.replication.throttled.replicas (they fetch it), as
"partition:broker" pairs. The entries are merged into what the topic already
lists and, when the moves are done or stopped, every entry of a moved
partition is taken out again, so a throttle set by hand on other partitions
stays. A topic listing "*" already throttles everything and is left alone. The rates themselves are broker configs
(leader/follower.replication.throttled.rate), set by the caller on the brokers.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tinystream.config.topic_configs import (
    ALL_REPLICAS,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_REPLICAS,
    InvalidConfig,
    throttled_replicas,
)
from tinystream.operator.controller.image import MetadataImage
from tinystream.operator.controller.rebalance.model import PartitionKey

Pairs = frozenset[tuple[int, int]]


@dataclass(frozen=True, slots=True)
class TopicThrottle:
    leader: Pairs
    follower: Pairs


def throttles_for(image: MetadataImage, moves: Mapping[PartitionKey, tuple[int, ...]]) -> dict[str, TopicThrottle]:
    """Per topic, the (partition, broker) pairs to throttle while `moves` run (current replicas lead,
    added ones follow). Partitions the image no longer has are skipped."""
    leader: dict[str, set[tuple[int, int]]] = {}
    follower: dict[str, set[tuple[int, int]]] = {}
    for (topic, index), target in moves.items():
        record = image.partition(topic, index)
        if record is None:
            continue
        current = record.original_replicas
        leader.setdefault(topic, set()).update((index, b) for b in current)
        follower.setdefault(topic, set()).update((index, b) for b in target if b not in current)
    return {t: TopicThrottle(frozenset(leader[t]), frozenset(follower.get(t, ()))) for t in sorted(leader)}


def _pairs(text: str) -> Pairs | None:
    try:
        parsed = throttled_replicas(text)
    except InvalidConfig:
        return frozenset()
    return None if parsed is None else frozenset(parsed)


def _text(pairs: Iterable[tuple[int, int]]) -> str | None:
    ordered = sorted(pairs)
    return ",".join(f"{p}:{b}" for p, b in ordered) if ordered else None


def config_change(current: Mapping[str, object], throttle: TopicThrottle, *, add: bool) -> dict[str, str | None]:
    """The AlterTopicConfig merge that adds `throttle`'s pairs or, to remove, every pair of the partitions
    it names (their replicas differ once the moves are done); None deletes a key left empty. Keys already
    "*" are not touched."""
    moved = {p for p, _ in throttle.leader | throttle.follower}
    change: dict[str, str | None] = {}
    for key, pairs in ((LEADER_THROTTLED_REPLICAS, throttle.leader), (FOLLOWER_THROTTLED_REPLICAS, throttle.follower)):
        text = str(current.get(key, ""))
        if text.strip() == ALL_REPLICAS:
            continue
        existing = _pairs(text) or frozenset()
        updated = existing | pairs if add else frozenset(pair for pair in existing if pair[0] not in moved)
        if updated != existing:
            change[key] = _text(updated)
    return change


def remaining(image: MetadataImage, moves: Mapping[PartitionKey, tuple[int, ...]]) -> list[PartitionKey]:
    """The moves not done yet: the partition is still reassigning or its replicas are not the target
    (a deleted partition counts as done)."""
    left = []
    for key, target in sorted(moves.items()):
        record = image.partition(*key)
        if record is not None and (record.reassigning or set(record.replicas) != set(target)):
            left.append(key)
    return left
