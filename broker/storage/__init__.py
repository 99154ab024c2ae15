"""Partition log storage, split as Kafka splits it: segmented files by default, in memory for tests.

Modules, bottom up (Kafka's class in brackets):

    compression.py      bounded codecs for the records section
    batch.py            RecordBatch v2: the header (BatchHeader, one struct), records, building and checking
    validation.py       what a leader or follower append checks before it writes
    index.py            the sparse offset and time indexes [OffsetIndex, TimeIndex]
    file_range.py       a Fetch's batches left in a segment file, sharing its descriptor [FileRecords.slice]
    file_records.py     one segment's .log bytes read by position, batch walks [FileRecords]
    segment.py          one segment's .log + .index + .timeindex [LogSegment]
    segments.py         the sorted segment snapshot [LogSegments]
    leader_epoch.py     the leader-epoch cache and its checkpoint [LeaderEpochFileCache]
    checkpoint.py       offset checkpoint files, written atomically
    policy.py           the roll rule, retention decisions, config bounds (pure)
    loader.py           opening and recovering a partition directory [LogLoader]
    segmented.py        SegmentedLog: append, read, truncate, retention [LocalLog]
    compaction_swap.py  the cleaner's .cleaned / .swap protocol and its crash recovery
    cleaner.py          compaction: the last record per key [LogCleaner]
    memory.py           MemoryLog, the in-memory PartitionLog for tests
    log_manager.py      where partition logs live, opened and deleted [LogManager]
    log_scan.py         walk stored batch headers (producer-state rebuilds, ListOffsets)
    base.py             the PartitionLog interface, LogConfig, results and errors
    rwlock.py           the shared/exclusive lock readers and destructive writers take
    meta_properties.py  a log dir's cluster id and node id (meta.properties)
    topic_partition.py  TopicPartition, the name every layer above uses

Open a log with ``open_log(directory, config, now_ms=...)`` (a
SegmentedLog; ``directory=None`` gives a MemoryLog).
"""

from __future__ import annotations

import os

from tinystream.broker.storage.base import LogConfig, PartitionLog
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.segmented import SegmentedLog


def open_log(directory: str | os.PathLike[str] | None, config: LogConfig | None = None, *, now_ms: int) -> PartitionLog:
    """A SegmentedLog in ``directory`` (recovered if it exists), or a MemoryLog when directory is None."""
    if directory is None:
        return MemoryLog(config, now_ms=now_ms)

    return SegmentedLog.open(directory, config, now_ms=now_ms)
