"""Where partition logs live, and how they are opened, deleted and looked after.

Layout (Kafka's): every log dir in `log.dirs` holds one directory per
partition, `<topic>-<partition>/`, owned by the storage engine, plus this
broker's producer-state snapshot for it (`producer-state.json`, see
`idempotence`). A new partition goes to the log dir holding the fewest
partitions; an existing one is found wherever it is.

Moves between log dirs (AlterReplicaLogDirs, `copy_partition`) copy into
`<name>.move-tmp` in the destination, rename it into place only when
complete, rename the source to `<name>.move-old` and delete it. At start-up
leftover `.move-tmp` copies (a move cut short: the source is intact) and
`.move-old` directories (a move that had finished) are deleted. A crash
between the two renames leaves two complete, identical copies: the one with
the most log bytes is kept (ties: the earlier dir in `log.dirs`), the others
are deleted.

Storage engines: `SegmentedLog` (files, the default) or `MemoryLog`
(`in_memory=True`, tests). Both are behind `PartitionLog`; compaction is
`storage.cleaner`, run by `ReplicaManager.compact` on a timer.
"""

from __future__ import annotations

import logging
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from tinystream.broker.storage.base import LogConfig, PartitionLog
from tinystream.broker.storage.cleaner import CompactableLog, clean
from tinystream.broker.storage.memory import MemoryLog
from tinystream.broker.storage.segmented import SegmentedLog
from tinystream.broker.storage.topic_partition import TopicPartition

PRODUCER_SNAPSHOT = "producer-state.json"
MOVE_TMP = ".move-tmp"  # a copy being made by a move between log dirs
MOVE_OLD = ".move-old"  # a moved partition's source, being deleted

log = logging.getLogger(__name__)


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
        if not in_memory:
            resolve_moves(self.log_dirs)

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

    def relocated(self, tp: TopicPartition, directory: Path) -> None:
        """The partition's directory is now `directory` (a finished move between log dirs)."""
        self._dirs[tp] = directory
        self._load = None

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


def _fsync_tree(root: Path) -> None:
    for here, _, files in os.walk(root):
        for name in files:
            fd = os.open(os.path.join(here, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        _fsync_dir(Path(here))


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def copy_partition(source: Path, target_dir: Path) -> Path:
    """Move a closed partition directory into `target_dir`; returns its new path. Blocking (a worker thread).

    Crash-safe: the copy is made as `<name>.move-tmp`, fsynced and renamed into place; only then is the
    source renamed to `<name>.move-old` and deleted (see the module docstring for start-up)."""
    name = source.name
    temporary, final = target_dir / (name + MOVE_TMP), target_dir / name
    if final.exists():
        raise FileExistsError(f"{final} already exists")
    shutil.rmtree(temporary, ignore_errors=True)
    shutil.copytree(source, temporary)
    _fsync_tree(temporary)
    os.rename(temporary, final)
    _fsync_dir(target_dir)
    old = source.with_name(name + MOVE_OLD)
    os.rename(source, old)
    _fsync_dir(source.parent)
    shutil.rmtree(old, ignore_errors=True)
    return final


def _log_bytes(directory: Path) -> int:
    return sum(f.stat().st_size for f in directory.glob("*.log"))


def _is_partition_dir(name: str) -> bool:
    """`<topic>-<partition>`, as partition_dir names them."""
    topic, _, partition = name.rpartition("-")
    return bool(topic) and partition.isdigit()


def resolve_moves(log_dirs: list[Path]) -> None:
    """Start-up: delete what unfinished or finished moves left, and keep one copy of a doubled partition."""
    seen: dict[str, list[Path]] = {}
    for d in log_dirs:
        for entry in sorted(d.iterdir()):
            if not entry.is_dir():
                continue
            if entry.name.endswith((MOVE_TMP, MOVE_OLD)):
                log.warning("deleting %s, left by a move between log dirs", entry)
                shutil.rmtree(entry, ignore_errors=True)
            else:
                seen.setdefault(entry.name, []).append(entry)
    for name, copies in seen.items():
        if len(copies) > 1 and _is_partition_dir(name):  # never another kind of directory that two dirs share
            keep = max(copies, key=lambda c: (_log_bytes(c), -copies.index(c)))
            for other in copies:
                if other != keep:
                    log.warning("%s is also in %s (a move cut between its renames): keeping %s", other.name,
                                other.parent, keep)
                    shutil.rmtree(other, ignore_errors=True)
