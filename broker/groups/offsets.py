"""Committed offsets, pure: what a commit keeps, its records, the OffsetFetch answer, open transactions.

No asyncio, no clock, no I/O (time comes in as `now`); `offset_manager` runs these over the
__consumer_offsets partitions. Kafka's new group coordinator keeps the same line between its
OffsetMetadataManager (offsets) and GroupMetadataManager (membership).

- `accept_commit`: Kafka's offset.metadata.max.bytes check, per partition, before anything is
  appended; the partitions that pass become `CommittedOffset`s stamped with `now`.
- `commit_records` / `offset_tombstones`: the OffsetCommitKey/Value records of a commit, or of a
  deleted group's offsets.
- `fetch_answer`: OffsetFetch over a group's committed offsets (nothing committed: offset -1).
- `PendingTxnOffsets` (KIP-98, KIP-447): offsets appended inside a producer's transaction, kept
  per (producer id, group) until the transaction's marker lands in the group's partition; a marker
  that lands while that partition is still loading waits for the load's end.

Invariant: a pending transactional offset is never a committed one; it becomes one only through
`take` on a COMMIT marker.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from tinystream.broker.errors import ErrorCode
from tinystream.broker.groups.group import CommittedOffset
from tinystream.broker.groups.persistence import Record
from tinystream.broker.groups.records import OffsetCommitKey, OffsetCommitValue, encode_key, encode_offset_commit_value
from tinystream.broker.groups.results import FetchOffsetsResult, OffsetAndMetadata

__all__ = [
    "OffsetRequest",
    "PendingTxnOffsets",
    "TopicPartitionOffsets",
    "accept_commit",
    "commit_records",
    "fetch_answer",
    "offset_tombstones",
]

_OK = ErrorCode.none

#: What OffsetCommit / TxnOffsetCommit carry per partition: (offset, leader epoch, metadata).
OffsetRequest = dict[tuple[str, int], tuple[int, int, str | None]]
#: Offsets by (topic, partition).
TopicPartitionOffsets = dict[tuple[str, int], CommittedOffset]


def accept_commit(
    offsets: OffsetRequest, *, metadata_max: int, now: int
) -> tuple[dict[tuple[str, int], ErrorCode], TopicPartitionOffsets]:
    """The error per partition and the offsets to append: metadata over `metadata_max` is refused
    per partition (OFFSET_METADATA_TOO_LARGE) while the others of the same request still commit."""
    results: dict[tuple[str, int], ErrorCode] = {}
    accepted: TopicPartitionOffsets = {}
    for tp, (offset, leader_epoch, metadata) in offsets.items():
        if metadata is not None and len(metadata) > metadata_max:
            results[tp] = ErrorCode.offset_metadata_too_large
            continue
        accepted[tp] = CommittedOffset(offset=offset, leader_epoch=leader_epoch, metadata=metadata or "",
                                       commit_timestamp=now)
        results[tp] = _OK
    return results, accepted


def commit_records(group_id: str, accepted: TopicPartitionOffsets) -> list[Record]:
    """One OffsetCommit record per partition, in the request's order."""
    return [
        (
            encode_key(OffsetCommitKey(group_id, topic, partition)),
            encode_offset_commit_value(OffsetCommitValue(
                offset=c.offset, leader_epoch=c.leader_epoch, metadata=c.metadata,
                commit_timestamp=c.commit_timestamp,
            )),
        )
        for (topic, partition), c in accepted.items()
    ]


def offset_tombstones(group_id: str, partitions: Iterable[tuple[str, int]]) -> list[Record]:
    """A deleted group's offsets, so a coordinator loading the partition later does not revive them."""
    return [(encode_key(OffsetCommitKey(group_id, topic, p)), None) for topic, p in partitions]


def fetch_answer(
    committed: Mapping[tuple[str, int], CommittedOffset],
    partitions: list[tuple[str, int]] | None,
    *,
    unstable: Callable[[tuple[str, int]], bool],
) -> FetchOffsetsResult:
    """OffsetFetch: `partitions=None` means every partition committed; a partition `unstable`
    names (a pending transactional offset under require_stable, KIP-447) gets UNSTABLE_OFFSET_COMMIT,
    which the client retries, instead of an offset it might read past."""
    wanted = list(committed) if partitions is None else list(partitions)
    out: dict[tuple[str, int], OffsetAndMetadata] = {}
    errors: dict[tuple[str, int], ErrorCode] = {}
    for tp in wanted:
        c = committed.get(tp)
        # Kafka: nothing committed -> offset -1, no leader epoch, metadata "".
        out[tp] = OffsetAndMetadata(-1, -1, "") if c is None else OffsetAndMetadata(c.offset, c.leader_epoch, c.metadata)
        if unstable(tp):
            errors[tp] = ErrorCode.unstable_offset_commit
    return FetchOffsetsResult(error=_OK, offsets=out, partition_errors=errors)


class PendingTxnOffsets:
    """Transactional offsets not yet decided: producer id -> group id -> (topic, partition) -> offset,
    and the markers that landed in a partition while it was loading."""

    def __init__(self) -> None:
        self._by_producer: dict[int, dict[str, TopicPartitionOffsets]] = {}
        self._deferred: dict[int, list[tuple[int, bool]]] = {}

    def add(self, producer_id: int, group_id: str, offsets: TopicPartitionOffsets) -> None:
        """Offsets appended inside the transaction: a later commit of the same partition wins."""
        self._by_producer.setdefault(producer_id, {}).setdefault(group_id, {}).update(offsets)

    def install(self, producer_id: int, group_id: str, offsets: TopicPartitionOffsets) -> None:
        """A transaction still open in a partition just loaded: the log's view replaces ours."""
        self._by_producer.setdefault(producer_id, {})[group_id] = offsets

    def take(self, producer_id: int, in_partition: Callable[[str], bool]) -> dict[str, TopicPartitionOffsets]:
        """Remove and return the producer's offsets of the groups `in_partition` accepts: a marker
        decides only the groups of the partition it landed in."""
        by_group = self._by_producer.get(producer_id)
        if not by_group:
            return {}
        done = {gid: by_group.pop(gid) for gid in [g for g in by_group if in_partition(g)]}
        if not by_group:
            del self._by_producer[producer_id]
        return done

    def has_pending(self, group_id: str, tp: tuple[str, int]) -> bool:
        return any(tp in by_group.get(group_id, {}) for by_group in self._by_producer.values())

    def drop(self, in_partition: Callable[[str], bool]) -> None:
        """Forget the groups of a partition unloaded here (its next coordinator reads them from the log)."""
        for by_group in self._by_producer.values():
            for gid in [g for g in by_group if in_partition(g)]:
                del by_group[gid]

    def defer(self, partition: int, producer_id: int, commit: bool) -> None:
        """A marker for a loading partition: the load's read may have ended before it."""
        self._deferred.setdefault(partition, []).append((producer_id, commit))

    def take_deferred(self, partition: int) -> list[tuple[int, bool]]:
        return self._deferred.pop(partition, [])

    def drop_deferred(self, partition: int) -> None:
        self._deferred.pop(partition, None)
