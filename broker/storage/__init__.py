"""Partition log storage: segmented files by default, in memory for tests.

Modules, bottom up: ``compression`` (bounded codecs), ``batch`` (RecordBatch
v2 header, records), ``validation`` (what an append checks), ``index``,
``segment``, ``leader_epoch``, ``checkpoint``, ``policy`` (roll/retention
decisions), ``segmented`` (SegmentedLog), ``memory`` (MemoryLog),
``cleaner`` (compaction). ``base`` holds the PartitionLog interface.

Open a log with ``open_log(directory, config, now_ms=...)`` (a
SegmentedLog; ``directory=None`` gives a MemoryLog).
"""

from __future__ import annotations

import os

from tinystream.broker.storage.base import LogConfig, PartitionLog
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.segmented import SegmentedLog


def open_log(directory: str | os.PathLike | None, config: LogConfig | None = None, *, now_ms: int) -> PartitionLog:
    """A SegmentedLog in ``directory`` (recovered if it exists), or a MemoryLog when directory is None."""
    if directory is None:
        return MemoryLog(config, now_ms=now_ms)

    return SegmentedLog.open(directory, config, now_ms=now_ms)
