"""Replaying one __consumer_offsets partition, pure: its log folded into what a coordinator loads.

`PartitionReplay.add(entry)` takes the partition's entries in offset order (what
`OffsetsTopic.read` yields); afterwards it says, per group, the last GroupMetadata value (classic
groups), the KIP-848 records (`ConsumerGroupLog`), the committed offsets, and the transactional
offsets of transactions with no marker yet. The coordinator turns these into groups
(`group_manager`) and pending offsets (`offset_manager`). Kafka's precedent: the new group
coordinator's shard `replay`s each record into its GroupMetadataManager or OffsetMetadataManager.

Rules, as Kafka loads a partition:
- the last record per key wins; a tombstone (value None) deletes;
- an offset written inside a transaction counts only after its COMMIT marker, and not at all after
  ABORT;
- a GroupMetadata value after a group's KIP-848 records means the group turned classic, and a
  ConsumerGroupMetadata value after a GroupMetadata one that it turned into a consumer group;
- a record that cannot be decoded is skipped with a warning (a bad record must not stop the load).
"""

from __future__ import annotations

import logging
from collections import defaultdict

from tinystream.broker.groups.consumer_persistence import ConsumerGroupLog
from tinystream.broker.groups.errors import RecordDecodeError
from tinystream.broker.groups.group import CommittedOffset
from tinystream.broker.groups.persistence import LogEntry, TxnMarker, TxnRecord
from tinystream.broker.groups.records import (
    ConsumerGroupMetadataKey,
    GroupMetadataKey,
    GroupMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    decode_key,
    decode_value,
)

__all__ = ["PartitionReplay"]

log = logging.getLogger(__name__)

_TopicPartitionValues = dict[tuple[str, int], OffsetCommitValue]


def _committed(value: OffsetCommitValue) -> CommittedOffset:
    return CommittedOffset(offset=value.offset, leader_epoch=value.leader_epoch, metadata=value.metadata,
                           commit_timestamp=value.commit_timestamp)


class PartitionReplay:
    """The groups and offsets one __consumer_offsets partition's log leaves behind."""

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self.group_values: dict[str, GroupMetadataValue | None] = {}
        self.consumer_log = ConsumerGroupLog()  # KIP-848 groups: epochs, members, target assignments
        self.offsets: dict[str, dict[tuple[str, int], OffsetCommitValue | None]] = defaultdict(dict)
        self.pending: dict[int, dict[str, _TopicPartitionValues]] = {}  # producer id -> group -> offsets

    def add(self, entry: LogEntry) -> bool:
        """Fold one entry in; True when it was a record that was read (not a marker, not unreadable),
        which is what the loader counts between two yields to the event loop."""
        if isinstance(entry, TxnMarker):
            self._end_transaction(entry)
            return False
        producer_id = entry.producer_id if isinstance(entry, TxnRecord) else -1
        try:
            key = decode_key(entry[0])
            value = decode_value(key, entry[1])
        except RecordDecodeError as exc:
            log.warning("__consumer_offsets-%d: skipping an unreadable record: %s", self.partition, exc)
            return False
        if isinstance(key, OffsetCommitKey) and producer_id >= 0:
            if isinstance(value, OffsetCommitValue):
                self.pending.setdefault(producer_id, {}).setdefault(key.group, {})[(key.topic, key.partition)] = value
        elif isinstance(key, OffsetCommitKey):
            assert value is None or isinstance(value, OffsetCommitValue)
            self.offsets[key.group][(key.topic, key.partition)] = value
        elif isinstance(key, GroupMetadataKey):
            assert value is None or isinstance(value, GroupMetadataValue)
            self.group_values[key.group] = value
            if value is not None:
                self.consumer_log.forget(key.group)  # the group turned classic
        elif self.consumer_log.add(key, value):
            if isinstance(key, ConsumerGroupMetadataKey) and value is not None:
                self.group_values.pop(key.group, None)  # the group turned into a consumer group
        return True

    def _end_transaction(self, marker: TxnMarker) -> None:
        """COMMIT makes the transaction's offsets committed ones; ABORT drops them."""
        done = self.pending.pop(marker.producer_id, {})
        if marker.commit:
            for gid, committed in done.items():
                self.offsets[gid].update(committed)

    # ----------------------------------------------------------------- what the log left

    def group_ids(self) -> set[str]:
        """Every group the partition names: with metadata, KIP-848 records, offsets or open transactions."""
        return (self.group_values.keys() | self.consumer_log.group_ids() | self.offsets.keys()
                | {g for by in self.pending.values() for g in by})

    def committed(self, group_id: str) -> dict[tuple[str, int], CommittedOffset]:
        """The group's committed offsets (tombstoned ones left out)."""
        return {tp: _committed(v) for tp, v in self.offsets.get(group_id, {}).items() if v is not None}

    def open_transactions(self) -> list[tuple[int, str, dict[tuple[str, int], CommittedOffset]]]:
        """(producer id, group, offsets) of transactions with no marker in this partition yet."""
        return [
            (producer_id, gid, {tp: _committed(v) for tp, v in values.items()})
            for producer_id, by_group in self.pending.items()
            for gid, values in by_group.items()
        ]
