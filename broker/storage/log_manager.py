"""Where partition logs live, and how they are opened, deleted and looked after.

Layout (Kafka's): every log dir in `log.dirs` holds one directory per
partition, `<topic>-<partition>/`, owned by the storage engine, plus this
broker's producer-state snapshot for it (`producer-state.json`, see
`idempotence`). A new partition goes to the log dir holding the fewest
partitions; an existing one is found wherever it is.

Storage engines: `SegmentedLog` (files, the default) or `MemoryLog`
(`in_memory=True`, tests). Both are behind `PartitionLog`; compaction is
`storage.cleaner`, run by `ReplicaManager.compact` on a timer.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterable
from pathlib import Path

from tinystream.broker.storage.base import LogConfig, PartitionLog
from tinystream.broker.storage.cleaner import CompactableLog, clean
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.segmented import SegmentedLog
from tinystream.broker.storage.topic_partition import TopicPartition

PRODUCER_SNAPSHOT = "producer-state.json"


class LogManager:
    def __init__(self, log_dirs: Iterable[Path], *, in_memory: bool = False) -> None:
        self.log_dirs = [Path(d) for d in log_dirs]
        if not self.log_dirs:
            raise ValueError("log.dirs names no directory")
        for d in self.log_dirs:
            d.mkdir(parents=True, exist_ok=True)
        self.in_memory = in_memory
        self._dirs: dict[TopicPartition, Path] = {}
        self._load: dict[Path, int] | None = None  # partition directories per log dir, counted once

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
        if self._load is None:
            self._load = {d: sum(1 for p in d.iterdir() if p.is_dir()) for d in self.log_dirs}
        least = min(self.log_dirs, key=self._load.__getitem__)
        self._load[least] += 1
        self._dirs[tp] = least / name
        return least / name

    def open(self, tp: TopicPartition, config: LogConfig, now_ms: int) -> PartitionLog:
        return self.open_in(self.partition_dir(tp), config, now_ms)

    @staticmethod
    def open_in(directory: Path | None, config: LogConfig, now_ms: int) -> PartitionLog:
        """Open (or create) the log in `directory` (None: in memory). Touches that directory only, so it may
        run on a worker thread (creating a log is several fsyncs) once partition_dir chose it on the loop."""
        if directory is None:
            return MemoryLog(config, now_ms=now_ms)
        return SegmentedLog.open(directory, config, now_ms=now_ms)

    def forget_unopened(self, tp: TopicPartition) -> None:
        """A partition whose log failed to open: its directory (what the attempt made of it) goes."""
        directory = self._dirs.pop(tp, None)
        if directory is not None and directory.exists():
            shutil.rmtree(directory, ignore_errors=True)

    def snapshot_path(self, tp: TopicPartition) -> Path | None:
        directory = self.partition_dir(tp)
        return None if directory is None else directory / PRODUCER_SNAPSHOT

    def delete(self, tp: TopicPartition, partition_log: PartitionLog) -> None:
        directory = self.partition_dir(tp)
        partition_log.delete()
        if directory is not None and directory.exists():
            shutil.rmtree(directory, ignore_errors=True)
        self._dirs.pop(tp, None)

    @staticmethod
    def clean(
        partition_log: PartitionLog,
        now_ms: int,
        *,
        max_offset: int | None = None,
        aborted: Iterable[tuple[int, int, int]] = (),
    ) -> bool:
        """One compaction pass over a compacted topic's closed segments; True if it changed the log.

        `max_offset` (the last stable offset) and `aborted` (producer id, first offset, marker offset)
        keep the cleaner away from undecided transactions and drop aborted ones (see `cleaner`)."""
        if not partition_log.config.compacted or not isinstance(partition_log, CompactableLog):
            return False
        return bool(clean(partition_log, now_ms, max_offset=max_offset, aborted=aborted))
