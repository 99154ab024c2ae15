"""Where partition logs live, and how they are opened, deleted and looked after.

Layout (Kafka's): every log dir in `log.dirs` holds one directory per
partition, `<topic>-<partition>/`, owned by the storage engine, plus this
broker's producer-state snapshot for it (`producer-state.json`, see
`idempotence`). A new partition goes to the log dir holding the fewest
partitions; an existing one is found wherever it is.

Storage engines: `SegmentedLog` (files; the default once it exists) or
`MemoryLog` (`in_memory=True`, tests). Both are behind `PartitionLog`.

The maintenance passes (retention, segment roll by time, flush policy,
compaction) are plain methods over the open logs; `app` runs them on timers.
"""

from __future__ import annotations

import importlib
import logging
import shutil
from collections.abc import Iterable
from pathlib import Path

from tinystream.broker.partition import TopicPartition
from tinystream.broker.storage.base import LogConfig, PartitionLog
from tinystream.broker.storage.memory import MemoryLog

log = logging.getLogger(__name__)

PRODUCER_SNAPSHOT = "producer-state.json"


def _segmented_log_class() -> type | None:
    """storage.segmented.SegmentedLog when the storage engine provides it."""
    try:
        module = importlib.import_module("tinystream.broker.storage.segmented")
    except ImportError:
        return None
    return getattr(module, "SegmentedLog", None)


def _cleaner_module():
    try:
        return importlib.import_module("tinystream.broker.storage.cleaner")
    except ImportError:
        return None


class LogManager:
    def __init__(self, log_dirs: Iterable[Path], *, in_memory: bool = False) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("log.dirs names no directory")
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        segmented = None if in_memory else _segmented_log_class()
        self._segmented = segmented
        self.in_memory = segmented is None
        if segmented is None and not in_memory:
            log.warning("storage.segmented is not available: partitions are kept in memory only")
        self._dirs: dict[TopicPartition, Path] = {}

    @property
    def metadata_dir(self) -> Path:
        """Where broker metadata (topics.json, producer-ids.json, meta.properties) lives."""
        return self.log_dirs[0]

    def partition_dir(self, tp: TopicPartition) -> Path | None:
        if self.in_memory:
            return None
        cached = self._dirs.get(tp)
        if cached is not None:
            return cached
        name = f"{tp.topic}-{tp.partition}"
        for d in self.log_dirs:
            if (d / name).is_dir():
                self._dirs[tp] = d / name
                return d / name
        least = min(self.log_dirs, key=lambda d: sum(1 for p in d.iterdir() if p.is_dir()))
        self._dirs[tp] = least / name
        return least / name

    def open(self, tp: TopicPartition, config: LogConfig, now_ms: int) -> PartitionLog:
        directory = self.partition_dir(tp)
        if directory is None or self._segmented is None:
            return MemoryLog(config, now_ms=now_ms)
        return self._segmented.open(directory, config, now_ms=now_ms)

    def snapshot_path(self, tp: TopicPartition) -> Path | None:
        directory = self.partition_dir(tp)
        return None if directory is None else directory / PRODUCER_SNAPSHOT

    def delete(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        directory = self.partition_dir(tp)
        partition_log.delete()
        if directory is not None and directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        self._dirs.pop(tp, None)

    # -- maintenance ------------------------------------------------------------------

    @staticmethod
    def clean(partition_log: PartitionLog, now_ms: int) -> bool:
        """One compaction pass when storage.cleaner exists; True if it changed the log."""
        cleaner = _cleaner_module()
        if cleaner is None or not partition_log.config.compacted:
            return False
        clean = getattr(cleaner, "clean", None) or getattr(cleaner, "compact", None)
        if clean is None:
            return False
        return bool(clean(partition_log, now_ms=now_ms))
